"""Keras metrics for language models."""

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="tfnlp")
class Perplexity(keras.metrics.Mean):
    """`exp` of the (weighted) mean negative log-likelihood per token.

    Feed it per-token NLLs (natural log) and, as `sample_weight`, 1 for the
    tokens that count and 0 for padding; the result is the perplexity over
    all tokens seen since the last reset.

    Example:

    >>> metric = Perplexity()
    >>> metric.update_state([[1.0, 3.0, 9.0]], sample_weight=[[1, 1, 0]])
    >>> round(float(metric.result()), 4)  # exp(2)
    7.3891
    """

    def __init__(self, name="perplexity", dtype="float32"):
        super().__init__(name=name, dtype=dtype)

    def result(self):
        return tf.exp(super().result())

    def get_config(self):
        return {"name": self.name, "dtype": self.dtype}
