"""UniLM against an encoder-decoder of about the same size: same pairs, vocabulary and steps.

Which architecture to fine-tune on your pairs? This trains both on the same
bundled aligned verses (`--pairs`: English -> Spanish by default, or King
James -> modern English) and reports corpus BLEU on held-out books:

- `TransformerSeq2Seq` with `--layers / 2` encoder and `--layers / 2`
  decoder blocks, teacher forcing, its default loss (label smoothing 0.1);
- `UniLM` with `--layers` blocks of the same width, seq2seq fine-tuning with
  pseudo-masks (`data.unilm_pseudo_masked_dataset`, every target token
  predicted, as microsoft/unilm's s2s-ft) or the paper's masked fine-tuning
  (`--unilm-fine-tuning masked`), optionally after `--lm-steps` steps of
  left-to-right LM on the training pairs' text (both sides, one sentence an
  example; not counted in `--steps`).

Both read one WordPiece vocabulary learned from both sides of the training
pairs (cased, accents kept), batches of `--batch-size` pairs, `--steps`
optimizer steps of AdamW with 10% linear warm-up and linear decay to the
same peak, dropout 0.1, the same seed. UniLM packs `[CLS] S [SEP] T [SEP]`
into `--source-length + --target-length` tokens, cutting the longer side
first, and decodes from sources cut at `--source-length`; the
encoder-decoder cuts sources at `--source-length` in both. BLEU is
`tfnlp.metrics.corpus_bleu` on lower-cased words and punctuation, greedy
and beam search, next to copying the source. Writes `results.json`.

    python examples/compare_seq2seq.py --steps 3000
"""

import argparse
import json
import os
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# tfnlp first: before TensorFlow is imported it picks the CPU settings read
# then (oneDNN on x86-64 Linux, tfnlp/_cpu_defaults.py).
from tfnlp import data, datasets, metrics, models, training  # noqa: E402

# isort: split
import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

PAIRS = ("bible_en_es", "bible_archaic_modern")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", default="bible_en_es", choices=PAIRS)
    parser.add_argument("--models", nargs="+", default=["transformer", "unilm"],
                        choices=["transformer", "unilm"])
    parser.add_argument("--layers", type=int, default=4,
                        help="UniLM's blocks; the encoder-decoder gets half each side")
    parser.add_argument("--hidden-dim", type=int, default=128)
    parser.add_argument("--num-heads", type=int, default=2)
    parser.add_argument("--vocabulary-size", type=int, default=8000, help="both sides together")
    parser.add_argument("--source-length", type=int, default=48)
    parser.add_argument("--target-length", type=int, default=48, help="also the generated tokens")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=3000, help="optimizer steps, each model")
    parser.add_argument("--learning-rate", type=float, default=1e-3, help="peak")
    parser.add_argument("--unilm-fine-tuning", default="pseudo-masked",
                        choices=["pseudo-masked", "masked"])
    parser.add_argument("--masking-rate", type=float, default=0.7,
                        help="target tokens masked, --unilm-fine-tuning masked")
    parser.add_argument("--lm-steps", type=int, default=0,
                        help="UniLM left-to-right LM steps on the training text first")
    parser.add_argument("--max-train-pairs", type=int, default=None)
    parser.add_argument("--eval-pairs", type=int, default=500, help="test verses scored")
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default="runs/compare_seq2seq")
    args = parser.parse_args(argv)
    if args.layers < 2 or args.layers % 2:
        parser.error(f"--layers must be an even number >= 2 (the encoder-decoder gets half "
                     f"each side), got {args.layers}")
    if args.hidden_dim % args.num_heads:
        parser.error(f"--hidden-dim ({args.hidden_dim}) must be a multiple of --num-heads "
                     f"({args.num_heads})")
    return args


def optimizer(args, steps):
    return training.bert_adamw(training.LinearWarmupLinearDecay(
        args.learning_rate, max(steps // 10, 1), steps + 1))


def pair_dataset(pairs):
    return tf.data.Dataset.from_tensor_slices(tuple(map(list, zip(*pairs, strict=True))))


def train_transformer(args, tokenizer, pairs):
    model = models.TransformerSeq2Seq(
        len(tokenizer.vocabulary), num_encoder_layers=args.layers // 2,
        num_decoder_layers=args.layers // 2, hidden_dim=args.hidden_dim,
        num_heads=args.num_heads, dropout=0.1)
    batches = data.encoder_decoder_dataset(
        pair_dataset(pairs), tokenizer, tokenizer, args.source_length, args.target_length,
        batch_size=args.batch_size, shuffle_buffer=len(pairs), seed=args.seed,
    ).repeat().map(models.seq2seq_batch)
    model.compile(optimizer=optimizer(args, args.steps), metrics=[], weighted_metrics=[])
    model.fit(batches, steps_per_epoch=args.steps, epochs=1, verbose=2, shuffle=False)
    return model


def train_unilm(args, tokenizer, pairs):
    backbone = models.UniLMBackbone(
        len(tokenizer.vocabulary), num_layers=args.layers, num_heads=args.num_heads,
        hidden_dim=args.hidden_dim, dropout=0.1,
        max_sequence_length=args.source_length + args.target_length)
    model = models.UniLM(backbone)
    if args.lm_steps:
        sentences = tf.data.Dataset.from_tensor_slices(
            [[text] for pair in pairs for text in pair])  # one-sentence documents
        batches = data.left_to_right_lm_dataset(
            sentences.shuffle(2 * len(pairs), seed=args.seed).repeat(), tokenizer,
            args.target_length, batch_size=args.batch_size, seed=args.seed,
        ).map(models.unilm_batch)
        model.compile(optimizer=optimizer(args, args.lm_steps))
        model.fit(batches, steps_per_epoch=args.lm_steps, epochs=1, verbose=2, shuffle=False)
    length = args.source_length + args.target_length
    if args.unilm_fine_tuning == "pseudo-masked":
        batches = data.unilm_pseudo_masked_dataset(
            pair_dataset(pairs), tokenizer, length, batch_size=args.batch_size,
            shuffle_buffer=len(pairs), seed=args.seed)
    else:
        batches = data.unilm_finetuning_dataset(
            pair_dataset(pairs), tokenizer, length, masking_rate=args.masking_rate,
            batch_size=args.batch_size, shuffle_buffer=len(pairs), seed=args.seed)
    model.compile(optimizer=optimizer(args, args.steps))
    model.fit(batches.repeat().map(models.unilm_batch), steps_per_epoch=args.steps, epochs=1,
              verbose=2, shuffle=False)
    return model


def source_batches(name, tokenizer, sources, args):
    """`sources` (a list of str) encoded as each model reads them in training, 64 a batch.

    The encoder-decoder's `S [SEP]` (`encoder_decoder_dataset`), UniLM's
    `[CLS] S [SEP]` (as `unilm_seq2seq_dataset` packs the source).
    """
    if name == "transformer":
        return [(b["encoder_token_ids"], b["encoder_padding_mask"]) for b in
                data.encoder_decoder_dataset(
                    tf.data.Dataset.from_tensor_slices((sources, sources)), tokenizer, tokenizer,
                    args.source_length, 2, batch_size=64, drop_remainder=False)]
    preprocessor = data.BertPreprocessor(tokenizer, args.source_length)
    packed = [preprocessor(tf.constant(sources[i : i + 64])) for i in range(0, len(sources), 64)]
    return [(p["token_ids"], p["padding_mask"]) for p in packed]


def generate(name, model, tokenizer, batches, args, beam_size):
    """Decoded texts of `source_batches`' batches."""
    options = {"end_id": tokenizer.sep_id, "max_length": args.target_length,
               "beam_size": beam_size, "length_penalty": 0.6 if beam_size > 1 else 0.0}
    options.update({"start_id": tokenizer.cls_id} if name == "transformer"
                   else {"mask_id": tokenizer.mask_id})
    outputs = []
    for token_ids, padding_mask in batches:
        result = model.generate(token_ids, padding_mask, **options)
        outputs += [t.decode() for t in tokenizer.detokenize(result["token_ids"]).numpy()]
    return outputs


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.output, exist_ok=True)
    train_pairs = datasets.read_text_pairs(args.pairs, "train")[: args.max_train_pairs]
    test_pairs = datasets.read_text_pairs(args.pairs, "test")[: args.eval_pairs]
    sources, references = [s for s, _ in test_pairs], [t for _, t in test_pairs]
    vocabulary = data.learn_wordpiece_vocabulary(
        [text for pair in train_pairs for text in pair], args.vocabulary_size,
        lower_case=False, progress=False)
    tokenizer = data.WordPieceTokenizer(vocabulary, lower_case=False)
    results = {"options": vars(args), "train_pairs": len(train_pairs),
               "test_verses": len(test_pairs), "vocabulary": len(vocabulary),
               "copy_source_bleu": round(metrics.corpus_bleu(references, sources), 2)}
    trainers = {"transformer": train_transformer, "unilm": train_unilm}
    for name in args.models:
        keras.utils.set_random_seed(args.seed)
        started = time.time()
        model = trainers[name](args, tokenizer, train_pairs)
        result = {"parameters": model.count_params(),
                  "train_seconds": round(time.time() - started, 1)}
        batches = source_batches(name, tokenizer, sources, args)
        for label, beam_size in (("greedy", 1), (f"beam{args.beam_size}", args.beam_size)):
            hypotheses = generate(name, model, tokenizer, batches, args, beam_size)
            result[f"bleu_{label}"] = round(metrics.corpus_bleu(references, hypotheses), 2)
        result["examples"] = [{"source": s, "output": h, "reference": r} for s, h, r in
                              list(zip(sources, hypotheses, references, strict=True))[:3]]
        results[name] = result
        print(json.dumps({name: {k: v for k, v in result.items() if k != "examples"}}))
    print("\n" + json.dumps(results, indent=2))
    with open(os.path.join(args.output, "results.json"), "w") as f:
        json.dump(results, f, indent=2)
    return results


if __name__ == "__main__":
    main()
