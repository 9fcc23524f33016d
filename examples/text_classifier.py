"""Train a Transformer text classifier from scratch on the bundled fine-food reviews.

Learns a WordPiece vocabulary from the training reviews, trains a
`TransformerClassifier` (keeping the weights of the best validation epoch),
and reports held-out test accuracy and macro-F1 next to TF-IDF + logistic
regression run in the same script and to the majority class. Writes
TensorBoard logs (curves, test figures and the confusion matrix image), a
confusion matrix PNG and `results.json` to `--logs`; `--export` also writes
a SavedModel that takes raw text. scikit-learn and matplotlib are
example-only dependencies (`pip install -e .[examples]`).

    python examples/text_classifier.py --logs runs/text_classifier \
        --export saved_models/text_classifier
"""

import argparse
import io
import json
import os
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# tfnlp first: before TensorFlow is imported it picks the CPU settings read
# then (oneDNN on x86-64 Linux, tfnlp/_cpu_defaults.py).
from tfnlp import data, datasets, export, models, training  # noqa: E402

# isort: split
import keras  # noqa: E402
import matplotlib  # noqa: E402

matplotlib.use("Agg")  # files only, no display

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from sklearn.feature_extraction.text import TfidfVectorizer  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.metrics import accuracy_score, confusion_matrix, f1_score  # noqa: E402

LABELS = list(datasets.FINE_FOOD_LABELS)


def scores(labels, predictions):
    return {
        "accuracy": float(accuracy_score(labels, predictions)),
        "macro_f1": float(f1_score(labels, predictions, average="macro")),
    }


def tfidf_predictions(train, test):
    """Test predictions of TF-IDF (words and bigrams) + logistic regression."""
    vectorizer = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)
    features = vectorizer.fit_transform([t for t, _ in train])
    model = LogisticRegression(max_iter=2000, C=4.0).fit(features, [y for _, y in train])
    return model.predict(vectorizer.transform([t for t, _ in test]))


def confusion_figure(matrix, path):
    """Draws `matrix` (rows: true class, columns: predicted) to `path`; returns the PNG bytes."""
    figure, axes = plt.subplots(figsize=(4, 3.5), dpi=100)
    axes.imshow(matrix, cmap="Blues")
    for (row, column), count in np.ndenumerate(matrix):
        color = "white" if count > matrix.max() / 2 else "black"
        axes.text(column, row, str(count), ha="center", va="center", color=color)
    axes.set(xticks=range(len(LABELS)), yticks=range(len(LABELS)), xticklabels=LABELS,
             yticklabels=LABELS, xlabel="predicted", ylabel="true", title="test reviews")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    with open(path, "wb") as f:
        f.write(buffer.getvalue())
    return buffer.getvalue()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vocabulary-size", type=int, default=4000)
    parser.add_argument("--sequence-length", type=int, default=256)
    parser.add_argument("--bucket-boundaries", default="32,64,128",
                        help="comma-separated; batches are padded to their bucket only")
    parser.add_argument("--num-layers", type=int, default=2)
    parser.add_argument("--num-heads", type=int, default=4)
    parser.add_argument("--hidden-dim", type=int, default=64)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--pooling", default="mean", choices=["mean", "first"])
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--max-train-examples", type=int, default=None,
                        help="use only the first N training reviews (quick runs)")
    parser.add_argument("--logs", default="runs/text_classifier",
                        help="TensorBoard logs, results.json and confusion_matrix.png")
    parser.add_argument("--export", default=None, help="also write a SavedModel here")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    start = time.time()
    keras.utils.set_random_seed(args.seed)
    os.makedirs(args.logs, exist_ok=True)

    train = datasets.read_fine_food_reviews("train")[: args.max_train_examples]
    test = datasets.read_fine_food_reviews("test")
    test_labels = np.array([y for _, y in test])

    vocabulary = data.learn_wordpiece_vocabulary(
        [t for t, _ in train], args.vocabulary_size, progress=False
    )
    preprocessor = data.BertPreprocessor(data.WordPieceTokenizer(vocabulary), args.sequence_length)
    texts, labels = zip(*train, strict=True)
    train_batches = data.classification_dataset(
        tf.data.Dataset.from_tensor_slices((list(texts), list(labels))), preprocessor,
        args.batch_size, shuffle_buffer=len(train), seed=args.seed,
        bucket_boundaries=[int(b) for b in args.bucket_boundaries.split(",") if b] or None,
    )

    def batches(split):  # in order and unbucketed, so predictions line up with the labels
        return data.classification_dataset(
            datasets.load_fine_food_reviews(split), preprocessor, args.batch_size,
            drop_remainder=False,
        )

    classifier = models.TransformerClassifier(
        len(vocabulary), len(LABELS), num_layers=args.num_layers, num_heads=args.num_heads,
        hidden_dim=args.hidden_dim, dropout=args.dropout, pooling=args.pooling,
    )
    classifier.compile(optimizer=training.bert_adamw(args.learning_rate))
    callbacks = [
        keras.callbacks.TensorBoard(args.logs),
        keras.callbacks.EarlyStopping("val_loss", patience=2, restore_best_weights=True),
    ]
    history = classifier.fit(train_batches, validation_data=batches("validation"),
                             epochs=args.epochs, callbacks=callbacks, verbose=2, shuffle=False)

    predictions = classifier.predict(batches("test"), verbose=0).argmax(-1)
    majority_class = int(np.mean(labels) >= 0.5)  # the most frequent training label
    result = {
        "transformer": scores(test_labels, predictions),
        "tfidf_logistic_regression": scores(test_labels, tfidf_predictions(train, test)),
        "majority_class": scores(test_labels, np.full_like(test_labels, majority_class)),
        "epochs_trained": len(history.history["loss"]),
        "train_examples": len(train),
        "vocabulary_size": len(vocabulary),
        "parameters": classifier.count_params(),
    }

    matrix = confusion_matrix(test_labels, predictions, labels=range(len(LABELS)))
    result["confusion_matrix"] = matrix.tolist()
    png = confusion_figure(matrix, os.path.join(args.logs, "confusion_matrix.png"))
    with tf.summary.create_file_writer(os.path.join(args.logs, "test")).as_default():
        tf.summary.image("confusion_matrix", tf.image.decode_png(png)[None], step=0)
        for name, value in result["transformer"].items():
            tf.summary.scalar(f"test_{name}", value, step=0)

    if args.export:
        result["saved_model"] = export.export_classifier(
            classifier, args.export, preprocessor=preprocessor, labels=LABELS
        )
    result["seconds"] = round(time.time() - start, 1)
    with open(os.path.join(args.logs, "results.json"), "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
