"""The machine's limit: matrix-multiply GFLOP/s, float32 and bfloat16, with and without XLA.

Every other figure in benchmarks/ is relative (tfnlp vs Keras / keras-hub,
cache vs recomputation); this one says how far a workload is from what the
machine can do at all. `tf.matmul` of random matrices inside a
`tf.function` (no eager dispatch per op), without and with
`jit_compile=True`, for square products 1024^3, 2048^3, 4096^3 and the two
products that dominate BERT-small pretraining at batch 32 x 128:
(4096 x 512) @ (512 x 2048) (a feed-forward layer over all tokens) and
(640 x 512) @ (512 x 30522) (the masked-LM logits of 32 x 20 positions).
FLOPs = 2 m k n. Each repetition times enough back-to-back calls to last
`--min-seconds`; rounds alternate the XLA and non-XLA functions; reported:
the median GFLOP/s of each and the median per-round XLA speed-up, then the
peak per dtype (the best shape and XLA setting).

Other scripts compute MFU (model FLOP/s / peak) against a peak measured in
the same run:

    sys.path.insert(0, "benchmarks")  # when not run from benchmarks/ itself
    from machine_benchmark import matmul_peak_gflops
    peak = matmul_peak_gflops("bfloat16", repeats=3)

    python benchmarks/machine_benchmark.py [--quick] [--repeats 5] [--dtypes float32 bfloat16]
        [--json PATH]
"""

import argparse
import math
import os
import statistics
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
from _common import write_json  # noqa: E402  (benchmarks/_common.py)

SQUARE_SIZES = (1024, 2048, 4096)
# (m, k, n, what): BERT-small (hidden 512, FFN 2048, 30,522 tokens) at batch 32 x 128.
BERT_PRODUCTS = (
    (4096, 512, 2048, "BERT-small FFN in, 32 x 128 tokens"),
    (640, 512, 30522, "BERT MLM logits, 32 x 20 positions"),
)
QUICK_SQUARE_SIZES = (512, 1024)


def products(square_sizes=SQUARE_SIZES, bert_products=True):
    """(m, k, n, what) of the products measured."""
    squares = [(s, s, s, "square") for s in square_sizes]
    return squares + (list(BERT_PRODUCTS) if bert_products else [])


def _matmul(jit_compile):
    @tf.function(jit_compile=jit_compile)
    def matmul(a, b):
        return tf.matmul(a, b)

    return matmul


def _seconds_per_call(function, a, b, calls):
    started = time.perf_counter()
    for _ in range(calls):
        product = function(a, b)
    product[:1, :1].numpy()  # waits for the last call (asynchronous devices)
    return (time.perf_counter() - started) / calls


def measure(dtype, shapes=None, jit_compile=(False, True), repeats=5, min_seconds=0.2, seed=0):
    """GFLOP/s of `tf.matmul` for each shape, one row per shape.

    Args:
        dtype: `"float32"` or `"bfloat16"` (any `tf.DType` name).
        shapes: (m, k, n, what) tuples; defaults to `products()`.
        jit_compile: the XLA settings compared (rounds alternate them).
        repeats: timed rounds; medians are reported.
        min_seconds: each round calls the product enough times to last this.
        seed: of the random inputs.

    Returns:
        List of dicts: dtype, shape, what, gflop and, per XLA setting,
        `<xla|no_xla>_ms` and `<...>_gflops` (None where it failed), and
        `xla_speedup` (median per-round non-XLA time / XLA time) when both ran.
    """
    shapes = products() if shapes is None else shapes
    rows = []
    for m, k, n, what in shapes:
        a = tf.cast(tf.random.stateless_normal((m, k), (seed, 1)), dtype)
        b = tf.cast(tf.random.stateless_normal((k, n), (seed, 2)), dtype)
        flops = 2 * m * k * n
        functions, calls, errors = {}, {}, {}
        for jit in jit_compile:
            function = _matmul(jit)
            try:
                warm = _seconds_per_call(function, a, b, 1)  # trace (and compile)
                warm = _seconds_per_call(function, a, b, 1)
            except Exception as error:  # e.g. a dtype XLA cannot compile here
                errors[jit] = f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
                continue
            functions[jit] = function
            calls[jit] = max(1, math.ceil(min_seconds / max(warm, 1e-6)))
        times = {jit: [] for jit in functions}
        for _ in range(repeats):
            for jit, function in functions.items():
                times[jit].append(_seconds_per_call(function, a, b, calls[jit]))
        row = {"dtype": tf.as_dtype(dtype).name, "shape": f"({m}x{k})@({k}x{n})", "what": what,
               "gflop": round(flops / 1e9, 2)}
        for jit in jit_compile:
            name = "xla" if jit else "no_xla"
            seconds = statistics.median(times[jit]) if times.get(jit) else None
            row[f"{name}_ms"] = None if seconds is None else round(1000 * seconds, 2)
            row[f"{name}_gflops"] = None if seconds is None else round(flops / seconds / 1e9, 1)
            if jit in errors:
                row[f"{name}_error"] = errors[jit]
        if len(times) == 2 and set(times) == {False, True}:
            row["xla_speedup"] = round(statistics.median(
                off / on for off, on in zip(times[False], times[True], strict=True)), 2)
        rows.append(row)
    return rows


def peak(rows):
    """(GFLOP/s, row, XLA setting) of the fastest measurement in `rows`."""
    best = (0.0, None, None)
    for row in rows:
        for jit, name in ((False, "no_xla_gflops"), (True, "xla_gflops")):
            if row.get(name) is not None and row[name] > best[0]:
                best = (row[name], row, jit)
    return best


def matmul_peak_gflops(dtype="float32", repeats=3, shapes=None, jit_compile=(False, True),
                       min_seconds=0.2):
    """The best matmul GFLOP/s of `dtype` on this machine, measured now.

    For MFU: `model FLOPs / step seconds / 1e9 / matmul_peak_gflops(dtype)`.
    Takes about (repeats + 2) x the products' FLOPs at that rate, a few seconds
    to a minute on a CPU; pass fewer `shapes` (see `products`) to shorten it.
    """
    return peak(measure(dtype, shapes, jit_compile, repeats, min_seconds))[0]


def markdown_row(row):
    cells = [row["dtype"], row["shape"], row["what"]]
    for name in ("no_xla_gflops", "xla_gflops"):
        cells.append("failed" if row.get(name) is None else f"{row[name]:,}")
    cells.append(row.get("xla_speedup", ""))
    return "| " + " | ".join(str(c) for c in cells) + " |"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SQUARE_SIZES),
                        help="square sizes")
    parser.add_argument("--no-bert-shapes", action="store_true",
                        help="skip the two BERT-shaped products")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--min-seconds", type=float, default=0.2,
                        help="each repetition calls the product for at least this long")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run (< 1 minute): squares 512 and 1024 and the BERT "
                        "products, 2 repetitions of at least 0.05 s")
    parser.add_argument("--json", default="benchmarks/results/machine.json")
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.repeats, args.min_seconds = list(QUICK_SQUARE_SIZES), 2, 0.05

    shapes = products(args.sizes, not args.no_bert_shapes)
    print("| dtype | product | what | GFLOP/s | GFLOP/s XLA | XLA speed-up |")
    print("|---|---|---|---|---|---|")
    rows, peaks = [], []
    for dtype in args.dtypes:
        dtype_rows = []
        for shape in shapes:  # one at a time, so that the table prints as it goes
            dtype_rows += measure(dtype, [shape], repeats=args.repeats,
                                  min_seconds=args.min_seconds)
            print(markdown_row(dtype_rows[-1]), flush=True)
        rows += dtype_rows
        gflops, row, jit = peak(dtype_rows)
        peaks.append({"dtype": dtype, "peak_gflops": gflops,
                      "at": f"{row['shape']} {'XLA' if jit else 'no XLA'}" if row else None})
    for entry in peaks:  # bfloat16 (or any) vs float32: what the lower precision buys
        reference = next((p["peak_gflops"] for p in peaks if p["dtype"] == "float32"), None)
        if reference:
            entry["speedup_vs_float32"] = round(entry["peak_gflops"] / reference, 2)
    print()
    print("| dtype | peak GFLOP/s | at | vs float32 |")
    print("|---|---|---|---|")
    for entry in peaks:
        print(f"| {entry['dtype']} | {entry['peak_gflops']:,} | {entry['at']} "
              f"| {entry.get('speedup_vs_float32', '')} |")
    settings = {k: v for k, v in vars(args).items() if k != "json"}
    if tf.config.list_physical_devices("GPU"):
        settings["tensor_float_32"] = tf.config.experimental.tensor_float_32_execution_enabled()
    write_json(args.json, {"matmul": rows, "peak": peaks},
               peak_gflops={p["dtype"]: p["peak_gflops"] for p in peaks}, settings=settings)
    print(f"\nwritten to {args.json}")


if __name__ == "__main__":
    main()
