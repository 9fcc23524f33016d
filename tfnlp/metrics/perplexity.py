"""Perplexity, a Keras metric for language models (inside `fit` and `evaluate`)."""

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="tfnlp")
class Perplexity(keras.metrics.Metric):
    """`exp` of the weighted mean negative log-likelihood over all tokens seen.

    Feed it per-token NLLs (natural log, any shape) and, as `sample_weight`
    (same shape), 1 for the tokens that count and 0 for padding. Every token
    counts once, whatever the shapes of the batches it came in (unlike
    `keras.metrics.Mean`, which first averages each row). Under a
    `tf.distribute` strategy the replicas' sums are added when read.

    Args:
        name: str.
        dtype: the metric's dtype.

    Example:

    >>> metric = Perplexity()
    >>> metric.update_state([[1.0, 1.0]], sample_weight=[[1, 1]])
    >>> metric.update_state([[3.0] + [0.0] * 9], sample_weight=[[1] + [0] * 9])
    >>> round(float(metric.result()), 4)  # exp((1 + 1 + 3) / 3)
    5.2945
    """

    def __init__(self, name="perplexity", dtype="float32"):
        super().__init__(name=name, dtype=dtype)
        self.total = self.add_variable(shape=(), initializer="zeros", dtype="float32", name="total")
        self.count = self.add_variable(shape=(), initializer="zeros", dtype="float32", name="count")

    def update_state(self, values, sample_weight=None):
        values = tf.cast(values, tf.float32)
        weights = (
            tf.ones_like(values)
            if sample_weight is None
            else tf.broadcast_to(tf.cast(sample_weight, tf.float32), tf.shape(values))
        )
        # A padded token's NLL may be inf (e.g. a banned [PAD] target); weight 0 drops it.
        self.total.assign_add(tf.reduce_sum(tf.math.multiply_no_nan(values, weights)))
        self.count.assign_add(tf.reduce_sum(weights))

    def result(self):
        return tf.exp(tf.math.divide_no_nan(self.total, self.count))

    def get_config(self):
        return {"name": self.name, "dtype": self.dtype}
