"""oneDNN on or off: what TensorFlow's CPU default costs tfnlp's models on this machine.

TensorFlow's x86 builds turn their oneDNN kernels on by default only on CPUs
with deep-learning instructions (AVX-512 VNNI or BF16, AMX, ...: Intel
Cascade Lake and newer, AMD Zen 4); elsewhere (AVX2-only CPUs such as AMD
Zen 2/3 or older Intel Xeons) matmuls run on Eigen unless
`TF_ENABLE_ONEDNN_OPTS=1` is set before TensorFlow is imported. This script
measures tfnlp's workloads in fresh processes with the variable set to 0
and to 1 (a round = one process per setting and family of workloads; which
setting runs first alternates between rounds) and reports the median
per-round speed-up of `1` over `0` (with 2 rounds, the mean of the two). It
is the measurement behind `tfnlp/_cpu_defaults.py`: importing tfnlp before
TensorFlow sets the variable to 1 on x86-64 when it is unset.

Workloads (in float32, or the policy given by `--policy`; in-memory
batches; the median time of the timed calls):
- BERT pretraining step (`BertPretrainer.train_on_batch`, batch 32 x 128, 20
  masked positions, 30,522 words) and the backbone's forward pass, for
  tiny / mini / small (`bert_benchmark.py`'s setup);
- `TransformerClassifier` 4 x 256 and `TransformerSeq2Seq` small training
  steps, and cached greedy decoding of 64 tokens for 16 sources
  (`seq2seq_benchmark.py`'s models and decoding setup; training timed by
  `train_on_batch` here, by `fit` there);
- `ELMoBiLM` `elmo_small` training step (sampled softmax) and `ELMoEmbedder`
  extraction on the bundled novels (`elmo_benchmark.py`'s setup);
- the three products of BERT-tiny's masked-LM logits, 640 x 128 hidden
  states against the 30,522 x 128 embedding: the logits `h Eᵀ`, and the
  gradients `dL E` and `dLᵀ h` (the `matmul` family).

    python benchmarks/onednn_benchmark.py [--rounds 2] [--families bert seq2seq elmo]
        [--policy mixed_bfloat16]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402
from _common import markdown_table, write_json  # noqa: E402

FAMILIES = ("bert", "seq2seq", "elmo", "matmul")
CHILD_TIMEOUT_S = 1800  # one family in one process; BERT-small steps take seconds each


def _median_seconds(function, steps):
    times = []
    for _ in range(steps):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _bert(steps, policy):
    import bert_benchmark

    result = {}
    for preset in ("bert_tiny", "bert_mini", "bert_small"):
        train, infer = bert_benchmark.prepared(bert_benchmark.tfnlp_model, preset, policy, False)
        result[f"{preset} train step"] = _median_seconds(train, steps)
        result[f"{preset} backbone forward"] = _median_seconds(infer, steps)
    return result


def _seq2seq(steps, policy):
    import seq2seq_benchmark

    result = {}
    for name, build in (("classifier 4x256 train step", seq2seq_benchmark.classifier_setup),
                        ("seq2seq small train step", seq2seq_benchmark.seq2seq_setup)):
        model, x, y, weights, _ = build(policy)
        args = (x, y) if weights is None else (x, y, weights)
        model.train_on_batch(*args)  # trace
        result[name] = _median_seconds(lambda model=model, args=args: model.train_on_batch(*args),
                                       steps)
    model, sources, end_id = seq2seq_benchmark.decoding_setup(policy)

    def decode():
        model.generate(sources, start_id=2, end_id=end_id, max_length=64)

    decode()  # trace
    result["seq2seq greedy decode 64 tokens"] = _median_seconds(decode, steps)
    return result


def _elmo(steps, policy):
    import elmo_benchmark
    import keras
    import tensorflow as tf

    from tfnlp import models

    vocabulary = elmo_benchmark.novel_vocabulary(20000)
    features = elmo_benchmark.novel_batches(vocabulary, "train", 32, 32, 1)[0]
    keras.utils.set_random_seed(0)
    bilm = models.ELMoBiLM.from_architecture("elmo_small", len(vocabulary), dtype=policy)
    bilm.compile()
    x, y = models.elmo_batch(features)
    bilm.train_on_batch(x, y)  # trace
    result = {"elmo_small train step": _median_seconds(lambda: bilm.train_on_batch(x, y), steps)}
    embedder = models.ELMoEmbedder(bilm)
    extract = tf.function(lambda ids: embedder(ids, training=False)["elmo"])
    extract(features["character_ids"])
    result["elmo_small embedding forward"] = _median_seconds(
        lambda: extract(features["character_ids"]).numpy(), steps)
    return result


def _matmul(steps, policy):
    import keras
    import tensorflow as tf

    dtype = keras.DTypePolicy(policy).compute_dtype
    hidden = tf.random.normal([640, 128], dtype=dtype)
    embedding = tf.random.normal([30522, 128], dtype=dtype)
    upstream = tf.random.normal([640, 30522], dtype=dtype)
    products = {
        "logits h Eᵀ (640x128 @ 128x30522)":
            lambda: tf.matmul(hidden, embedding, transpose_b=True),
        "gradient dL E": lambda: tf.matmul(upstream, embedding),
        "gradient dLᵀ h": lambda: tf.matmul(upstream, hidden, transpose_a=True),
    }
    result = {}
    for name, product in products.items():
        function = tf.function(product)
        function()  # trace
        result[name] = _median_seconds(lambda function=function: function().numpy(), 5 * steps)
    return result


def child(family, steps, policy):
    from tensorflow.python.util import _pywrap_util_port

    function = {"bert": _bert, "seq2seq": _seq2seq, "elmo": _elmo, "matmul": _matmul}[family]
    result = function(steps, policy)
    print(json.dumps({"onednn": bool(_pywrap_util_port.IsMklEnabled()), "seconds": result}))


def run_child(family, setting, steps, policy):
    return _common.run_child(__file__, ["--child", family, "--steps", str(steps), "--policy", policy],
                             f"{family} with TF_ENABLE_ONEDNN_OPTS={setting}", CHILD_TIMEOUT_S,
                             TF_ENABLE_ONEDNN_OPTS=setting)


def default_onednn():
    """Whether this machine's TensorFlow turns oneDNN on when the variable is unset."""
    environment = {k: v for k, v in os.environ.items() if k != "TF_ENABLE_ONEDNN_OPTS"}
    code = ("from tensorflow.python.util import _pywrap_util_port as p; "
            "print(bool(p.IsMklEnabled()))")
    completed = subprocess.run([sys.executable, "-c", code],
                               env=dict(environment, TF_CPP_MIN_LOG_LEVEL="3"),
                               capture_output=True, text=True, check=False, timeout=300)
    if completed.returncode != 0:
        raise RuntimeError(f"importing TensorFlow failed:\n{completed.stderr[-3000:]}")
    return completed.stdout.strip().splitlines()[-1] == "True"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", nargs="+", default=list(FAMILIES), choices=FAMILIES)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3, help="timed calls per workload and process")
    parser.add_argument("--policy", default="float32", help="Keras dtype policy of every model")
    parser.add_argument("--child", choices=FAMILIES, help=argparse.SUPPRESS)
    parser.add_argument("--json", default=None,
                        help="default benchmarks/results/onednn_POLICY.json")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.steps, args.policy)
        return
    default = default_onednn()
    print(f"oneDNN by default on this machine: {default}", flush=True)
    rows = []
    for family in args.families:
        times = {"0": [], "1": []}
        for round_index in range(args.rounds):
            # Which setting runs first alternates (0 1, 1 0, ...): no order bias.
            for setting in ("0", "1") if round_index % 2 == 0 else ("1", "0"):
                measured = run_child(family, setting, args.steps, args.policy)
                if measured["onednn"] != (setting == "1"):
                    raise RuntimeError(f"TF_ENABLE_ONEDNN_OPTS={setting} was not honoured")
                times[setting].append(measured["seconds"])
        for workload in times["0"][0]:
            off = [t[workload] for t in times["0"]]
            on = [t[workload] for t in times["1"]]
            row = {
                "workload": workload,
                "off_ms": round(1000 * statistics.median(off), 1),
                "on_ms": round(1000 * statistics.median(on), 1),
                "onednn_speedup": round(statistics.median(
                    f / n for f, n in zip(off, on, strict=True)), 2),
            }
            print(json.dumps(row), flush=True)
            rows.append(row)
    header = ["workload", "oneDNN off ms", "oneDNN on ms", "speed-up (off / on)"]
    print(markdown_table(header, [[r["workload"], r["off_ms"], r["on_ms"],
                                   f"{r['onednn_speedup']:.2f}"] for r in rows]))
    write_json(args.json or f"benchmarks/results/onednn_{args.policy}.json", rows,
               onednn_by_default=default, policy=args.policy)


if __name__ == "__main__":
    main()
