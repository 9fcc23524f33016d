"""tfnlp MultiHeadAttention / TransformerBlock vs stock Keras, forward + backward.

Both sides run in the same process, alternately, on the same inputs (batch
32, length 128, a padding mask with ~25% padding), as a `tf.function` that
computes the loss and the gradients of all weights. Each round times
`--steps` steps of each side; the reported ratio is the median over rounds of
keras_time / tfnlp_time (> 1 means tfnlp is faster).

    python benchmarks/attention_benchmark.py [--rounds 7] [--steps 3] [--json PATH]
        [--policy mixed_bfloat16]
"""

import argparse
import os
import statistics
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from _common import machine_info, write_json  # noqa: E402  (benchmarks/_common.py)

from tfnlp import layers  # noqa: E402


class KerasBlock(keras.layers.Layer):
    """The post-LN encoder block written with stock Keras layers only."""

    def __init__(self, num_heads, hidden_dim, intermediate_dim, **kwargs):
        super().__init__(**kwargs)
        self.attention = keras.layers.MultiHeadAttention(num_heads, hidden_dim // num_heads)
        self.norm1 = keras.layers.LayerNormalization(epsilon=1e-12)
        self.inner = keras.layers.Dense(intermediate_dim, activation="gelu")
        self.outer = keras.layers.Dense(hidden_dim)
        self.norm2 = keras.layers.LayerNormalization(epsilon=1e-12)

    def call(self, x, attention_mask):
        x = self.norm1(x + self.attention(x, x, attention_mask=attention_mask))
        return self.norm2(x + self.outer(self.inner(x)))


def gradient_step(forward, layer):
    @tf.function
    def step(x, padding):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(tf.cast(forward(x, padding), tf.float32)))
        return tape.gradient(loss, layer.trainable_variables)

    return step


def candidates(kind, hidden_dim, num_heads):
    head_dim = hidden_dim // num_heads
    if kind == "MultiHeadAttention":
        ours = layers.MultiHeadAttention(num_heads, head_dim)
        theirs = keras.layers.MultiHeadAttention(num_heads, head_dim)
        return (
            (ours, lambda x, p: ours(x, x, attention_mask=p[:, None, :])),
            (theirs, lambda x, p: theirs(x, x, attention_mask=p[:, None, :])),
        )
    ours = layers.TransformerBlock(
        num_heads, 4 * hidden_dim, activation="gelu", layer_norm_epsilon=1e-12
    )
    theirs = KerasBlock(num_heads, hidden_dim, 4 * hidden_dim)
    return (
        (ours, lambda x, p: ours(x, padding_mask=p)),
        (theirs, lambda x, p: theirs(x, attention_mask=p[:, None, :])),
    )


def timed(step, x, padding, steps):
    start = time.perf_counter()
    for _ in range(steps):
        result = step(x, padding)
    _ = [g.numpy() for g in result]  # wait for the last step
    return (time.perf_counter() - start) / steps


def run(kind, hidden_dim, num_heads, batch, length, rounds, steps):
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(batch, length, hidden_dim)), keras.config.dtype_policy().compute_dtype)
    lengths = rng.integers(length // 2, length + 1, size=batch)
    padding = tf.sequence_mask(lengths, length)
    (ours, ours_fn), (theirs, theirs_fn) = candidates(kind, hidden_dim, num_heads)
    ours_fn(x, padding), theirs_fn(x, padding)  # build
    ours_step, theirs_step = gradient_step(ours_fn, ours), gradient_step(theirs_fn, theirs)
    timed(ours_step, x, padding, 2), timed(theirs_step, x, padding, 2)  # trace + warm up
    ours_times, theirs_times = [], []
    for _ in range(rounds):
        ours_times.append(timed(ours_step, x, padding, steps))
        theirs_times.append(timed(theirs_step, x, padding, steps))
    return {
        "layer": kind,
        "hidden_dim": hidden_dim,
        "num_heads": num_heads,
        "batch": batch,
        "length": length,
        "tfnlp_ms": 1000 * statistics.median(ours_times),
        "keras_ms": 1000 * statistics.median(theirs_times),
        "speedup": statistics.median(t / o for o, t in zip(ours_times, theirs_times, strict=True)),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--policy", default="float32", help="Keras dtype policy of both sides")
    parser.add_argument("--json", default=None, help="default benchmarks/results/attention_POLICY.json")
    args = parser.parse_args()
    keras.config.set_dtype_policy(args.policy)
    args.json = args.json or f"benchmarks/results/attention_{args.policy}.json"
    results = []
    for kind in ("MultiHeadAttention", "TransformerBlock"):
        for hidden_dim, num_heads in ((256, 4), (512, 8)):
            results.append(
                run(kind, hidden_dim, num_heads, args.batch, args.length, args.rounds, args.steps)
            )
            r = results[-1]
            print(
                f"| {kind} | {hidden_dim} | {r['tfnlp_ms']:.1f} | {r['keras_ms']:.1f} "
                f"| {r['speedup']:.3f} |",
                flush=True,
            )
    machine = machine_info(policy=args.policy)
    write_json(args.json, results, machine=machine,
               settings={"rounds": args.rounds, "steps": args.steps, "policy": args.policy})
    print(f"machine: {machine}; written to {args.json}")


if __name__ == "__main__":
    main()
