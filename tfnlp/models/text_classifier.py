"""What tfnlp's text classifiers share: a preprocessor, class names, texts in and labels out."""

import keras
import numpy as np
import tensorflow as tf

from tfnlp import _checks
from tfnlp.data.bert_preprocessor import BertPreprocessor
from tfnlp.models.task import (
    DEFAULT_BATCH_SIZE,
    Task,
    TextArrays,
    is_pair,
    is_texts,
    preprocessing_object,
    string_tensor,
    text_rank,
)

_CHUNK = 1024  # texts preprocessed at once, for texts given in memory
# Texts given in memory become arrays of their token ids (3 int32 arrays of
# texts x sequence length: 400 MB at this many ids); beyond, a tf.data
# pipeline tokenizes them batch by batch.
_IN_MEMORY_IDS = 1 << 25


def classifier_size(num_classes, labels):
    """`(num_classes, labels)` checked and made consistent: either may be given, or both."""
    if labels is not None:
        if isinstance(labels, (str, bytes)) or not hasattr(labels, "__iter__"):
            raise ValueError(f"`labels` must be a list of class names, got {labels!r}.")
        labels = [str(label) for label in labels]
        if len(set(labels)) != len(labels):
            repeated = sorted({label for label in labels if labels.count(label) > 1})
            raise ValueError(f"`labels` must name each class once, got {repeated} more than once.")
        if num_classes is None:
            num_classes = len(labels)
    if num_classes is None:
        raise ValueError("`num_classes` is required (or give `labels`, the class names).")
    num_classes = _checks.positive_int("num_classes", num_classes)
    if labels is not None and len(labels) != num_classes:
        raise ValueError(f"`labels` has {len(labels)} names for `num_classes`={num_classes}.")
    return num_classes, labels


def checked_preprocessor(preprocessor, vocabulary_size, max_sequence_length=None):
    """`preprocessor` (a `BertPreprocessor`, its config, or None) that fits the model's tables."""
    preprocessor = preprocessing_object("preprocessor", preprocessor, TextClassifier.preprocessor_cls)
    if preprocessor is None:
        return None
    tokens = preprocessor.tokenizer.vocabulary_size()
    if tokens > vocabulary_size:
        raise ValueError(
            f"`preprocessor`'s tokenizer has {tokens} tokens but the model's vocabulary has only "
            f"{vocabulary_size} (`vocabulary_size`)."
        )
    if max_sequence_length is not None and preprocessor.sequence_length > max_sequence_length:
        raise ValueError(
            f"`preprocessor`'s `sequence_length` ({preprocessor.sequence_length}) exceeds the "
            f"model's position table (`max_sequence_length`={max_sequence_length})."
        )
    return preprocessor


class TextClassifier(Task):
    """A classifier that may carry its `BertPreprocessor` and class names.

    With a `preprocessor`, `fit`, `evaluate` and `predict` take texts: a
    list (or NumPy array, or `tf.string` tensor) of texts, a tuple
    `(texts_a, texts_b)` of text pairs, or a `tf.data.Dataset` of texts (of
    single examples, batched by `batch_size`, or of batches). Labels are
    class ids or, with `labels`, class names. `predict` returns the model's
    outputs `(N, num_classes)` (logits, or probabilities for a model with
    `activation="softmax"`); `predict_labels` the class names. A dataset
    given to `predict` holds texts, text pairs `(a, b)`, or `(text, class
    id)` examples (the ids are ignored); two strings are always a pair, so
    map a dataset of `(text, label name)` to its texts first. The
    token-id dicts of the model's inputs work as before, with or without a
    preprocessor. Subclasses set `preprocessor`, `labels` and `num_classes`
    (see `classifier_size`, `checked_preprocessor`).
    """

    preprocessor_cls = BertPreprocessor

    def _compile_defaults(self):
        return {
            "optimizer": self._default_optimizer(),
            "loss": keras.losses.SparseCategoricalCrossentropy(
                from_logits=getattr(self, "activation", None) is None
            ),
            "metrics": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        }

    def _text_config(self):
        return {
            "preprocessor": (
                None if self.preprocessor is None
                else keras.saving.serialize_keras_object(self.preprocessor)
            ),
            "labels": self.labels,
        }

    def predict_labels(self, x, batch_size=None, verbose=0):
        """The most probable class of each text: its name (with `labels`), else its id.

        Args:
            x: texts (as for `predict`) or model inputs.
            batch_size: int, texts per batch (default 32).
            verbose: as for `predict` (default 0, silent).

        Returns:
            A list of class names (str), or a NumPy array of class ids.
        """
        ids = np.argmax(self.predict(x, batch_size=batch_size, verbose=verbose), axis=-1)
        return ids if self.labels is None else [self.labels[i] for i in ids]

    # --- Texts to model inputs ---

    def _text_inputs(self, x, y, batch_size, shuffle, mode):
        if isinstance(x, tf.data.Dataset):
            with_labels = mode != "predict" or _has_labels(x)
            return self._from_dataset(x, batch_size, with_labels)
        if not is_texts(x):
            return None
        texts = tuple(string_tensor(part, f"x[{i}]") for i, part in enumerate(x)) if is_pair(x) \
            else string_tensor(x, "x")
        self._check_text_inputs(texts)
        count = int(texts[0].shape[0] if isinstance(texts, tuple) else texts.shape[0])
        if isinstance(texts, tuple) and int(texts[1].shape[0]) != count:
            raise ValueError(
                f"`x` must hold two batches of the same number of texts, got {count} and "
                f"{int(texts[1].shape[0])}."
            )
        if y is None and mode != "predict":
            raise ValueError(f"`y` (the labels) is required to {mode} on texts.")
        labels = None if y is None else self._label_ids(y, count)
        if count * self.preprocessor.sequence_length <= _IN_MEMORY_IDS:
            return TextArrays(self._preprocessed_in_memory(texts, count), labels)
        # Too many for their ids to be held at once: tokenized batch by batch.
        dataset = tf.data.Dataset.from_tensor_slices(texts if labels is None else (texts, labels))
        if shuffle and mode == "fit":
            dataset = dataset.shuffle(count, reshuffle_each_iteration=True)
        return self._preprocessed(dataset.batch(batch_size or DEFAULT_BATCH_SIZE), labels is not None)

    def _preprocessed_in_memory(self, texts, count):
        """The preprocessor's outputs for `count` texts (or pairs) as NumPy arrays,
        computed eagerly `_CHUNK` texts at a time (to bound the tokenizer's
        intermediate tensors)."""
        chunks = []
        for start in range(0, max(count, 1), _CHUNK):
            part = (tuple(t[start:start + _CHUNK] for t in texts) if isinstance(texts, tuple)
                    else texts[start:start + _CHUNK])
            chunks.append({k: v.numpy() for k, v in self.preprocessor(part).items()})
        return {k: np.concatenate([c[k] for c in chunks]) for k in chunks[0]}

    def _from_dataset(self, dataset, batch_size, with_labels):
        spec = dataset.element_spec
        features = spec[0] if with_labels and isinstance(spec, tuple) and len(spec) == 2 else spec
        parts = features if isinstance(features, tuple) else (features,)
        if not all(isinstance(p, tf.TensorSpec) and p.dtype == tf.string for p in parts) or len(parts) > 2:
            return None  # model inputs (or something Keras will name)
        self._check_text_inputs(tuple(parts) if len(parts) == 2 else None)
        if text_rank(parts, features) == 0:  # single examples
            dataset = dataset.batch(batch_size or DEFAULT_BATCH_SIZE)
        if with_labels:
            label_spec = spec[1]
            if label_spec.dtype == tf.string:
                dataset = dataset.map(self._label_lookup(), num_parallel_calls=tf.data.AUTOTUNE)
            elif not label_spec.dtype.is_integer:
                raise TypeError(
                    "The dataset's labels must be class ids (integers) or class names (strings), "
                    f"got dtype {label_spec.dtype.name}."
                )
        return self._preprocessed(dataset, with_labels)

    def _preprocessed(self, dataset, with_labels):
        preprocessor, num_classes = self.preprocessor, self.num_classes

        @tf.autograph.experimental.do_not_convert
        def inputs(*texts):  # a pair arrives as two arguments
            return preprocessor(texts[0] if isinstance(texts[0], tuple) else texts)

        @tf.autograph.experimental.do_not_convert
        def labelled(texts, labels):
            labels = tf.cast(labels, tf.int32)
            check = tf.debugging.assert_less(
                tf.cast(tf.reduce_max(tf.concat([labels, [0]], 0)), tf.int64),
                tf.constant(num_classes, tf.int64),
                message=f"class ids must be in [0, num_classes={num_classes})",
            )
            with tf.control_dependencies([check, tf.debugging.assert_non_negative(
                labels, message="class ids must be in [0, num_classes)"
            )]):
                return inputs(texts), tf.identity(labels)

        return dataset.map(labelled if with_labels else inputs,
                           num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)

    def _check_text_inputs(self, texts):
        if self.preprocessor is None:
            raise ValueError(
                f"This {type(self).__name__} has no `preprocessor`, so it takes token ids, not "
                "texts: build it with `preprocessor=tfnlp.data.BertPreprocessor(...)`, or pass "
                "the preprocessor's output."
            )
        if isinstance(texts, tuple) and self.preprocessor is not None and not self._takes_pairs():
            raise ValueError(
                f"This {type(self).__name__} has one segment: it cannot read text pairs (`predict` "
                "reads a dataset of two strings as text pairs: map a dataset of (text, label "
                "name) to its texts first)."
            )

    def _takes_pairs(self):
        return getattr(self, "num_segments", 2) >= 2 and getattr(
            getattr(self, "backbone", None), "num_segments", 2
        ) >= 2

    def _label_ids(self, y, count):
        """Class ids (int32) of `y`: class names (with `labels`) or ids, checked."""
        values = y.numpy() if tf.is_tensor(y) else np.asarray(y)
        if values.ndim != 1 or values.shape[0] != count:
            raise ValueError(f"`y` must hold one label per text ({count}), got shape {values.shape}.")
        if values.dtype.kind in ("U", "S", "O"):
            if self.labels is None:
                raise ValueError(
                    f"`y` holds class names (e.g. {_text(values[0])!r}) but this "
                    f"{type(self).__name__} has no `labels`: give `labels=[...]` or class ids."
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
                f"`y` holds class ids outside [0, num_classes={self.num_classes}): {sorted(set(bad.tolist()))[:5]}."
            )
        return values.astype(np.int32)

    def _label_lookup(self):
        if self.labels is None:
            raise ValueError(
                f"The dataset's labels are strings but this {type(self).__name__} has no "
                "`labels` (class names) to map them to ids."
            )
        table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(self.labels), tf.range(len(self.labels), dtype=tf.int64)
            ),
            default_value=-1,
        )

        @tf.autograph.experimental.do_not_convert
        def lookup(texts, labels):
            ids = table.lookup(labels)
            check = tf.debugging.assert_non_negative(
                ids, message=f"a label is not one of this classifier's `labels` {self.labels}"
            )
            with tf.control_dependencies([check]):
                return texts, tf.cast(ids, tf.int32)

        return lookup


def _text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _has_labels(dataset):
    """For `predict`: a dataset of `(texts, class ids)` (the ids are ignored), not text pairs."""
    spec = dataset.element_spec
    return (isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[1], tf.TensorSpec)
            and spec[1].dtype != tf.string)
