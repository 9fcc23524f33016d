"""Transformer classifier and encoder-decoder: training throughput and decoding speed.

1. Training tokens/s (optimizer steps on fixed batches, no input pipeline) of
   `TransformerClassifier` (batch 32 x 128) and `TransformerSeq2Seq` (batch
   64, source 64 + target 64 tokens) in float32 and `mixed_bfloat16`; rounds
   alternate between the two precisions; reported: median step time, tokens/s
   and the median per-round ratio.
2. Decoding: `TransformerSeq2Seq.generate` on 16 sources of 32 tokens, with
   the key/value cache vs recomputing the whole prefix at every step, for 16,
   64 and 128 new tokens (the end token is disabled so every run decodes the
   full length), greedy and beam 4; reported: generated tokens/s (beam:
   tokens of the returned hypotheses), sentences/s and the median
   cache / recomputation speed-up.

    python benchmarks/seq2seq_benchmark.py [--rounds 5] [--json PATH]
"""

import argparse
import json
import os
import statistics
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from _common import write_json  # noqa: E402  (benchmarks/_common.py)

from tfnlp import models  # noqa: E402

VOCABULARY = 8000
RNG = np.random.default_rng(0)


def classifier_setup(policy):
    model = models.TransformerClassifier(
        VOCABULARY, num_classes=2, num_layers=4, num_heads=4, hidden_dim=256, dtype=policy
    )
    model.compile(optimizer=keras.optimizers.Adam(1e-4), metrics=[])
    x = {
        "token_ids": RNG.integers(5, VOCABULARY, (32, 128)).astype("int32"),
        "segment_ids": np.zeros((32, 128), "int32"),
        "padding_mask": np.ones((32, 128), "int32"),
    }
    return model, x, RNG.integers(0, 2, (32,)).astype("int32"), None, 32 * 128


def seq2seq_setup(policy):
    model = models.TransformerSeq2Seq.from_architecture(
        "transformer_small", VOCABULARY, VOCABULARY, dtype=policy
    )
    model.compile(optimizer=keras.optimizers.Adam(1e-4), metrics=[])
    x = {
        "encoder_token_ids": RNG.integers(5, VOCABULARY, (64, 64)).astype("int32"),
        "encoder_padding_mask": np.ones((64, 64), "int32"),
        "decoder_token_ids": RNG.integers(5, VOCABULARY, (64, 64)).astype("int32"),
        "decoder_padding_mask": np.ones((64, 64), "int32"),
    }
    y = RNG.integers(5, VOCABULARY, (64, 64)).astype("int32")
    return model, x, y, np.ones((64, 64), "float32"), 64 * 128


def train_step_seconds(setup, steps):
    model, x, y, weights, _ = setup
    dataset = tf.data.Dataset.from_tensors((x, y) if weights is None else (x, y, weights))
    model.fit(dataset.repeat(2), verbose=0)  # trace and warm up
    started = time.perf_counter()
    model.fit(dataset.repeat(steps), verbose=0)
    return (time.perf_counter() - started) / steps


def training(rounds, steps):
    rows = []
    for name, build in (("TransformerClassifier 4x256", classifier_setup),
                        ("TransformerSeq2Seq small 3+3x256", seq2seq_setup)):
        setups = {policy: build(policy) for policy in ("float32", "mixed_bfloat16")}
        times = {policy: [] for policy in setups}
        for _ in range(rounds):
            for policy, setup in setups.items():
                times[policy].append(train_step_seconds(setup, steps))
        tokens = setups["float32"][4]
        row = {"model": name, "tokens_per_step": tokens}
        for policy, values in times.items():
            row[f"{policy}_step_ms"] = round(1000 * statistics.median(values), 1)
            row[f"{policy}_tokens_per_s"] = round(tokens / statistics.median(values))
        row["bf16_speedup"] = round(statistics.median(
            f / b for f, b in zip(times["float32"], times["mixed_bfloat16"], strict=True)), 2)
        print(json.dumps(row))
        rows.append(row)
    return rows


def decoding_setup(policy="float32"):
    """A small translator that never ends a sentence, 16 sources of 32 tokens, its end id.

    The end token's logit bias is -1e4, so every run decodes `max_length`
    tokens (`start_id=2`, `end_id=3`).
    """
    keras.utils.set_random_seed(0)
    model = models.TransformerSeq2Seq.from_architecture(
        "transformer_small", VOCABULARY, VOCABULARY, dropout=0.0, dtype=policy
    )
    end_id = 3
    bias = model.token_logits.bias
    bias.assign(tf.tensor_scatter_nd_update(bias, [[end_id]], [-1e4]))
    sources = tf.constant(RNG.integers(5, VOCABULARY, (16, 32)), tf.int32)
    return model, sources, end_id


def decoding(rounds, lengths):
    model, sources, end_id = decoding_setup()
    rows = []
    for beam_size in (1, 4):
        for length in lengths:
            settings = {"start_id": 2, "end_id": end_id, "max_length": length,
                        "beam_size": beam_size}
            times = {True: [], False: []}
            for use_cache in times:  # trace
                model.generate(sources, use_cache=use_cache, **settings)
            for _ in range(rounds):
                for use_cache in times:
                    started = time.perf_counter()
                    result = model.generate(sources, use_cache=use_cache, **settings)
                    times[use_cache].append(time.perf_counter() - started)
            assert int(tf.reduce_min(result["lengths"])) == length
            cached, recomputed = (statistics.median(times[c]) for c in (True, False))
            row = {
                "beam_size": beam_size,
                "new_tokens": length,
                "cached_tokens_per_s": round(16 * length / cached),
                "recomputed_tokens_per_s": round(16 * length / recomputed),
                "cached_sentences_per_s": round(16 / cached, 1),
                "cache_speedup": round(statistics.median(
                    r / c for c, r in zip(times[True], times[False], strict=True)), 2),
            }
            print(json.dumps(row))
            rows.append(row)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=5, help="training steps per round")
    parser.add_argument("--lengths", type=int, nargs="+", default=[16, 64, 128])
    parser.add_argument("--json", default="benchmarks/results/seq2seq.json")
    args = parser.parse_args()
    rows = {
        "training": training(args.rounds, args.steps),
        "decoding": decoding(args.rounds, args.lengths),
    }
    write_json(args.json, rows, settings={k: v for k, v in vars(args).items() if k != "json"})


if __name__ == "__main__":
    main()
