"""UniLM end to end: pretrain with four objectives, fine-tune archaic -> modern English.

One network, three uses, all measured on held-out data:
1. seq2seq: fine-tuned on the bundled King James -> World English Bible verse
   pairs (whole books held out); ROUGE-1/2/L and BLEU (`tfnlp.metrics`, lower-
   cased words and punctuation) for greedy and beam search, with and without
   trigram blocking, next to copying the source (a strong baseline: the two
   translations share most words);
2. left-to-right LM, trained on the novels with every token a target
   (`data.left_to_right_lm_dataset`, `--lm-steps`) after the four-objective
   pretraining, and measured before the seq2seq fine-tuning: per-token
   perplexity of held-out novel chapters (`UniLM.left_to_right_log_probs`)
   next to a unigram model, and held-out sentence beginnings continued with
   `UniLM.continue_prompt` (top-p 0.95, temperatures 0.7 and 1.2);
3. bidirectional encoder: `to_bert()` + `BertClassifier` on the fine-food
   reviews, next to the majority class.
Starts from the BERT of `examples/pretrain_bert.py` (`--pretrained DIR`), or
from scratch, then runs `--pretrain-steps` of UniLM pretraining on the novels
(1/3 bidirectional, 1/3 seq2seq, 1/6 each unidirectional LM in every batch).

    python examples/unilm_seq2seq.py --pretrained runs/bert_pretrain --export saved_models/modernize
"""

import argparse
import collections
import json
import math
import os
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# tfnlp first: before TensorFlow is imported it picks the CPU settings read
# then (oneDNN on x86-64 Linux, tfnlp/_cpu_defaults.py).
from tfnlp import data, datasets, export, metrics, models, training  # noqa: E402

# isort: split
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pretrained", default=None, help="dir with vocab.txt + backbone.keras")
    parser.add_argument("--architecture", "--preset", dest="architecture",  # --preset: until the next release
                        default="bert_tiny", help="without --pretrained")
    parser.add_argument("--vocabulary-size", type=int, default=8000)
    parser.add_argument("--pretrain-steps", type=int, default=1000,
                        help="four-objective UniLM pretraining steps")
    parser.add_argument("--lm-steps", type=int, default=2000,
                        help="left-to-right LM steps on the novels, every token a target")
    parser.add_argument("--lm-sequence-length", type=int, default=64)
    parser.add_argument("--lm-learning-rate", type=float, default=1e-3)
    parser.add_argument("--lm-batch-size", type=int, default=32)
    parser.add_argument("--sequence-length", type=int, default=96, help="source + target")
    parser.add_argument("--source-length", type=int, default=48)
    parser.add_argument("--max-length", type=int, default=48, help="generated tokens")
    parser.add_argument("--batch-size", type=int, default=36)
    parser.add_argument("--epochs", type=int, default=4, help="fine-tuning epochs")
    parser.add_argument("--max-train-pairs", type=int, default=None)
    parser.add_argument("--learning-rate", type=float, default=5e-4)
    parser.add_argument(
        "--fine-tuning", default="masked", choices=["masked", "pseudo-masked"],
        help="masked: UniLM's, --masking-rate of the target masked and predicted; "
        "pseudo-masked: s2s-ft's (UniLMv2), every target token predicted from the real ones "
        "before it, as decoding does (data.unilm_pseudo_masked_dataset)",
    )
    parser.add_argument(
        "--masking-rate", type=float, default=None,
        help="share of target tokens masked in --fine-tuning masked (default and UniLM's: 0.7)",
    )
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument("--eval-pairs", type=int, default=None, help="test verses scored")
    parser.add_argument("--classifier-epochs", type=int, default=2)
    parser.add_argument("--perplexity-sentences", type=int, default=2000)
    parser.add_argument("--samples", type=int, default=3,
                        help="held-out sentence beginnings continued at two temperatures")
    parser.add_argument("--seed", type=int, default=0,
                        help="weights, dropout, masks and the order of the pairs")
    parser.add_argument("--output", default="runs/unilm")
    parser.add_argument("--export", default=None, help="SavedModel directory")
    args = parser.parse_args(argv)
    if args.masking_rate is not None and args.fine_tuning == "pseudo-masked":
        parser.error("--masking-rate is for --fine-tuning masked: pseudo-masks predict every "
                     "target token")
    if args.masking_rate is None and args.fine_tuning == "masked":
        args.masking_rate = 0.7
    return args


def adamw(learning_rate, steps):
    return training.bert_adamw(
        training.LinearWarmupLinearDecay(learning_rate, max(steps // 10, 1), steps + 1))


def fit_phase(model, batches, learning_rate, steps, logs, name):
    """`steps` steps of `batches` under a fresh AdamW schedule, logged under `logs/name`."""
    model.compile(optimizer=adamw(learning_rate, steps))
    model.fit(batches, steps_per_epoch=steps, epochs=1, verbose=2, shuffle=False,
              callbacks=[keras.callbacks.TensorBoard(os.path.join(logs, name))])


def start(args):
    """The tokenizer and a UniLM backbone, from the pretrained BERT or from scratch."""
    if args.pretrained:
        vocabulary = data.load_vocabulary(os.path.join(args.pretrained, "vocab.txt"))
        bert = keras.saving.load_model(os.path.join(args.pretrained, "backbone.keras"))
        return data.WordPieceTokenizer(vocabulary), models.UniLMBackbone.from_bert(bert)
    texts = [s for d in datasets.read_documents("en_novels", "train") for s in d]
    texts += [t for pair in datasets.read_text_pairs("bible_archaic_modern", "train") for t in pair]
    vocabulary = data.learn_wordpiece_vocabulary(texts, args.vocabulary_size, progress=False)
    backbone = models.UniLMBackbone.from_architecture(
        args.architecture, vocabulary_size=len(vocabulary), max_sequence_length=128)
    return data.WordPieceTokenizer(vocabulary), backbone


def generate(model, tokenizer, sources, args, beam_size, no_repeat_ngram_size):
    preprocessor = data.BertPreprocessor(tokenizer, args.source_length)
    outputs = []
    for begin in range(0, len(sources), 64):
        packed = preprocessor(tf.constant(sources[begin : begin + 64]))
        result = model.generate(
            packed["token_ids"], packed["padding_mask"], end_id=tokenizer.sep_id,
            mask_id=tokenizer.mask_id, max_length=args.max_length, beam_size=beam_size,
            length_penalty=0.6 if beam_size > 1 else 0.0,
            no_repeat_ngram_size=no_repeat_ngram_size)
        outputs += [t.decode() for t in tokenizer.detokenize(result["token_ids"]).numpy()]
    return outputs


def perplexities(model, tokenizer, args):
    """Held-out left-to-right perplexity and a unigram model's, per WordPiece token."""
    preprocessor = data.BertPreprocessor(tokenizer, 64)
    counts = collections.Counter()
    for document in datasets.read_documents("en_novels", "train")[::4]:
        counts.update(tokenizer(tf.constant(document)).flat_values.numpy().tolist())
    total = sum(counts.values())
    sentences = [s for d in datasets.read_documents("en_novels", "validation") for s in d]
    sentences = sentences[: args.perplexity_sentences]
    model_sum = unigram_sum = tokens = 0.0
    for begin in range(0, len(sentences), 64):
        packed = preprocessor(tf.constant(sentences[begin : begin + 64]))
        scores = model.left_to_right_log_probs(packed["token_ids"], packed["padding_mask"],
                                               mask_id=tokenizer.mask_id).numpy()
        ids, real = packed["token_ids"].numpy(), packed["padding_mask"].numpy().astype(bool)
        real[:, 0] = False  # [CLS] is given, not predicted
        model_sum += scores[real].sum()
        unigram_sum += sum(math.log((counts[i] + 1) / (total + len(tokenizer.vocabulary)))
                           for i in ids[real])
        tokens += real.sum()
    return math.exp(-model_sum / tokens), math.exp(-unigram_sum / tokens)


def continuations(model, tokenizer, args):
    """Held-out novel sentences' first words, continued left to right at two temperatures."""
    sentences = [s for d in datasets.read_documents("en_novels", "validation") for s in d]
    prompts = [" ".join(s.split()[:8]) for s in sentences if len(s.split()) > 12][: args.samples]
    ids = [[tokenizer.cls_id] + tokenizer(tf.constant(p)).numpy().tolist() for p in prompts]
    width = max(map(len, ids))
    padded = tf.constant([row + [tokenizer.pad_id] * (width - len(row)) for row in ids])
    mask = tf.constant([[1] * len(row) + [0] * (width - len(row)) for row in ids])
    samples = {}
    for temperature in (0.7, 1.2):
        output = model.continue_prompt(padded, mask, end_id=tokenizer.sep_id,
                                       mask_id=tokenizer.mask_id, max_length=24,
                                       temperature=temperature, top_p=0.95, seed=0)
        texts = [t.decode() for t in tokenizer.detokenize(output["token_ids"]).numpy()]
        samples[f"temperature_{temperature}"] = [f"{p} | {t}" for p, t in zip(prompts, texts,
                                                                                strict=True)]
    return samples


def classify(backbone, tokenizer, args):
    preprocessor = data.BertPreprocessor(tokenizer, 128)

    def split(name, shuffle):
        return data.classification_dataset(
            datasets.load_fine_food_reviews(name), preprocessor, 32,
            shuffle_buffer=4096 if shuffle else 0, drop_remainder=shuffle)

    classifier = models.BertClassifier(backbone.to_bert(), num_classes=2)
    classifier.compile(optimizer=adamw(args.learning_rate, args.classifier_epochs * 112))
    classifier.fit(split("train", True), epochs=args.classifier_epochs, verbose=2, shuffle=False)
    labels = [y for _, y in datasets.read_fine_food_reviews("test")]
    accuracy = classifier.evaluate(split("test", False), return_dict=True, verbose=0)["accuracy"]
    return accuracy, max(np.mean(labels), 1 - np.mean(labels))


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.output, exist_ok=True)
    keras.utils.set_random_seed(args.seed)
    started = time.time()
    tokenizer, backbone = start(args)
    model = models.UniLM(backbone)
    logs = os.path.join(args.output, "logs")
    if args.pretrain_steps:
        batches = data.unilm_pretraining_dataset(
            datasets.load_documents("en_novels", "train").repeat(), tokenizer, 128,
            batch_size=args.batch_size, seed=args.seed).map(models.unilm_batch)
        fit_phase(model, batches, args.learning_rate, args.pretrain_steps, logs, "pretrain")
    if args.lm_steps:
        batches = data.left_to_right_lm_dataset(
            datasets.load_documents("en_novels", "train").repeat(), tokenizer,
            args.lm_sequence_length, batch_size=args.lm_batch_size,
            seed=args.seed).map(models.unilm_batch)
        fit_phase(model, batches, args.lm_learning_rate, args.lm_steps, logs, "left_to_right")
    pretrain_seconds = time.time() - started
    results = {"options": {name: getattr(args, name) for name in (
        "pretrained", "architecture", "pretrain_steps", "lm_steps", "lm_sequence_length",
        "lm_learning_rate", "lm_batch_size", "epochs", "learning_rate", "fine_tuning",
        "masking_rate", "seed")}}
    # The language model as pretrained, before the seq2seq fine-tuning
    # (not counted in train_seconds).
    model_ppl, unigram_ppl = perplexities(model, tokenizer, args)
    results["left_to_right_perplexity"] = round(model_ppl, 1)
    results["unigram_perplexity"] = round(unigram_ppl, 1)
    if args.samples:
        results["continuations"] = continuations(model, tokenizer, args)
        for name, lines in results["continuations"].items():
            print(f"\n{name} (top-p 0.95, seed 0; prompt | continuation):")
            print("\n".join(lines))

    finetune_began = time.time()
    pairs = datasets.read_text_pairs("bible_archaic_modern", "train")[: args.max_train_pairs]
    pair_dataset = tf.data.Dataset.from_tensor_slices(tuple(map(list, zip(*pairs, strict=True))))
    if args.fine_tuning == "pseudo-masked":
        train = data.unilm_pseudo_masked_dataset(
            pair_dataset, tokenizer, args.sequence_length, batch_size=args.batch_size,
            shuffle_buffer=len(pairs), seed=args.seed,
        )
    else:
        train = data.unilm_finetuning_dataset(
            pair_dataset, tokenizer, args.sequence_length, masking_rate=args.masking_rate,
            batch_size=args.batch_size, shuffle_buffer=len(pairs), seed=args.seed,
        )
    train = train.map(models.unilm_batch)
    model.compile(optimizer=adamw(args.learning_rate, args.epochs * (len(pairs) // args.batch_size)))
    model.fit(train, epochs=args.epochs, verbose=2, shuffle=False,
              callbacks=[keras.callbacks.TensorBoard(os.path.join(logs, "finetune"))])
    train_seconds = pretrain_seconds + time.time() - finetune_began

    test = datasets.read_text_pairs("bible_archaic_modern", "test")[: args.eval_pairs]
    sources, references = [s for s, _ in test], [t for _, t in test]
    results.update({"test_verses": len(test), "train_seconds": round(train_seconds, 1)})
    candidates = {"copy_source": sources}
    beam = f"beam{args.beam_size}"
    for name, beam_size, ngram in (("greedy", 1, 0), (beam, args.beam_size, 0),
                                   (f"{beam}_trigram_blocking", args.beam_size, 3)):
        generate(model, tokenizer, sources[:2], args, beam_size, ngram)  # trace
        begun = time.time()
        candidates[name] = generate(model, tokenizer, sources, args, beam_size, ngram)
        results[f"sentences_per_second_{name}"] = round(len(sources) / (time.time() - begun), 1)
    for name, hypotheses in candidates.items():
        rouge = metrics.rouge_scores(references, hypotheses)
        results[name] = {"bleu": round(metrics.corpus_bleu(references, hypotheses), 2),
                         **{k: round(v, 2) for k, v in rouge.items()}}
    for source, output, reference in list(zip(sources, candidates[beam],
                                              references, strict=True))[:5]:
        print(f"\nKJV: {source}\nOUT: {output}\nWEB: {reference}")

    if args.classifier_epochs:
        accuracy, majority = classify(backbone, tokenizer, args)
        results["review_classifier_accuracy"] = round(accuracy, 4)
        results["review_majority_baseline"] = round(majority, 4)
    print("\n" + json.dumps(results, indent=2))
    with open(os.path.join(args.output, "results.json"), "w") as f:
        json.dump(results, f, indent=2)
    model.save(os.path.join(args.output, "unilm.keras"))
    data.save_vocabulary(tokenizer.get_vocabulary(), os.path.join(args.output, "vocab.txt"))
    if args.export:
        path = export.export_seq2seq(model, args.export, source_tokenizer=tokenizer, target_tokenizer=tokenizer,
                                     source_length=args.source_length, max_length=args.max_length,
                                     beam_size=args.beam_size, length_penalty=0.6)
        print(f"SavedModel: {path}")
    return results


if __name__ == "__main__":
    main()
