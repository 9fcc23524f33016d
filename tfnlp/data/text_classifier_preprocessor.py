"""Texts (or text pairs) and class labels to a text classifier's inputs and class ids."""

import keras
import numpy as np
import tensorflow as tf

from tfnlp import _checks
from tfnlp.data.bert_preprocessor import BertPreprocessor
from tfnlp.data.task_preprocessor import TaskPreprocessor, preprocessing_object, serialized


@keras.saving.register_keras_serializable(package="tfnlp")
class TextClassifierPreprocessor(TaskPreprocessor):
    """A `BertPreprocessor` and the class names: what a text classifier reads texts with.

    `BertClassifier` and `TransformerClassifier` build theirs from their
    `preprocessor`, `labels` and `num_classes`. Texts (or pairs) become the
    `BertPreprocessor`'s `token_ids`, `segment_ids` and `padding_mask`;
    labels are class ids or, with `labels`, class names, mapped to ids in
    the graph (a name that is not a class fails when the batch is read,
    `InvalidArgumentError`) or, for texts in memory, on the host
    (`checked_labels(y, count)`, a `ValueError` that names the unknown labels).
    Class ids outside `[0, num_classes)` fail likewise. Texts in memory are
    preprocessed once into arrays while their ids fit in memory
    (`in_memory`).

    Args:
        preprocessor: a `BertPreprocessor` (or its config), or None for a
            classifier that takes token ids only (texts are then refused by
            `check`).
        num_classes: int, the number of classes.
        labels: optional list of the class names (str), id order.
        pairs: bool, whether the classifier reads text pairs (two
            segments); a one-segment classifier refuses them.
        task_name: str, the classifier named in error messages.

    Call arguments:
        x: `tf.string` `(B,)` texts, or a tuple `(texts_a, texts_b)` of pairs.
        y: optional class ids `(B,)` (integers) or class names (`tf.string`,
            with `labels`).
        sample_weight: optional `(B,)` weights, passed through.

    Returns:
        `(inputs, y, sample_weight)`: the `BertPreprocessor`'s dict of int32
        `(B, sequence_length)` tensors, int32 class ids (or None) and the
        weights (or None).

    Example:

    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "food"]
    >>> bert = BertPreprocessor(tfnlp.data.WordPieceTokenizer(vocab), sequence_length=5)
    >>> preprocessor = TextClassifierPreprocessor(bert, 2, labels=["bad", "good"])
    >>> inputs, y, _ = preprocessor(tf.constant(["good food", "food"]), tf.constant(["good", "bad"]))
    >>> inputs["token_ids"].numpy().tolist(), y.numpy().tolist()
    ([[2, 5, 6, 3, 0], [2, 6, 3, 0, 0]], [1, 0])
    >>> preprocessor.checked_labels(["bad", "good", "good"], 3).tolist()
    [0, 1, 1]
    """

    default_task_name = "TextClassifier"
    label_name = "the labels"
    element_name = "(text, label)"
    reads_pairs = True

    def __init__(self, preprocessor, num_classes, labels=None, pairs=True, task_name=None):
        super().__init__(task_name=task_name)
        self.preprocessor = preprocessing_object("preprocessor", preprocessor, BertPreprocessor)
        self.num_classes = _checks.positive_int("num_classes", num_classes)
        self.labels = None if labels is None else [str(label) for label in labels]
        self.pairs = bool(pairs)
        self._label_table = None  # built when class names are first read (`_class_ids`)

    def call(self, x, y=None, sample_weight=None):
        self.check("predict", pairs=isinstance(x, tuple))
        inputs = self.preprocessor(x)
        return inputs, None if y is None else self._class_ids(y), sample_weight

    def _class_ids(self, y):
        """`y` (class ids or names) as int32 class ids, checked when the batch is read."""
        y = tf.convert_to_tensor(y)
        checks = []
        if y.dtype == tf.string:
            if self.labels is None:
                raise ValueError(
                    f"The dataset's labels are strings but this {self.task_name} has no "
                    "`labels` (class names) to map them to ids."
                )
            if self._label_table is None:
                # Only for class names: the models build a preprocessor on every
                # `fit`/`evaluate`/`predict`, and TensorFlow keeps each table to the
                # end of the process.
                with tf.init_scope():
                    self._label_table = tf.lookup.StaticHashTable(
                        tf.lookup.KeyValueTensorInitializer(
                            tf.constant(self.labels), tf.range(len(self.labels), dtype=tf.int64)
                        ),
                        default_value=-1,
                    )
            y = self._label_table.lookup(y)
            checks.append(tf.debugging.assert_non_negative(
                y, message=f"a label is not one of this classifier's `labels` {self.labels}"
            ))
        elif not y.dtype.is_integer:
            raise TypeError(
                "The dataset's labels must be class ids (integers) or class names (strings), "
                f"got dtype {y.dtype.name}."
            )
        with tf.control_dependencies(checks):
            y = tf.cast(y, tf.int32)
        checks = [
            tf.debugging.assert_less(
                tf.cast(tf.reduce_max(tf.concat([tf.reshape(y, [-1]), [0]], 0)), tf.int64),
                tf.constant(self.num_classes, tf.int64),
                message=f"class ids must be in [0, num_classes={self.num_classes})",
            ),
            tf.debugging.assert_non_negative(y, message="class ids must be in [0, num_classes)"),
        ]
        with tf.control_dependencies(checks):
            return tf.identity(y)

    # --- The text path's hooks ---

    def check(self, mode, pairs=False):
        if self.preprocessor is None:
            raise self._without("`preprocessor`", "`preprocessor=tfnlp.data.BertPreprocessor(...)`",
                                "the preprocessor's output")
        if pairs and not self.pairs:
            raise ValueError(
                f"This {self.task_name} has one segment: it cannot read text pairs (`predict` "
                "reads a dataset of two strings as text pairs: map a dataset of (text, label "
                "name) to its texts first)."
            )

    def checked_labels(self, y, count):
        """Class ids (int32) of `y`: class names (with `labels`) or ids, checked."""
        values = super().checked_labels(y, count)
        if values.dtype.kind in ("U", "S", "O"):
            if self.labels is None:
                raise ValueError(
                    f"`y` holds class names (e.g. {_text(values[0])!r}) but this "
                    f"{self.task_name} has no `labels`: give `labels=[...]` or class ids."
                )
            index = {name: i for i, name in enumerate(self.labels)}
            names = [_text(v) for v in values]
            unknown = sorted({n for n in names if n not in index})
            if unknown:
                raise ValueError(
                    f"`y` holds labels that are not among the model's `labels` {self.labels}: "
                    f"{unknown[:5]}."
                )
            return np.array([index[n] for n in names], np.int32)
        if values.dtype.kind not in ("i", "u") and values.dtype != bool:
            raise TypeError(f"`y` must hold class ids (integers) or class names, got {values.dtype}.")
        bad = values[(values < 0) | (values >= self.num_classes)]
        if bad.size:
            raise ValueError(
                f"`y` holds class ids outside [0, num_classes={self.num_classes}): "
                f"{sorted(set(bad.tolist()))[:5]}."
            )
        return values.astype(np.int32)

    def in_memory(self, count):
        # 3 int32 arrays of texts x sequence length: 400 MB at the default
        # `max_in_memory_ids`; beyond, a pipeline tokenizes batch by batch.
        return count * self.preprocessor.sequence_length <= self.max_in_memory_ids

    def get_config(self):
        config = super().get_config()
        config.update({
            "preprocessor": serialized(self.preprocessor),
            "num_classes": self.num_classes,
            "labels": None if self.labels is None else list(self.labels),
            "pairs": self.pairs,
        })
        return config


def _text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
