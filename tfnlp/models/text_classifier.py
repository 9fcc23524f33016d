"""What tfnlp's text classifiers share: a preprocessor, class names, texts in and labels out."""

import keras
import numpy as np

from tfnlp import _checks
from tfnlp.data.bert_preprocessor import BertPreprocessor
from tfnlp.data.task_preprocessor import preprocessing_object
from tfnlp.data.text_classifier_preprocessor import TextClassifierPreprocessor
from tfnlp.models.task import Task

# Texts given in memory: preprocessed this many at once, into arrays of their
# token ids while those hold at most this many ids (see
# `TextClassifierPreprocessor.in_memory`); set here (tests lower them).
_CHUNK = TextClassifierPreprocessor.chunk_size
_IN_MEMORY_IDS = TextClassifierPreprocessor.max_in_memory_ids


def classifier_size(num_classes, labels):
    """`(num_classes, labels)` checked and made consistent: either may be given, or both."""
    return _checks.count_and_names(num_classes, labels, "num_classes", "labels", "class")


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
    preprocessor. Texts are read by a `tfnlp.data.TextClassifierPreprocessor`
    built from `preprocessor`, `labels` and `num_classes`, which subclasses
    set (see `classifier_size`, `checked_preprocessor`).
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

    def _task_preprocessor(self):
        preprocessor = TextClassifierPreprocessor(
            self.preprocessor, self.num_classes, labels=self.labels, pairs=self._takes_pairs(),
            task_name=type(self).__name__,
        )
        preprocessor.chunk_size, preprocessor.max_in_memory_ids = _CHUNK, _IN_MEMORY_IDS
        return preprocessor

    def _takes_pairs(self):
        return getattr(self, "num_segments", 2) >= 2 and getattr(
            getattr(self, "backbone", None), "num_segments", 2
        ) >= 2
