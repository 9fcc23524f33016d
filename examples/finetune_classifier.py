"""Fine-tune a pretrained BERT on the bundled fine-food reviews, then export it.

Loads `backbone.keras` and `vocab.txt` written by `examples/pretrain_bert.py`,
fine-tunes a `BertClassifier`, and reports test accuracy next to two
baselines computed in the same run: TF-IDF + logistic regression
(scikit-learn, an example-only dependency) and the same classifier trained
from scratch (random weights), which shows whether pretraining helped.
Exports the fine-tuned classifier as a SavedModel that takes raw text.

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


def train_classifier(backbone, preprocessor, args, seed, run_name):
    keras.utils.set_random_seed(seed)
    def split(name):  # texts and label names: the classifier tokenizes them itself
        examples = datasets.read_fine_food_reviews(name)
        return [t for t, _ in examples], [datasets.FINE_FOOD_LABELS[y] for _, y in examples]

    texts, labels = split("train")
    steps = args.epochs * math.ceil(len(texts) / args.batch_size)
    classifier = models.BertClassifier(
        backbone, preprocessor=preprocessor, labels=list(datasets.FINE_FOOD_LABELS)
    )
    classifier.compile(
        optimizer=training.bert_adamw(training.LinearWarmupLinearDecay(args.learning_rate, steps // 10, steps))
    )
    callbacks = [keras.callbacks.TensorBoard(os.path.join(args.logs, run_name))]
    classifier.fit(texts, labels, batch_size=args.batch_size, validation_data=split("validation"),
                   epochs=args.epochs, verbose=2, callbacks=callbacks)
    test = split("test")
    return classifier, classifier.evaluate(*test, batch_size=args.batch_size, return_dict=True,
                                           verbose=0)["accuracy"]


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
    parser.add_argument("--export", default="saved_models/reviews")
    parser.add_argument("--logs", default="runs/finetune", help="TensorBoard logs")
    parser.add_argument("--skip-scratch", action="store_true", help="skip the from-scratch run")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    vocabulary = data.load_vocabulary(os.path.join(args.pretrained, "vocab.txt"))
    preprocessor = data.BertPreprocessor(data.WordPieceTokenizer(vocabulary), args.sequence_length)
    pretrained = keras.saving.load_model(os.path.join(args.pretrained, "backbone.keras"), safe_mode=True)
    classifier, accuracy = train_classifier(pretrained, preprocessor, args, args.seed, "pretrained")

    result = {"pretrained_test_accuracy": accuracy}
    if not args.skip_scratch:
        scratch = models.BertBackbone.from_config(pretrained.get_config())
        result["scratch_test_accuracy"] = train_classifier(
            scratch, preprocessor, args, args.seed, "from_scratch"
        )[1]
    test_labels = np.array([y for _, y in datasets.read_fine_food_reviews("test")])
    result["majority_baseline"] = float(max(test_labels.mean(), 1 - test_labels.mean()))
    result["tfidf_logistic_regression"] = tfidf_baseline(
        datasets.read_fine_food_reviews("train"), datasets.read_fine_food_reviews("test")
    )
    path = export.export_classifier(classifier, args.export)  # its own preprocessor and labels
    result["saved_model"] = path
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
