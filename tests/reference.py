"""Independent implementations built from stock Keras layers, for parity tests.

Each function copies the weights of a tfnlp layer into `keras.layers`
counterparts and recomputes the layer's output with them.
"""

import keras


def keras_attention(ours, query, value):
    """A built `keras.layers.MultiHeadAttention` with the weights of `ours`."""
    reference = keras.layers.MultiHeadAttention(
        num_heads=ours.num_heads,
        key_dim=ours.key_dim,
        value_dim=ours.value_dim,
        use_bias=ours.use_bias,
        output_shape=ours.output_dim,
    )
    reference(query, value)
    for name in ("_query_dense", "_key_dense", "_value_dense", "_output_dense"):
        getattr(reference, name).set_weights(getattr(ours, name).get_weights())
    return reference


def _copy(layer, like, inputs):
    layer(inputs)
    layer.set_weights(like.get_weights())
    return layer


def _feedforward(block, x):
    inner = _copy(
        keras.layers.Dense(block.intermediate_dim, activation=block.activation),
        block._intermediate_dense,
        x,
    )
    outer = _copy(keras.layers.Dense(x.shape[-1]), block._output_dense, inner(x))
    return outer(inner(x))


def _norm(norm, x):
    return _copy(keras.layers.LayerNormalization(epsilon=norm.epsilon), norm, x)(x)


def _residual(block, x, sublayer, norm):
    if block.norm_first:
        return x + sublayer(_norm(norm, x))
    return _norm(norm, x + sublayer(x))


def encoder_block(block, x, attention_mask):
    """`TransformerBlock` recomputed with stock Keras layers (inference)."""

    def attend(h):
        return keras_attention(block._self_attention, h, h)(h, h, attention_mask=attention_mask)

    x = _residual(block, x, attend, block._self_attention_norm)
    return _residual(block, x, lambda h: _feedforward(block, h), block._feedforward_norm)


def decoder_block(block, x, encoder, self_mask, cross_mask):
    """`TransformerDecoderBlock` recomputed with stock Keras layers."""

    def self_attend(h):
        return keras_attention(block._self_attention, h, h)(h, h, attention_mask=self_mask)

    def cross_attend(h):
        return keras_attention(block._cross_attention, h, encoder)(
            h, encoder, attention_mask=cross_mask
        )

    x = _residual(block, x, self_attend, block._self_attention_norm)
    if encoder is not None:
        x = _residual(block, x, cross_attend, block._cross_attention_norm)
    return _residual(block, x, lambda h: _feedforward(block, h), block._feedforward_norm)
