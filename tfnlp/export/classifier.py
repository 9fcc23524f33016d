"""Text classifier -> SavedModel that takes raw strings (TF Serving layout)."""

import tensorflow as tf

from tfnlp.export._common import (
    WARMUP_BATCH_SIZES,
    check_preprocessor,
    preprocessor_for,
    save,
    takes_pairs,
)
from tfnlp.export._old_call_forms import takes_old_call_form
from tfnlp.export._serving_module import ServingModule, text_and_pair_signatures


def _num_classes(classifier, preprocessor):
    if getattr(classifier, "outputs", None):  # a Functional model
        return classifier.outputs[0].shape[-1]
    # a subclassed one: its output on one text tells
    return classifier(preprocessor(tf.constant([""])), training=False).shape[-1]


class ClassifierServingModule(ServingModule):
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

    SIGNATURES = text_and_pair_signatures("classify", "classify_pairs")

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
        self.takes_pairs = takes_pairs(classifier)

    def _serve(self, *texts):
        outputs = tf.cast(self.classifier(self.preprocessor(texts), training=False), tf.float32)
        probabilities = outputs if self.outputs_probabilities else tf.nn.softmax(outputs, axis=-1)
        label_id = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
        return {
            "probabilities": probabilities,
            "label_id": label_id,
            "label": tf.gather(self.labels, label_id),
        }


@takes_old_call_form("classifier", "export_dir", "preprocessor", "labels", "version",
                     "warmup_batch_sizes")
def export_classifier(model, export_dir, *, preprocessor=None, labels=None, version=1,
                      warmup_batch_sizes=WARMUP_BATCH_SIZES):
    """Writes `export_dir/VERSION/` (the layout TF Serving watches).

    The SavedModel needs only TensorFlow and tensorflow-text to load
    (`import tensorflow_text` registers its ops); tfnlp is not needed.

    A classifier built with its `preprocessor` and `labels` (see
    `tfnlp.models.BertClassifier`) needs nothing else:
    `export_classifier(classifier, "saved_models/mine")`.

    Args:
        model: a Keras model returning logits (e.g. `BertClassifier`,
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
    preprocessor = preprocessor_for(model, preprocessor)
    if labels is None:
        labels = getattr(model, "labels", None)
    if labels is None:
        labels = [str(i) for i in range(_num_classes(model, preprocessor))]
    module = ClassifierServingModule(model, preprocessor, labels)
    return save(module, export_dir, version, warmup_batch_sizes)
