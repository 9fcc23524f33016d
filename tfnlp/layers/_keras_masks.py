"""Helpers for Keras implicit masks (the `_keras_mask` of a tensor)."""

import tensorflow as tf

from tfnlp.layers import masks as masks_lib


def keras_mask(x):
    """The implicit Keras mask of `x`, or `None`."""
    return getattr(x, "_keras_mask", None)


def without_keras_mask(x):
    """Returns `x` without its implicit Keras mask, leaving `x` itself alone.

    Unlike `keras.layers.MultiHeadAttention`, tfnlp never deletes the mask
    from a caller's tensor; it hands a mask-free view to sublayers that must
    not see it (projections, or an attention that would otherwise also mask
    the padded queries).
    """
    return tf.identity(x) if keras_mask(x) is not None else x


def key_padding_mask(sequence, padding_mask, name):
    """`padding_mask` (or the implicit mask of `sequence`) as `(B, 1, S)`."""
    if padding_mask is None:
        padding_mask = keras_mask(sequence)
    if padding_mask is None:
        return None
    padding_mask = tf.convert_to_tensor(padding_mask)
    if padding_mask.shape.rank is not None and padding_mask.shape.rank != 2:
        raise ValueError(f"`{name}` must have shape (B, S), got {padding_mask.shape}.")
    return masks_lib.combine_masks(padding_mask)[:, None, :]
