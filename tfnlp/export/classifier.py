"""Text classifier -> SavedModel that takes raw strings (TF Serving layout)."""

import os

import tensorflow as tf

from tfnlp.export._common import (
    WARMUP_BATCH_SIZES,
    batch_of_texts,
    check_preprocessor,
    pair_texts,
    save,
    takes_pairs,
)


def _num_classes(classifier, preprocessor):
    if getattr(classifier, "outputs", None):  # a Functional model
        return classifier.outputs[0].shape[-1]
    # a subclassed one: its output on one text tells
    return classifier(preprocessor(tf.constant([""])), training=False).shape[-1]


class ClassifierServingModule(tf.Module):
    """Tokenizer + classifier in one tracked module with explicit signatures.

    Signatures (any batch size; strings that are empty, huge or not UTF-8
    still give a valid answer, see `WordPieceTokenizer`):

    - `serving_default(text)`: `text` `tf.string (B,)`.
    - `classify_pairs(text_a, text_b)`: two `tf.string (B,)` (exported
      only for a classifier with 2 or more segments).

    Both return `probabilities` float32 `(B, num_classes)`, `label_id` int32
    `(B,)` and `label` `tf.string (B,)` (the name of the most probable class).

    The classifier's output is taken as logits and softmax is applied,
    unless the classifier has `activation == "softmax"` (e.g.
    `TransformerClassifier(..., activation="softmax")`): its output is then
    already the probabilities and is served as is.

    Args:
        classifier: a Keras model taking the preprocessor's dict and
            returning logits `(B, num_classes)`, `num_classes >= 2`, or
            probabilities if its `activation` attribute is `"softmax"`.
        preprocessor: the `BertPreprocessor` the classifier was trained
            with; its tokenizer may not have more tokens than the model's
            vocabulary.
        labels: a list of class names, one per class.
    """

    def __init__(self, classifier, preprocessor, labels):
        super().__init__(name="classifier_serving")
        check_preprocessor(preprocessor, classifier)
        num_classes = _num_classes(classifier, preprocessor)
        if num_classes is None or num_classes < 2:
            raise ValueError(
                f"The classifier must output scores for 2 or more classes (a softmax over one "
                f"would always give 1.0), got {num_classes}."
            )
        if isinstance(labels, (str, bytes)):
            raise ValueError(f"`labels` must be a list of class names, got the string {labels!r}.")
        labels = [str(label) for label in labels]
        if len(labels) != num_classes:
            raise ValueError(f"`labels` has {len(labels)} names for {num_classes} classes.")
        self.classifier = classifier
        self.outputs_probabilities = getattr(classifier, "activation", None) == "softmax"
        self.preprocessor = preprocessor
        self.labels = tf.constant(labels)

    def _predict(self, inputs):
        outputs = tf.cast(self.classifier(inputs, training=False), tf.float32)
        probabilities = outputs if self.outputs_probabilities else tf.nn.softmax(outputs, axis=-1)
        label_id = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
        return {
            "probabilities": probabilities,
            "label_id": label_id,
            "label": tf.gather(self.labels, label_id),
        }

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def classify(self, text):
        return self._predict(self.preprocessor(batch_of_texts("text", text)))

    @tf.function(
        input_signature=[
            tf.TensorSpec([None], tf.string, name="text_a"),
            tf.TensorSpec([None], tf.string, name="text_b"),
        ]
    )
    def classify_pairs(self, text_a, text_b):
        return self._predict(self.preprocessor(pair_texts(text_a, text_b)))


def export_classifier(classifier, export_dir, preprocessor=None, labels=None, version=1,
                      warmup_batch_sizes=WARMUP_BATCH_SIZES):
    """Writes `export_dir/VERSION/` (the layout TF Serving watches).

    The SavedModel needs only TensorFlow and tensorflow-text to load
    (`import tensorflow_text` registers its ops); tfnlp is not needed.

    A classifier built with its `preprocessor` and `labels` (see
    `tfnlp.models.BertClassifier`) needs nothing else:
    `export_classifier(classifier, "saved_models/mine")`.

    Args:
        classifier: a Keras model returning logits (e.g. `BertClassifier`,
            `TransformerClassifier`) or, with `activation="softmax"`,
            probabilities (see `ClassifierServingModule`).
        export_dir: the model's directory, e.g. `saved_models/reviews`.
        preprocessor: its `BertPreprocessor`; defaults to the classifier's
            own `preprocessor`.
        labels: class names; default: the classifier's `labels`, else the
            class ids as text (`"0"`, `"1"`, ...).
        version: int, the version subdirectory.
        warmup_batch_sizes: the batch sizes of the TF Serving warm-up
            requests written for every signature (`()`: none; keep them at
            most the server's `max_batch_size` when it batches requests).

    Returns:
        The path of the written version.

    Example:

    >>> from tfnlp import data, models
    >>> import tempfile
    >>> vocab = list(data.SPECIAL_TOKENS) + ["good", "bad"]
    >>> preprocessor = data.BertPreprocessor(data.WordPieceTokenizer(vocab), 8)
    >>> backbone = models.BertBackbone.from_architecture("bert_tiny", vocabulary_size=7)
    >>> classifier = models.BertClassifier(backbone, preprocessor=preprocessor, labels=["bad", "good"])
    >>> path = export_classifier(classifier, tempfile.mkdtemp())
    >>> served = tf.saved_model.load(path).signatures["serving_default"]
    >>> served(text=tf.constant(["good", ""]))["probabilities"].shape
    TensorShape([2, 2])
    """
    if not isinstance(export_dir, (str, os.PathLike)):
        raise TypeError(
            f"`export_dir` must be a directory path, got {type(export_dir).__name__} (the "
            "preprocessor is now the keyword argument `preprocessor=`, or the classifier's own)."
        )
    if preprocessor is None:
        preprocessor = getattr(classifier, "preprocessor", None)
        if preprocessor is None:
            raise ValueError(
                "`preprocessor` is required: this classifier carries none (build it with "
                "`preprocessor=`, or pass the BertPreprocessor it was trained with)."
            )
    if labels is None:
        labels = getattr(classifier, "labels", None)
    if labels is None:
        labels = [str(i) for i in range(_num_classes(classifier, preprocessor))]
    module = ClassifierServingModule(classifier, preprocessor, labels)
    signatures = {"serving_default": module.classify}
    if takes_pairs(classifier):
        signatures["classify_pairs"] = module.classify_pairs
    return save(module, export_dir, version, signatures, warmup_batch_sizes)
