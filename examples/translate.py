"""Train a small Transformer to translate English verses into Spanish, then export it.

Data: the bundled aligned Bible (World English Bible -> Reina-Valera 1909),
with whole books held out for validation and test. Learns one WordPiece
vocabulary per language (English lower-cased; Spanish keeps case and
accents), trains a `TransformerSeq2Seq` with teacher forcing and label
smoothing, and reports corpus BLEU on the held-out test books for greedy and
beam search next to the copy-the-source baseline. BLEU is computed by
`tfnlp.metrics.corpus_bleu` on lower-cased text split into words and single
punctuation characters (`tfnlp.metrics.tokenize_for_evaluation`), one
reference per verse. Writes TensorBoard logs, `results.json` and, with
`--export`, a SavedModel that takes raw English text.

    python examples/translate.py --export saved_models/translate_en_es
"""

import argparse
import json
import os
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# tfnlp first: before TensorFlow is imported it picks the CPU settings read
# then (oneDNN on x86-64 Linux, tfnlp/_cpu_defaults.py).
from tfnlp import data, datasets, export, metrics, models, training  # noqa: E402

# isort: split
import keras  # noqa: E402
import tensorflow as tf  # noqa: E402


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--architecture", "--preset", dest="architecture",  # --preset: until the next release
                        default="transformer_small",
                        choices=sorted(models.TRANSFORMER_ARCHITECTURES))
    parser.add_argument("--num-layers", type=int, default=None,
                        help="override the preset's encoder and decoder depth")
    parser.add_argument("--vocabulary-size", type=int, default=8000, help="per language")
    parser.add_argument("--source-length", type=int, default=48)
    parser.add_argument("--target-length", type=int, default=48)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--max-train-pairs", type=int, default=None, help="use fewer pairs")
    parser.add_argument("--learning-rate", type=float, default=1e-3, help="peak")
    parser.add_argument("--warmup-steps", type=int, default=400)
    parser.add_argument("--label-smoothing", type=float, default=0.1)
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument("--length-penalty", type=float, default=0.6)
    parser.add_argument("--eval-pairs", type=int, default=None, help="test verses scored")
    parser.add_argument("--output", default="runs/translate")
    parser.add_argument("--export", default=None, help="SavedModel directory")
    return parser.parse_args(argv)


def translate(model, source_tokenizer, target_tokenizer, sources, args, beam_size):
    """Translations of `sources` (a list of str), decoded in batches."""
    preprocess = data.encoder_decoder_dataset(
        tf.data.Dataset.from_tensor_slices((sources, sources)), source_tokenizer,
        target_tokenizer, args.source_length, 2, batch_size=64, drop_remainder=False,
    )
    outputs = []
    for batch in preprocess:
        result = model.generate(
            batch["encoder_token_ids"], batch["encoder_padding_mask"],
            start_id=target_tokenizer.cls_id, end_id=target_tokenizer.sep_id,
            max_length=args.target_length, beam_size=beam_size,
            length_penalty=args.length_penalty if beam_size > 1 else 0.0,
        )
        outputs += [t.decode() for t in target_tokenizer.detokenize(result["token_ids"]).numpy()]
    return outputs



def translation_tokenizers(pairs, vocabulary_size):
    """WordPiece vocabularies and tokenizers of both sides of (English, Spanish) `pairs`.

    English is lower-cased, Spanish keeps its case (the model must write it).
    Returns (source vocabulary, target vocabulary, source tokenizer, target tokenizer).
    """
    source_vocabulary = data.learn_wordpiece_vocabulary(
        [s for s, _ in pairs], vocabulary_size, progress=False)
    target_vocabulary = data.learn_wordpiece_vocabulary(
        [t for _, t in pairs], vocabulary_size, lower_case=False, progress=False)
    return (source_vocabulary, target_vocabulary, data.WordPieceTokenizer(source_vocabulary),
            data.WordPieceTokenizer(target_vocabulary, lower_case=False))

def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.output, exist_ok=True)
    keras.utils.set_random_seed(0)
    train_pairs = datasets.read_text_pairs("bible_en_es", "train")[: args.max_train_pairs]
    test_pairs = datasets.read_text_pairs("bible_en_es", "test")[: args.eval_pairs]

    started = time.time()
    source_vocabulary, target_vocabulary, source_tokenizer, target_tokenizer = (
        translation_tokenizers(train_pairs, args.vocabulary_size))
    data.save_vocabulary(source_vocabulary, os.path.join(args.output, "source_vocab.txt"))
    data.save_vocabulary(target_vocabulary, os.path.join(args.output, "target_vocab.txt"))

    def batches(name, shuffle):
        return data.encoder_decoder_dataset(
            datasets.load_text_pairs("bible_en_es", name).take(args.max_train_pairs or -1)
            if name == "train" else datasets.load_text_pairs("bible_en_es", name),
            source_tokenizer, target_tokenizer, args.source_length, args.target_length,
            batch_size=args.batch_size, shuffle_buffer=30_000 if shuffle else 0, seed=0,
            drop_remainder=shuffle,
        ).map(models.seq2seq_batch)

    train, validation = batches("train", True), batches("validation", False)
    depth = {} if args.num_layers is None else {
        "num_encoder_layers": args.num_layers, "num_decoder_layers": args.num_layers}
    model = models.TransformerSeq2Seq.from_architecture(
        args.architecture, len(source_vocabulary), len(target_vocabulary), **depth)
    model.compile(
        optimizer=keras.optimizers.Adam(
            training.InverseSquareRootDecay(args.learning_rate, args.warmup_steps),
            beta_1=0.9, beta_2=0.98, epsilon=1e-9,
        ),
        loss=training.SmoothedSparseCategoricalCrossentropy(args.label_smoothing),
        weighted_metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        metrics=[],
    )
    callbacks = [keras.callbacks.TensorBoard(os.path.join(args.output, "logs"))]
    history = model.fit(train, validation_data=validation, epochs=args.epochs, verbose=2,
                        callbacks=callbacks, shuffle=False)
    train_seconds = time.time() - started

    sources = [s for s, _ in test_pairs]
    references = [t for _, t in test_pairs]
    results = {
        "model_parameters": model.count_params(),
        "train_pairs": len(train_pairs),
        "test_verses": len(test_pairs),
        "train_seconds": round(train_seconds, 1),
        "validation_token_accuracy": round(history.history["val_accuracy"][-1], 4),
        "bleu_copy_source_baseline": round(metrics.corpus_bleu(references, sources), 2),
    }
    for name, beam_size in (("greedy", 1), (f"beam{args.beam_size}", args.beam_size)):
        translate(model, source_tokenizer, target_tokenizer, sources[:2], args, beam_size)  # trace
        started = time.time()
        hypotheses = translate(model, source_tokenizer, target_tokenizer, sources, args,
                               beam_size)
        seconds = time.time() - started
        results[f"bleu_{name}"] = round(metrics.corpus_bleu(references, hypotheses), 2)
        results[f"sentences_per_second_{name}"] = round(len(sources) / seconds, 1)
        if beam_size > 1:
            examples = list(zip(sources, hypotheses, references, strict=True))[:5]
            results[f"examples_beam{beam_size}"] = [
                {"source": s, "output": h, "reference": r} for s, h, r in examples]
    for source, hypothesis, reference in examples:
        print(f"\nEN:  {source}\nOUT: {hypothesis}\nREF: {reference}")
    print("\n" + json.dumps(results, indent=2))
    with open(os.path.join(args.output, "results.json"), "w") as f:
        json.dump(results, f, indent=2)
    if args.export:
        path = export.export_seq2seq(
            model, args.export, source_tokenizer=source_tokenizer, target_tokenizer=target_tokenizer,
            source_length=args.source_length, max_length=args.target_length, beam_size=args.beam_size,
            length_penalty=args.length_penalty)
        print(f"SavedModel: {path}")
    return results


if __name__ == "__main__":
    main()
