"""Transformer decoder block."""

import keras
import tensorflow as tf

from tfnlp import _checks
from tfnlp.layers import masks as masks_lib
from tfnlp.layers._keras_masks import key_padding_mask, without_keras_mask
from tfnlp.layers._transformer_base import TransformerBlockBase


@keras.saving.register_keras_serializable(package="tfnlp")
class TransformerDecoderBlock(TransformerBlockBase):
    """Transformer decoder block: causal self-attention, cross-attention, FFN.

    Causal (left-to-right) self-attention over the decoder sequence, then
    attention over the encoder output, then the position-wise FFN, each with a
    residual connection and layer normalisation (post-LN, or pre-LN with
    `norm_first=True`). If the block is built without an encoder sequence it
    has no cross-attention and is a decoder-only (GPT-style) block.

    Masks: the causal mask is always applied. `decoder_padding_mask` `(B, T)`
    and `encoder_padding_mask` `(B, S)` (or the implicit Keras masks of the
    two sequences) hide padded keys. When decoding with a cache,
    `decoder_padding_mask` covers the `T_max` cache slots and the implicit
    mask of `decoder_sequence` is not used.

    Incremental decoding: pass `self_attention_cache`
    `(B, 2, T_max, num_heads, head_dim)` (zeros to start) with
    `self_attention_cache_update_index`, the position of the first new
    token; the block then masks the cache slots after the new tokens itself
    and returns `(output, updated_self_attention_cache)`. The encoder output
    can be projected once with `compute_cross_attention_cache` and passed as
    `cross_attention_cache` at every step (then `encoder_sequence` may be
    omitted).

    Args:
        num_heads: int, number of attention heads.
        intermediate_dim: int, hidden size of the feed-forward network.
        dropout: float in [0, 1), dropout on attention weights and sublayer
            outputs.
        activation: activation of the FFN.
        layer_norm_epsilon: float, epsilon of the layer normalisations.
        norm_first: bool, pre-LN instead of post-LN.
        kernel_initializer: initializer of all kernels.
        bias_initializer: initializer of all biases.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        decoder_sequence: tensor `(B, T, hidden)`.
        encoder_sequence: optional tensor `(B, S, encoder_hidden)`.
        decoder_padding_mask: optional bool or int tensor `(B, T)`
            (`(B, T_max)` when decoding with a cache).
        encoder_padding_mask: optional bool or int tensor `(B, S)`.
        self_attention_cache: optional tensor, see above.
        self_attention_cache_update_index: optional int or scalar int tensor.
        cross_attention_cache: optional tensor `(B, 2, S, num_heads, head_dim)`.
        training: bool, whether dropout is active.

    Returns:
        Tensor `(B, T, hidden)`, or `(output, updated_self_attention_cache)`
        when `self_attention_cache` is given.

    Example:

    >>> target = keras.ops.ones((2, 7, 32))
    >>> source = keras.ops.ones((2, 9, 32))
    >>> block = TransformerDecoderBlock(num_heads=4, intermediate_dim=64)
    >>> block(target, source).shape
    TensorShape([2, 7, 32])

    References:
        Vaswani et al., "Attention Is All You Need", 2017, section 3.1.
    """

    def build(self, decoder_sequence_shape, encoder_sequence_shape=None):
        hidden_dim = self._hidden_dim("decoder_sequence", decoder_sequence_shape)
        self._self_attention, self._self_attention_norm, self._self_attention_dropout = (
            self._build_attention(
                "self_attention", hidden_dim, decoder_sequence_shape, decoder_sequence_shape
            )
        )
        self._cross_attention = None
        self._encoder_size = None
        if encoder_sequence_shape is not None:
            self._encoder_size = _checks.last_dim("encoder_sequence", encoder_sequence_shape)
            self._cross_attention, self._cross_attention_norm, self._cross_attention_dropout = (
                self._build_attention(
                    "cross_attention", hidden_dim, decoder_sequence_shape, encoder_sequence_shape
                )
            )
        self._build_feedforward(hidden_dim, decoder_sequence_shape)
        self.built = True

    def compute_cross_attention_cache(self, encoder_sequence):
        """Projects the encoder output once into a cross-attention cache."""
        self._require_cross_attention()
        return self._cross_attention.compute_key_value_cache(
            without_keras_mask(encoder_sequence)
        )

    def _require_cross_attention(self):
        if not self.built:
            raise ValueError(
                "This TransformerDecoderBlock is not built yet: call it once (with "
                "`encoder_sequence`, to give it cross-attention) before "
                "`compute_cross_attention_cache`."
            )
        if self._cross_attention is None:
            raise ValueError(
                "This TransformerDecoderBlock was built without an encoder sequence, "
                "so it has no cross-attention; build it by calling it with "
                "`encoder_sequence` first."
            )

    @_checks.errors_without_input_dump()
    def call(
        self,
        decoder_sequence,
        encoder_sequence=None,
        decoder_padding_mask=None,
        encoder_padding_mask=None,
        self_attention_cache=None,
        self_attention_cache_update_index=None,
        cross_attention_cache=None,
        training=None,
    ):
        self._check_call((
            ("decoder_sequence", decoder_sequence, "BTD"),
            ("encoder_sequence", encoder_sequence, "BSE"),
            ("decoder_padding_mask", decoder_padding_mask,
             "BT" if self_attention_cache is None else "BM"),
            ("encoder_padding_mask", encoder_padding_mask, "BS"),
            ("self_attention_cache", self_attention_cache, "BCMHK"),
            ("cross_attention_cache", cross_attention_cache, "BCSHK"),
        ), E=self._encoder_size)
        has_encoder = encoder_sequence is not None or cross_attention_cache is not None
        if has_encoder:
            self._require_cross_attention()
        elif self._cross_attention is not None:
            raise ValueError(
                "This TransformerDecoderBlock was built with cross-attention: pass "
                "`encoder_sequence` (or `cross_attention_cache`); without them its "
                "output would skip the encoder."
            )
        if self_attention_cache is None:
            if self_attention_cache_update_index is not None:
                raise ValueError(
                    "`self_attention_cache_update_index` was given without "
                    "`self_attention_cache`."
                )
            causal = masks_lib.causal_mask(tf.shape(decoder_sequence)[1])
        else:
            if self_attention_cache_update_index is None:
                raise ValueError(
                    "`self_attention_cache_update_index` is required with "
                    "`self_attention_cache`."
                )
            causal = masks_lib.causal_mask(
                tf.shape(decoder_sequence)[1],
                tf.shape(self_attention_cache)[2],
                self_attention_cache_update_index,
            )
        # With a cache the implicit mask covers the new tokens, not the slots.
        implicit_source = decoder_sequence if self_attention_cache is None else None
        self_mask = masks_lib.combine_masks(
            causal[None],
            key_padding_mask(implicit_source, decoder_padding_mask, "decoder_padding_mask"),
        )

        x, cache = self._self_attention_sublayer(
            decoder_sequence,
            self_mask,
            self_attention_cache,
            self_attention_cache_update_index,
            training,
        )

        if has_encoder:
            cross_mask = key_padding_mask(
                encoder_sequence, encoder_padding_mask, "encoder_padding_mask"
            )

            def cross_attend(h):
                h = without_keras_mask(h)
                if cross_attention_cache is not None:
                    output, _ = self._cross_attention(
                        h, h, attention_mask=cross_mask, cache=cross_attention_cache, training=training
                    )
                else:
                    source = without_keras_mask(encoder_sequence)
                    output = self._cross_attention(
                        h, source, attention_mask=cross_mask, training=training
                    )
                return output, None

            x, _ = self._residual(
                x, cross_attend, self._cross_attention_norm, self._cross_attention_dropout, training
            )
        x = self._feedforward(x, training)
        return x if cache is None else (x, cache)
