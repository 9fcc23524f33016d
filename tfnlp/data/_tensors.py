"""Small tensor helpers shared by the tf.data pipelines."""

import tensorflow as tf


def dense_row(x):
    """A row sliced out of a ragged tensor arrives ragged-typed: make it dense."""
    return x.to_tensor() if isinstance(x, tf.RaggedTensor) else tf.identity(x)
