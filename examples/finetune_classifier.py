"""Fine-tune a pretrained BERT on the bundled fine-food reviews, then export it.

Loads `backbone.keras` and `vocab.txt` written by `examples/pretrain_bert.py`,
fine-tunes a `BertClassifier`, and reports test accuracy next to two
baselines computed in the same run: TF-IDF + logistic regression
(scikit-learn, an example-only dependency) and the same classifier trained
from scratch (random weights), which shows whether pretraining helped.
Each run keeps the weights of its epoch with the best validation accuracy;
with `--seeds N` both classifiers are trained N times (seeds `--seed` ...
`--seed + N - 1`) and the mean and standard deviation are reported.
Exports the fine-tuned classifier of the first seed as a SavedModel that
takes raw text.

    python examples/finetune_classifier.py --pretrained runs/bert_pretrain \
        --export saved_models/reviews
"""

import argparse
import json
import math
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# tfnlp first: before TensorFlow is imported it picks the CPU settings read
# then (oneDNN on x86-64 Linux, tfnlp/_cpu_defaults.py).
from tfnlp import data, datasets, export, models, training  # noqa: E402

# isort: split
import keras  # noqa: E402
import numpy as np  # noqa: E402


def tfidf_baseline(train, test):
    """Test accuracy of TF-IDF + logistic regression, or None without scikit-learn."""
    try:
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression
    except ImportError:
        return None
    vectorizer = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)
    features = vectorizer.fit_transform([t for t, _ in train])
    model = LogisticRegression(max_iter=2000, C=4.0).fit(features, [y for _, y in train])
    predictions = model.predict(vectorizer.transform([t for t, _ in test]))
    return float(np.mean(predictions == np.array([y for _, y in test])))


def reviews(split, train_examples=None):
    """`(text, label)` reviews of a split; of "train", a fixed random subset if asked."""
    examples = datasets.read_fine_food_reviews(split)
    if split == "train" and train_examples:  # the same subset in every run
        keep = np.random.default_rng(0).permutation(len(examples))[:train_examples]
        examples = [examples[i] for i in sorted(keep)]
    return examples


def texts_and_labels(examples):
    """`(text, label id)` pairs as texts and label names: the classifier tokenizes them itself."""
    return [t for t, _ in examples], [datasets.FINE_FOOD_LABELS[y] for _, y in examples]


def train_classifier(backbone, preprocessor, args, splits, run_name):
    texts, labels = splits["train"]
    steps = args.epochs * math.ceil(len(texts) / args.batch_size)
    classifier = models.BertClassifier(
        backbone, preprocessor=preprocessor, labels=list(datasets.FINE_FOOD_LABELS)
    )
    classifier.compile(
        optimizer=training.bert_adamw(training.LinearWarmupLinearDecay(args.learning_rate, steps // 10, steps))
    )
    callbacks = [
        keras.callbacks.TensorBoard(os.path.join(args.logs, run_name)),
        # The epoch with the best validation accuracy is kept (no early stop).
        keras.callbacks.EarlyStopping(
            "val_accuracy", mode="max", patience=args.epochs, restore_best_weights=True
        ),
    ]
    classifier.fit(texts, labels, batch_size=args.batch_size, validation_data=splits["validation"],
                   epochs=args.epochs, verbose=2, callbacks=callbacks)
    return classifier, classifier.evaluate(*splits["test"], batch_size=args.batch_size,
                                           return_dict=True, verbose=0)["accuracy"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pretrained", default="runs/bert_pretrain")
    parser.add_argument("--sequence-length", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument(
        "--learning-rate", type=float, default=3e-4,
        help="peak of the linear warm-up/decay schedule (1e-4 under-trains bert_tiny here)",
    )
    parser.add_argument("--dropout", type=float, default=0.1, help="the backbone's, in fine-tuning")
    parser.add_argument(
        "--dtype-policy", default="float32", choices=["float32", "mixed_bfloat16", "mixed_float16"]
    )
    parser.add_argument("--export", default="saved_models/reviews", help='"" to export nothing')
    parser.add_argument("--logs", default="runs/finetune", help="TensorBoard logs")
    parser.add_argument("--skip-scratch", action="store_true", help="skip the from-scratch run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=1, help="runs of each classifier (mean, sd)")
    parser.add_argument("--train-examples", type=int, default=None,
                        help="fine-tune on this many training reviews (a fixed random subset)")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error(f"--seeds must be at least 1, got {args.seeds}")
    if args.train_examples is not None and args.train_examples < 1:
        parser.error(f"--train-examples must be at least 1, got {args.train_examples}")

    vocabulary = data.load_vocabulary(os.path.join(args.pretrained, "vocab.txt"))
    preprocessor = data.BertPreprocessor(data.WordPieceTokenizer(vocabulary), args.sequence_length)
    backbone_path = os.path.join(args.pretrained, "backbone.keras")
    examples = {split: reviews(split, args.train_examples) for split in ("train", "validation", "test")}
    splits = {split: texts_and_labels(pairs) for split, pairs in examples.items()}
    seeds = range(args.seed, args.seed + args.seeds)
    result, classifier = {}, None
    for kind in ("pretrained",) if args.skip_scratch else ("pretrained", "scratch"):
        accuracies = []
        for seed in seeds:
            # Seeded before any layer is built: the scratch weights and the
            # dropout streams too. Fine-tuning changes the backbone, so each
            # run starts from the file, rebuilt with this run's dropout and
            # dtype policy (the saved ones are the pretraining's).
            keras.utils.set_random_seed(seed)
            saved = keras.saving.load_model(backbone_path, safe_mode=True)
            backbone = models.BertBackbone.from_config(
                dict(saved.get_config(), dropout=args.dropout, dtype=args.dtype_policy)
            )
            if kind == "pretrained":
                backbone.set_weights(saved.get_weights())
            name = "from_scratch" if kind == "scratch" else kind
            if args.seeds > 1:
                name = f"{kind}_seed{seed}"
            model, accuracy = train_classifier(backbone, preprocessor, args, splits, name)
            accuracies.append(accuracy)
            if classifier is None:
                classifier = model  # the first pretrained run is exported
        result[f"{kind}_test_accuracy"] = float(np.mean(accuracies))
        if args.seeds > 1:
            result[f"{kind}_test_accuracy_sd"] = float(np.std(accuracies, ddof=1))
            result[f"{kind}_test_accuracies"] = accuracies
    test_labels = np.array([y for _, y in examples["test"]])
    result["majority_baseline"] = float(max(test_labels.mean(), 1 - test_labels.mean()))
    result["tfidf_logistic_regression"] = tfidf_baseline(examples["train"], examples["test"])
    result["train_examples"] = len(examples["train"])
    if args.export:
        # The classifier takes its own preprocessor and label names along.
        result["saved_model"] = export.export_classifier(classifier, args.export)
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
