"""BERT pretraining and inference: tfnlp vs keras-hub at the same configuration.

Both sides: the same backbone size, 30,522-token vocabulary, batch 32 x 128,
20 masked positions, a masked-LM head tied to the token embedding applied at
the gathered positions plus a next-sentence head on the pooled output, Adam,
sparse cross-entropy on logits. keras-hub side: `keras_hub.models.BertBackbone`
+ `keras_hub.layers.MaskedLMHead` (GELU, epsilon 1e-12) + `Dense(2)`.
Rounds alternate between the sides in one process; reported: median step time
and the median over rounds of keras-hub time / tfnlp time (> 1: tfnlp faster).

    pip install keras-hub==0.32.0   # benchmark-only dependency
    python benchmarks/bert_benchmark.py [--presets bert_mini bert_small] [--json PATH]
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

from tfnlp import models  # noqa: E402

VOCABULARY, BATCH, LENGTH, PREDICTIONS = 30522, 32, 128, 20


def tfnlp_model(preset, policy):
    backbone = models.BertBackbone.from_preset(
        preset, vocabulary_size=VOCABULARY, max_sequence_length=LENGTH, dtype=policy
    )
    return models.BertPretrainer(backbone), backbone, "masked_positions"


def keras_hub_model(preset, policy):
    import keras_hub

    size = models.BERT_PRESETS[preset]
    backbone = keras_hub.models.BertBackbone(
        VOCABULARY, size["num_layers"], size["num_heads"], size["hidden_dim"],
        4 * size["hidden_dim"], max_sequence_length=LENGTH, dtype=policy,
    )
    head = keras_hub.layers.MaskedLMHead(
        token_embedding=backbone.token_embedding, intermediate_activation="gelu",
        layer_norm_epsilon=1e-12, dtype=policy,
    )
    inputs = dict(backbone.input)
    inputs["mask_positions"] = keras.Input((PREDICTIONS,), dtype="int32", name="mask_positions")
    outputs = backbone(dict(backbone.input))
    mlm = head(outputs["sequence_output"], mask_positions=inputs["mask_positions"])
    nsp = keras.layers.Dense(2, dtype="float32")(outputs["pooled_output"])
    return keras.Model(inputs, {"mlm": mlm, "nsp": nsp}), backbone, "mask_positions"


def batch(positions_name):
    rng = np.random.default_rng(0)
    x = {
        "token_ids": rng.integers(5, VOCABULARY, (BATCH, LENGTH)).astype("int32"),
        "segment_ids": np.repeat([[0] * 64 + [1] * 64], BATCH, 0).astype("int32"),
        "padding_mask": np.ones((BATCH, LENGTH), "int32"),
        positions_name: np.sort(rng.integers(1, LENGTH, (BATCH, PREDICTIONS)), -1).astype("int32"),
    }
    y = {"mlm": rng.integers(5, VOCABULARY, (BATCH, PREDICTIONS)).astype("int32"),
         "nsp": rng.integers(0, 2, (BATCH,)).astype("int32")}
    return x, y


def prepared(builder, preset, policy, jit):
    model, backbone, positions_name = builder(preset, policy)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    # No metrics on either side: only the training step is compared.
    model.compile(optimizer=keras.optimizers.Adam(1e-4), loss={"mlm": loss, "nsp": loss},
                  weighted_metrics=[], metrics=[], jit_compile=jit)
    x, y = batch(positions_name)
    features = {k: x[k] for k in ("token_ids", "segment_ids", "padding_mask")}
    infer = tf.function(lambda f: backbone(f, training=False)["sequence_output"], jit_compile=jit)
    model.train_on_batch(x, y)  # trace (and compile)
    infer(features).numpy()
    return (lambda: model.train_on_batch(x, y)), (lambda: infer(features).numpy())


def timed(fn, steps):
    start = time.perf_counter()
    for _ in range(steps):
        fn()
    return (time.perf_counter() - start) / steps


def compare(preset, policy, jit, rounds, steps):
    keras.config.set_dtype_policy("float32")
    ours = prepared(tfnlp_model, preset, policy, jit)
    theirs = prepared(keras_hub_model, preset, policy, jit)
    result = {"preset": preset, "policy": policy, "jit_compile": jit}
    for index, kind in enumerate(("train", "infer")):
        mine, other = [], []
        for _ in range(rounds):
            mine.append(timed(ours[index], steps))
            other.append(timed(theirs[index], steps))
        result[f"{kind}_tfnlp_tokens_per_s"] = BATCH * LENGTH / statistics.median(mine)
        result[f"{kind}_keras_hub_tokens_per_s"] = BATCH * LENGTH / statistics.median(other)
        result[f"{kind}_speedup"] = statistics.median(o / m for m, o in zip(mine, other, strict=True))
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--presets", nargs="+", default=["bert_mini", "bert_small"])
    parser.add_argument("--policies", nargs="+", default=["float32", "mixed_bfloat16"])
    parser.add_argument("--jit", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--json", default="benchmarks/results/bert.json")
    args = parser.parse_args()
    results = []
    print("| preset | policy | XLA | train tfnlp tok/s | train keras-hub tok/s | train speed-up "
          "| infer tfnlp tok/s | infer keras-hub tok/s | infer speed-up |")
    for preset in args.presets:
        for policy in args.policies:
            for jit in args.jit:
                r = compare(preset, policy, bool(jit), args.rounds, args.steps)
                results.append(r)
                print(f"| {preset} | {policy} | {bool(jit)} | {r['train_tfnlp_tokens_per_s']:.0f} "
                      f"| {r['train_keras_hub_tokens_per_s']:.0f} | {r['train_speedup']:.2f} "
                      f"| {r['infer_tfnlp_tokens_per_s']:.0f} | {r['infer_keras_hub_tokens_per_s']:.0f} "
                      f"| {r['infer_speedup']:.2f} |", flush=True)
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
