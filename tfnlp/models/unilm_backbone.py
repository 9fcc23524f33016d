"""The UniLM encoder: BERT with a self-attention mask chosen per example."""

import keras
import numpy as np
import tensorflow as tf

from tfnlp.layers import masks as masks_lib
from tfnlp.models.bert_backbone import BertBackbone

# Segment-embedding row of (objective, segment): the segment embedding also
# tells the model which LM it is (UniLM section 2; the layout of
# microsoft/unilm's `new_segment_ids`): bidirectional A/B 0/1, left-to-right 2,
# right-to-left 3, seq2seq source/target 4/5.
SEGMENT_ROWS = ((0, 1), (2, 2), (3, 3), (4, 5))
NUM_SEGMENT_ROWS = 6
# Which BERT segment row initialises each UniLM row (`UniLMBackbone.from_bert`).
_ROWS_FROM_BERT = (0, 1, 0, 0, 0, 1)


@keras.saving.register_keras_serializable(package="tfnlp")
class ObjectiveSegments(keras.layers.Layer):
    """Maps `(segment_ids, objective)` to UniLM's segment-embedding rows.

    See `SEGMENT_ROWS`. Segment ids other than 0 and 1 are clipped to them.

    Call arguments:
        segment_ids: int tensor `(B, S)`.
        objective: int tensor `(B,)`, indices of `masks.OBJECTIVES`.

    Returns:
        int32 tensor `(B, S)`.

    Example:

    >>> ObjectiveSegments()(tf.constant([[0, 1], [0, 1]]), tf.constant([0, 3])).numpy()
    array([[0, 1],
           [4, 5]], dtype=int32)
    """

    def call(self, segment_ids, objective):
        table = tf.constant(SEGMENT_ROWS, tf.int32)  # (4, 2)
        rows = tf.gather(table, tf.clip_by_value(tf.cast(objective, tf.int32), 0, 3))  # (B, 2)
        segment_ids = tf.clip_by_value(tf.cast(segment_ids, tf.int32), 0, 1)
        return tf.gather(rows, segment_ids, batch_dims=1)

    def compute_output_spec(self, segment_ids, objective):
        return keras.KerasTensor(segment_ids.shape, "int32")


@keras.saving.register_keras_serializable(package="tfnlp")
class ObjectiveAttentionMask(keras.layers.Layer):
    """`masks.objective_mask` as a layer, for Functional models.

    Call arguments:
        objective: int tensor `(B,)`.
        segment_ids: int tensor `(B, S)`.
        padding_mask: int or bool tensor `(B, S)`.

    Returns:
        bool tensor `(B, S, S)`.

    Example:

    >>> layer = ObjectiveAttentionMask()
    >>> layer(tf.constant([1]), tf.zeros((1, 3), tf.int32), tf.ones((1, 3), tf.int32)).shape
    TensorShape([1, 3, 3])
    """

    def call(self, objective, segment_ids, padding_mask):
        return masks_lib.objective_mask(objective, segment_ids, padding_mask)

    def compute_output_spec(self, objective, segment_ids, padding_mask):
        length = segment_ids.shape[1]
        return keras.KerasTensor((segment_ids.shape[0], length, length), "bool")


@keras.saving.register_keras_serializable(package="tfnlp")
class UniLMBackbone(BertBackbone):
    """UniLM: one BERT-shaped Transformer for four language-model objectives.

    The network is `BertBackbone`'s (token + segment + learned position
    embeddings, post-LN GELU blocks, pooler) with one more input,
    `objective` int32 `(B,)`, that picks each example's self-attention mask
    (`tfnlp.layers.masks.objective_mask`): 0 bidirectional, 1 left-to-right,
    2 right-to-left, 3 seq2seq (`[CLS] S1 [SEP] S2 [SEP]` with segment ids 0
    / 1: the source sees the source, the target sees the source and its own
    prefix). No token sees padding. The segment embedding has six rows, and
    the objective picks which (`SEGMENT_ROWS`), so that it also identifies
    the LM task.

    Inputs (a dict, int32): `token_ids`, `segment_ids` (0 / 1),
    `padding_mask` `(B, T)` and `objective` `(B,)` (checked as
    `BertBackbone` checks its inputs). Outputs: as `BertBackbone`.
    Initialise from BERT with `from_bert`; `to_bert` gives the
    bidirectional encoder as a plain `BertBackbone` (same weights) for
    classifiers and exporters.

    Args:
        vocabulary_size: int.
        num_layers: int.
        num_heads: int; must divide `hidden_dim`.
        hidden_dim: int.
        intermediate_dim: int, FFN size; defaults to `4 * hidden_dim`.
        dropout: float in [0, 1).
        max_sequence_length: int, size of the position table.
        layer_norm_epsilon: float > 0, epsilon of every layer norm (1e-12
            as BERT; microsoft/unilm v1 checkpoints use 1e-5).
        activation: `"gelu"` (exact, as microsoft/unilm v1 computes it) or
            `"gelu_approximate"` (tanh), as in `BertBackbone`.
        **kwargs: base model arguments (`name`, `dtype`, ...).

    Example:

    >>> backbone = UniLMBackbone.from_architecture("bert_tiny", vocabulary_size=1000)
    >>> outputs = backbone({
    ...     "token_ids": tf.constant([[2, 45, 3, 67, 3], [2, 45, 3, 67, 3]]),
    ...     "segment_ids": tf.constant([[0, 0, 0, 1, 1], [0, 0, 0, 1, 1]]),
    ...     "padding_mask": tf.ones((2, 5), tf.int32),
    ...     "objective": tf.constant([0, 3]),  # bidirectional, seq2seq
    ... })
    >>> outputs["sequence_output"].shape
    TensorShape([2, 5, 128])

    References:
        Dong et al., "Unified Language Model Pre-training for Natural
        Language Understanding and Generation", 2019.
    """

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_heads,
        hidden_dim,
        intermediate_dim=None,
        dropout=0.1,
        max_sequence_length=512,
        layer_norm_epsilon=1e-12,
        activation="gelu",
        **kwargs,
    ):
        num_segments = kwargs.pop("num_segments", NUM_SEGMENT_ROWS)
        if num_segments != NUM_SEGMENT_ROWS:
            raise ValueError(
                f"`num_segments` must be {NUM_SEGMENT_ROWS} (UniLM's segment table has "
                f"{NUM_SEGMENT_ROWS} rows), got {num_segments!r}."
            )
        self.objective_segments = ObjectiveSegments(name="objective_segments")
        self.objective_attention_mask = ObjectiveAttentionMask(name="objective_attention_mask")
        super().__init__(
            vocabulary_size, num_layers, num_heads, hidden_dim, intermediate_dim, dropout,
            max_sequence_length, NUM_SEGMENT_ROWS, layer_norm_epsilon, activation, **kwargs,
        )

    def _input_specs(self):
        return {
            **super()._input_specs(),
            "segment_ids": ("BT", 2, "segments A and B"),
            "objective": ("B", len(masks_lib.OBJECTIVES), "one of `masks.OBJECTIVES`"),
        }

    def _functional_inputs(self):
        inputs = super()._functional_inputs()
        inputs["objective"] = keras.Input(shape=(), dtype="int32", name="objective")
        return inputs

    def _embed(self, inputs):
        rows = self.objective_segments(inputs["segment_ids"], inputs["objective"])
        return super()._embed(dict(inputs, segment_ids=rows))

    def _attention_mask(self, inputs):
        return self.objective_attention_mask(
            inputs["objective"], inputs["segment_ids"], inputs["padding_mask"]
        )

    @classmethod
    def from_bert(cls, bert_backbone, **overrides):
        """A UniLM initialised from a `BertBackbone` (as UniLM starts from BERT).

        Every weight and the configuration (layer-norm epsilon included)
        are copied; the six segment rows start from BERT's segment A
        (bidirectional A, left-to-right, right-to-left, seq2seq source) and
        B (bidirectional B, seq2seq target) rows.

        Args:
            bert_backbone: a `BertBackbone` (e.g. from
                `load_google_checkpoint`).
            **overrides: constructor arguments to change (e.g. `dropout`).
        """
        if not isinstance(bert_backbone, BertBackbone) or isinstance(bert_backbone, cls):
            raise ValueError(
                f"`bert_backbone` must be a BertBackbone, got {type(bert_backbone).__name__}."
            )
        config = bert_backbone.get_config()
        config.pop("num_segments")
        config.pop("name")
        config.update(overrides)
        unilm = cls.from_config(config)
        bert_segments = bert_backbone.segment_embedding.embeddings.numpy()
        for source, target in zip(bert_backbone.weights, unilm.weights, strict=True):
            if source is bert_backbone.segment_embedding.embeddings:
                target.assign(bert_segments[np.minimum(_ROWS_FROM_BERT, len(bert_segments) - 1)])
            else:
                target.assign(source)
        return unilm

    def to_bert(self):
        """The bidirectional encoder as a `BertBackbone` with the same weights (and epsilon).

        Its outputs equal this model's with `objective` 0 (bidirectional),
        so every BERT tool (`BertClassifier`, the exporters) applies.
        """
        config = self.get_config()
        config.pop("name")
        bert = BertBackbone(num_segments=2, **config)
        for source, target in zip(self.weights, bert.weights, strict=True):
            if source is self.segment_embedding.embeddings:
                target.assign(source[:2])
            else:
                target.assign(source)
        return bert

    def get_config(self):
        config = super().get_config()
        config.pop("num_segments")
        return config

