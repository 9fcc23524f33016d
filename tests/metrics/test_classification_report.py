import json

import numpy as np
import pytest

from tfnlp import metrics
from tfnlp.metrics import classification_report

NAMES = ["neg", "neutral", "pos", "unused"]


def test_a_hand_computed_case():
    labels = [0, 0, 0, 1, 1, 2, 2, 2]
    predictions = [0, 0, 1, 1, 2, 2, 2, 0]
    report = classification_report(labels, predictions, NAMES)
    # Confusion (true rows, predicted columns): neg 2/1/0, neutral 0/1/1, pos 1/0/2.
    assert report["confusion_matrix"] == {
        "labels": NAMES,
        "rows": [[2, 1, 0, 0], [0, 1, 1, 0], [1, 0, 2, 0], [0, 0, 0, 0]],
    }
    assert report["examples"] == 8
    assert report["accuracy"] == 5 / 8
    assert report["per_class"]["neg"] == {"precision": 2 / 3, "recall": 2 / 3, "f1": 2 / 3, "support": 3}
    assert report["per_class"]["neutral"] == {"precision": 0.5, "recall": 0.5, "f1": 0.5, "support": 2}
    assert report["per_class"]["pos"] == {"precision": 2 / 3, "recall": 2 / 3, "f1": 2 / 3, "support": 3}
    # A class with no true and no predicted example scores 0 and counts in the macro mean.
    assert report["per_class"]["unused"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 0}
    assert report["macro_f1"] == pytest.approx((2 / 3 + 0.5 + 2 / 3 + 0) / 4)
    assert list(report["per_class"]) == NAMES


def test_never_predicted_and_never_true_classes_score_zero():
    report = classification_report([0, 0, 1], [0, 0, 0], ["a", "b"])
    assert report["per_class"]["b"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}
    assert report["per_class"]["a"]["precision"] == pytest.approx(2 / 3)
    assert report["per_class"]["a"]["recall"] == 1.0
    perfect = classification_report([1, 1], [1, 1], ["a", "b"])
    assert perfect["accuracy"] == 1.0 and perfect["macro_f1"] == 0.5  # "a" absent: F1 0


def test_the_report_is_json_serialisable_with_plain_types():
    labels = np.array([0, 1, 2, 1], np.int64)
    predictions = np.array([0, 2, 2, 1], np.int32)
    report = classification_report(labels, predictions, ["a", "b", "c"])
    assert json.loads(json.dumps(report)) == report
    assert type(report["examples"]) is int and type(report["accuracy"]) is float
    assert all(type(c) is int for row in report["confusion_matrix"]["rows"] for c in row)


def test_accepts_tensors():
    tf = pytest.importorskip("tensorflow")
    report = classification_report(tf.constant([0, 1]), tf.argmax([[0.9, 0.1], [0.2, 0.8]], -1), ["a", "b"])
    assert report["accuracy"] == 1.0


@pytest.mark.parametrize("seed", range(5))
def test_agrees_with_scikit_learn(seed):
    sk = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(seed)
    classes = int(rng.integers(2, 8))
    size = int(rng.integers(1, 200))
    labels = rng.integers(0, classes, size)
    # Mostly right, some classes possibly never predicted or never true.
    predictions = np.where(rng.random(size) < 0.6, labels, rng.integers(0, max(1, classes - 1), size))
    names = [f"class {i}" for i in range(classes)]
    report = classification_report(labels, predictions, names)
    ids = list(range(classes))
    precision, recall, f1, support = sk.precision_recall_fscore_support(
        labels, predictions, labels=ids, zero_division=0
    )
    for i, name in enumerate(names):
        scores = report["per_class"][name]
        assert scores["precision"] == pytest.approx(precision[i])
        assert scores["recall"] == pytest.approx(recall[i])
        assert scores["f1"] == pytest.approx(f1[i])
        assert scores["support"] == support[i]
    assert report["macro_f1"] == pytest.approx(
        sk.f1_score(labels, predictions, labels=ids, average="macro", zero_division=0)
    )
    assert report["accuracy"] == pytest.approx(sk.accuracy_score(labels, predictions))
    assert report["confusion_matrix"]["rows"] == sk.confusion_matrix(labels, predictions, labels=ids).tolist()


@pytest.mark.parametrize(
    "labels,predictions,names,error,pattern",
    [
        ([0, 1], [0], ["a", "b"], ValueError,
         r"`labels` and `predictions` must have the same length, got 2 and 1"),
        ([], [], ["a", "b"], ValueError, r"`labels` and `predictions` are empty"),
        ([0, 2], [0, 1], ["a", "b"], ValueError,
         r"`labels` must be in \[0, 2\) \(the ids of `label_names`\), got 2 at index 1"),
        ([0, 1], [-1, 1], ["a", "b"], ValueError, r"`predictions` must be in \[0, 2\).*got -1 at index 0"),
        ([0, 1], [[0.9, 0.1], [0.2, 0.8]], ["a", "b"], ValueError,
         r"`predictions` must be 1-D class ids, got shape \(2, 2\) \(class scores\? take their argmax"),
        ([0, 1], [0.0, 1.0], ["a", "b"], ValueError, r"`predictions` must hold integer class ids, got dtype float64"),
        ([0, 1], [0, 1], "ab", TypeError, r"`label_names` must be a list of str"),
        ([0, 1], [0, 1], [], ValueError, r"`label_names` must not be empty"),
        ([0, 1], [0, 1], ["a", 1], TypeError, r"`label_names` must hold strings, got 1"),
        ([0, 1], [0, 1], ["a", "a"], ValueError, r"`label_names` has duplicated names: \['a'\]"),
    ],
)
def test_bad_arguments_are_named(labels, predictions, names, error, pattern):
    with pytest.raises(error, match=pattern):
        classification_report(labels, predictions, names)


def test_reexported_from_tfnlp_metrics():
    assert metrics.classification_report is classification_report
    assert "classification_report" in metrics.__all__
