"""BERT pretraining and inference: tfnlp vs keras-hub at the same configuration.

Both sides: the same backbone size, 30,522-token vocabulary, batch 32 x 128,
20 masked positions, a masked-LM head tied to the token embedding applied at
the gathered positions plus a next-sentence head on the pooled output,
AdamW (weight decay 0.01 off biases and LayerNorm weights), sparse
cross-entropy on logits, no metrics. Each library as its users run it:
tfnlp = `BertPretrainer(...).compile()` with its defaults (tfnlp's fused
AdamW and cross-entropy kernels); keras-hub = `keras_hub.models.BertBackbone`
+ `keras_hub.layers.MaskedLMHead` (GELU, epsilon 1e-12) + `Dense(2)`,
compiled with `keras.optimizers.AdamW` and Keras' sparse cross-entropy.
Training = one `train_on_batch` on an in-memory batch; inference = the
backbone's forward pass. Rounds alternate between the sides in one process;
reported: median tokens/s, the median over rounds of keras-hub time / tfnlp
time (> 1: tfnlp faster), and model-FLOPs utilisation (MFU): the model's
matmul FLOPs per second over the matmul peak of the same dtype measured at
the end of the same run (`machine_benchmark.matmul_peak_gflops`).

Both sides share the process and so run on the same TensorFlow kernels.
TensorFlow is imported here before tfnlp, so the run keeps TensorFlow's own
oneDNN default: on for CPUs with deep-learning instructions (AVX-512 VNNI or
BF16, AMX), off on AVX2-only CPUs, where tfnlp imported first would turn it
on. Set `TF_ENABLE_ONEDNN_OPTS=1` to compare both at tfnlp's default there
(benchmarks/README.md, "oneDNN on CPUs where TensorFlow leaves it off").

`--profile` instead traces a few training steps of each side with the
TensorFlow profiler and prints where the time goes, by part of the model
(the vocabulary projection, the loss, the optimizer, dropout, attention,
dense layers, ...), as a share of summed op time.

    pip install keras-hub==0.32.0   # benchmark-only dependency
    python benchmarks/bert_benchmark.py [--presets bert_tiny bert_mini bert_small]
        [--policies float32 mixed_bfloat16] [--jit 0 1] [--batch-size 32] [--json PATH]
    python benchmarks/bert_benchmark.py --presets bert_base --rounds 2 --steps 1 --jit 0
    python benchmarks/bert_benchmark.py --profile --presets bert_tiny bert_small
"""

import argparse
import collections
import glob
import os
import re
import statistics
import sys
import tempfile
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import markdown_table, write_json  # noqa: E402
from machine_benchmark import matmul_peak_gflops  # noqa: E402

from tfnlp import models  # noqa: E402
from tfnlp.training import NO_DECAY  # noqa: E402

VOCABULARY, BATCH, LENGTH, PREDICTIONS = 30522, 32, 128, 20
TOKENS = BATCH * LENGTH


def tfnlp_model(preset, policy, jit):
    backbone = models.BertBackbone.from_architecture(
        preset, vocabulary_size=VOCABULARY, max_sequence_length=LENGTH, dtype=policy
    )
    model = models.BertPretrainer(backbone)
    model.compile(weighted_metrics=[], metrics=[], jit_compile=jit)  # tfnlp's defaults
    return model, backbone, "masked_positions"


def keras_hub_model(preset, policy, jit):
    import keras_hub

    size = models.BERT_ARCHITECTURES[preset]
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
    model = keras.Model(inputs, {"mlm": mlm, "nsp": nsp})
    optimizer = keras.optimizers.AdamW(1e-4, weight_decay=0.01)
    optimizer.exclude_from_weight_decay(var_names=list(NO_DECAY))
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(optimizer=optimizer, loss={"mlm": loss, "nsp": loss},
                  weighted_metrics=[], metrics=[], jit_compile=jit)
    return model, backbone, "mask_positions"


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
    model, backbone, positions_name = builder(preset, policy, jit)
    x, y = batch(positions_name)
    features = {k: x[k] for k in ("token_ids", "segment_ids", "padding_mask")}
    infer = tf.function(lambda f: backbone(f, training=False)["sequence_output"], jit_compile=jit)
    model.train_on_batch(x, y)  # trace (and compile)
    infer(features).numpy()
    return (lambda: model.train_on_batch(x, y)), (lambda: infer(features).numpy())


def matmul_flops(preset, training):
    """Matmul FLOPs of one step (2 m k n per product; backward = 2x forward)."""
    size = models.BERT_ARCHITECTURES[preset]
    hidden, layers = size["hidden_dim"], size["num_layers"]
    per_token = layers * (
        2 * (4 * hidden * hidden + 2 * hidden * 4 * hidden)  # Q, K, V, output; feed-forward
        + 2 * 2 * LENGTH * hidden  # scores and context
    )
    forward = TOKENS * per_token
    if not training:
        return forward
    head = BATCH * PREDICTIONS * 2 * (hidden * hidden + hidden * VOCABULARY)  # MLM transform + logits
    head += BATCH * 2 * (hidden * hidden + 2 * hidden)  # pooler + NSP
    return 3 * (forward + head)


def skipped_flops(preset):
    """The matmul FLOPs of one training step that tfnlp's pretrainer does not run.

    Its last block computes `[CLS]` and the masked positions only: the query
    and output projections, the feed-forward network and the attention rows
    of the other `T - 1 - P` positions of each sequence are skipped (forward
    and backward). MFU counts the full model's FLOPs for both sides, as
    usual; `train_tfnlp_executed_mfu` counts only those tfnlp runs.
    """
    hidden = models.BERT_ARCHITECTURES[preset]["hidden_dim"]
    per_token = 2 * (2 * hidden * hidden + 2 * hidden * 4 * hidden) + 2 * 2 * LENGTH * hidden
    return 3 * BATCH * (LENGTH - 1 - PREDICTIONS) * per_token


def timed(fn, steps):
    start = time.perf_counter()
    for _ in range(steps):
        fn()
    return (time.perf_counter() - start) / steps


def compare(preset, policy, jit, rounds, steps):
    keras.config.set_dtype_policy("float32")
    ours = prepared(tfnlp_model, preset, policy, jit)
    theirs = prepared(keras_hub_model, preset, policy, jit)
    result = {"preset": preset, "policy": policy, "jit_compile": jit, "batch_size": BATCH}
    for index, kind in enumerate(("train", "infer")):
        mine, other = [], []
        for _ in range(rounds):
            mine.append(timed(ours[index], steps))
            other.append(timed(theirs[index], steps))
        flops = matmul_flops(preset, kind == "train")
        for side, times in (("tfnlp", mine), ("keras_hub", other)):
            seconds = statistics.median(times)
            result[f"{kind}_{side}_tokens_per_s"] = round(TOKENS / seconds)
            result[f"{kind}_{side}_gflops"] = round(flops / seconds / 1e9, 1)
        result[f"{kind}_speedup"] = round(
            statistics.median(o / m for m, o in zip(mine, other, strict=True)), 3
        )
    return result


def add_mfu(result, peaks):
    """MFU of each side: model FLOP/s over the matmul peak of the policy's dtype."""
    peak = peaks["bfloat16" if "bfloat16" in result["policy"] else "float32"]
    for kind in ("train", "infer"):
        for side in ("tfnlp", "keras_hub"):
            result[f"{kind}_{side}_mfu"] = round(result[f"{kind}_{side}_gflops"] / peak, 3)
    executed = 1 - skipped_flops(result["preset"]) / matmul_flops(result["preset"], True)
    result["train_tfnlp_executed_mfu"] = round(result["train_tfnlp_mfu"] * executed, 3)
    return result


# Where op time goes, by op name (the first matching pattern wins).
PARTS = (
    ("optimizer (AdamW update)", r"^(adam|AdamW|adamw)|ResourceApplyAdam|/adam/|/adamw/"),
    ("loss (cross-entropy)",
     r"compile_loss|sparse_categorical|smoothed_sparse|SoftmaxCrossEntropy|cross_entropy_gradient"),
    ("vocabulary projection (MLM logits, fwd+bwd)",
     r"(mlm|masked_lm_head)[^/]*/(MatMul|add|einsum|Einsum|BiasAdd|Cast|matmul|token_embedding)"
     r"|tied_logits_gradient"),
    ("dropout", r"dropout"),
    ("layer norm", r"norm"),
    # tfnlp's projections are 2-D matmuls (+ bias) named after the attention
    # layer; its scores and context are batched matmuls.
    ("Q/K/V/output projections",
     r"(query|key|value|attention_output)"
     r"|attention(_\d+)?/(add|MatMul)(_\d+)?(/[^:]*)?:(_Mkl(NativeFused)?)?MatMul$"
     r"|attention(_\d+)?/add(_\d+)?/Sum"),
    ("attention core (scores, softmax, context)",
     r"(self_attention|attention)[^/]*/(einsum|Einsum|MatMul|matmul|Softmax|SelectV2|transpose|mul|Cast)"),
    ("layer-norm and GELU gradients (custom gradients, unscoped)",
     r"^(mul|sub|add|Mean|Exp|Square)(_\d+)?:"),
    ("feed-forward dense + GELU",
     r"(intermediate|output_dense|feedforward)[^/]*/(Tensordot|MatMul|BiasAdd|Gelu|gelu|Erf|mul|add)"),
    ("embeddings", r"embedding|StridedSliceGrad|UnsortedSegmentSum"),
    ("MLM transform + NSP + pooler", r"(mlm|masked_lm_head|nsp|pooler|pooled)"),
)


def profile(preset, policy, steps=3):
    """Op time by part of the model, for each side's training step."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    keras.config.set_dtype_policy("float32")
    rows = []
    for name, builder in (("tfnlp", tfnlp_model), ("keras_hub", keras_hub_model)):
        train, _ = prepared(builder, preset, policy, False)
        for _ in range(2):
            train()
        step = timed(train, steps)
        logdir = tempfile.mkdtemp(prefix="bert_profile_")
        tf.profiler.experimental.start(logdir)
        for _ in range(steps):
            train()
        tf.profiler.experimental.stop()
        space = xplane_pb2.XSpace()
        with open(glob.glob(f"{logdir}/**/*.xplane.pb", recursive=True)[0], "rb") as f:
            space.ParseFromString(f.read())
        parts = collections.Counter()
        for plane in space.planes:
            for line in plane.lines:
                if not line.name.startswith("tf_Compute"):
                    continue  # executor threads: one event per op
                for event in line.events:
                    op = plane.event_metadata[event.metadata_id].name
                    if op.startswith("ExecutorState") or op == "ParallelFor":
                        continue  # wrappers around the ops counted themselves
                    part = next((p for p, rx in PARTS if re.search(rx, op)), "other")
                    parts[part] += event.duration_ps / 1e9 / steps
        total = sum(parts.values())
        row = {"side": name, "preset": preset, "policy": policy,
               "step_ms": round(step * 1e3, 1), "op_ms": round(total, 1)}
        row.update({part: round(ms / total, 3) for part, ms in parts.most_common()})
        rows.append(row)
        print(f"\n{name} {preset} {policy}: step {step * 1e3:.0f} ms, summed op time "
              f"{total:.0f} ms (two executor threads)")
        for part, ms in parts.most_common():
            print(f"  {ms:8.1f} ms  {ms / total:6.1%}  {part}")
    return rows


def main():
    global BATCH, TOKENS
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--presets", nargs="+", default=["bert_tiny", "bert_mini", "bert_small"])
    parser.add_argument("--policies", nargs="+", default=["float32", "mixed_bfloat16"])
    parser.add_argument("--jit", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32,
                        help="sequences per step (32 everywhere in benchmarks/README.md except "
                             "the GPU section's 256)")
    parser.add_argument("--profile", action="store_true",
                        help="trace training steps and print where the time goes")
    parser.add_argument("--json", default=None,
                        help="default benchmarks/results/bert.json (bert_profile.json with --profile)")
    args = parser.parse_args()
    BATCH, TOKENS = args.batch_size, args.batch_size * LENGTH
    if args.profile:
        rows = [row for preset in args.presets for policy in args.policies
                for row in profile(preset, policy)]
        write_json(args.json or "benchmarks/results/bert_profile.json", rows)
        return
    results = []
    for preset in args.presets:
        for policy in args.policies:
            for jit in args.jit:
                results.append(compare(preset, policy, bool(jit), args.rounds, args.steps))
                print(f"measured {preset} {policy} XLA={bool(jit)}", flush=True)
    # Measured after the models, not before: measured first, it left the
    # float32 steps that followed up to 1.5x slower (benchmarks/README.md).
    peaks = {dtype: matmul_peak_gflops(dtype, repeats=3) for dtype in ("float32", "bfloat16")}
    print(f"matmul peak (this run): float32 {peaks['float32']:.0f} GFLOP/s, "
          f"bfloat16 {peaks['bfloat16']:.0f} GFLOP/s")
    header = ["preset", "policy", "XLA", "train tfnlp tok/s", "train keras-hub tok/s",
              "train speed-up", "train MFU tfnlp", "train MFU keras-hub",
              "tfnlp executed-FLOPs utilisation", "infer tfnlp tok/s",
              "infer keras-hub tok/s", "infer speed-up"]
    rows = [
        [r["preset"], r["policy"], r["jit_compile"], f"{r['train_tfnlp_tokens_per_s']:,}",
         f"{r['train_keras_hub_tokens_per_s']:,}", f"{r['train_speedup']:.2f}",
         f"{r['train_tfnlp_mfu']:.0%}", f"{r['train_keras_hub_mfu']:.0%}",
         f"{r['train_tfnlp_executed_mfu']:.0%}", f"{r['infer_tfnlp_tokens_per_s']:,}", f"{r['infer_keras_hub_tokens_per_s']:,}",
         f"{r['infer_speedup']:.2f}"]
        for r in (add_mfu(r, peaks) for r in results)
    ]
    print(markdown_table(header, rows))
    write_json(args.json or "benchmarks/results/bert.json", results,
               matmul_peak_gflops={k: round(v) for k, v in peaks.items()})


if __name__ == "__main__":
    main()
