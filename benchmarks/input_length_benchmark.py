"""Latency against input length for every exported signature: bounded by truncation.

Exports one small model per kind of SavedModel tfnlp writes, with random
weights (what is measured does not depend on them), a WordPiece vocabulary
learned from the bundled fine-food training reviews:

- `export_backbone` (BERT-tiny, 128 tokens): `serving_default(text)` and
  `encode_pairs(text_a, text_b)`;
- `export_fill_mask` (the same BERT with its masked-LM head): `serving_default`;
- `export_classifier`: a `BertClassifier` (`serving_default`, `classify_pairs`)
  and a `TransformerClassifier` (2 x 64, 256 tokens);
- `export_elmo` (`elmo_small`, 64 tokens);
- `export_seq2seq`: a `TransformerSeq2Seq` and a `UniLM` (2 x 64, sources of
  64 tokens, greedy, 16 tokens generated; the end token is made impossible so
  that every request generates all 16 and only the input varies).

Small models on purpose: the cheaper the model, the larger the share of the
text processing, so growth with input length shows more, not less.

Each SavedModel is served by a FRESH Python process (this script with
`--serve`) that imports only TensorFlow and tensorflow-text, and times one
request (batch 1) of 10, 100, 1k, 10k, 100k and 1M characters (reviews
repeated; for fill-mask every 50th word is `[MASK]`; for pairs the long text
is `text_a`, `text_b` is a short review), in rounds alternating the lengths.
Reported: the median latency per length and the median per-round ratio to
the 100-character request. Text is cut to `max_input_bytes` (100 kB) before
tokenization or word splitting and to the model's length before the model,
so the ratio must level off however long the text is.

    python benchmarks/input_length_benchmark.py [--rounds 10] [--quick] [--json PATH]
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

from _common import fresh_process_arguments, markdown_table, peak_rss_mb, write_json  # noqa: E402

# Nothing from tfnlp (nor keras) is imported at module level: the --serve
# process runs this file and must load the SavedModel without them.

LENGTHS = (10, 100, 1_000, 10_000, 100_000, 1_000_000)


def export_all(directory, vocabulary_size, max_reviews):
    """{name: (path, [(signature, input names)])} for every export kind."""
    import keras
    import tensorflow as tf

    from tfnlp import data, datasets, export, models

    keras.utils.set_random_seed(0)
    texts = [t for t, _ in datasets.read_fine_food_reviews("train")][:max_reviews]
    vocabulary = data.learn_wordpiece_vocabulary(texts, vocabulary_size, progress=False)
    tokenizer = data.WordPieceTokenizer(vocabulary)
    size = len(vocabulary)
    bert = models.BertBackbone.from_architecture("bert_tiny", vocabulary_size=size, max_sequence_length=128)
    preprocessor = data.BertPreprocessor(tokenizer, 128)
    single, pairs = ("serving_default", ["text"]), ("encode_pairs", ["text_a", "text_b"])
    exported = {
        "bert encode": (export.export_backbone(bert, f"{directory}/encode", preprocessor=preprocessor),
                        [single, pairs]),
        "bert fill_mask": (export.export_fill_mask(models.BertPretrainer(bert), f"{directory}/fill_mask",
                                                   preprocessor=preprocessor), [single]),
        "bert classifier": (export.export_classifier(
            models.BertClassifier(bert, 2), f"{directory}/bert_classifier", preprocessor=preprocessor,
            labels=["a", "b"]), [single, ("classify_pairs", ["text_a", "text_b"])]),
        "transformer classifier": (export.export_classifier(
            models.TransformerClassifier(size, 2, num_layers=2, hidden_dim=64),
            f"{directory}/transformer_classifier", preprocessor=data.BertPreprocessor(tokenizer, 256),
            labels=["a", "b"]), [single]),
        "elmo": (export.export_elmo(models.ELMoBiLM.from_architecture("elmo_small", 1000, num_sampled=None),
                                    f"{directory}/elmo", max_tokens=64), [single]),
    }
    translator = models.TransformerSeq2Seq(size, size, num_encoder_layers=2, num_decoder_layers=2,
                                           hidden_dim=64, num_heads=4)
    unilm = models.UniLM(models.UniLMBackbone(size, 2, 4, 64, max_sequence_length=96))
    for name, model, bias in (("translator", translator, translator.token_logits.bias),
                              ("unilm", unilm, unilm.masked_lm_head.output_bias)):
        # The end token never wins: every request generates `max_length` tokens.
        bias.assign(tf.tensor_scatter_nd_update(bias, [[tokenizer.sep_id]], [-1e4]))
        path = export.export_seq2seq(model, f"{directory}/{name}", source_tokenizer=tokenizer,
                                     target_tokenizer=tokenizer, source_length=64, max_length=16, beam_size=1)
        exported[f"{name} generate"] = (path, [single])
    return exported


def texts_of_lengths(lengths):
    from tfnlp import datasets

    seed = " ".join(t for t, _ in datasets.read_fine_food_reviews("test"))
    masked = " ".join(w if i % 50 else "[MASK]" for i, w in enumerate(seed.split(" ")))
    texts = {}
    for length in lengths:
        texts[length] = {
            "plain": (seed * (length // len(seed) + 1))[:length],
            "masked": (masked * (length // len(masked) + 1))[:length],
        }
    return texts, seed[:200]


def serve(path, request, timeout):
    with tempfile.TemporaryDirectory() as scratch:
        request_path, output_path = f"{scratch}/request.json", f"{scratch}/measured.json"
        with open(request_path, "w") as f:
            json.dump(request, f)
        result = subprocess.run([sys.executable, os.path.abspath(__file__), "--serve", path,
                                 "--request", request_path, "--output", output_path],
                                capture_output=True, text=True, timeout=timeout, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"the serving process failed:\n{result.stderr[-3000:]}")
        with open(output_path) as f:
            return json.load(f)


def serving_process(path, request_path, output_path):
    """Times every signature in the request at every length (TF + tf-text only)."""
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the ops the SavedModel uses)

    assert "tfnlp" not in sys.modules, "tfnlp was imported"
    with open(request_path) as f:
        request = json.load(f)
    model = tf.saved_model.load(path)
    rows = []
    for signature, names, kind in request["signatures"]:
        function = model.signatures[signature]

        def call(text, function=function, names=names):
            inputs = {names[0]: tf.constant([text])}
            if len(names) == 2:
                inputs[names[1]] = tf.constant([request["short"]])
            started = time.perf_counter()
            outputs = function(**inputs)  # eager: the values are computed on return
            elapsed = time.perf_counter() - started
            finite = all(np.isfinite(v.numpy()).all() for v in outputs.values() if v.dtype.is_floating)
            return elapsed, finite

        texts = {int(length): variants[kind] for length, variants in request["texts"].items()}
        for text in texts.values():  # warm up
            call(text)
        seconds = {length: [] for length in texts}
        all_finite = True
        for _ in range(request["rounds"]):
            for length, text in texts.items():
                elapsed, finite = call(text)
                seconds[length].append(elapsed)
                all_finite = all_finite and finite
        for length in texts:
            rows.append({
                "signature": signature, "characters": length,
                "median_ms": round(1000 * statistics.median(seconds[length]), 2),
                "vs_100_chars": round(statistics.median(
                    t / r for t, r in zip(seconds[length], seconds[100], strict=True)), 2),
                "outputs_finite": all_finite,
            })
    with open(output_path, "w") as f:
        json.dump({"rows": rows, "peak_rss_mb": peak_rss_mb()}, f)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--lengths", type=int, nargs="+", default=list(LENGTHS))
    parser.add_argument("--vocabulary-size", type=int, default=8000)
    parser.add_argument("--vocabulary-reviews", type=int, default=None)
    parser.add_argument("--timeout", type=int, default=1800, help="per serving process, seconds")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: 2 rounds, a 2,000-token vocabulary")
    fresh_process_arguments(parser)
    args = parser.parse_args()
    if args.serve:
        serving_process(args.serve, args.request, args.output)
        return
    if 100 not in args.lengths:
        parser.error("--lengths must include 100 (the reference request)")
    args.json = args.json or f"benchmarks/results/input_length{'_quick' if args.quick else ''}.json"
    if args.quick:
        args.rounds, args.vocabulary_size, args.vocabulary_reviews = 2, 2000, 600

    texts, short = texts_of_lengths(args.lengths)
    directory = tempfile.mkdtemp(prefix="tfnlp_input_length_")
    rows = []
    try:
        for model, (path, signatures) in export_all(directory, args.vocabulary_size,
                                                   args.vocabulary_reviews).items():
            kind = "masked" if "fill_mask" in model else "plain"
            request = {"signatures": [(s, names, kind) for s, names in signatures],
                       "texts": texts, "short": short, "rounds": args.rounds}
            measured = serve(path, request, args.timeout)
            rows += [{"model": model, **row, "serving_peak_rss_mb": measured["peak_rss_mb"]}
                     for row in measured["rows"]]
            print(json.dumps(rows[-1]), flush=True)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    longest = {f"{r['model']} {r['signature']}": r["vs_100_chars"] for r in rows
               if r["characters"] == max(args.lengths)}
    settings = {k: v for k, v in vars(args).items() if k not in ("json", "serve", "request", "output")}
    write_json(args.json, rows, settings=settings, longest_over_100_chars=longest)
    print(markdown_table(
        ["model", "signature", "characters", "median ms", "vs 100 chars", "finite"],
        [(r["model"], r["signature"], f"{r['characters']:,}", r["median_ms"], r["vs_100_chars"],
          r["outputs_finite"]) for r in rows]))
    print(f"\nlatency of {max(args.lengths):,} characters / 100 characters: {longest}")
    print(f"written to {args.json}")


if __name__ == "__main__":
    main()
