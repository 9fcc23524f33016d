"""ELMo: the projected LSTM's implementation, biLM training and embedding extraction.

1. LSTM implementation (why `ProjectedLSTM` is written as it is): forward +
   backward (loss = mean output; gradients of the weights and of the inputs,
   in one `tf.function`), float32, all sequences full length, at the
   `elmo_small` LSTM size (512 cells, projection 128, input 128, batch 32 x
   20 steps) and the original size (4096 / 512 / 512, batch 32 x 10 steps),
   with and without `jit_compile`:
   (a) `ProjectedLSTM` (input matmul hoisted out of a `tf.while_loop`, the
       default), (b) `ProjectedLSTM(unroll=True)`, (c) `keras.layers.RNN`
   over `LSTMPCell` below, an `LSTMCell` with a clipped projection (the
   plain Keras way, the anchor), (d) `keras.layers.LSTM` with `units` =
   the projection size and no projection (what Keras' own LSTM costs at the
   output width). Rounds alternate all variants of a size; reported:
   tokens/s and the median per-round speed-up over (c) with the same
   `jit_compile`.
2. biLM training: `ELMoBiLM` `elmo_small` on the bundled novels
   (`elmo_dataset` + `elmo_batch`, batches taken once and kept in memory so
   that only the training step is timed; `train_on_batch` over them, i.e.
   the compiled train function that `fit` runs, Adam), sampled
   softmax (1,024 candidates) vs the full softmax (`num_sampled=None`), in
   float32 and `mixed_bfloat16`, rounds alternating the four. Tokens are
   real tokens (the sum of `next_word_weights`: the words each direction
   predicts), padding excluded. Ratio: vs float32 with the full softmax.
   Also the input pipeline's real tokens/s on its own (both cores).
3. Embedding extraction: `ELMoEmbedder` forward pass (inference) on held-out
   sentences, `elmo_small` (batch 32) and `elmo_original` (batch 8; built
   with the same small word vocabulary: the softmax is not used by
   extraction), tokens = non-padding tokens, `<S>`/`</S>` included. Ratio:
   vs `elmo_small` float32 without XLA.
4. Peak resident memory of the process (`getrusage`) after each part.

    python benchmarks/elmo_benchmark.py [--quick] [--rounds 5] [--output PATH]
"""

import argparse
import json
import os
import statistics
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402
from _common import machine_info, peak_rss_mb, write_json  # noqa: E402  (benchmarks/_common.py)
from _common import markdown_table as table  # noqa: E402

from tfnlp import data, datasets, layers, models  # noqa: E402

tf.get_logger().setLevel("ERROR")  # one tf.function per variant: retracing warnings

CLIP = 3.0  # ELMo's cell and projection clip


class LSTMPCell(keras.layers.Layer):
    """`keras.layers.LSTMCell` (implementation 2) plus a clipped output projection.

    Written the way a Keras user would, for `keras.layers.RNN`: every step
    multiplies its own input by the input kernel (nothing hoisted). State
    `[r, c]`: the projected output and the cell.
    """

    def __init__(self, units, projection_dim, **kwargs):
        super().__init__(**kwargs)
        self.units, self.projection_dim = units, projection_dim
        self.state_size = [projection_dim, units]
        self.output_size = projection_dim

    def build(self, input_shape):
        units = self.units
        self.kernel = self.add_weight(shape=(input_shape[-1], 4 * units), name="kernel")
        self.recurrent_kernel = self.add_weight(
            shape=(self.projection_dim, 4 * units), initializer="orthogonal", name="recurrent_kernel"
        )
        self.bias = self.add_weight(shape=(4 * units,), initializer="zeros", name="bias")
        self.projection = self.add_weight(shape=(units, self.projection_dim), name="projection")

    def call(self, inputs, states):
        output, cell = states
        z = (keras.ops.matmul(inputs, self.kernel)
             + keras.ops.matmul(output, self.recurrent_kernel) + self.bias)
        i, f, g, o = keras.ops.split(z, 4, axis=-1)
        cell = keras.ops.sigmoid(f) * cell + keras.ops.sigmoid(i) * keras.ops.tanh(g)
        cell = keras.ops.clip(cell, -CLIP, CLIP)
        output = keras.ops.matmul(keras.ops.sigmoid(o) * keras.ops.tanh(cell), self.projection)
        output = keras.ops.clip(output, -CLIP, CLIP)
        return output, [output, cell]


def lstm_variants(units, projection_dim):
    """(name, layer factory) of the four implementations, (c) the anchor."""
    def projected(unroll):
        return lambda: layers.ProjectedLSTM(units, projection_dim=projection_dim, cell_clip=CLIP,
                                            projection_clip=CLIP, unroll=unroll)

    return (
        ("(a) ProjectedLSTM while_loop (default)", projected(False)),
        ("(b) ProjectedLSTM unroll=True", projected(True)),
        ("(c) keras.layers.RNN(LSTMPCell)", lambda: keras.layers.RNN(
            LSTMPCell(units, projection_dim), return_sequences=True)),
        (f"(d) keras.layers.LSTM({projection_dim}), no projection", lambda: keras.layers.LSTM(
            projection_dim, return_sequences=True)),
    )


ANCHOR = 2  # index of (c) in lstm_variants


def gradient_step(layer, jit):
    @tf.function(jit_compile=jit)
    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_mean(layer(x))
        return tape.gradient(loss, [x, *layer.trainable_variables])

    return step


def timed(function, steps):
    """Seconds per call of `function` (its tensors' results waited for)."""
    started = time.perf_counter()
    for _ in range(steps):
        result = function()
    tf.nest.map_structure(lambda t: t.numpy() if tf.is_tensor(t) else t, result)
    return (time.perf_counter() - started) / steps


def alternate(functions, rounds, steps):
    """Per-round seconds per call of each function, rounds alternating all of them.

    `steps`: calls per round, one int for all or one per function.
    """
    steps = [steps] * len(functions) if isinstance(steps, int) else steps
    times = [[] for _ in functions]
    for _ in range(rounds):
        for index, function in enumerate(functions):
            times[index].append(timed(function, steps[index]))
    return times


def speedup(anchor, times):
    """Median over rounds of anchor time / time (> 1: faster than the anchor)."""
    return round(statistics.median(a / t for a, t in zip(anchor, times, strict=True)), 2)


def lstm_implementations(sizes, jits, rounds, steps):
    rows = []
    for name, units, projection_dim, batch, length in sizes:
        x = tf.random.stateless_normal((batch, length, projection_dim), (0, 0))
        for jit in jits:
            keras.utils.set_random_seed(0)
            variants = [(label, make()) for label, make in lstm_variants(units, projection_dim)]
            functions = []
            for _, layer in variants:
                step = gradient_step(layer, jit)
                step(x)  # build, trace (and compile)
                functions.append(lambda step=step, x=x: step(x))
            times = alternate(functions, rounds, steps)
            for (label, _), values in zip(variants, times, strict=True):
                row = {
                    "size": name, "variant": label, "jit_compile": jit,
                    "tokens_per_step": batch * length,
                    "step_ms": round(1000 * statistics.median(values), 1),
                    "tokens_per_s": round(batch * length / statistics.median(values)),
                    "speedup_vs_keras_rnn_lstmp": speedup(times[ANCHOR], values),
                }
                print(json.dumps(row), flush=True)
                rows.append(row)
    return rows


def novel_vocabulary(size):
    """The biLM's word vocabulary: the `size` most frequent words of the training novels."""
    sentences = [s for d in datasets.read_documents("en_novels", "train") for s in d]
    return data.build_word_vocabulary(sentences, size)


def novel_pipeline(vocabulary, split, sequence_length, batch_size, repeat=False):
    """`elmo_dataset` over the novels' sentences (20,000 shuffled at once, seed 0).

    Also what `data_benchmark.py` measures on one core.
    """
    texts = datasets.load_documents("en_novels", split)
    return data.elmo_dataset(texts.repeat() if repeat else texts, vocabulary,
                             sequence_length=sequence_length, batch_size=batch_size,
                             shuffle_buffer=20000, seed=0)


def novel_batches(vocabulary, split, sequence_length, batch_size, count):
    return list(novel_pipeline(vocabulary, split, sequence_length, batch_size).take(count))


def pipeline_tokens_per_s(vocabulary, sequence_length, batch_size, count):
    """Real tokens/s of `elmo_dataset` on its own (a fresh pipeline, both cores)."""
    dataset = novel_pipeline(vocabulary, "train", sequence_length, batch_size, repeat=True)
    iterator = iter(dataset)
    next(iterator)  # start the pipeline (the shuffle buffer fills)
    started, tokens = time.perf_counter(), 0
    for _ in range(count):
        tokens += int(tf.reduce_sum(next(iterator)["next_word_weights"]))
    return round(tokens / (time.perf_counter() - started))


def bilm_training(vocabulary, args):
    features = novel_batches(vocabulary, "train", args.sequence_length, args.batch_size,
                             args.train_batches)
    tokens = sum(int(tf.reduce_sum(f["next_word_weights"])) for f in features)
    # The batches in memory, `(character_ids, targets)` as `fit` takes them:
    # only the training step (Keras' compiled train function) is timed.
    batches = [models.elmo_batch(f) for f in features]
    settings = [(softmax, policy) for softmax in ("full", "sampled")
                for policy in ("float32", "mixed_bfloat16")]
    functions = []
    for softmax, policy in settings:
        keras.utils.set_random_seed(0)
        overrides = {"num_sampled": None} if softmax == "full" else {}
        model = models.ELMoBiLM.from_architecture("elmo_small", len(vocabulary), dtype=policy,
                                            **overrides)
        model.compile()
        for x, y in batches[:2]:
            model.train_on_batch(x, y)  # trace and warm up

        def one_pass(model=model):  # one optimizer step per batch
            for x, y in batches:
                model.train_on_batch(x, y)

        functions.append(one_pass)
    # A round is one pass over the batches (`train_on_batch` waits for its loss).
    times = alternate(functions, args.rounds, 1)
    rows = []
    for (softmax, policy), values in zip(settings, times, strict=True):
        seconds = statistics.median(values)
        row = {
            "model": "elmo_small", "softmax": softmax, "policy": policy,
            "batch": f"{args.batch_size} x {args.sequence_length}",
            "step_ms": round(1000 * seconds / args.train_batches, 1),
            "real_tokens_per_s": round(tokens / seconds),
            "speedup_vs_float32_full": speedup(times[0], values),
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
    pipeline = pipeline_tokens_per_s(vocabulary, args.sequence_length, args.batch_size,
                                     args.pipeline_batches)
    print(json.dumps({"input_pipeline_real_tokens_per_s": pipeline}), flush=True)
    return rows, pipeline


def extraction(vocabulary, args):
    settings = [("elmo_small", "float32", False, args.batch_size, args.steps)]
    if not args.quick:
        settings.append(("elmo_small", "float32", True, args.batch_size, args.steps))
    settings += [
        ("elmo_small", "mixed_bfloat16", False, args.batch_size, args.steps),
        ("elmo_original", "float32", False, args.original_batch_size, 1),
        ("elmo_original", "mixed_bfloat16", False, args.original_batch_size, 1),
    ]
    # One batch of held-out sentences per batch size (the same shuffle: the
    # smaller batch is the start of the larger one).
    held_out = {size: novel_batches(vocabulary, "validation", args.sequence_length, size, 1)[0]
                for size in {s[3] for s in settings}}
    functions, token_counts = [], []
    for preset, policy, jit, batch_size, _ in settings:
        keras.utils.set_random_seed(0)
        # No sampled softmax: its size must stay below the small vocabulary.
        bilm = models.ELMoBiLM.from_architecture(preset, len(vocabulary), num_sampled=None, dtype=policy)
        embedder = models.ELMoEmbedder(bilm)
        x = held_out[batch_size]["character_ids"]
        token_counts.append(int(tf.reduce_sum(held_out[batch_size]["padding_mask"])))
        infer = tf.function(lambda x, embedder=embedder: embedder(x, training=False)["elmo"],
                            jit_compile=jit)
        infer(x)  # trace (and compile)
        functions.append(lambda infer=infer, x=x: infer(x))
    times = alternate(functions, args.rounds, [s[4] for s in settings])
    rows = []
    for (preset, policy, jit, batch_size, _), count, values in zip(
            settings, token_counts, times, strict=True):
        row = {
            "model": preset, "policy": policy, "jit_compile": jit,
            "batch": f"{batch_size} x {args.sequence_length}",
            "tokens_per_s": round(count / statistics.median(values)),
            "speedup_vs_small_float32": round(statistics.median(
                (count / t) / (token_counts[0] / a)  # tokens/s over the anchor's
                for a, t in zip(times[0], values, strict=True)), 2),
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def markdown(results):
    lstm = table(
        ["size", "implementation", "XLA", "ms / step", "tok/s", "vs (c)"],
        [(r["size"], r["variant"], r["jit_compile"], r["step_ms"], f"{r['tokens_per_s']:,}",
          r["speedup_vs_keras_rnn_lstmp"]) for r in results["lstm_implementations"]],
    )
    training = table(
        ["model", "softmax", "policy", "batch", "ms / step", "real tok/s", "vs float32 full"],
        [(r["model"], r["softmax"], r["policy"], r["batch"], r["step_ms"],
          f"{r['real_tokens_per_s']:,}", r["speedup_vs_float32_full"])
         for r in results["bilm_training"]]
        + [("input pipeline alone", "", "", "", "",
            f"{results['input_pipeline_real_tokens_per_s']:,}", "")],
    )
    embedding = table(
        ["model", "policy", "XLA", "batch", "tok/s", "vs small float32"],
        [(r["model"], r["policy"], r["jit_compile"], r["batch"], f"{r['tokens_per_s']:,}",
          r["speedup_vs_small_float32"]) for r in results["extraction"]],
    )
    memory = table(["part", "seconds", "peak RSS MiB so far"],
                   [(name, seconds, results["peak_rss_mib"][name])
                    for name, seconds in results["seconds"].items()])
    return "\n\n".join([lstm, training, embedding, memory])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run (~1.5 minutes): 1 round of 1 step, 2 training "
                        "batches, no XLA variants, the original LSTM over 4 steps")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=3, help="timed calls per round and variant")
    parser.add_argument("--vocabulary-size", type=int, default=20000)
    parser.add_argument("--sequence-length", type=int, default=32, help="biLM tokens per sentence")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--original-batch-size", type=int, default=8)
    parser.add_argument("--train-batches", type=int, default=8, help="training steps per round")
    parser.add_argument("--pipeline-batches", type=int, default=50)
    parser.add_argument("--output", default=None,
                        help="JSON results (default benchmarks/results/elmo[_quick].json)")
    args = parser.parse_args()
    # (name, units, projection = input, batch, steps) of the LSTM comparison.
    sizes = [("elmo_small", 512, 128, 32, 20), ("original", 4096, 512, 32, 10)]
    jits = [False, True]
    if args.quick:
        args.rounds, args.steps, args.train_batches, args.pipeline_batches = 1, 1, 2, 5
        sizes = [("elmo_small", 512, 128, 32, 20), ("original", 4096, 512, 32, 4)]
        jits = [False]
    args.output = args.output or f"benchmarks/results/elmo{'_quick' if args.quick else ''}.json"

    keras.config.set_dtype_policy("float32")
    vocabulary = novel_vocabulary(args.vocabulary_size)
    results = {
        "machine": machine_info(),
        "settings": {k: v for k, v in vars(args).items() if k != "output"},
        "word_vocabulary_size": len(vocabulary),
        "peak_rss_mib": {}, "seconds": {},
    }
    parts = (
        ("1 LSTM implementations",
         lambda: {"lstm_implementations": lstm_implementations(sizes, jits, args.rounds,
                                                               args.steps)}),
        ("2 biLM training", lambda: dict(zip(
            ("bilm_training", "input_pipeline_real_tokens_per_s"),
            bilm_training(vocabulary, args), strict=True))),
        ("3 embedding extraction", lambda: {"extraction": extraction(vocabulary, args)}),
    )
    for name, part in parts:
        started = time.perf_counter()
        results.update(part())
        results["seconds"][name] = round(time.perf_counter() - started)
        results["peak_rss_mib"][name] = round(peak_rss_mb())  # the process's peak so far

    tables = ("lstm_implementations", "bilm_training", "extraction")
    rows = {name: results[name] for name in tables}
    rows["parts"] = [{"part": name, "seconds": seconds, "peak_rss_mib_so_far":
                      results["peak_rss_mib"][name]} for name, seconds in results["seconds"].items()]
    write_json(args.output, rows, **{k: v for k, v in results.items() if k not in tables})
    print()
    print(markdown(results))
    print(f"\nwritten to {args.output}")


if __name__ == "__main__":
    main()
