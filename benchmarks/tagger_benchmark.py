"""Sequence taggers' speed: training words/s and tokens/s, and words/s served by TensorFlow's C++ loader.

Random weights throughout (speed does not depend on them); an 8,000-token
WordPiece vocabulary learned from the bundled EWT training sentences;
sequence length 128, float32, every model built from seed 0.

1. Training: `train_on_batch` (the model's default `compile()`, metrics
   included), batch 32, cycling over `--train-batches` batches of EWT UPOS
   training sentences packed once by `tfnlp.data.TaggerPreprocessor`. Arms:
   `BertTokenClassifier` on `bert_tiny` and `TransformerTokenClassifier`
   (defaults: 2 blocks x 128), each without and with `crf=True`, and the
   anchor `BertClassifier` on `bert_tiny` (same token inputs, one label per
   sentence). One pass over the batches per arm and one round are untimed
   (trace, warm-up); then `--rounds` rounds run `--steps` steps of every arm
   (order reversed every other round). Reported: median words/s (tagged words),
   tokens/s (real WordPieces, `[CLS]`/`[SEP]` included, padding excluded),
   ms/step, and the median over rounds of anchor time / arm time
   (`speed_vs_anchor`, > 1: faster than the anchor). A CRF arm's anchor is
   the same encoder without CRF; the others' is the BERT classifier.
2. Serving: `BertTokenClassifier` (`bert_tiny`) without and with CRF,
   exported with `tfnlp.export.export_tagger`, and the anchor
   `BertClassifier` (`bert_tiny`, `serving_benchmark.export_model`), all
   loaded in one `CppServer` (tests/export/serving/harness.py:
   `LoadSavedModel`, the warm-up file replayed as TF Serving does). Requests
   are EWT UPOS test sentences, words joined by spaces: `serving_default(text)`
   at batch 1 and 32, and the taggers' `tag_words(words)` at batch 32 (the
   EWT words). Latency is `Session::Run` inside the C++ process (as in
   `cpp_serving_benchmark.py`); rounds alternate the exports. Reported per
   export, signature and batch: p50 / p99 / mean ms per request, texts/s,
   served words/s (the outputs' `num_words`: BERT's words of each text, or
   the words given), and `speed_vs_classifier` / `speed_vs_plain` (median
   over rounds of the classifier's / the CRF-less tagger's mean latency at
   the same batch over this row's).

    python benchmarks/tagger_benchmark.py [--quick] [--parts train serve] [--rounds 5]
        [--steps 10] [--requests 300 60] [--keep DIR] [--json PATH]

`--quick`: a smoke run (a minute or two): length 64, a 2,000-token
vocabulary, a few steps and requests. Writes `results/tagger[_quick].json`.
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import types

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # _common, the other benchmarks; tests.export.serving

# tfnlp first: it picks the CPU settings (oneDNN) before TensorFlow is imported.
from tfnlp import data, datasets, export, models  # noqa: E402

# isort: split
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from _common import machine_info, machine_line, markdown_table, write_json  # noqa: E402
from cpp_serving_benchmark import ms, percentile_ms, requests_of  # noqa: E402

ANCHOR = "bert_classifier"
ARMS = {  # name: (encoder, crf, anchor)
    ANCHOR: ("classifier", False, None), "bert": ("bert", False, ANCHOR), "bert_crf": ("bert", True, "bert"),
    "transformer": ("transformer", False, ANCHOR), "transformer_crf": ("transformer", True, "transformer"),
}


def build(encoder, crf, preprocessor, tag_names):
    """A tagger (or, `encoder` "classifier", the anchor classifier), seed 0, compiled with its defaults."""
    keras.utils.set_random_seed(0)
    if encoder == "transformer":
        model = models.TransformerTokenClassifier(preprocessor=preprocessor, tag_names=tag_names, crf=crf)
    else:
        backbone = models.BertBackbone.from_architecture("bert_tiny", vocabulary_size=len(preprocessor.tokenizer.vocabulary))
        model = (models.BertClassifier(backbone, num_classes=2) if encoder == "classifier" else
                 models.BertTokenClassifier(backbone, tag_names=tag_names, preprocessor=preprocessor, crf=crf))
    model.compile()
    return model


def training_batches(train, preprocessor, args):
    """[(x, y, words, tokens)] of `args.train_batches` batches of shuffled training sentences."""
    tagger = data.TaggerPreprocessor(preprocessor, train.tag_names)
    order = np.random.default_rng(0).permutation(len(train))
    batches = []
    for index in range(args.train_batches):
        chosen = order[index * args.batch_size:(index + 1) * args.batch_size]
        words = tf.ragged.constant([train.words[i] for i in chosen])
        tags = tf.ragged.constant([train.tags[i] for i in chosen])
        x, y, _ = tagger(words, tags)
        x = {name: value.numpy() for name, value in x.items()}
        batches.append((x, y.numpy(), int((x["word_positions"] > 0).sum()), int(x["padding_mask"].sum())))
    return batches


def training(train, preprocessor, args):
    batches = training_batches(train, preprocessor, args)
    labels = np.random.default_rng(0).integers(0, 2, args.batch_size).astype("int32")
    steps = {}  # arm: one step function per batch
    for arm, (encoder, crf, _) in ARMS.items():
        model = build(encoder, crf, preprocessor, train.tag_names)
        if encoder == "classifier":
            steps[arm] = [lambda m=model, x=x: m.train_on_batch(
                {k: v for k, v in x.items() if k != "word_positions"}, labels) for x, *_ in batches]
        else:
            steps[arm] = [lambda m=model, x=x, y=y: m.train_on_batch(x, y) for x, y, *_ in batches]
        for step in steps[arm]:  # trace, warm up (train_on_batch returns the loss: waits for the step)
            step()
        print(f"built {arm}: {model.count_params():,} parameters", flush=True)
    names = list(steps)
    seconds = {arm: [] for arm in names}
    for round_index in range(-1, args.rounds):  # round -1: untimed, every arm once more
        for arm in names if round_index % 2 else names[::-1]:
            started = time.perf_counter()
            for index in range(args.steps):
                steps[arm][index % len(batches)]()
            if round_index >= 0:
                seconds[arm].append(time.perf_counter() - started)
    words = sum(batches[i % len(batches)][2] for i in range(args.steps))
    tokens = sum(batches[i % len(batches)][3] for i in range(args.steps))
    rows = []
    for arm in names:
        middle = statistics.median(seconds[arm])
        anchor = ARMS[arm][2]
        rows.append({
            "arm": arm, "anchor": anchor, "batch": args.batch_size, "sequence_length": args.sequence_length,
            "step_ms": ms(middle / args.steps), "words_per_s": round(words / middle),
            "tokens_per_s": round(tokens / middle),
            "speed_vs_anchor": anchor and round(statistics.median(
                a / s for a, s in zip(seconds[anchor], seconds[arm], strict=True)), 3),
        })
        print(json.dumps(rows[-1]), flush=True)
    return rows


def exports(train, test_texts, preprocessor, directory, args):
    """{name: SavedModel path}: the two BERT taggers and the anchor classifier."""
    import serving_benchmark

    paths = {}
    for name, crf in (("tagger", False), ("tagger_crf", True)):
        model = build("bert", crf, preprocessor, train.tag_names)
        paths[name] = export.export_tagger(model, os.path.join(directory, name))
    settings = types.SimpleNamespace(preset="bert_tiny", bert_sequence_length=args.sequence_length)
    paths["classifier"] = serving_benchmark.export_model(
        "bert", preprocessor.tokenizer.vocabulary, test_texts, directory, settings)[0]
    return paths


def words_request(sentences, indices):
    """`tag_words`' input: the sentences' words, `(B, W)` bytes padded with `b""`."""
    width = max(len(sentences[i]) for i in indices)
    return {"words": np.array([[w.encode() for w in sentences[i]] + [b""] * (width - len(sentences[i]))
                               for i in indices], dtype=object)}


def serving(train, test, preprocessor, args):
    from tests.export.serving.harness import CppServer

    texts = [" ".join(words) for words in test.words]
    directory = args.keep or tempfile.mkdtemp(prefix="tfnlp_tagger_benchmark_")
    cpp = None
    try:
        paths = exports(train, texts, preprocessor, directory, args)
        cpp = CppServer(timeout=1800)
        for path in paths.values():
            cpp.load(path)
            cpp.warmup(path)
        counts = dict(zip((1, args.batch_size), args.requests, strict=True))
        keys = [(name, "serving_default", batch) for name in paths for batch in counts]
        keys += [(name, "tag_words", args.batch_size) for name in paths if name != "classifier"]
        rounds = max(1, min(args.rounds, *args.requests))
        requests = {key: [words_request(test.words, indices) if key[1] == "tag_words"
                          else {"text": [texts[i] for i in indices]}
                          for indices in requests_of(range(len(texts)), counts[key[2]], key[2])]
                    for key in keys}
        for key, listed in requests.items():  # untimed
            for _ in range(args.warmup_calls):
                cpp.timed_call(paths[key[0]], key[1], **listed[0])
        seconds = {key: [] for key in keys}
        words = {key: 0 for key in keys}
        round_means = {key: [] for key in keys}
        for round_index in range(rounds):
            for key in keys if round_index % 2 == 0 else keys[::-1]:
                listed, times = requests[key], []
                for inputs in listed[len(listed) * round_index // rounds:len(listed) * (round_index + 1) // rounds]:
                    run_s, outputs = cpp.timed_call(paths[key[0]], key[1], **inputs)
                    times.append(run_s)
                    words[key] += int(outputs["num_words"].sum()) if "num_words" in outputs else 0
                seconds[key] += times
                round_means[key].append(float(np.mean(times)))
    finally:
        if cpp is not None:
            cpp.close()
        if args.keep is None:
            shutil.rmtree(directory, ignore_errors=True)

    def speed(anchor, key):
        return round(statistics.median(a / m for a, m in zip(round_means[anchor], round_means[key], strict=True)), 3)

    rows = []
    for key in keys:
        name, signature, batch = key
        total = sum(seconds[key])
        row = {"export": name, "signature": signature, "batch": batch, "requests": len(seconds[key]),
               "p50_ms": percentile_ms(seconds[key], 50), "p99_ms": percentile_ms(seconds[key], 99),
               "mean_ms": ms(total / len(seconds[key])), "texts_per_s": round(batch * len(seconds[key]) / total, 1),
               "words_per_s": round(words[key] / total) if name != "classifier" else None,
               "speed_vs_classifier": speed(("classifier", "serving_default", batch), key),
               "speed_vs_plain": speed(("tagger", signature, batch), key) if name == "tagger_crf" else None}
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", nargs="+", default=["train", "serve"], choices=["train", "serve"])
    parser.add_argument("--sequence-length", type=int, default=128)
    parser.add_argument("--vocabulary-size", type=int, default=8000)
    parser.add_argument("--vocabulary-sentences", type=int, default=None,
                        help="learn the vocabulary from the first N training sentences (all)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--train-batches", type=int, default=8, help="distinct training batches")
    parser.add_argument("--steps", type=int, default=10, help="training steps per arm and round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, nargs=2, default=[300, 60], metavar=("BATCH1", "BATCHED"),
                        help="serving requests per export and signature")
    parser.add_argument("--warmup-calls", type=int, default=2, help="untimed requests of each kind")
    parser.add_argument("--keep", default=None, help="keep the SavedModels in this directory")
    parser.add_argument("--quick", action="store_true", help="a smoke run: small sizes, few steps")
    parser.add_argument("--json", default=None, help="results (default: results/tagger[_quick].json)")
    args = parser.parse_args()
    if args.quick:
        args.sequence_length, args.vocabulary_size, args.vocabulary_sentences = 64, 2000, 2000
        args.train_batches, args.steps, args.rounds, args.requests = 2, 2, 2, [6, 2]
        args.warmup_calls = 1
    args.json = args.json or os.path.join(HERE, "results", f"tagger{'_quick' if args.quick else ''}.json")
    keras.config.set_dtype_policy("float32")
    tf.get_logger().setLevel("ERROR")
    print(f"machine: {machine_line(machine_info())}", flush=True)

    train, test = datasets.load_tagged("en_ewt_upos", "train"), datasets.load_tagged("en_ewt_upos", "test")
    sentences = [" ".join(words) for words in train.words[:args.vocabulary_sentences]]
    vocabulary = data.learn_wordpiece_vocabulary(sentences, args.vocabulary_size, progress=False)
    preprocessor = data.BertPreprocessor(data.WordPieceTokenizer(vocabulary), args.sequence_length)
    results = {}
    if "train" in args.parts:
        results["training"] = training(train, preprocessor, args)
    if "serve" in args.parts:
        results["serving"] = serving(train, test, preprocessor, args)
    settings = {k: v for k, v in vars(args).items() if k != "json"}
    write_json(args.json, results, settings=settings, vocabulary_size=len(vocabulary))
    for name, rows in results.items():
        print(f"\n{name}\n" + markdown_table(list(rows[0]), [list(row.values()) for row in rows]))
    print(f"\nwritten to {args.json}")


if __name__ == "__main__":
    main()
