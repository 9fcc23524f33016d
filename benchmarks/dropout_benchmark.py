"""Dropout's random draws, with and without XLA: tfnlp vs Keras, and Philox named vs TensorFlow's default.

`layers.Dropout` (and the attention dropout of `layers.MultiHeadAttention`)
draws 16 random bits per element from stateless Philox words; Keras draws a
float32 uniform per element. The draws name the Philox algorithm
(`_devices.random_algorithm`): TensorFlow's default, `"auto_select"`, gives
the same bits, but XLA on a CPU generates them far more slowly.

Three comparisons, each side alternating with the other in every round
(median over rounds; speed-up = the other side's time / this one's):

1. `layer`: `layers.Dropout(0.1)` vs `keras.layers.Dropout(0.1)`, forward,
   on a `(32, 8, 128, 128)` attention-weights tensor, without and with
   `jit_compile`.
2. `algorithm`: the same tfnlp layer traced with `alg="auto_select"` (as
   before this was measured) vs with Philox named, without and with XLA.
3. `training`: BERT pretraining steps (`bert_benchmark.py`'s setup: batch
   32 x 128, 20 masked positions, 30,522 words, `train_on_batch`) of two
   tfnlp pretrainers compiled with `jit_compile=True`, one traced with
   `"auto_select"`, one with Philox.

    python benchmarks/dropout_benchmark.py [--presets bert_tiny] [--rounds 7]
"""

import argparse
import os
import statistics
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bert_benchmark  # noqa: E402  (imports tfnlp first)
import keras  # noqa: E402
import tensorflow as tf  # noqa: E402
from _common import markdown_table, write_json  # noqa: E402

from tfnlp import _devices, layers  # noqa: E402

SHAPE = (32, 8, 128, 128)


def traced_with(algorithm, build, *args):
    """`build(*args)` with tfnlp's draws using `algorithm` while it traces (and compiles)."""
    chosen = _devices.random_algorithm
    _devices.random_algorithm = lambda: algorithm
    try:
        return build(*args)
    finally:
        _devices.random_algorithm = chosen


def dropout_function(layer, jit, x):
    function = tf.function(lambda x: layer(x, training=True), jit_compile=jit)
    function(x).numpy()  # trace and compile
    return lambda: function(x).numpy()


def pretrainer(preset):
    """A tfnlp BERT pretrainer's training step, compiled with XLA."""
    return bert_benchmark.prepared(bert_benchmark.tfnlp_model, preset, "float32", True)[0]


def alternate(first, second, rounds, steps):
    """Median ms of each, and the median over rounds of first time / second time."""
    times = ([], [])
    for _ in range(rounds):
        for side, fn in enumerate((first, second)):
            times[side].append(bert_benchmark.timed(fn, steps))
    return (
        round(statistics.median(times[0]) * 1e3, 2),
        round(statistics.median(times[1]) * 1e3, 2),
        round(statistics.median(a / b for a, b in zip(*times, strict=True)), 3),
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--presets", nargs="+", default=["bert_tiny"])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", default="benchmarks/results/dropout.json")
    args = parser.parse_args()
    keras.config.set_dtype_policy("float32")
    x = tf.random.normal(SHAPE)
    rows = []
    for jit in (False, True):
        keras_ms, tfnlp_ms, speed_up = alternate(
            dropout_function(keras.layers.Dropout(0.1), jit, x),
            dropout_function(layers.Dropout(0.1), jit, x), args.rounds, 5,
        )
        rows.append({"comparison": "layer", "case": f"{SHAPE}", "jit_compile": jit,
                     "other": "keras.layers.Dropout", "other_ms": keras_ms,
                     "tfnlp_ms": tfnlp_ms, "speedup": speed_up})
        auto_ms, philox_ms, speed_up = alternate(
            traced_with("auto_select", dropout_function, layers.Dropout(0.1), jit, x),
            traced_with("philox", dropout_function, layers.Dropout(0.1), jit, x),
            args.rounds, 5,
        )
        rows.append({"comparison": "algorithm", "case": f"{SHAPE}", "jit_compile": jit,
                     "other": "auto_select", "other_ms": auto_ms,
                     "tfnlp_ms": philox_ms, "speedup": speed_up})
    for preset in args.presets:
        auto_ms, philox_ms, speed_up = alternate(
            traced_with("auto_select", pretrainer, preset), traced_with("philox", pretrainer, preset),
            args.rounds, 3,
        )
        rows.append({"comparison": "training", "case": f"{preset} float32", "jit_compile": True,
                     "other": "auto_select", "other_ms": auto_ms,
                     "tfnlp_ms": philox_ms, "speedup": speed_up})
    print(markdown_table(
        ["comparison", "case", "XLA", "other side", "other ms", "tfnlp ms", "speed-up"],
        [[r["comparison"], r["case"], "yes" if r["jit_compile"] else "no", r["other"],
          r["other_ms"], r["tfnlp_ms"], r["speedup"]] for r in rows],
    ))
    write_json(args.json, rows, shape=list(SHAPE), rounds=args.rounds)


if __name__ == "__main__":
    main()
