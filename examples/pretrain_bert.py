"""Pretrain a small BERT (masked LM + next-sentence prediction) on the bundled novels.

Learns a WordPiece vocabulary from the training chapters, pretrains a
`BertPretrainer` with BERT's schedule (linear warm-up and decay, AdamW), and
reports masked-LM and NSP accuracy on held-out chapters next to the
baselines (the most frequent masked token; 50% for NSP). Writes
`vocab.txt`, `backbone.keras` and TensorBoard logs under `--output`.

    python examples/pretrain_bert.py --architecture bert_mini --steps 2000

Your own unlabelled text joins the novels with `--domain-texts` (a TSV, CSV
or JSONL file; `--domain-text-column` names the column), the training
reviews of `finetune_classifier.py` with `--review-texts`: the vocabulary
is learned from all of it, and each text is a document split into
sentences at `.`, `!` and `?` (`--domain-repeats` reads them more than once
per pass over the novels). Give it the training texts of the task you
fine-tune on, never its validation or test texts. `--no-next-sentence`
pretrains the masked LM alone on full-sentence segments (RoBERTa).

    python examples/pretrain_bert.py --domain-texts my_train.tsv --no-next-sentence
"""

import argparse
import json
import os
import re
import time
import warnings

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# tfnlp first: before TensorFlow is imported it picks the CPU settings read
# then (oneDNN on x86-64 Linux, tfnlp/_cpu_defaults.py).
from tfnlp import data, datasets, models, training  # noqa: E402

# isort: split
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--architecture", "--preset", dest="architecture",  # --preset: until the next release
                        default="bert_mini", choices=sorted(models.BERT_ARCHITECTURES))
    parser.add_argument("--vocabulary-size", type=int, default=8000)
    parser.add_argument("--sequence-length", type=int, default=128)
    parser.add_argument("--max-predictions", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=2000, help="optimizer steps in all")
    parser.add_argument("--steps-per-epoch", type=int, default=250)
    parser.add_argument("--learning-rate", type=float, default=5e-4)
    parser.add_argument("--warmup-fraction", type=float, default=0.1)
    parser.add_argument("--masking-rate", type=float, default=0.15)
    parser.add_argument("--whole-word-masking", action="store_true")
    parser.add_argument(
        "--next-sentence", action=argparse.BooleanOptionalAction, default=True,
        help="sentence pairs and next-sentence prediction (BERT); --no-next-sentence: masked LM "
        "alone on full-sentence segments (RoBERTa)",
    )
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument(
        "--token-embeddings", default="random", choices=["random", "ppmi"],
        help="ppmi: start the token embedding from PPMI-SVD vectors of the pretraining text's "
        "co-occurrence counts (tfnlp.data.learn_token_embeddings, seconds)",
    )
    parser.add_argument("--domain-texts", help="a TSV, CSV or JSONL file of your own texts")
    parser.add_argument("--domain-text-column", default="text")
    parser.add_argument(
        "--review-texts", action="store_true",
        help="add the training reviews of finetune_classifier.py (never its validation or test "
        "reviews): domain-adaptive pretraining",
    )
    parser.add_argument("--domain-repeats", type=int, default=1,
                        help="reads of --domain-texts and --review-texts per pass over the novels")
    parser.add_argument("--eval-batches", type=int, default=40)
    parser.add_argument("--max-documents", type=int, default=None, help="use fewer chapters")
    parser.add_argument("--shuffle-buffer", type=int, default=2000, help="pairs shuffled at once")
    parser.add_argument(
        "--cache-batches", type=int, default=0,
        help="prepare this many training batches once and cycle through them (0: stream)",
    )
    parser.add_argument(
        "--dtype-policy", default="float32",
        choices=["float32", "mixed_bfloat16", "mixed_float16", "auto"],
        help="mixed_bfloat16 trains BERT-small 1.4-1.5x faster on CPUs with AVX-512 BF16 "
        "(benchmarks/README.md); auto: mixed_bfloat16 where the CPU has bfloat16 instructions "
        "or a GPU is visible, else float32",
    )
    parser.add_argument("--output", default="runs/bert_pretrain")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.dtype_policy == "auto":
        args.dtype_policy = "mixed_bfloat16" if native_bfloat16() else "float32"
    if args.domain_repeats < 1:
        parser.error(f"--domain-repeats must be at least 1, got {args.domain_repeats}")
    if (args.domain_texts or args.review_texts) and args.next_sentence:
        warnings.warn(
            "Next-sentence pairs need documents of at least two segments of "
            f"{(args.sequence_length - 3) // 2} tokens: shorter texts from --domain-texts or "
            "--review-texts give no pair and are not trained on (only their words reach the "
            "vocabulary). Add --no-next-sentence to train on every text.",
            stacklevel=2,
        )
    return args


def native_bfloat16(cpuinfo="/proc/cpuinfo"):
    """Whether bfloat16 runs natively here: a GPU of compute capability 8.0 or more
    (Ampere and later), or a CPU with AVX-512 BF16 or AMX.

    Elsewhere (AVX2-only CPUs, older GPUs) bfloat16 matmuls are emulated,
    slower than float32. Reads the CPU flags from `cpuinfo` (Linux); False
    when it cannot be read.
    """
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        capability = tf.config.experimental.get_device_details(gpus[0]).get("compute_capability")
        return bool(capability) and tuple(capability) >= (8, 0)
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return False
    return bool({"avx512_bf16", "amx_bf16"} & set(flags))


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def domain_documents(texts, source):
    """Texts as documents: one per text, split into sentences."""
    documents = [[s for s in _SENTENCE_END.split(text.strip()) if s] for text in texts]
    documents = [d for d in documents if d]  # texts of white space only
    if not documents:
        raise ValueError(f"{source}: no text to pretrain on.")
    ragged = tf.ragged.constant(documents, dtype=tf.string, ragged_rank=1)
    return tf.data.Dataset.from_tensor_slices(ragged).map(
        lambda sentences: tf.reshape(sentences, [-1]), num_parallel_calls=tf.data.AUTOTUNE
    )


def main(argv=None):
    args = parse_args(argv)
    keras.utils.set_random_seed(args.seed)
    os.makedirs(args.output, exist_ok=True)
    train_documents = datasets.load_documents("en_novels", "train")
    if args.max_documents:
        train_documents = train_documents.take(args.max_documents)
    vocabulary_documents = train_documents
    texts = []
    if args.domain_texts:
        texts += data.read_texts(args.domain_texts, args.domain_text_column)
    if args.review_texts:
        texts += [text for text, _ in datasets.read_fine_food_reviews("train")]
    if texts:
        domain = domain_documents(texts, args.domain_texts or "the training reviews")
        vocabulary_documents = train_documents.concatenate(domain)
        # Chapters and texts mixed in every pass: the buffer holds them all.
        train_documents = train_documents.concatenate(domain.repeat(args.domain_repeats))
        train_documents = train_documents.shuffle(
            int(train_documents.cardinality()), seed=args.seed, reshuffle_each_iteration=True
        )
    vocabulary = data.learn_wordpiece_vocabulary(
        vocabulary_documents, args.vocabulary_size,
        output_path=os.path.join(args.output, "vocab.txt"),
    )
    tokenizer = data.WordPieceTokenizer(vocabulary)

    def batches(documents, seed, repeat):
        return data.bert_pretraining_dataset(
            documents.repeat() if repeat else documents, tokenizer, args.sequence_length,
            args.max_predictions, args.batch_size, masking_rate=args.masking_rate,
            whole_word_masking=args.whole_word_masking, seed=seed,
            shuffle_buffer=args.shuffle_buffer, next_sentence=args.next_sentence,
        ).map(models.pretraining_batch)

    train = batches(train_documents, args.seed, repeat=True)
    if args.cache_batches:
        train = train.take(args.cache_batches).cache().repeat()
    held_out = batches(datasets.load_documents("en_novels", "validation"), 1, repeat=False)
    held_out = held_out.take(args.eval_batches).cache()
    # How many batches the held-out pairs make is known only by building them:
    # count them once (this fills the cache), so that Keras knows the
    # validation steps instead of warning that its input ran out of data.
    count = held_out.reduce(np.int64(0), lambda count, _: count + 1)
    held_out = held_out.apply(tf.data.experimental.assert_cardinality(count))

    backbone = models.BertBackbone.from_architecture(
        args.architecture, vocabulary_size=len(vocabulary), max_sequence_length=args.sequence_length,
        dtype=args.dtype_policy, dropout=args.dropout,
    )
    if args.token_embeddings == "ppmi":
        started = time.perf_counter()
        sentences = [s for document in vocabulary_documents.as_numpy_iterator() for s in document]
        embeddings = data.learn_token_embeddings(
            tokenizer(tf.constant(sentences)), len(vocabulary), backbone.hidden_dim, seed=args.seed
        )
        backbone.token_embedding.embeddings.assign(embeddings)
        print(f"PPMI-SVD token embeddings from {len(sentences)} sentences "
              f"in {time.perf_counter() - started:.1f} s")
    pretrainer = models.BertPretrainer(backbone, next_sentence=args.next_sentence)
    schedule = training.LinearWarmupLinearDecay(
        args.learning_rate, int(args.warmup_fraction * args.steps), args.steps
    )
    pretrainer.compile(optimizer=training.bert_adamw(schedule))
    epochs = max(1, args.steps // args.steps_per_epoch)
    started = time.perf_counter()
    pretrainer.fit(
        train,
        steps_per_epoch=min(args.steps, args.steps_per_epoch),
        epochs=epochs,
        validation_data=held_out,
        shuffle=False,  # the pipeline shuffles (Keras 3.15 warns at its default True)
        callbacks=[
            keras.callbacks.TensorBoard(os.path.join(args.output, "logs")),
            training.AttentionImages(
                backbone, data.BertPreprocessor(tokenizer, args.sequence_length),
                ("It is a truth universally acknowledged.", "The whale swam on."),
                os.path.join(args.output, "logs"),
            ),
        ],
        verbose=2,
    )
    train_seconds = time.perf_counter() - started  # includes the per-epoch held-out evaluation

    scores = pretrainer.evaluate(held_out, return_dict=True, verbose=0)
    train_labels = np.concatenate([y["mlm"][w["mlm"] == 1] for _, y, w in train.take(50).as_numpy_iterator()])
    most_frequent = np.bincount(train_labels).argmax()
    held_labels = np.concatenate([y["mlm"][w["mlm"] == 1] for _, y, w in held_out.as_numpy_iterator()])
    result = {
        "mlm_accuracy": scores["mlm_accuracy"],
        "mlm_most_frequent_baseline": float(np.mean(held_labels == most_frequent)),
        "most_frequent_token": vocabulary[most_frequent],
    }
    if args.next_sentence:
        nsp_labels = np.concatenate([y["nsp"] for _, y, _ in held_out.as_numpy_iterator()])
        result["nsp_accuracy"] = scores["nsp_accuracy"]
        result["nsp_majority_baseline"] = float(max(nsp_labels.mean(), 1 - nsp_labels.mean()))
    result.update({
        "steps": epochs * min(args.steps, args.steps_per_epoch),
        "architecture": args.architecture,
        "dtype_policy": args.dtype_policy,
        "next_sentence": args.next_sentence,
        "dropout": args.dropout,
        "masking_rate": args.masking_rate,
        "whole_word_masking": args.whole_word_masking,
        "token_embeddings": args.token_embeddings,
        "domain_texts": args.domain_texts,
        "review_texts": args.review_texts,
        "domain_repeats": args.domain_repeats,
        "train_seconds": round(train_seconds, 1),
    })
    backbone.save(os.path.join(args.output, "backbone.keras"))
    with open(os.path.join(args.output, "pretraining_results.json"), "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps(result, indent=2))
    print(f"backbone and vocab.txt in {args.output}; TensorBoard: tensorboard --logdir {args.output}/logs")
    return result


if __name__ == "__main__":
    main()
