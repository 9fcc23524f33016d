"""Input pipelines and tokenizers: are they fast enough to never starve training?

0. WordPiece vocabulary learning (seconds): tfnlp's learner
   (`tfnlp/data/_wordpiece_learner.py`, what `learn_wordpiece_vocabulary`
   runs) vs tensorflow-text's `wordpiece_tokenizer_learner_lib.learn` (what
   `bert_vocab_from_dataset` runs) on the same word counts of the training
   novels and the same arguments, in one process (rounds alternate which
   learner goes first); the two vocabularies are checked equal and the
   median of the per-round ratios is reported. Skipped with
   `--learner-rounds 0`, and when `--only` picks only seq2seq and elmo.
1. Tokenizer throughput (sentences/s): tfnlp `WordPieceTokenizer`
   (FastBertTokenizer) vs tensorflow-text's reference `BertTokenizer` on the
   same vocabulary and the same bundled sentences, alternating rounds in one
   process; the median ratio is reported.
2. Every model's tf.data pipeline on ONE core (tf.data private thread pool of
   1, intra-op parallelism 1) against the examples/s that model's training
   consumes on all cores, each at the small configuration its example script
   trains (bundled corpora, the model's default `compile()`, float32 unless
   `--policy`):

   | pipeline (tfnlp.data) | data | model (tfnlp.models) | batch |
   |---|---|---|---|
   | `bert_pretraining_dataset` | novels | `BertPretrainer`, bert_mini | 32 x 128, 20 masked |
   | `classification_dataset` | reviews | `BertClassifier`, bert_mini | 32 x 128 |
   | `classification_dataset`, buckets 32/64/128 | reviews | `TransformerClassifier` 2 x 64 | 32 x <= 256 |
   | `unilm_pretraining_dataset` | novels | `UniLM`, bert_mini | 36 x 128, 20 masked |
   | `unilm_finetuning_dataset` | KJV -> WEB verses | `UniLM`, bert_mini | 36 x 96, 70% of targets |
   | `encoder_decoder_dataset` | WEB -> RV1909 verses | `TransformerSeq2Seq`, transformer_small | 64 x (48 + 48) |
   | `elmo_dataset` | novel sentences | `ELMoBiLM`, elmo_small | 32 x 40 words x 50 chars |

   The WordPiece pipelines share one English vocabulary learned from the
   training novels (`--vocabulary-size`); the translator has one per
   language learned from its training verses, as `examples/translate.py`;
   ELMo the 20,000 most frequent novel words (`elmo_benchmark.py`).
   Training = optimizer steps (`train_on_batch`) cycling over
   `--train-batches` batches taken once from the same pipeline and kept in
   memory, so only the step is timed. Rounds alternate pipeline and
   training; each pipeline round starts a fresh iterator (a live one keeps
   filling its buffers in the background while training runs, which would
   both flatter the pipeline and slow training), untimed until
   `--warmup-batches` have come out (the shuffle buffer fills), then timed
   for at least `--batches` batches and `--min-seconds`. Each training round
   is at least `--train-steps` steps and `--min-seconds`. Reported: median
   examples/s of both and the median per-round ratio pipeline / training
   (the performance issue's goal: >= 3).

    python benchmarks/data_benchmark.py [--quick] [--only elmo seq2seq ...] [--policy mixed_bfloat16]
        [--learner-rounds N] [--json PATH]
"""

import argparse
import itertools
import json
import os
import statistics
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_text as tf_text  # noqa: E402
from _common import markdown_table as table  # noqa: E402  (benchmarks/_common.py)
from _common import write_json
from elmo_benchmark import novel_pipeline, novel_vocabulary  # noqa: E402
from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib  # noqa: E402

from tfnlp import data, datasets, models  # noqa: E402
from tfnlp.data import _wordpiece_learner  # noqa: E402
from tfnlp.data.vocabulary import _learner_options  # noqa: E402

GOAL = 3.0  # pipeline on one core / training consumption, from the performance issue


def one_core(dataset):
    options = tf.data.Options()
    options.threading.private_threadpool_size = 1
    options.threading.max_intra_op_parallelism = 1
    return dataset.with_options(options)


def batch_size(batch):
    return int(tf.shape(tf.nest.flatten(batch)[0])[0])


def learners(documents, size, rounds):
    """Seconds to learn the same vocabulary with tfnlp's and tensorflow-text's learner."""
    counts = data.count_words([s for d in documents for s in d], progress=False)
    kwargs = _learner_options(size)  # as `learn_wordpiece_vocabulary` learns
    args = (list(counts.items()), size, list(data.SPECIAL_TOKENS))
    ours_times, reference_times = [], []
    both = ((_wordpiece_learner.learn, ours_times),
            (wordpiece_tokenizer_learner_lib.learn, reference_times))
    for index in range(rounds):
        results = []
        for learn, times in both[::-1] if index % 2 else both:
            start = time.perf_counter()
            results.append(learn(*args, **kwargs))
            times.append(time.perf_counter() - start)
        if results[0] != results[1]:
            raise AssertionError("tfnlp's learner and tensorflow-text's learned different vocabularies")
    return {
        "documents": len(documents), "distinct_words": len(counts), "vocabulary_size": size,
        "tfnlp_s": round(statistics.median(ours_times), 2),
        "tensorflow_text_s": round(statistics.median(reference_times), 2),
        "speedup": round(statistics.median(
            r / o for o, r in zip(ours_times, reference_times, strict=True)), 1),
    }


def tokenizers(vocabulary, sentences, rounds):
    ours = data.WordPieceTokenizer(vocabulary)
    table = tf.lookup.StaticVocabularyTable(
        tf.lookup.KeyValueTensorInitializer(vocabulary, tf.range(len(vocabulary), dtype=tf.int64)), 1
    )
    reference = tf_text.BertTokenizer(table, lower_case=True, token_out_type=tf.int64)
    batch = tf.constant(sentences)
    ours_fn = tf.function(lambda x: ours(x).flat_values)
    reference_fn = tf.function(lambda x: reference.tokenize(x).flat_values)
    ours_fn(batch), reference_fn(batch)
    ours_times, reference_times = [], []
    for _ in range(rounds):
        for fn, times in ((ours_fn, ours_times), (reference_fn, reference_times)):
            start = time.perf_counter()
            fn(batch).numpy()
            times.append(time.perf_counter() - start)
    return {
        "sentences": len(sentences),
        "tfnlp_sentences_per_s": round(len(sentences) / statistics.median(ours_times)),
        "bert_tokenizer_sentences_per_s": round(len(sentences) / statistics.median(reference_times)),
        "speedup": round(statistics.median(
            r / o for o, r in zip(ours_times, reference_times, strict=True)), 2),
    }


# --- One setup per model: (pipeline, model) at its example's configuration ---


def bert_pretraining(vocab, policy, quick):  # examples/pretrain_bert.py
    tokenizer = data.WordPieceTokenizer(vocab["english"])
    pipeline = data.bert_pretraining_dataset(
        datasets.load_documents("en_novels", "train").repeat(), tokenizer, 128, 20, 32,
        shuffle_buffer=200 if quick else 2000,
    ).map(models.pretraining_batch)
    backbone = models.BertBackbone.from_architecture(
        "bert_mini", vocabulary_size=len(vocab["english"]), max_sequence_length=128, dtype=policy)
    return pipeline, models.BertPretrainer(backbone)


def bert_classifier(vocab, policy, quick):  # examples/finetune_classifier.py
    preprocessor = data.BertPreprocessor(data.WordPieceTokenizer(vocab["english"]), 128)
    pipeline = data.classification_dataset(
        datasets.load_fine_food_reviews("train").repeat(), preprocessor, 32, shuffle_buffer=4096)
    backbone = models.BertBackbone.from_architecture(
        "bert_mini", vocabulary_size=len(vocab["english"]), max_sequence_length=128, dtype=policy)
    return pipeline, models.BertClassifier(backbone, num_classes=2)


def transformer_classifier(vocab, policy, quick):  # examples/text_classifier.py
    preprocessor = data.BertPreprocessor(data.WordPieceTokenizer(vocab["english"]), 256)
    pipeline = data.classification_dataset(
        datasets.load_fine_food_reviews("train").repeat(), preprocessor, 32, shuffle_buffer=3606,
        bucket_boundaries=[32, 64, 128],
    )
    model = models.TransformerClassifier(len(vocab["english"]), 2, num_layers=2, num_heads=4,
                                         hidden_dim=64, dtype=policy)
    return pipeline, model


def unilm_backbone(vocab, policy):
    return models.UniLMBackbone.from_architecture(
        "bert_mini", vocabulary_size=len(vocab["english"]), max_sequence_length=128, dtype=policy)


def unilm_pretraining(vocab, policy, quick):  # examples/unilm_seq2seq.py, pretraining
    pipeline = data.unilm_pretraining_dataset(
        datasets.load_documents("en_novels", "train").repeat(),
        data.WordPieceTokenizer(vocab["english"]), 128, batch_size=36,
        shuffle_buffer=200 if quick else 10_000,
    ).map(models.unilm_batch)
    return pipeline, models.UniLM(unilm_backbone(vocab, policy))


def unilm_finetuning(vocab, policy, quick):  # examples/unilm_seq2seq.py, fine-tuning
    pipeline = data.unilm_finetuning_dataset(
        datasets.load_text_pairs("bible_archaic_modern", "train").repeat(),
        data.WordPieceTokenizer(vocab["english"]), 96, masking_rate=0.7, batch_size=36,
        shuffle_buffer=30_000,
    ).map(models.unilm_batch)
    return pipeline, models.UniLM(unilm_backbone(vocab, policy))


def seq2seq(vocab, policy, quick):  # examples/translate.py
    pipeline = data.encoder_decoder_dataset(
        datasets.load_text_pairs("bible_en_es", "train").repeat(),
        data.WordPieceTokenizer(vocab["source"]),
        data.WordPieceTokenizer(vocab["target"], lower_case=False), 48, 48, batch_size=64,
        shuffle_buffer=30_000,
    ).map(models.seq2seq_batch)
    model = models.TransformerSeq2Seq.from_architecture(
        "transformer_small", len(vocab["source"]), len(vocab["target"]), dtype=policy)
    return pipeline, model


def elmo(vocab, policy, quick):  # examples/pretrain_elmo.py (sequence length 40)
    pipeline = novel_pipeline(vocab["words"], "train", 40, 32, repeat=True).map(models.elmo_batch)
    overrides = {"num_sampled": 256} if quick else {}  # must stay below the quick vocabulary
    return pipeline, models.ELMoBiLM.from_architecture("elmo_small", len(vocab["words"]), dtype=policy,
                                                 **overrides)


SETUPS = {  # name -> (pipeline, model, batch) description, builder
    "bert_pretraining": ("bert_pretraining_dataset", "BertPretrainer bert_mini", "32 x 128, 20 masked",
                         bert_pretraining),
    "classification": ("classification_dataset", "BertClassifier bert_mini", "32 x 128",
                       bert_classifier),
    "text_classifier": ("classification_dataset, buckets 32/64/128",
                        "TransformerClassifier 2 x 64", "32 x <= 256", transformer_classifier),
    "unilm_pretraining": ("unilm_pretraining_dataset", "UniLM bert_mini", "36 x 128, 20 masked",
                          unilm_pretraining),
    "unilm_finetuning": ("unilm_finetuning_dataset", "UniLM bert_mini", "36 x 96, 70% of targets",
                         unilm_finetuning),
    "seq2seq": ("encoder_decoder_dataset", "TransformerSeq2Seq transformer_small",
                "64 x (48 + 48)", seq2seq),
    "elmo": ("elmo_dataset", "ELMoBiLM elmo_small", "32 x 40 x 50 chars", elmo),
}


def vocabularies(names, size, quick):
    """Only the vocabularies the chosen setups need (learning one takes seconds)."""
    vocab = {}
    if set(names) - {"seq2seq", "elmo"}:
        documents = datasets.load_documents("en_novels", "train")
        vocab["english"] = data.learn_wordpiece_vocabulary(
            documents.take(60) if quick else documents, size, progress=False)
    if "seq2seq" in names:
        pairs = datasets.read_text_pairs("bible_en_es", "train")[: 3000 if quick else None]
        vocab["source"] = data.learn_wordpiece_vocabulary([s for s, _ in pairs], size,
                                                          progress=False)
        vocab["target"] = data.learn_wordpiece_vocabulary([t for _, t in pairs], size,
                                                          lower_case=False, progress=False)
    if "elmo" in names:
        vocab["words"] = novel_vocabulary(2000 if quick else 20_000)
    return vocab


def pipeline_round(pipeline, warmup_batches, min_batches, min_seconds):
    """Examples/s of a fresh one-core iterator after its warm-up; the iterator is then deleted."""
    iterator = iter(one_core(pipeline))
    for _ in range(warmup_batches):  # the first one fills the shuffle buffer
        next(iterator)
    started, count, examples = time.perf_counter(), 0, 0
    while count < min_batches or time.perf_counter() - started < min_seconds:
        examples += batch_size(next(iterator))
        count += 1
    seconds = time.perf_counter() - started
    del iterator  # stops its background threads before training runs
    return examples / seconds


def training_round(model, batches, min_steps, min_seconds):
    """Examples/s of `train_on_batch` cycling over the in-memory `batches`."""
    started, count, examples = time.perf_counter(), 0, 0
    for batch in itertools.cycle(batches):
        model.train_on_batch(*batch)  # returns the loss: waits for the step
        examples += batch_size(batch[0])
        count += 1
        if count >= min_steps and time.perf_counter() - started >= min_seconds:
            return examples / (time.perf_counter() - started)


def pipeline_vs_training(name, vocab, args):
    pipeline_name, model_name, shape, build = SETUPS[name]
    keras.utils.set_random_seed(0)
    pipeline, model = build(vocab, args.policy, args.quick)
    model.compile()  # the model's defaults, as its example trains it
    batches = list(pipeline.take(args.train_batches))  # taken once, kept in memory
    for batch in batches:  # build, trace (one trace per batch shape), warm up
        model.train_on_batch(*batch)
    pipeline_rates, training_rates = [], []
    for _ in range(args.rounds):
        pipeline_rates.append(pipeline_round(pipeline, args.warmup_batches, args.batches,
                                             args.min_seconds))
        training_rates.append(training_round(model, batches, args.train_steps, args.min_seconds))
    ratio = statistics.median(p / t for p, t in zip(pipeline_rates, training_rates, strict=True))
    row = {
        "setup": name, "pipeline": pipeline_name, "model": model_name, "batch": shape,
        "policy": args.policy,
        "pipeline_one_core_examples_per_s": round(statistics.median(pipeline_rates), 1),
        "training_examples_per_s": round(statistics.median(training_rates), 1),
        "pipeline_over_training": round(ratio, 1),
        "goal_met": ratio >= GOAL,
    }
    print(json.dumps(row), flush=True)
    return row


def markdown(rows):
    learner = rows["learner"] and table(
        ["documents", "distinct words", "vocabulary", "tfnlp s", "tensorflow-text s", "speed-up"],
        [(r["documents"], f"{r['distinct_words']:,}", f"{r['vocabulary_size']:,}", r["tfnlp_s"],
          r["tensorflow_text_s"], r["speedup"]) for r in rows["learner"]],
    )
    tokenizer = table(
        ["sentences", "tfnlp sentences/s", "BertTokenizer sentences/s", "speed-up"],
        [(r["sentences"], f"{r['tfnlp_sentences_per_s']:,}",
          f"{r['bert_tokenizer_sentences_per_s']:,}", r["speedup"]) for r in rows["tokenizer"]],
    )
    pipelines = table(
        ["pipeline", "model", "batch", "pipeline, one core, ex/s", "training ex/s",
         "pipeline / training", f">= {GOAL:g}x"],
        [(r["pipeline"], r["model"], r["batch"], f"{r['pipeline_one_core_examples_per_s']:,}",
          f"{r['training_examples_per_s']:,}", f"{r['pipeline_over_training']:,}",
          "yes" if r["goal_met"] else "**no**") for r in rows["pipelines"]],
    )
    return "\n\n".join(t for t in (learner, tokenizer, pipelines) if t)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: small vocabularies and shuffle buffers, 1 round of "
                        "short measurements (figures not comparable)")
    parser.add_argument("--only", nargs="+", choices=sorted(SETUPS), default=None,
                        help="measure only these pipelines (default: all); the tokenizer "
                        "comparison runs unless only seq2seq and elmo are chosen")
    parser.add_argument("--policy", default="float32", choices=["float32", "mixed_bfloat16"],
                        help="the models' dtype policy")
    parser.add_argument("--vocabulary-size", type=int, default=8000, help="WordPiece vocabularies")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokenizer-rounds", type=int, default=7)
    parser.add_argument("--learner-rounds", type=int, default=1,
                        help="rounds of the learner comparison (0: skip it; tensorflow-text's "
                        "learner takes about 50 s a round on the whole corpus)")
    parser.add_argument("--warmup-batches", type=int, default=3,
                        help="untimed batches of each fresh pipeline iterator")
    parser.add_argument("--batches", type=int, default=20, help="least pipeline batches per round")
    parser.add_argument("--train-steps", type=int, default=8, help="least training steps per round")
    parser.add_argument("--train-batches", type=int, default=8,
                        help="in-memory batches the training steps cycle over")
    parser.add_argument("--min-seconds", type=float, default=2.0,
                        help="least seconds of each timed pipeline or training round")
    parser.add_argument("--json", default=None,
                        help="JSON results (default benchmarks/results/data[_quick].json)")
    args = parser.parse_args()
    if args.quick:
        args.vocabulary_size, args.rounds, args.tokenizer_rounds = 2000, 1, 1
        args.learner_rounds = min(args.learner_rounds, 1)
        args.warmup_batches, args.batches, args.train_steps = 1, 2, 2
        args.train_batches, args.min_seconds = 2, 0.2
    args.json = args.json or f"benchmarks/results/data{'_quick' if args.quick else ''}.json"
    names = args.only or list(SETUPS)

    started = time.perf_counter()
    vocab = vocabularies(names, args.vocabulary_size, args.quick)
    rows = {"learner": [], "tokenizer": [], "pipelines": []}
    if args.learner_rounds and "english" in vocab:
        documents = datasets.read_documents("en_novels", "train")[: 60 if args.quick else None]
        rows["learner"].append(learners(documents, args.vocabulary_size, args.learner_rounds))
        print(json.dumps(rows["learner"][0]), flush=True)
    if "english" in vocab:
        sentences = [s for d in datasets.read_documents("en_novels", "test") for s in d]
        rows["tokenizer"].append(tokenizers(vocab["english"], sentences, args.tokenizer_rounds))
        print(json.dumps(rows["tokenizer"][0]), flush=True)
    for name in names:
        rows["pipelines"].append(pipeline_vs_training(name, vocab, args))
    write_json(args.json, rows, settings={k: v for k, v in vars(args).items() if k != "json"},
               goal_pipeline_over_training=GOAL, seconds=round(time.perf_counter() - started))
    print()
    print(markdown(rows))
    print(f"\nwritten to {args.json} ({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
