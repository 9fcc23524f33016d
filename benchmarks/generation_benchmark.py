"""UniLM generation: key/value cache vs recomputation, and vs keras-hub's cached sampler.

1. `UniLM.generate` (BERT-mini size: 4 layers, hidden 256, 4 heads, 8,000
   tokens) on 16 sources of 32 tokens, 16 / 64 / 128 new tokens, greedy and
   beam 4, with the cache vs recomputing the packed sequence every step
   (`use_cache=False`). The end token is disabled so every run decodes the
   full length. Reported: generated tokens/s and the median per-round
   speed-up (rounds alternate the two).
2. Per-token cost next to keras-hub's `GPT2CausalLM` of the same size (4
   layers, 256, 4 heads, FFN 1024, 8,000 tokens) with its cached greedy
   sampler, same batch, prompt and new tokens, both with and without
   `jit_compile` (keras-hub's default is on, tfnlp's off). UniLM feeds two
   tokens per step (the previous token and a `[MASK]`), a decoder-only LM one.

    pip install keras-hub==0.32.0   # benchmark-only dependency
    python benchmarks/generation_benchmark.py [--rounds 3] [--json PATH]
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

VOCABULARY, BATCH, PROMPT = 8000, 16, 32
END, MASK = 3, 4


def unilm():
    keras.utils.set_random_seed(0)
    backbone = models.UniLMBackbone.from_preset(
        "bert_mini", vocabulary_size=VOCABULARY, dropout=0.0, max_sequence_length=512
    )
    model = models.UniLM(backbone)
    bias = model.masked_lm_head.output_bias  # never end: decode the full length
    bias.assign(tf.tensor_scatter_nd_update(bias, [[END]], [-1e4]))
    return model


def timed(function, rounds):
    function()  # trace
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return times


def cache_vs_recomputation(model, sources, rounds, lengths):
    rows = []
    for beam_size in (1, 4):
        for length in lengths:
            settings = {"end_id": END, "mask_id": MASK, "max_length": length,
                        "beam_size": beam_size}
            times = {True: [], False: []}
            for use_cache in times:
                model.generate(sources, use_cache=use_cache, **settings)  # trace
            for _ in range(rounds):
                for use_cache in times:
                    started = time.perf_counter()
                    model.generate(sources, use_cache=use_cache, **settings)
                    times[use_cache].append(time.perf_counter() - started)
            cached, recomputed = (statistics.median(times[c]) for c in (True, False))
            row = {
                "beam_size": beam_size, "new_tokens": length,
                "cached_tokens_per_s": round(BATCH * length / cached),
                "recomputed_tokens_per_s": round(BATCH * length / recomputed),
                "cache_speedup": round(statistics.median(
                    r / c for c, r in zip(times[True], times[False], strict=True)), 2),
            }
            print(json.dumps(row))
            rows.append(row)
    return rows


def keras_hub_comparison(model, sources, rounds, length):
    import keras_hub

    backbone = keras_hub.models.GPT2Backbone(
        VOCABULARY, 4, 4, 256, 1024, dropout=0.0, max_sequence_length=512
    )
    rows = []
    prompt = sources.numpy()
    inputs = {
        "token_ids": np.pad(prompt, [[0, 0], [0, length]]),
        "padding_mask": np.pad(np.ones_like(prompt), [[0, 0], [0, length]]),
    }
    for jit in (True, False):
        ours = timed(lambda jit=jit: model.generate(sources, end_id=END, mask_id=MASK,
                                                    max_length=length, jit_compile=jit), rounds)
        lm = keras_hub.models.GPT2CausalLM(backbone, preprocessor=None)
        lm.compile(sampler="greedy", jit_compile=jit)
        theirs = timed(lambda lm=lm: lm.generate(inputs, stop_token_ids=None), rounds)
        row = {
            "new_tokens": length, "jit_compile (both)": jit,
            "tfnlp_unilm_ms_per_token_step": round(1000 * statistics.median(ours) / length, 2),
            "keras_hub_gpt2_ms_per_token_step": round(1000 * statistics.median(theirs) / length, 2),
            "keras_hub_time_over_tfnlp": round(statistics.median(theirs) / statistics.median(ours),
                                               2),
        }
        print(json.dumps(row))
        rows.append(row)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--lengths", type=int, nargs="+", default=[16, 64, 128])
    parser.add_argument("--json", default="benchmarks/results/generation.json")
    parser.add_argument("--only-keras-hub", action="store_true", help="skip part 1")
    args = parser.parse_args()
    model = unilm()
    rng = np.random.default_rng(0)
    sources = np.concatenate([np.full((BATCH, 1), 2), rng.integers(5, VOCABULARY, (BATCH, PROMPT - 2)),
                              np.full((BATCH, 1), END)], 1)
    sources = tf.constant(sources, tf.int32)
    rows = {
        "cache_vs_recomputation": [] if args.only_keras_hub else cache_vs_recomputation(
            model, sources, args.rounds, args.lengths),
        "vs_keras_hub": keras_hub_comparison(model, sources, args.rounds, 64),
    }
    write_json(args.json, rows, settings={k: v for k, v in vars(args).items() if k != "json"})


if __name__ == "__main__":
    main()
