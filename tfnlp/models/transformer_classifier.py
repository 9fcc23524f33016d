"""A Transformer encoder text classifier trained from scratch."""

import keras

from tfnlp import _checks
from tfnlp.layers.dropout import Dropout
from tfnlp.models._mixins import FromConfig
from tfnlp.models._transformer_encoder import build_encoder, encode, encoder_arguments
from tfnlp.models.bert_backbone import input_specs
from tfnlp.models.bert_pretrainer import BACKBONE_INPUTS
from tfnlp.models.text_classifier import TextClassifier, checked_preprocessor, classifier_size
from tfnlp.training.optimizers import bert_adamw

POOLINGS = ("mean", "first")
ACTIVATIONS = (None, "softmax")


@keras.saving.register_keras_serializable(package="tfnlp")
class TransformerClassifier(FromConfig, TextClassifier):
    """Token + segment embeddings, sinusoidal positions, encoder blocks, pooling, classes.

    `x = sqrt(hidden_dim) * TokenEmbedding(token_ids) + SinusoidalPositions
    + SegmentEmbedding(segment_ids)`, dropout, then `num_layers` post-LN
    `TransformerBlock`s (ReLU FFN, as in Vaswani et al.) that never attend
    to padding, then pooling to `(B, hidden_dim)`, dropout and
    `Dense(num_classes)` in float32 (also under a mixed precision policy).

    Token embeddings are drawn from `N(0, 1 / hidden_dim)` and multiplied by
    `sqrt(hidden_dim)` (section 3.4 of the paper), so they start at unit
    scale, like the sine/cosine encoding they are added to. The segment
    embedding (0 for `[CLS] A [SEP]`, 1 for `B [SEP]`) lets one model read
    text pairs as packed by `tfnlp.data.BertPreprocessor`; with single
    texts only row 0 is used.

    Pooling: `"mean"` averages the final vectors of the real tokens only
    (`padding_mask` weighted; a row with no real token gives zeros, never
    NaN), `"first"` takes the vector of the first token (`[CLS]`). Either
    way, extra padding does not change the output.

    Inputs are the dict of `BertBackbone` (all int32 `(B, T)`, any `T`):
    `token_ids`, `segment_ids`, `padding_mask` (1 real, 0 padding), so
    `tfnlp.data.classification_dataset` and
    `tfnlp.export.export_classifier` work unchanged; bad inputs fail as in
    `BertBackbone` (any length is accepted). `compile()` without
    arguments uses AdamW (learning rate 1e-3, weight decay 0.01 off biases
    and LayerNorm), sparse cross-entropy (on logits when `activation` is
    None) and accuracy.

    Given its `preprocessor` (and, optionally, the class names `labels`),
    the classifier also takes raw text: `fit(texts, labels)`,
    `evaluate`, `predict(texts)` and `predict_labels(texts)` (class names),
    as described in `TextClassifier`; `tfnlp.export.export_classifier(
    classifier, path)` then needs nothing else.

    Args:
        vocabulary_size: int; may be left out with a `preprocessor` (its
            tokenizer's size).
        num_classes: int; may be left out when `labels` is given.
        num_layers: int, number of `TransformerBlock`s.
        num_heads: int; must divide `hidden_dim`.
        hidden_dim: int.
        intermediate_dim: int, FFN size; defaults to `4 * hidden_dim`.
        dropout: float in [0, 1), on embeddings, attention, sublayers and
            the pooled vector.
        pooling: `"mean"` (over real tokens) or `"first"` (first token).
        num_segments: int, size of the segment table (2 for text pairs).
        activation: None (the model returns logits) or `"softmax"` (it
            returns probabilities).
        preprocessor: optional `tfnlp.data.BertPreprocessor`, so that the
            model takes raw text.
        labels: optional list of class names, one per class.
        **kwargs: base model arguments (`name`, `dtype`, ...).

    Returns:
        float32 `(B, num_classes)`: logits, or probabilities with
        `activation="softmax"`.

    Example:

    >>> classifier = TransformerClassifier(vocabulary_size=1000, num_classes=3, hidden_dim=32)
    >>> classifier({
    ...     "token_ids": tf.constant([[2, 45, 67, 3, 0]]),
    ...     "segment_ids": tf.zeros((1, 5), tf.int32),
    ...     "padding_mask": tf.constant([[1, 1, 1, 1, 0]]),
    ... }).shape
    TensorShape([1, 3])

    On raw text, strings in and strings out:

    >>> from tfnlp import data
    >>> vocab = list(data.SPECIAL_TOKENS) + ["good", "bad", "food"]
    >>> preprocessor = data.BertPreprocessor(data.WordPieceTokenizer(vocab), 8)
    >>> classifier = TransformerClassifier(preprocessor=preprocessor, labels=["neg", "pos"])
    >>> classifier.compile()
    >>> history = classifier.fit(["good food", "bad food"], ["pos", "neg"], epochs=2, verbose=0)
    >>> classifier.predict_labels(["good"])[0] in ("neg", "pos")
    True

    References:
        Vaswani et al., "Attention Is All You Need", 2017.
    """

    def __init__(
        self,
        vocabulary_size=None,
        num_classes=None,
        num_layers=2,
        num_heads=4,
        hidden_dim=128,
        intermediate_dim=None,
        dropout=0.1,
        pooling="mean",
        num_segments=2,
        activation=None,
        preprocessor=None,
        labels=None,
        **kwargs,
    ):
        (vocabulary_size, preprocessor, num_layers, num_heads, hidden_dim, intermediate_dim, dropout,
         num_segments) = encoder_arguments(vocabulary_size, preprocessor, num_layers, num_heads,
                                                 hidden_dim, intermediate_dim, dropout, num_segments)
        num_classes, labels = classifier_size(num_classes, labels)
        preprocessor = checked_preprocessor(preprocessor, vocabulary_size)
        pooling = _checks.one_of("pooling", pooling, POOLINGS)
        activation = _checks.one_of("activation", activation, ACTIVATIONS)
        dtype = kwargs.pop("dtype", None)

        # === Layers ===
        build_encoder(self, vocabulary_size, num_layers, num_heads, hidden_dim, intermediate_dim,
                            dropout, num_segments, dtype)
        # The head runs in float32 whatever the policy.
        self.output_dropout = Dropout(dropout, dtype="float32", name="output_dropout")
        self.output_dense = keras.layers.Dense(
            num_classes, activation=activation, dtype="float32",
            name="logits" if activation is None else "probabilities",
        )

        # === Functional model ===
        inputs = {
            name: keras.Input(shape=(None,), dtype="int32", name=name) for name in BACKBONE_INPUTS
        }
        x = encode(self, inputs)  # (B, T, hidden_dim)
        x = keras.ops.cast(x, "float32")
        if pooling == "mean":
            mask = keras.ops.cast(inputs["padding_mask"], "float32")[:, :, None]  # (B, T, 1)
            count = keras.ops.maximum(keras.ops.sum(mask, axis=1), 1.0)  # (B, 1)
            pooled = keras.ops.sum(x * mask, axis=1) / count  # (B, hidden_dim)
        else:
            pooled = x[:, 0, :]
        outputs = self.output_dense(self.output_dropout(pooled))
        # A Functional model ignores `dtype`: the layers carry the policy.
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.num_classes = num_classes
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.dropout = dropout
        self.pooling = pooling
        self.num_segments = num_segments
        self.activation = activation
        self.preprocessor = preprocessor
        self.labels = labels

    def _checked_inputs(self, inputs):
        specs = input_specs(self.vocabulary_size, self.num_segments)
        return _checks.has_positions(_checks.model_inputs(inputs, specs), {
            "token_ids": "every text needs at least one token for the classifier to pool.",
        })

    def _default_optimizer(self):
        return bert_adamw(1e-3)

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(self.token_embedding.dtype_policy),
            "vocabulary_size": self.vocabulary_size,
            "num_classes": self.num_classes,
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "hidden_dim": self.hidden_dim,
            "intermediate_dim": self.intermediate_dim,
            "dropout": self.dropout,
            "pooling": self.pooling,
            "num_segments": self.num_segments,
            "activation": self.activation,
            **self._text_config(),
        }
