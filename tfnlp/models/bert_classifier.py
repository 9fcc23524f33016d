"""Text (or text-pair) classification on a BERT backbone."""

import keras

from tfnlp import _checks
from tfnlp.layers.dropout import Dropout
from tfnlp.models._mixins import CallsBackboneLayers
from tfnlp.models.bert_backbone import BertBackbone, bert_kernel_initializer
from tfnlp.models.bert_pretrainer import BACKBONE_INPUTS
from tfnlp.models.text_classifier import TextClassifier, checked_preprocessor, classifier_size
from tfnlp.training.optimizers import bert_adamw

POOLINGS = ("cls", "mean")


def masked_mean(sequence, padding_mask):
    """The mean of `sequence` `(B, T, H)` over the positions where `padding_mask` `(B, T)` is 1.

    In float32 whatever the compute dtype; a row without any real token
    gives zeros, not NaN.
    """
    weights = keras.ops.cast(padding_mask, "float32")[:, :, None]
    total = keras.ops.sum(keras.ops.cast(sequence, "float32") * weights, axis=1)
    return total / keras.ops.maximum(keras.ops.sum(weights, axis=1), 1.0)


@keras.saving.register_keras_serializable(package="tfnlp")
class BertClassifier(CallsBackboneLayers, TextClassifier):
    """`Dense(num_classes)` on the pooled `[CLS]` output (or the mean output) of a `BertBackbone`.

    Takes the backbone's inputs (single texts or text pairs, as packed by
    `tfnlp.data.BertPreprocessor`) and returns class logits `(B,
    num_classes)` in float32 (bad inputs fail as in `BertBackbone`).
    `compile()` without arguments uses AdamW with the BERT fine-tuning
    defaults (learning rate 2e-5, weight decay 0.01 off LayerNorm and
    biases), sparse cross-entropy on logits and accuracy.

    Given its `preprocessor` (and, optionally, the class names `labels`),
    the classifier also takes raw text: `fit(texts, labels)`,
    `evaluate(texts, labels)`, `predict(texts)` (logits) and
    `predict_labels(texts)` (class names), with texts as a list, a
    `(texts_a, texts_b)` tuple of text pairs or a `tf.data.Dataset`
    (`TextClassifier`); `tfnlp.export.export_classifier(classifier, path)`
    then needs nothing else, and a `.keras` file keeps both.

    With `pooling="cls"` (BERT's) the backbone's last block computes
    `[CLS]` only, the one position the pooler reads (`TransformerBlock`'s
    `output_positions`): the same logits as the full pass, for less work.
    `pooling="mean"` averages the last block's output over the real
    (unpadded) tokens, without the pooler: for a backbone pretrained by
    masked LM alone, whose `[CLS]` output and pooler no objective trained.
    (On the bundled reviews, a linear probe of such a `bert_tiny`'s mean
    output beats one of its pooled `[CLS]` output at every number of
    labels; docs/results.md.)

    Args:
        backbone: a `BertBackbone` (pretrained or not).
        num_classes: int; may be left out when `labels` is given.
        dropout: float in [0, 1), dropout on the pooled output.
        pooling: `"cls"` (the pooler on `[CLS]`) or `"mean"` (the mean
            of the last block's output over the tokens with
            `padding_mask` 1).
        preprocessor: optional `tfnlp.data.BertPreprocessor` (its
            `sequence_length` at most the backbone's
            `max_sequence_length`), so that the model takes raw text.
        labels: optional list of class names, one per class.
        **kwargs: base model arguments (`name`, ...).

    Example:

    >>> backbone = BertBackbone.from_architecture("bert_tiny", vocabulary_size=1000)
    >>> classifier = BertClassifier(backbone, num_classes=3)
    >>> classifier({
    ...     "token_ids": tf.constant([[2, 45, 3]]),
    ...     "segment_ids": tf.zeros((1, 3), tf.int32),
    ...     "padding_mask": tf.ones((1, 3), tf.int32),
    ... }).shape
    TensorShape([1, 3])

    With a preprocessor, on raw text:

    >>> from tfnlp import data
    >>> vocab = list(data.SPECIAL_TOKENS) + ["good", "bad", "food"]
    >>> preprocessor = data.BertPreprocessor(data.WordPieceTokenizer(vocab), 8)
    >>> backbone = BertBackbone.from_architecture("bert_tiny", vocabulary_size=len(vocab))
    >>> classifier = BertClassifier(backbone, preprocessor=preprocessor, labels=["neg", "pos"])
    >>> classifier.compile()
    >>> history = classifier.fit(["good food", "bad food"], ["pos", "neg"], verbose=0)
    >>> len(classifier.predict_labels(["good", "bad"]))
    2
    """

    backbone_cls = BertBackbone

    def __init__(self, backbone, num_classes=None, dropout=0.1, preprocessor=None, labels=None,
                 pooling="cls", **kwargs):
        backbone = self._backbone_object(backbone)
        num_classes, labels = classifier_size(num_classes, labels)
        dropout = _checks.rate("dropout", dropout)
        pooling = _checks.one_of("pooling", pooling, POOLINGS)
        preprocessor = checked_preprocessor(
            preprocessor, backbone.vocabulary_size, backbone.max_sequence_length
        )
        self.backbone = backbone
        self.pooling = pooling  # read by trainable_weights
        self.output_dropout = Dropout(dropout, name="output_dropout")
        self.output_dense = keras.layers.Dense(
            num_classes, kernel_initializer=bert_kernel_initializer(), dtype="float32", name="logits"
        )
        inputs = {
            name: keras.Input(shape=(None,), dtype="int32", name=name) for name in BACKBONE_INPUTS
        }
        if pooling == "cls":
            # The last block runs at [CLS] only: all that the pooler reads.
            cls_position = keras.ops.zeros_like(inputs["token_ids"][:, :1])
            x = backbone.encode(inputs, output_positions=cls_position)  # (B, 1, H)
            pooled = backbone.pooler(x[:, 0, :])
        else:
            pooled = masked_mean(backbone.encode(inputs), inputs["padding_mask"])
        logits = self.output_dense(self.output_dropout(pooled))
        super().__init__(inputs=inputs, outputs=logits, **kwargs)
        self.num_classes = num_classes
        self.dropout = dropout
        self.preprocessor = preprocessor
        self.labels = labels

    def _head_layers(self):
        return [self.output_dropout, self.output_dense]

    def _unread_backbone_layers(self):
        return [self.backbone.pooler] if self.pooling == "mean" else []

    def _checked_inputs(self, inputs):
        return self.backbone._checked_inputs(inputs)

    def _default_optimizer(self):
        return bert_adamw(2e-5)

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "backbone": keras.saving.serialize_keras_object(self.backbone),
            "num_classes": self.num_classes,
            "dropout": self.dropout,
            "pooling": self.pooling,
            **self._text_config(),
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)
