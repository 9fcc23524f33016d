"""Exported classifiers served from raw text: latency, throughput, long inputs, memory.

Builds two review classifiers with random weights (what is measured does not
depend on the weights), a WordPiece vocabulary learned from the bundled
fine-food training reviews, and exports each with
`tfnlp.export.export_classifier` (tokenizer + model in one SavedModel):

- "bert": `BertClassifier` on `BertBackbone.from_architecture(--preset)`
  (default `bert_small`: 4 layers x 512, 8 heads), sequence length 128;
- "transformer": `TransformerClassifier` as `examples/text_classifier.py`
  trains it (2 layers x 64, 4 heads, mean pooling), sequence length 256.

Each SavedModel is then served by a FRESH Python process (this script with
`--serve`) that imports only TensorFlow and tensorflow-text (`tfnlp` is never
imported there; checked), loads it with `tf.saved_model.load` and calls its
`serving_default(text)` signature the way a server would (Python strings in,
`tf.constant`, outputs fetched to NumPy):

(a) single-request latency p50 / p99 at batch 1 and batch 32, held-out test
    reviews (median ~280 characters), rounds alternating the two batch sizes;
(b) throughput at batch 32 from the same requests, back to back from one
    client: examples/s and real tokens/s (`[CLS]`/`[SEP]` included, padding
    excluded, counted with the same preprocessor in the parent process);
(c) latency of one request of 10, 100, 1k, 10k, 100k and 1M characters
    (reviews repeated), rounds alternating the lengths: text is cut to
    `max_input_bytes` (100 kB) before tokenization and the tokens to the
    sequence length before the model, so the cost is bounded; reported: the
    median per-round ratio to the 100-character request;
(d) the serving process's resident memory after loading and its peak.
Every output is checked to be finite probabilities summing to 1.

    python benchmarks/serving_benchmark.py [--quick] [--preset bert_small] [--models bert transformer]
        [--requests 300] [--length-rounds 10] [--json PATH]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
from _common import current_rss_mb, fresh_process_arguments, peak_rss_mb, write_json  # noqa: E402

# Nothing from tfnlp (nor keras) is imported at module level: the --serve
# process runs this file and must load the SavedModel without them.

LENGTHS = (10, 100, 1_000, 10_000, 100_000, 1_000_000)
BATCHES = (1, 32)


# --- The parent process: build, export, count tokens, start the servers ---

def learn_vocabulary(size, max_reviews):
    from tfnlp import data, datasets

    texts = [t for t, _ in datasets.read_fine_food_reviews("train")][:max_reviews]
    return data.learn_wordpiece_vocabulary(texts, size, progress=False)


def build(kind, vocabulary, args):
    """(classifier, sequence length, description) of one model, random weights."""
    import keras

    from tfnlp import models

    keras.utils.set_random_seed(0)
    if kind == "bert":
        backbone = models.BertBackbone.from_architecture(args.preset, vocabulary_size=len(vocabulary))
        classifier = models.BertClassifier(backbone, num_classes=2)
        return classifier, args.bert_sequence_length, f"BertClassifier {args.preset}"
    classifier = models.TransformerClassifier(
        len(vocabulary), 2, num_layers=args.transformer_layers, num_heads=4,
        hidden_dim=args.transformer_hidden_dim,
    )
    description = (f"TransformerClassifier {args.transformer_layers} x "
                   f"{args.transformer_hidden_dim}")
    return classifier, args.transformer_sequence_length, description


def directory_mb(path):
    total = sum(os.path.getsize(os.path.join(root, name))
                for root, _, names in os.walk(path) for name in names)
    return round(total / 2**20, 1)


def export_model(kind, vocabulary, reviews, directory, args):
    """Exports one classifier; returns (SavedModel path, facts, real tokens per review)."""
    import tensorflow as tf

    from tfnlp import data, datasets, export

    classifier, sequence_length, description = build(kind, vocabulary, args)
    preprocessor = data.BertPreprocessor(data.WordPieceTokenizer(vocabulary), sequence_length)
    started = time.perf_counter()
    path = export.export_classifier(classifier, os.path.join(directory, kind), preprocessor=preprocessor,
                                    labels=list(datasets.FINE_FOOD_LABELS))
    facts = {
        "model": kind,
        "description": description,
        "parameters": classifier.count_params(),
        "sequence_length": sequence_length,
        "vocabulary_size": len(vocabulary),
        "export_s": round(time.perf_counter() - started, 1),
        "saved_model_mb": directory_mb(path),
    }
    tokens = preprocessor(tf.constant(reviews))["padding_mask"].numpy().sum(axis=1)
    return path, facts, [int(t) for t in tokens]


def serve(path, request, args):
    """Runs `--serve` on `path` in a new Python process; returns its measurements."""
    with tempfile.TemporaryDirectory() as scratch:
        request_path = os.path.join(scratch, "request.json")
        output_path = os.path.join(scratch, "measurements.json")
        with open(request_path, "w") as f:
            json.dump(request, f)
        command = [sys.executable, os.path.abspath(__file__), "--serve", path,
                   "--request", request_path, "--output", output_path]
        result = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout,
                                check=False)
        if result.returncode != 0 or not os.path.exists(output_path):
            raise RuntimeError(f"the serving process failed ({result.returncode}):\n"
                               f"{result.stderr[-3000:]}")
        with open(output_path) as f:
            return json.load(f)


# --- The serving process: TensorFlow and tensorflow-text only ---

def _check(outputs):
    """True if the probabilities are finite, in [0, 1] and sum to 1 per row."""
    probabilities = outputs["probabilities"]
    return bool(np.isfinite(probabilities).all() and (probabilities >= 0).all()
                and np.allclose(probabilities.sum(axis=-1), 1.0, atol=1e-4))


def _percentile(values, q):
    return round(float(np.percentile(np.array(values) * 1000, q)), 2)


def serving_process(path, request_path, output_path):
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the ops the SavedModel uses)

    assert "tfnlp" not in sys.modules and "keras_hub" not in sys.modules, "tfnlp was imported"
    with open(request_path) as f:
        request = json.load(f)
    reviews, tokens = request["reviews"], request["review_tokens"]
    settings = request["settings"]
    rss_before = current_rss_mb()
    started = time.perf_counter()
    model = tf.saved_model.load(path)
    classify = model.signatures["serving_default"]
    load_s = time.perf_counter() - started
    rss_after_load = current_rss_mb()
    all_valid = True

    def call(texts):
        nonlocal all_valid
        started = time.perf_counter()
        outputs = classify(text=tf.constant(texts))
        outputs = {name: value.numpy() for name, value in outputs.items()}
        seconds = time.perf_counter() - started
        all_valid = all_valid and _check(outputs) and len(outputs["label"]) == len(texts)
        return seconds

    first_call_s = call(reviews[:1])
    for batch in BATCHES:  # warm up each batch size
        for _ in range(3):
            call(reviews[:batch])

    # (a) and (b): requests of consecutive reviews, rounds alternating the batch sizes.
    seconds = {batch: [] for batch in BATCHES}
    real_tokens = {batch: 0 for batch in BATCHES}
    position = {batch: 0 for batch in BATCHES}
    for index in range(settings["requests"]):
        for batch in BATCHES:
            if batch > 1 and index % settings["batch_every"]:
                continue  # fewer batch-32 requests: each costs ~32 single ones
            chosen = [(position[batch] + i) % len(reviews) for i in range(batch)]
            position[batch] += batch
            seconds[batch].append(call([reviews[i] for i in chosen]))
            real_tokens[batch] += sum(tokens[i] for i in chosen)
    latency = []
    for batch in BATCHES:
        total = sum(seconds[batch])
        latency.append({
            "batch": batch,
            "requests": len(seconds[batch]),
            "p50_ms": _percentile(seconds[batch], 50),
            "p99_ms": _percentile(seconds[batch], 99),
            "mean_ms": round(1000 * total / len(seconds[batch]), 2),
            "examples_per_s": round(batch * len(seconds[batch]) / total, 1),
            "real_tokens_per_s": round(real_tokens[batch] / total),
            "padded_tokens_per_s": round(
                batch * settings["sequence_length"] * len(seconds[batch]) / total),
        })

    # (c): one request of each length, rounds alternating the lengths.
    seed = " ".join(reviews)
    texts = {}
    for length in settings["lengths"]:
        text = seed * (length // len(seed) + 1)
        texts[length] = text[:length]
    by_length, errors = {length: [] for length in texts}, {}
    for length, text in texts.items():  # warm up (and find failures)
        try:
            call([text])
        except Exception as error:
            errors[length] = f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
    for _ in range(settings["length_rounds"]):
        for length, text in texts.items():
            if length not in errors:
                by_length[length].append(call([text]))
    input_length = []
    for length, text in texts.items():
        row = {"characters": length, "utf8_bytes": len(text.encode("utf-8"))}
        if length in errors:
            row["error"] = errors[length]
        else:
            row["median_ms"] = round(1000 * statistics.median(by_length[length]), 2)
            row["max_ms"] = round(1000 * max(by_length[length]), 2)
            if 100 in by_length and 100 not in errors:
                row["vs_100_chars"] = round(statistics.median(
                    t / r for t, r in zip(by_length[length], by_length[100], strict=True)), 2)
        input_length.append(row)

    measurements = {
        "tfnlp_imported": "tfnlp" in sys.modules,
        "all_outputs_valid": all_valid,
        "load_s": round(load_s, 2),
        "first_call_ms": round(1000 * first_call_s, 1),
        "rss_before_load_mb": rss_before,
        "rss_after_load_mb": rss_after_load,
        "peak_rss_mb": peak_rss_mb(),
        "latency": latency,
        "input_length": input_length,
    }
    with open(output_path, "w") as f:
        json.dump(measurements, f)


# --- Tables ---

def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join("" if v is None else f"{v:,}" if isinstance(v, (int, float))
                                and not isinstance(v, bool) else str(v) for v in row) + " |"
              for row in rows]
    return "\n".join(lines)


def markdown(rows):
    latency = table(
        ["model", "batch", "requests", "p50 ms", "p99 ms", "examples/s", "real tok/s"],
        [(r["model"], r["batch"], r["requests"], r["p50_ms"], r["p99_ms"], r["examples_per_s"],
          r["real_tokens_per_s"]) for r in rows["latency"]])
    lengths = table(
        ["model", "characters", "median ms", "max ms", "vs 100 chars", "error"],
        [(r["model"], r["characters"], r.get("median_ms"), r.get("max_ms"),
          r.get("vs_100_chars"), r.get("error", "")) for r in rows["input_length"]])
    process = table(
        ["model", "parameters", "sequence length", "SavedModel MiB", "load s", "first call ms",
         "RSS after load MiB", "peak RSS MiB", "outputs valid"],
        [(r["model"], r["parameters"], r["sequence_length"], r["saved_model_mb"], r["load_s"],
          r["first_call_ms"], r["rss_after_load_mb"], r["peak_rss_mb"], r["all_outputs_valid"])
         for r in rows["process"]])
    return "\n\n".join([latency, lengths, process])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["bert", "transformer"],
                        choices=["bert", "transformer"])
    parser.add_argument("--preset", default="bert_small", help="BertBackbone preset")
    parser.add_argument("--bert-sequence-length", type=int, default=128)
    parser.add_argument("--transformer-sequence-length", type=int, default=256)
    parser.add_argument("--transformer-layers", type=int, default=2)
    parser.add_argument("--transformer-hidden-dim", type=int, default=64)
    parser.add_argument("--vocabulary-size", type=int, default=8000)
    parser.add_argument("--vocabulary-reviews", type=int, default=None,
                        help="learn the vocabulary from the first N training reviews (all)")
    parser.add_argument("--requests", type=int, default=300, help="batch-1 requests")
    parser.add_argument("--batch-every", type=int, default=5,
                        help="one batch-32 request per N batch-1 requests")
    parser.add_argument("--length-rounds", type=int, default=10)
    parser.add_argument("--lengths", type=int, nargs="+", default=list(LENGTHS))
    parser.add_argument("--timeout", type=int, default=1800, help="per serving process, seconds")
    parser.add_argument("--keep", default=None, help="keep the SavedModels in this directory")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run (< 1 minute): bert_tiny, 64 / 128 tokens, a 2,000-token "
                        "vocabulary, 20 requests, 2 length rounds")
    fresh_process_arguments(parser)
    args = parser.parse_args()
    if args.serve:
        serving_process(args.serve, args.request, args.output)
        return
    args.json = args.json or f"benchmarks/results/serving{'_quick' if args.quick else ''}.json"
    if args.quick:
        args.preset, args.bert_sequence_length, args.transformer_sequence_length = "bert_tiny", 64, 128
        args.vocabulary_size, args.vocabulary_reviews = 2000, 600
        args.requests, args.batch_every, args.length_rounds = 20, 4, 2

    from tfnlp import datasets

    reviews = [t for t, _ in datasets.read_fine_food_reviews("test")]
    vocabulary = learn_vocabulary(args.vocabulary_size, args.vocabulary_reviews)
    directory = args.keep or tempfile.mkdtemp(prefix="tfnlp_serving_")
    rows = {"latency": [], "input_length": [], "process": []}
    try:
        for kind in args.models:
            path, facts, tokens = export_model(kind, vocabulary, reviews, directory, args)
            request = {"reviews": reviews, "review_tokens": tokens, "settings": {
                "requests": args.requests, "batch_every": args.batch_every,
                "length_rounds": args.length_rounds, "lengths": args.lengths,
                "sequence_length": facts["sequence_length"]}}
            measured = serve(path, request, args)
            for name in ("latency", "input_length"):
                rows[name] += [{"model": kind, **row} for row in measured.pop(name)]
            rows["process"].append({**facts, **measured})
            print(json.dumps(rows["process"][-1]), flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(directory, ignore_errors=True)
    ratios = {r["model"]: r.get("vs_100_chars") for r in rows["input_length"]
              if r["characters"] == max(args.lengths)}
    settings = {k: v for k, v in vars(args).items() if k not in ("json", "serve", "request",
                                                                  "output")}
    write_json(args.json, rows, settings=settings,
               longest_over_100_chars=ratios)
    print()
    print(markdown(rows))
    print(f"\nlatency of {max(args.lengths):,} characters / 100 characters: {ratios}")
    print(f"written to {args.json}")


if __name__ == "__main__":
    main()
