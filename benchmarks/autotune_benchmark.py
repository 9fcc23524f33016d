"""tf.data autotuning on vs off under `model.fit`: why tfnlp's pipelines turn it off.

Every `tfnlp.data` builder returns its dataset with `autotune.enabled=False`
(`tfnlp/data/tuning.py`). This script runs two examples end to end in fresh
processes, once as shipped (autotuning off) and once with the builders'
datasets handed back to the autotuner (`with_options`, the latest setting
wins), alternating which goes first, and reports the median per-round
ratio of the wall times (autotuned / static: > 1 means static is faster).
The examples' results (accuracies) must come out identical, since only the
tuning differs.

Workloads (the test suite's and the demo's kind of run, small enough to
repeat):
- `bert_pretraining`: `examples/pretrain_bert.py`, BERT-tiny, 2,000-token
  vocabulary, length 64, 800 steps in 2 epochs with held-out evaluation
  after each;
- `bert_demo`: the same example at `make demo`'s settings (BERT-tiny,
  8,000-token vocabulary, length 128, learning rate 1e-3), 600 steps in 2
  epochs;
- `text_classifier`: `examples/text_classifier.py` at its defaults, 3 epochs.

Run it: `python benchmarks/autotune_benchmark.py [--rounds 2]` (about 9
minutes). Writes `results/autotune.json`.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402
from _common import markdown_table, write_json  # noqa: E402

WORKLOADS = ("bert_pretraining", "bert_demo", "text_classifier")
CHILD_TIMEOUT_S = 1800


# The test fixture's settings, and make demo's (fewer steps).
BERT_ARGUMENTS = {
    "bert_pretraining": ["--vocabulary-size", "2000", "--sequence-length", "64", "--max-predictions", "10",
                         "--steps", "800", "--steps-per-epoch", "400", "--learning-rate", "2e-3",
                         "--max-documents", "150", "--eval-batches", "40", "--cache-batches", "400",
                         "--shuffle-buffer", "1000"],
    "bert_demo": ["--sequence-length", "128", "--steps", "600", "--steps-per-epoch", "300",
                  "--learning-rate", "1e-3", "--cache-batches", "300"],
}


def _pretrain_bert(workload, output):
    from examples import pretrain_bert

    result = pretrain_bert.main(["--preset", "bert_tiny", *BERT_ARGUMENTS[workload], "--output", output])
    return {"mlm_accuracy": result["mlm_accuracy"], "nsp_accuracy": result["nsp_accuracy"]}


def _text_classifier(workload, output):
    from examples import text_classifier

    result = text_classifier.main(["--epochs", "3", "--logs", output])
    return {"accuracy": result["transformer"]["accuracy"]}


def child(workload, autotune):
    import tfnlp  # noqa: F401  (before TensorFlow: tfnlp's CPU settings)
    # isort: split
    import tensorflow as tf

    from tfnlp import data

    if autotune:
        options = tf.data.Options()
        options.autotune.enabled = True
        for name in data.__all__:
            if name.endswith("_dataset"):
                builder = getattr(data, name)
                setattr(data, name, lambda *a, _builder=builder, **k: _builder(*a, **k).with_options(options))
    run = _text_classifier if workload == "text_classifier" else _pretrain_bert
    with tempfile.TemporaryDirectory() as output:
        started = time.perf_counter()
        result = run(workload, output)
        seconds = time.perf_counter() - started
    print(json.dumps({"seconds": seconds, "result": result}))


def run_child(workload, autotune):
    return _common.run_child(__file__, ["--child", workload, "--autotune", str(int(autotune))],
                             f"{workload} (autotune={autotune})", CHILD_TIMEOUT_S)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=WORKLOADS)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--child", choices=WORKLOADS, help=argparse.SUPPRESS)
    parser.add_argument("--autotune", type=int, choices=(0, 1), default=0, help=argparse.SUPPRESS)
    parser.add_argument("--json", default="benchmarks/results/autotune.json")
    args = parser.parse_args()
    if args.child:
        child(args.child, bool(args.autotune))
        return
    rows, failures = [], []
    for workload in args.workloads:
        seconds = {False: [], True: []}
        results = {False: [], True: []}
        for round_index in range(args.rounds):
            # Which setting goes first alternates: no order bias.
            for autotune in (False, True) if round_index % 2 == 0 else (True, False):
                measured = run_child(workload, autotune)
                seconds[autotune].append(round(measured["seconds"], 2))
                results[autotune].append(measured["result"])
                print(workload, "autotune" if autotune else "static", round(measured["seconds"], 1),
                      measured["result"], flush=True)
        distinct = {json.dumps(r, sort_keys=True) for r in results[False] + results[True]}
        if len(distinct) != 1:
            failures.append(f"{workload}: the settings gave different results: {sorted(distinct)}")
        row = {
            "workload": workload,
            "static_s": round(statistics.median(seconds[False]), 1),
            "autotuned_s": round(statistics.median(seconds[True]), 1),
            "static_speedup": round(statistics.median(
                a / s for a, s in zip(seconds[True], seconds[False], strict=True)), 2),
            "rounds": args.rounds,
            "static_seconds": seconds[False],
            "autotuned_seconds": seconds[True],
            "results": results[False][0],
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
    print(markdown_table(
        ["workload", "static (tfnlp) s", "autotuned s", "speed-up (autotuned / static)"],
        [[r["workload"], r["static_s"], r["autotuned_s"], f"{r['static_speedup']:.2f}"] for r in rows],
    ))
    write_json(args.json, rows, failures=failures)  # written first: a mismatch keeps the timings
    if failures:
        raise RuntimeError("\n".join(failures))


if __name__ == "__main__":
    main()
