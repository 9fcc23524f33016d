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

`--pooling mean` feeds the classifier the mean of the backbone's output
over the tokens instead of BERT's pooled `[CLS]` output: for a backbone
pretrained without next-sentence prediction (as `make demo`'s), whose
`[CLS]` output and pooler no objective trained.

`--learning-curve 100 300 1000` repeats the comparison on fixed random
subsets of the training reviews of those sizes and on all of them (each
subset holds the smaller ones; `--train-examples` caps the largest), and plots test accuracy against the number
of labelled examples (`--plot`, a PNG; the figures go to
`learning_curve.json` beside it). A run trains for at least `--min-steps`
optimizer steps: more epochs on fewer examples.

`--head-steps N` trains the pretrained run's new classification head alone
on the frozen backbone for at least N steps before fine-tuning everything
(LP-FT); the run from scratch fine-tunes everything from the start.

    python examples/finetune_classifier.py --learning-curve 100 300 1000 --seeds 3 \
        --min-steps 200 --export "" --plot docs/learning_curve.png
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
    if len({y for _, y in train}) < 2:
        return None  # one class only: nothing to fit
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


def steps_per_epoch(examples, args):
    return math.ceil(examples / args.batch_size)


def epochs_for(examples, args, steps):
    """Epochs of `examples` that take at least `steps` optimizer steps (at least 1)."""
    return max(1, math.ceil(steps / steps_per_epoch(examples, args)))


def finetuning_epochs(examples, args):
    """`--epochs`, or more to reach `--min-steps` optimizer steps on few examples."""
    return max(args.epochs, epochs_for(examples, args, args.min_steps))


def fit_stage(classifier, learning_rate, epochs, args, splits, log_dir):
    """`epochs` of `fit` with a linear warm-up/decay schedule; keeps the best validation epoch."""
    texts, labels = splits["train"]
    steps = epochs * steps_per_epoch(len(texts), args)
    schedule = training.LinearWarmupLinearDecay(learning_rate, steps // 10, steps)
    classifier.compile(optimizer=training.bert_adamw(schedule))
    callbacks = [
        keras.callbacks.TensorBoard(log_dir),
        # The epoch with the best validation accuracy is kept (no early stop).
        keras.callbacks.EarlyStopping(
            "val_accuracy", mode="max", patience=epochs, restore_best_weights=True
        ),
    ]
    classifier.fit(texts, labels, batch_size=args.batch_size, validation_data=splits["validation"],
                   epochs=epochs, verbose=2 if epochs <= 10 else 0, callbacks=callbacks)


def train_head(classifier, args, splits, log_dir):
    """The new head alone, on the frozen backbone, for at least `--head-steps` steps (LP-FT).

    Fine-tuning then starts from a head that already reads the pretrained
    features, instead of pulling the backbone towards a random head's
    gradients (Kumar et al., 2022, "Fine-Tuning can Distort Pretrained
    Features"). The backbone's dropout stays on (Keras' `trainable=False`
    freezes weights, not dropout): the head reads features as fine-tuning
    will.
    """
    backbone = classifier.backbone
    trainable = backbone.trainable
    backbone.trainable = False
    try:
        epochs = epochs_for(len(splits["train"][0]), args, args.head_steps)
        fit_stage(classifier, args.head_learning_rate, epochs, args, splits, log_dir)
    finally:
        backbone.trainable = trainable


def train_classifier(backbone, preprocessor, args, splits, run_name, head_first=False):
    classifier = models.BertClassifier(
        backbone, preprocessor=preprocessor, labels=list(datasets.FINE_FOOD_LABELS),
        pooling=args.pooling,
    )
    log_dir = os.path.join(args.logs, run_name)
    if head_first and args.head_steps:
        train_head(classifier, args, splits, os.path.join(log_dir, "head"))
        log_dir = os.path.join(log_dir, "all")
    fit_stage(classifier, args.learning_rate, finetuning_epochs(len(splits["train"][0]), args),
              args, splits, log_dir)
    return classifier, classifier.evaluate(*splits["test"], batch_size=args.batch_size,
                                           return_dict=True, verbose=0)["accuracy"]


def compare(args, examples, preprocessor, log_prefix=""):
    """Both classifiers over the seeds on `examples`; their test accuracies and TF-IDF's."""
    backbone_path = os.path.join(args.pretrained, "backbone.keras")
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
            model, accuracy = train_classifier(backbone, preprocessor, args, splits,
                                               log_prefix + name, head_first=kind == "pretrained")
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
    result["epochs"] = finetuning_epochs(len(examples["train"]), args)
    result["pooling"] = args.pooling
    if args.head_steps:
        result["head_steps"] = args.head_steps
        result["head_learning_rate"] = args.head_learning_rate
    return result, classifier


def plot_learning_curve(points, path):
    """Test accuracy against labelled examples, one line per model (mean ± sd as error bars)."""
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    counts = [p["train_examples"] for p in points]
    figure, axes = plt.subplots(figsize=(6, 4), dpi=120)
    for key, label in (("pretrained", "BERT fine-tuned from pretraining"),
                       ("scratch", "same BERT from random weights")):
        if f"{key}_test_accuracy" not in points[0]:
            continue
        means = [100 * p[f"{key}_test_accuracy"] for p in points]
        sds = [100 * p.get(f"{key}_test_accuracy_sd", 0.0) for p in points]
        axes.errorbar(counts, means, yerr=sds, marker="o", capsize=3, label=label)
    if points[0]["tfidf_logistic_regression"] is not None:
        axes.plot(counts, [100 * p["tfidf_logistic_regression"] for p in points], marker="s",
                  linestyle="--", label="TF-IDF + logistic regression")
    axes.axhline(100 * points[0]["majority_baseline"], color="grey", linestyle=":",
                 label="majority class")
    axes.set_xscale("log")
    axes.set_xticks(counts, [str(c) for c in counts])
    axes.set_xlabel("labelled training reviews")
    axes.set_ylabel("test accuracy (%)")
    axes.set_title("Fine-food reviews, 1,000 test reviews")
    axes.legend(fontsize=8)
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pretrained", default="runs/bert_pretrain")
    parser.add_argument("--sequence-length", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--min-steps", type=int, default=0,
                        help="train each run for at least this many steps (more epochs)")
    parser.add_argument(
        "--learning-rate", type=float, default=3e-4,
        help="peak of the linear warm-up/decay schedule (1e-4 under-trains bert_tiny here)",
    )
    parser.add_argument("--dropout", type=float, default=0.1, help="the backbone's, in fine-tuning")
    parser.add_argument(
        "--pooling", default="cls", choices=["cls", "mean"],
        help="the classifier's input: BERT's pooled [CLS] output, or the mean output over the "
        "tokens (for a backbone pretrained without next-sentence prediction)",
    )
    parser.add_argument(
        "--dtype-policy", default="float32", choices=["float32", "mixed_bfloat16", "mixed_float16"]
    )
    parser.add_argument(
        "--head-steps", type=int, default=0,
        help="first train the pretrained run's new head alone, on the frozen backbone, for at "
        "least this many steps, then fine-tune everything (LP-FT); 0: fine-tune all from the start",
    )
    parser.add_argument(
        "--head-learning-rate", type=float, default=3e-3,
        help="peak of the head-only steps' linear warm-up/decay schedule (with --head-steps)",
    )
    parser.add_argument("--export", default="saved_models/reviews", help='"" to export nothing')
    parser.add_argument("--logs", default="runs/finetune", help="TensorBoard logs")
    parser.add_argument("--skip-scratch", action="store_true", help="skip the from-scratch run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=1, help="runs of each classifier (mean, sd)")
    parser.add_argument("--train-examples", type=int, default=None,
                        help="fine-tune on this many training reviews (a fixed random subset)")
    parser.add_argument("--learning-curve", type=int, nargs="+", metavar="N",
                        help="also fine-tune on subsets of these sizes; plot accuracy against size")
    parser.add_argument("--plot", default="learning_curve.png", help="the learning curve's PNG")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error(f"--seeds must be at least 1, got {args.seeds}")
    if args.train_examples is not None and args.train_examples < 1:
        parser.error(f"--train-examples must be at least 1, got {args.train_examples}")
    if args.min_steps < 0:
        parser.error(f"--min-steps must be at least 0, got {args.min_steps}")
    if args.epochs < 1:
        parser.error(f"--epochs must be at least 1, got {args.epochs}")
    if args.head_steps < 0:
        parser.error(f"--head-steps must be at least 0, got {args.head_steps}")
    if args.head_learning_rate != parser.get_default("head_learning_rate") and not args.head_steps:
        parser.error("--head-learning-rate sets the head-only steps: give --head-steps too")
    if args.learning_curve and min(args.learning_curve) < 10:
        parser.error(f"--learning-curve sizes must be at least 10, got {args.learning_curve}")
    if args.plot != parser.get_default("plot") and not args.learning_curve:
        parser.error("--plot draws the learning curve: give --learning-curve too")

    vocabulary = data.load_vocabulary(os.path.join(args.pretrained, "vocab.txt"))
    preprocessor = data.BertPreprocessor(data.WordPieceTokenizer(vocabulary), args.sequence_length)
    held_out = {split: reviews(split) for split in ("validation", "test")}
    result, classifier = compare(
        args, {"train": reviews("train", args.train_examples), **held_out}, preprocessor
    )
    if args.learning_curve:
        points = []
        for count in sorted(set(args.learning_curve)):
            if count >= result["train_examples"]:
                print(f"--learning-curve {count}: the whole training set "
                      f"({result['train_examples']} reviews) is the last point already")
                continue
            point, _ = compare(args, {"train": reviews("train", count), **held_out}, preprocessor,
                               log_prefix=f"curve_{count}/")
            points.append(point)
            print(json.dumps(point), flush=True)
        points.append(dict(result))
        os.makedirs(os.path.dirname(os.path.abspath(args.plot)), exist_ok=True)
        plot_learning_curve(points, args.plot)
        figures = os.path.join(os.path.dirname(os.path.abspath(args.plot)), "learning_curve.json")
        with open(figures, "w") as f:
            json.dump({"pretrained": args.pretrained, "seeds": args.seeds, "min_steps": args.min_steps,
                       "pooling": args.pooling, "points": points}, f, indent=2)
        result["learning_curve"] = points
    if args.export:
        # The classifier takes its own preprocessor and label names along.
        result["saved_model"] = export.export_classifier(classifier, args.export)
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
