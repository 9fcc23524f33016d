"""Transformer encoder block."""

import keras
import tensorflow as tf

from tfnlp import _checks
from tfnlp.layers import masks as masks_lib
from tfnlp.layers._keras_masks import keras_mask, key_padding_mask
from tfnlp.layers._transformer_base import TransformerBlockBase
from tfnlp.layers.multi_head_attention import check_attention_mask


@keras.saving.register_keras_serializable(package="tfnlp")
class TransformerBlock(TransformerBlockBase):
    """Transformer encoder block: self-attention and a position-wise FFN.

    Each sublayer is wrapped in a residual connection with layer
    normalisation: post-LN `LayerNorm(x + Sublayer(x))` as in the paper and
    BERT (`norm_first=False`), or pre-LN `x + Sublayer(LayerNorm(x))`
    (`norm_first=True`; put a final `LayerNormalization` after the last
    block). The FFN is `Dense(intermediate_dim, activation) -> Dense(hidden)`.
    The hidden size is the last dimension of the input and must be divisible
    by `num_heads` (checked when the block is built).

    Masks: `padding_mask` `(B, S)` (or the input's implicit Keras mask) hides
    padded *keys*; padded query positions still attend to the real tokens, as
    in BERT, and their outputs are meant to be ignored. `attention_mask`
    `(B, T, S)` (e.g. from `tfnlp.layers.masks`) is combined with it by AND.

    The block also decodes incrementally (UniLM-style generation with any
    attention mask): pass `cache` `(B, 2, S_max, num_heads, head_dim)` and
    `cache_update_index`, and an `attention_mask` `(B, T, S_max)` that hides
    the unwritten slots; it then returns `(output, updated_cache)`. With a
    cache, `padding_mask` must cover the `S_max` slots and the input's
    implicit mask is not used.

    Args:
        num_heads: int, number of attention heads.
        intermediate_dim: int, hidden size of the feed-forward network.
        dropout: float in [0, 1), dropout on attention weights and on both
            sublayer outputs.
        activation: activation of the FFN (`"relu"`, `"gelu"` for BERT, ...).
        layer_norm_epsilon: float, epsilon of the layer normalisations (BERT
            uses 1e-12).
        norm_first: bool, pre-LN instead of post-LN.
        kernel_initializer: initializer of all kernels.
        bias_initializer: initializer of all biases.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: tensor `(B, T, hidden)`.
        padding_mask: optional bool or int tensor `(B, S)`.
        attention_mask: optional bool or int tensor `(B, T, S)`.
        cache: optional tensor `(B, 2, S_max, num_heads, hidden // num_heads)`.
        cache_update_index: int or scalar int tensor, required with `cache`:
            the cache slot of the first of `inputs`.
        output_positions: optional int tensor `(B, P)` of positions in
            `[0, T)` (checked as `MaskedLMHead` checks its positions): return
            the output at these positions only. Not with `cache`.
        training: bool, whether dropout is active.

    Returns:
        Tensor `(B, T, hidden)` (`(B, P, hidden)` with `output_positions`;
        an implicit mask of `inputs` is gathered along), or
        `(output, updated_cache)` with `cache`.

    Example:

    >>> x = keras.ops.ones((2, 10, 32))
    >>> block = TransformerBlock(num_heads=4, intermediate_dim=64, activation="gelu")
    >>> block(x, padding_mask=keras.ops.ones((2, 10), "int32")).shape
    TensorShape([2, 10, 32])
    >>> block(x, output_positions=tf.constant([[0, 4, 7], [0, 1, 2]])).shape
    TensorShape([2, 3, 32])

    References:
        Vaswani et al., "Attention Is All You Need", 2017; Devlin et al.,
        "BERT", 2019; Xiong et al., "On Layer Normalization in the
        Transformer Architecture", 2020 (pre-LN).
    """

    def __call__(self, inputs, *args, **kwargs):
        outputs = super().__call__(inputs, *args, **kwargs)
        positions = kwargs.get("output_positions")
        index = self.call_signature_parameters.index("output_positions") - 1  # after `inputs`
        if positions is None and len(args) > index:
            positions = args[index]
        if positions is not None and keras_mask(inputs) is not None:
            # Keras attached the `(B, T)` mask of `inputs`; the output has the
            # rows at `positions` (`call` checked them). Here rather than in
            # `call`, so that a Functional model (whose `call` runs on
            # placeholders when it is built) records these Keras ops.
            outputs._keras_mask = keras.ops.take_along_axis(
                keras_mask(inputs), keras.ops.cast(positions, "int32"), axis=1
            )
        return outputs

    def build(self, inputs_shape):
        hidden_dim = self._hidden_dim("inputs", inputs_shape)
        self._self_attention, self._self_attention_norm, self._self_attention_dropout = (
            self._build_attention("self_attention", hidden_dim, inputs_shape, inputs_shape)
        )
        self._build_feedforward(hidden_dim, inputs_shape)
        self.built = True

    @_checks.errors_without_input_dump()
    def call(
        self,
        inputs,
        padding_mask=None,
        attention_mask=None,
        cache=None,
        cache_update_index=None,
        output_positions=None,
        training=None,
    ):
        if cache is not None and attention_mask is None:
            raise ValueError(
                "`attention_mask` (B, T, S_max) is required with `cache`: it must hide "
                "the cache slots not written yet (e.g. masks.causal_mask(T, S_max, index))."
            )
        if cache is None and cache_update_index is not None:
            raise ValueError("`cache_update_index` was given without `cache`.")
        if cache is not None and cache_update_index is None:
            raise ValueError(
                "`cache_update_index` is required with `cache`: the index of the cache "
                "slot the first of `inputs` is written to."
            )
        if cache is not None and output_positions is not None:
            raise ValueError(
                "`output_positions` cannot be combined with `cache`: a cached call "
                "already computes only its new positions."
            )
        self._check_call((
            ("inputs", inputs, "BTD"),
            ("padding_mask", padding_mask, "BT" if cache is None else "BM"),
            ("cache", cache, "BCMHK"),
            ("output_positions", output_positions, "BP"),
        ))
        if attention_mask is not None:  # before it meets the padding mask
            attention_mask = check_attention_mask(
                attention_mask, inputs, inputs.shape[1] if cache is None else cache.shape[2]
            )
        # With a cache the implicit mask covers the new tokens, not the slots.
        implicit_source = inputs if cache is None else None
        mask = masks_lib.combine_masks(
            key_padding_mask(implicit_source, padding_mask, "padding_mask"), attention_mask
        )

        if output_positions is not None:
            output_positions = _checks.positions_in_range(
                "output_positions", output_positions, inputs, "the length of `inputs`"
            )
            mask = _query_rows(mask, output_positions, inputs)

        x, cache = self._self_attention_sublayer(
            inputs, mask, cache, cache_update_index, training, output_positions
        )
        x = self._feedforward(x, training)
        return x if cache is None else (x, cache)


def _query_rows(mask, positions, inputs):
    """The `(B, P, S)` rows of a `(B, T or 1, S)` mask for the queries at `positions`."""
    if mask is None or mask.shape[1] == 1:
        return mask  # the same row for every query
    batch, length = tf.shape(inputs)[0], tf.shape(inputs)[1]
    mask = tf.broadcast_to(mask, tf.stack([batch, length, tf.shape(mask)[2]]))
    return tf.gather(mask, positions, batch_dims=1)
