"""Exports served by TensorFlow's C++ loader (TF Serving's) next to `tf.saved_model.load`.

Builds two models with random weights (what is measured does not depend on
the weights) and exports each with tfnlp (tokenizer + model in one
SavedModel, TF Serving's warm-up file included):

- "classifier": `BertClassifier` on `BertBackbone.from_architecture(--preset)`
  (default `bert_small`: 4 layers x 512, 8 heads), sequence length 128, an
  8,000-token WordPiece vocabulary learned from the bundled fine-food
  training reviews (as `serving_benchmark.py` builds it), exported with
  `tfnlp.export.export_classifier`; requests are held-out test reviews;
- "translator": `TransformerSeq2Seq` at `examples/translate.py`'s size
  (`transformer_small`: 3 + 3 layers x 256, 8,000-token English and Spanish
  vocabularies learned from the bundled Bible's training verses), exported as
  that example exports it (`export_seq2seq`: sources cut to 48 tokens, at
  most 48 generated, beam search of 4, length penalty 0.6); requests are
  held-out English verses (`read_text_pairs("bible_en_es", "test")`).
  Random weights rarely pick the end token, so most outputs run to the
  maximum length: the generated lengths are reported (and the two backends
  decode exactly the same requests) so that the amount of decoding is known.

Two backends serve each export, one request at a time, never both at once:

- C++: `tests/export/serving/tfnlp_serve.cc` through its harness
  (`CppServer`): `LoadSavedModel` (tag "serve"), the export's warm-up file
  replayed as TF Serving does, then one `Session::Run` per request on the
  signature's tensors. Latency is the `Session::Run` time measured inside the
  C++ process: no network, no request parsing, no response encoding. The
  round trip seen from this Python process (PredictRequest built and
  serialized, pipe, parsing, `Session::Run`, PredictResponse back, decoded)
  is reported next to it for reference.
- Python: a FRESH Python process (this script with `--serve`) that imports
  only TensorFlow and tensorflow-text (`tfnlp` is never imported there;
  checked), loads the export with `tf.saved_model.load` and calls
  `signatures["serving_default"](text=tf.constant(texts))`, each call timed
  from the Python strings to the outputs fetched with `.numpy()`.

Both processes inherit this process's environment (`TF_ENABLE_ONEDNN_OPTS`
as `import tfnlp` set it, printed). After an untimed warm-up of each batch
size, the same list of requests (different texts each; batch 1 and batch
32) is split into rounds; each round runs its requests on one backend and
then on the other (which goes first alternates). Reported per model, batch
and backend: p50 / p99 / mean latency, requests/s (= 1 / mean latency: one
sequential client), examples/s; the C++/Python latency ratios (< 1: C++
faster) of the p50s, of the means, and the median over rounds of each
round's ratio of means; and whether the two backends gave the same answers
(largest probability difference, share of identical labels / token ids).

First request (C++ only, TF Serving's warm-up question): in a fresh
`CppServer`, load, then time the first batch-1 request ("cold"); in another
fresh one, load, replay the warm-up file (its time reported), then time the
first request ("warm"); in both, then the same request `--steady-repeats`
more times back to back (its median: the steady state). `--first-reps`
fresh processes per condition, the conditions alternating; medians
reported. The Python backend's first call after `tf.saved_model.load` is
shown for reference (one process).

    python benchmarks/cpp_serving_benchmark.py [--quick] [--models classifier translator]
        [--rounds 5] [--first-reps 3] [--keep DIR] [--json PATH]

`--quick` (a smoke run, under a minute on the project machine): `bert_tiny`
at 64 tokens, a 1 + 1 x 64 translator (16 source tokens, 8 generated, beam
2), small vocabularies, a handful of requests, one process per first-request
condition. Writes `results/cpp_serving[_quick].json`; `--keep DIR` keeps the
SavedModels.
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
import types

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
from _common import (  # noqa: E402
    current_rss_mb,
    fresh_process_arguments,
    machine_info,
    peak_rss_mb,
    write_json,
)

# Nothing from tfnlp (nor keras, nor the harness) is imported at module
# level: the --serve process runs this file and must load the SavedModel
# without them.

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SIGNATURE = "serving_default"
BACKENDS = ("cpp", "python")


# --- The Python serving process: TensorFlow and tensorflow-text only ---

def _jsonable(value):
    if value.dtype == object:
        return [v.decode("utf-8", "replace") if isinstance(v, bytes) else v
                for v in value.reshape(-1).tolist()]
    return value.tolist()


def serving_process(path):
    """Loads `path`, then answers one JSON line per JSON line of stdin: `{"texts": [...]}`."""
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything printed goes to stderr, never into the replies

    def send(message):
        replies.write(json.dumps(message) + "\n")

    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the ops the SavedModel uses)

    assert "tfnlp" not in sys.modules and "keras_hub" not in sys.modules, "tfnlp was imported"
    rss_before = current_rss_mb()
    started = time.perf_counter()
    function = tf.saved_model.load(path).signatures[SIGNATURE]
    send({"load_s": time.perf_counter() - started, "rss_before_load_mb": rss_before,
          "rss_after_load_mb": current_rss_mb(), "tensorflow": tf.__version__,
          "tfnlp_imported": "tfnlp" in sys.modules})
    for line in sys.stdin:
        request = json.loads(line)
        if "texts" not in request:
            break
        started = time.perf_counter()
        outputs = function(text=tf.constant(request["texts"]))
        outputs = {name: value.numpy() for name, value in outputs.items()}
        seconds = time.perf_counter() - started
        send({"seconds": seconds, "outputs": {name: [list(value.shape), _jsonable(value)]
                                              for name, value in outputs.items()}})
    send({"peak_rss_mb": peak_rss_mb(), "tfnlp_imported": "tfnlp" in sys.modules})


class PythonServer:
    """The `--serve` process of one SavedModel; `call(texts)` -> (seconds, outputs)."""

    def __init__(self, path, timeout):
        self._log = tempfile.TemporaryFile()  # its stderr, shown on failure
        self._process = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--serve", path],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, env=dict(os.environ))
        from tests.export.serving.harness import PipeReader

        self._timeout = timeout
        self._reader = PipeReader(self._process, self._log, "the Python serving process")
        self.ready = self._receive()
        if self.ready["tfnlp_imported"]:
            raise RuntimeError("the Python serving process imported tfnlp")

    def _send(self, message):
        self._process.stdin.write((json.dumps(message) + "\n").encode())
        self._process.stdin.flush()

    def _receive(self):
        return json.loads(self._reader.line(time.monotonic() + self._timeout))

    def call(self, texts):
        self._send({"texts": list(texts)})
        reply = self._receive()
        outputs = {name: np.array(values, dtype=object if values and isinstance(values[0], str)
                                  else None).reshape(shape)
                   for name, (shape, values) in reply["outputs"].items()}
        return reply["seconds"], outputs

    def close(self):
        """Ends the process; returns its last report (peak memory), or {} if it failed."""
        try:
            self._send({})
            report = self._receive()
            self._process.stdin.close()
            self._process.wait(timeout=60)
            return report
        except (OSError, RuntimeError, subprocess.TimeoutExpired):
            return {}
        finally:
            self._process.kill()
            self._log.close()


# --- The parent process: build and export ---

def export_classifier(reviews, directory, args):
    """(SavedModel path, facts) of the BERT classifier (serving_benchmark.py's export)."""
    import serving_benchmark

    vocabulary = serving_benchmark.learn_vocabulary(args.vocabulary_size, args.vocabulary_reviews)
    settings = types.SimpleNamespace(preset=args.preset, bert_sequence_length=args.sequence_length)
    path, facts, tokens = serving_benchmark.export_model("bert", vocabulary, reviews, directory,
                                                         settings)
    facts.update(model="classifier", mean_request_tokens=round(float(np.mean(tokens)), 1))
    return path, facts


def export_translator(sources, directory, args):
    """(SavedModel path, facts) of the translator, as examples/translate.py exports it."""
    import keras
    import tensorflow as tf

    from tfnlp import datasets, export, models

    pairs = datasets.read_text_pairs("bible_en_es", "train")[: args.translator_pairs]
    from examples.translate import translation_tokenizers

    source_vocabulary, target_vocabulary, source_tokenizer, target_tokenizer = (
        translation_tokenizers(pairs, args.translator_vocabulary_size))
    keras.utils.set_random_seed(0)
    if args.translator_preset == "tiny":
        model = models.TransformerSeq2Seq(
            len(source_vocabulary), len(target_vocabulary), num_encoder_layers=1,
            num_decoder_layers=1, hidden_dim=64, num_heads=2, intermediate_dim=128)
        description = "TransformerSeq2Seq 1 + 1 x 64"
    else:
        model = models.TransformerSeq2Seq.from_architecture(
            args.translator_preset, len(source_vocabulary), len(target_vocabulary))
        description = f"TransformerSeq2Seq {args.translator_preset}"
    description += f", beam {args.beam_size}, {args.source_length} -> {args.max_length} tokens"
    started = time.perf_counter()
    path = export.export_seq2seq(
        model, os.path.join(directory, "translator"), source_tokenizer=source_tokenizer,
        target_tokenizer=target_tokenizer, source_length=args.source_length, max_length=args.max_length,
        beam_size=args.beam_size, length_penalty=args.length_penalty)
    export_s = time.perf_counter() - started
    from serving_benchmark import directory_mb

    lengths = source_tokenizer(tf.constant(sources)).row_lengths().numpy() + 1  # + [SEP]
    return path, {
        "model": "translator",
        "description": description,
        "parameters": model.count_params(),
        "sequence_length": args.source_length,
        "vocabulary_size": f"{len(source_vocabulary)} + {len(target_vocabulary)}",
        "export_s": round(export_s, 1),
        "saved_model_mb": directory_mb(path),
        "mean_request_tokens": round(float(np.minimum(lengths, args.source_length).mean()), 1),
    }


def requests_of(texts, count, batch):
    """`count` requests of `batch` consecutive texts (cycled), all different while texts last."""
    return [[texts[(index * batch + i) % len(texts)] for i in range(batch)]
            for index in range(count)]


# --- Statistics ---

def ms(seconds):
    return round(1000 * seconds, 2)


def percentile_ms(values, q):
    return ms(float(np.percentile(np.array(values), q)))


def agreement(model, batch, cpp_outputs, python_outputs, max_length):
    """How far the two backends' answers to the same requests are from each other."""
    joined = {backend: {name: np.concatenate([o[name] for o in outputs])
                        for name in outputs[0]}
              for backend, outputs in (("cpp", cpp_outputs), ("python", python_outputs))}
    cpp, python = joined["cpp"], joined["python"]
    row = {"model": model, "batch": batch, "examples": len(next(iter(cpp.values())))}
    for name in sorted(cpp):
        a, b = cpp[name], python[name]
        if a.shape != b.shape:
            row[f"{name}_same"] = f"shapes {a.shape} vs {b.shape}"
        elif a.dtype.kind == "f":
            row[f"{name}_max_abs_diff"] = float(np.abs(a.astype(np.float64) - b).max())
        else:
            same = (a == b).reshape(len(a), -1).all(axis=1)
            row[f"{name}_same"] = round(float(same.mean()), 4)
    if "lengths" in cpp:
        for backend, outputs in joined.items():
            row[f"{backend}_mean_generated"] = round(float(outputs["lengths"].mean()), 2)
        row["at_max_length"] = round(float((cpp["lengths"] == max_length).mean()), 4)
    return row


# --- The C++ / Python comparison ---

def compare(model, path, requests, rounds, args):
    """Latency rows, ratio rows, agreement rows and process facts of one export."""
    from tests.export.serving.harness import CppServer

    cpp = python = None
    try:
        started = time.perf_counter()
        cpp = CppServer(timeout=args.timeout)
        cpp_load_s = cpp.load(path)
        cpp_start_s = time.perf_counter() - started
        started = time.perf_counter()
        cpp_warmup = cpp.warmup(path)  # as TF Serving does before it takes traffic
        cpp_warmup_s = time.perf_counter() - started
        started = time.perf_counter()
        python = PythonServer(path, args.timeout)
        python_start_s = time.perf_counter() - started
        python_first_s, _ = python.call(requests[1][0])
        for listed in requests.values():  # untimed warm-up of each batch size
            for _ in range(args.warmup_calls):
                cpp.timed_call(path, SIGNATURE, text=listed[0])
                python.call(listed[0])

        seconds = {(backend, batch): [] for backend in BACKENDS for batch in requests}
        roundtrips = {batch: [] for batch in requests}
        outputs = {(backend, batch): [] for backend in BACKENDS for batch in requests}
        round_ratios = {batch: [] for batch in requests}
        for index in range(rounds):
            order = BACKENDS if index % 2 == 0 else BACKENDS[::-1]
            chosen = {batch: listed[len(listed) * index // rounds:
                                    len(listed) * (index + 1) // rounds]
                      for batch, listed in requests.items()}
            this_round = {}
            for backend in order:
                for batch, listed in chosen.items():
                    times = []
                    for texts in listed:
                        if backend == "cpp":
                            started = time.perf_counter()
                            run_s, answer = cpp.timed_call(path, SIGNATURE, text=texts)
                            roundtrips[batch].append(time.perf_counter() - started)
                        else:
                            run_s, answer = python.call(texts)
                        times.append(run_s)
                        outputs[(backend, batch)].append(answer)
                    seconds[(backend, batch)] += times
                    this_round[(backend, batch)] = times
            for batch in requests:
                if this_round[("cpp", batch)]:
                    round_ratios[batch].append(
                        float(np.mean(this_round[("cpp", batch)]))
                        / float(np.mean(this_round[("python", batch)])))
    finally:
        if cpp is not None:
            cpp.close()
        python_end = python.close() if python is not None else {}

    latency, ratios, agreements = [], [], []
    for batch in requests:
        for backend in BACKENDS:
            values = seconds[(backend, batch)]
            mean = float(np.mean(values))
            row = {"model": model, "batch": batch, "backend": backend, "requests": len(values),
                   "p50_ms": percentile_ms(values, 50), "p99_ms": percentile_ms(values, 99),
                   "mean_ms": ms(mean), "requests_per_s": round(1 / mean, 2),
                   "examples_per_s": round(batch / mean, 1)}
            if backend == "cpp":
                row["roundtrip_p50_ms"] = percentile_ms(roundtrips[batch], 50)
                row["roundtrip_mean_ms"] = ms(float(np.mean(roundtrips[batch])))
            latency.append(row)
        cpp_values, python_values = seconds[("cpp", batch)], seconds[("python", batch)]
        ratios.append({
            "model": model, "batch": batch, "rounds": len(round_ratios[batch]),
            "cpp_over_python_p50": round(
                float(np.median(cpp_values) / np.median(python_values)), 3),
            "cpp_over_python_mean": round(float(np.mean(cpp_values) / np.mean(python_values)), 3),
            "median_round_ratio_of_means": round(statistics.median(round_ratios[batch]), 3),
            "round_ratios": [round(r, 3) for r in round_ratios[batch]],
        })
        agreements.append(agreement(model, batch, outputs[("cpp", batch)],
                                    outputs[("python", batch)], args.max_length))
    process = {
        "cpp_start_and_load_s": round(cpp_start_s, 2),
        "cpp_load_s": round(cpp_load_s, 2),
        "cpp_warmup_s": round(cpp_warmup_s, 2),
        "cpp_warmup_records": len(cpp_warmup),
        "python_start_and_load_s": round(python_start_s, 2),
        "python_load_s": round(python.ready["load_s"], 2),
        "python_first_call_ms": ms(python_first_s),
        "python_rss_after_load_mb": python.ready["rss_after_load_mb"],
        "python_peak_rss_mb": python_end.get("peak_rss_mb"),
        "python_tfnlp_imported": python_end.get("tfnlp_imported", python.ready["tfnlp_imported"]),
    }
    return latency, ratios, agreements, process


# --- First request, cold and warm ---

def first_request(model, path, text, args):
    """One row per fresh C++ server: load, [warm-up], first request, steady state."""
    from tests.export.serving.harness import CppServer

    runs = []
    for rep in range(args.first_reps):
        for condition in ("cold", "warm") if rep % 2 == 0 else ("warm", "cold"):
            started = time.perf_counter()
            server = CppServer(timeout=args.timeout)
            try:
                load_s = server.load(path)
                start_s = time.perf_counter() - started
                row = {"model": model, "condition": condition, "rep": rep,
                       "start_and_load_s": round(start_s, 2), "load_s": round(load_s, 3)}
                if condition == "warm":
                    started = time.perf_counter()
                    records = server.warmup(path)
                    row["warmup_s"] = round(time.perf_counter() - started, 3)
                    row["warmup_run_s"] = round(sum(s for _, s in records), 3)
                    row["warmup_records"] = len(records)
                started = time.perf_counter()
                first_s, _ = server.timed_call(path, SIGNATURE, text=[text])
                row["first_roundtrip_ms"] = ms(time.perf_counter() - started)
                row["first_ms"] = ms(first_s)
                steady = server.repeat(path, SIGNATURE, args.steady_repeats, text=[text])
                row["steady_p50_ms"] = ms(statistics.median(steady))
                row["first_over_steady"] = round(first_s / statistics.median(steady), 2)
            finally:
                server.close()
            runs.append(row)
    summary = []
    for condition in ("cold", "warm"):
        rows = [r for r in runs if r["condition"] == condition]
        row = {"model": model, "condition": condition, "processes": len(rows)}
        for key in ("start_and_load_s", "load_s", "warmup_s", "warmup_run_s", "first_ms",
                    "first_roundtrip_ms", "steady_p50_ms", "first_over_steady"):
            if key in rows[0]:
                row[key] = round(statistics.median(r[key] for r in rows), 3)
        summary.append(row)
    return summary, runs


# --- Tables ---

def table(header, keys, rows):
    from serving_benchmark import table as markdown_table

    return markdown_table(header, [[row.get(key) for key in keys] for row in rows])


def markdown(results):
    parts = [
        table(["model", "description", "parameters", "request tokens", "SavedModel MiB",
               "C++ load s", "C++ warm-up s", "Python load s", "Python first call ms",
               "Python peak RSS MiB"],
              ["model", "description", "parameters", "mean_request_tokens", "saved_model_mb",
               "cpp_load_s", "cpp_warmup_s", "python_load_s", "python_first_call_ms",
               "python_peak_rss_mb"], results["models"]),
        table(["model", "batch", "backend", "requests", "p50 ms", "p99 ms", "mean ms",
               "requests/s", "examples/s", "C++ round trip p50 ms", "round trip mean ms"],
              ["model", "batch", "backend", "requests", "p50_ms", "p99_ms", "mean_ms",
               "requests_per_s", "examples_per_s", "roundtrip_p50_ms", "roundtrip_mean_ms"],
              results["latency"]),
        table(["model", "batch", "C++/Python p50", "C++/Python mean", "median round ratio",
               "rounds"],
              ["model", "batch", "cpp_over_python_p50", "cpp_over_python_mean",
               "median_round_ratio_of_means", "rounds"], results["ratios"]),
    ]
    keys = sorted({key for row in results["agreement"] for key in row} - {"model", "batch"},
                  key=lambda k: (k != "examples", k))
    parts.append(table(["model", "batch", *keys], ["model", "batch", *keys],
                       results["agreement"]))
    parts.append(table(
        ["model", "condition", "processes", "start + load s", "load s", "warm-up s",
         "first request ms", "first round trip ms", "steady p50 ms", "first / steady"],
        ["model", "condition", "processes", "start_and_load_s", "load_s", "warmup_s",
         "first_ms", "first_roundtrip_ms", "steady_p50_ms", "first_over_steady"],
        results["first_request"]))
    return "\n\n".join(parts)


def cpu_facts():
    flags = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.partition(":")[2].split())
                    break
    except OSError:
        pass
    machine = machine_info()
    return {"cpu": machine["cpu"], "avx512f": "avx512f" in flags,
            "avx512_bf16": "avx512_bf16" in flags, "cores": machine["cores"],
            "usable_cores": machine["usable_cores"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["classifier", "translator"],
                        choices=["classifier", "translator"])
    parser.add_argument("--preset", default="bert_small", help="BertBackbone preset")
    parser.add_argument("--sequence-length", type=int, default=128, help="classifier")
    parser.add_argument("--vocabulary-size", type=int, default=8000, help="classifier")
    parser.add_argument("--vocabulary-reviews", type=int, default=None,
                        help="learn the vocabulary from the first N training reviews (all)")
    parser.add_argument("--translator-preset", default="transformer_small",
                        help='a TRANSFORMER_ARCHITECTURES name, or "tiny" (1 + 1 layers x 64)')
    parser.add_argument("--translator-vocabulary-size", type=int, default=8000,
                        help="per language")
    parser.add_argument("--translator-pairs", type=int, default=None,
                        help="learn the vocabularies from the first N training verses (all)")
    parser.add_argument("--source-length", type=int, default=48)
    parser.add_argument("--max-length", type=int, default=48, help="most tokens generated")
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument("--length-penalty", type=float, default=0.6)
    parser.add_argument("--batch-size", type=int, default=32, help="the batched requests' size")
    parser.add_argument("--classifier-requests", type=int, nargs=2, default=[300, 60],
                        metavar=("BATCH1", "BATCHED"), help="requests per backend")
    parser.add_argument("--translator-requests", type=int, nargs=2, default=[100, 20],
                        metavar=("BATCH1", "BATCHED"), help="requests per backend")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup-calls", type=int, default=2,
                        help="untimed calls of each batch size per backend before the rounds")
    parser.add_argument("--first-reps", type=int, default=3,
                        help="fresh C++ servers per model and condition (cold / warm)")
    parser.add_argument("--steady-repeats", type=int, default=10)
    parser.add_argument("--timeout", type=int, default=1800, help="per command, seconds")
    parser.add_argument("--keep", default=None, help="keep the SavedModels in this directory")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run (< 1 minute): bert_tiny at 64 tokens, a 1 + 1 x 64 "
                        "translator, small vocabularies, a handful of requests")
    fresh_process_arguments(parser)
    args = parser.parse_args()
    if args.serve:
        serving_process(args.serve)
        return
    if args.quick:
        args.preset, args.sequence_length = "bert_tiny", 64
        args.vocabulary_size, args.vocabulary_reviews = 2000, 600
        args.translator_preset = "tiny"
        args.translator_vocabulary_size, args.translator_pairs = 1000, 2000
        args.source_length, args.max_length, args.beam_size = 16, 8, 2
        args.classifier_requests, args.translator_requests = [8, 4], [6, 2]
        args.rounds, args.warmup_calls, args.first_reps, args.steady_repeats = 2, 1, 1, 3
    args.json = args.json or os.path.join(
        HERE, "results", f"cpp_serving{'_quick' if args.quick else ''}.json")

    sys.path.insert(0, ROOT)  # tests.export.serving.harness
    from tfnlp import datasets  # before TensorFlow: tfnlp picks the oneDNN setting

    # isort: split
    import tensorflow as tf

    from tests.export.serving.harness import binary

    cpu = cpu_facts()
    onednn = os.environ.get("TF_ENABLE_ONEDNN_OPTS")
    flags = ", ".join(f"{flag}: {'yes' if cpu[flag] else 'no'}"
                      for flag in ("avx512f", "avx512_bf16"))
    print(f"CPU: {cpu['cpu']} ({cpu['usable_cores']} usable cores), {flags}; TensorFlow "
          f"{tf.__version__}; TF_ENABLE_ONEDNN_OPTS={onednn} (both backends)", flush=True)
    print(f"C++ harness: {binary()}", flush=True)

    texts = {
        "classifier": [t for t, _ in datasets.read_fine_food_reviews("test")],
        "translator": [s for s, _ in datasets.read_text_pairs("bible_en_es", "test")],
    }
    counts = {"classifier": args.classifier_requests, "translator": args.translator_requests}
    directory = args.keep or tempfile.mkdtemp(prefix="tfnlp_cpp_serving_")
    results = {"models": [], "latency": [], "ratios": [], "agreement": [], "first_request": [],
               "first_request_runs": []}
    try:
        for model in args.models:
            exporter = export_classifier if model == "classifier" else export_translator
            path, facts = exporter(texts[model], directory, args)
            print(f"exported {model}: {json.dumps(facts)}", flush=True)
            requests = {1: requests_of(texts[model], counts[model][0], 1),
                        args.batch_size: requests_of(texts[model], counts[model][1],
                                                     args.batch_size)}
            rounds = max(1, min(args.rounds, *counts[model]))
            latency, ratios, agreements, process = compare(model, path, requests, rounds, args)
            results["latency"] += latency
            results["ratios"] += ratios
            results["agreement"] += agreements
            summary, runs = first_request(model, path, texts[model][0], args)
            results["first_request"] += summary
            results["first_request_runs"] += runs
            results["models"].append({**facts, **process})
            print(f"measured {model}: {json.dumps(process)}", flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(directory, ignore_errors=True)
    settings = {k: v for k, v in vars(args).items()
                if k not in ("json", "serve", "request", "output")}
    write_json(args.json, results, settings=settings, cpu=cpu, tensorflow=tf.__version__,
               tf_enable_onednn_opts=onednn)
    print()
    print(markdown(results))
    print("\nC++ latency: Session::Run inside the C++ process (no network, no request parsing); "
          "round trip: seen from Python (PredictRequest built, pipe, protobuf both ways).\n"
          "Python latency: tf.constant in, signature call, outputs .numpy() out, in a fresh "
          "process without tfnlp. Ratios: C++ time / Python time (< 1: C++ faster).")
    print(f"written to {args.json}")


if __name__ == "__main__":
    main()
