"""Classification scores: accuracy, per-class precision/recall/F1, confusion matrix."""


import numpy as np

from tfnlp import _checks


def classification_report(labels, predictions, label_names):
    """Accuracy, macro F1, per-class scores and the confusion matrix, as a dict.

    Every class of `label_names` is scored, including classes that appear
    neither in `labels` nor in `predictions`, and all of them count in the
    macro F1 (an unweighted mean over `label_names`). A score whose
    denominator is 0 is 0, scikit-learn's `zero_division=0` convention:
    precision of a class never predicted, recall of a class with no true
    example, and F1 = 2 TP / (2 TP + FP + FN) when that is 0/0. So the
    numbers equal `sklearn.metrics.precision_recall_fscore_support(labels,
    predictions, labels=range(len(label_names)), zero_division=0)` and
    `f1_score(..., labels=range(len(label_names)), average="macro",
    zero_division=0)` (without `labels=`, scikit-learn averages only over
    the classes present in either array).

    Args:
        labels: 1-D integer array-like of true class ids, in
            `[0, len(label_names))`.
        predictions: 1-D integer array-like of predicted class ids, as long
            as `labels` (take the argmax of a model's scores first).
        label_names: list of distinct `str`, the name of each class id.

    Returns:
        A JSON-serialisable dict: `examples` (int), `accuracy` and
        `macro_f1` (floats), `per_class` (`{name: {"precision", "recall",
        "f1", "support"}}`, in `label_names` order; `support` is the number
        of true examples) and `confusion_matrix` (`{"labels": label_names,
        "rows": counts}`, row = true class, column = predicted class).

    Example:

    >>> report = classification_report([0, 0, 1, 1, 2], [0, 1, 1, 1, 0], ["a", "b", "c"])
    >>> report["accuracy"], round(report["macro_f1"], 4)
    (0.6, 0.4333)
    >>> report["per_class"]["b"]
    {'precision': 0.6666666666666666, 'recall': 1.0, 'f1': 0.8, 'support': 2}
    >>> report["confusion_matrix"]["rows"]
    [[1, 1, 0], [0, 2, 0], [1, 0, 0]]
    """
    label_names = _checked_names(label_names)
    classes = len(label_names)
    labels = _checked_ids("labels", labels, classes)
    predictions = _checked_ids("predictions", predictions, classes)
    if len(labels) != len(predictions):
        raise ValueError(
            f"`labels` and `predictions` must have the same length, got {len(labels)} and "
            f"{len(predictions)}."
        )
    if not len(labels):
        raise ValueError("`labels` and `predictions` are empty; there is nothing to score.")

    matrix = np.bincount(labels * classes + predictions, minlength=classes * classes)
    matrix = matrix.reshape(classes, classes)  # (true, predicted)
    true_positives = np.diag(matrix)
    support = matrix.sum(axis=1)
    predicted = matrix.sum(axis=0)
    precision = _ratio(true_positives, predicted)
    recall = _ratio(true_positives, support)
    f1 = _ratio(2 * true_positives, support + predicted)  # 2TP / (2TP + FP + FN)
    per_class = {
        name: {
            "precision": float(precision[i]),
            "recall": float(recall[i]),
            "f1": float(f1[i]),
            "support": int(support[i]),
        }
        for i, name in enumerate(label_names)
    }
    return {
        "examples": int(len(labels)),
        "accuracy": float(true_positives.sum() / len(labels)),
        "macro_f1": float(f1.mean()),
        "per_class": per_class,
        "confusion_matrix": {"labels": list(label_names), "rows": matrix.tolist()},
    }


def _ratio(numerator, denominator):
    numerator = numerator.astype(np.float64)
    return np.divide(numerator, denominator, out=np.zeros_like(numerator), where=denominator > 0)


def _checked_names(label_names):
    if isinstance(label_names, (str, bytes)) or not hasattr(label_names, "__iter__"):
        raise TypeError(f"`label_names` must be a list of str, got {type(label_names).__name__}.")
    label_names = list(label_names)
    if not label_names:
        raise ValueError("`label_names` must not be empty.")
    for name in label_names:
        if not isinstance(name, str):
            raise TypeError(f"`label_names` must hold strings, got {name!r}.")
    if len(set(label_names)) != len(label_names):
        duplicated = sorted({n for n in label_names if label_names.count(n) > 1})
        raise ValueError(f"`label_names` has duplicated names: {duplicated}.")
    return label_names


def _checked_ids(name, ids, classes):
    ids = np.asarray(ids)
    if ids.ndim != 1:
        hint = " (class scores? take their argmax over the last axis)" if ids.ndim == 2 else ""
        raise ValueError(f"`{name}` must be 1-D class ids, got shape {ids.shape}{hint}.")
    if ids.size and not np.issubdtype(ids.dtype, np.integer):
        if ids.dtype == object and all(
            _checks.is_int(i) for i in ids
        ):
            ids = ids.astype(np.int64)
        else:
            raise ValueError(f"`{name}` must hold integer class ids, got dtype {ids.dtype}.")
    ids = ids.astype(np.int64)
    if ids.size and (ids.min() < 0 or ids.max() >= classes):
        bad = ids[(ids < 0) | (ids >= classes)][0]
        position = int(np.flatnonzero(ids == bad)[0])
        raise ValueError(
            f"`{name}` must be in [0, {classes}) (the ids of `label_names`), got {int(bad)} at "
            f"index {position}."
        )
    return ids
