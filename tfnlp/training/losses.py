"""Losses."""

import keras
import tensorflow as tf

from tfnlp.layers import _validation
from tfnlp.training.distribute import global_sum


@keras.saving.register_keras_serializable(package="tfnlp")
class SmoothedSparseCategoricalCrossentropy(keras.losses.Loss):
    """Cross-entropy on logits and integer labels, with label smoothing.

    The target distribution puts `1 - label_smoothing` on the label and
    spreads `label_smoothing` uniformly over all `V` classes (Szegedy et al.,
    2016; "Attention Is All You Need" uses 0.1):
    `loss = -(1 - ε) log p_y - (ε / V) Σ_v log p_v`, computed in float32 from
    the logits. With `ε = 0` it is the plain sparse cross-entropy. The
    default reduction divides by the sum of the sample weights, so padded
    target positions (weight 0) neither add to the loss nor dilute it;
    under a `tf.distribute` strategy it divides by the sum over *all*
    replicas, so the replicas' losses add up to exactly the single-device
    loss however the weights fall between them.

    Args:
        label_smoothing: float in [0, 1).
        reduction: a Keras loss reduction.
        name: str.

    Example:

    >>> loss = SmoothedSparseCategoricalCrossentropy(label_smoothing=0.1)
    >>> logits = tf.constant([[[2.0, 0.0, 0.0], [0.0, 0.0, 0.0]]])
    >>> # Only the first position counts: 0.9 * 0.2395 + 0.1 * (0.2395 + 2 * 2.2395) / 3
    >>> round(float(loss(tf.constant([[0, 1]]), logits, sample_weight=[[1.0, 0.0]])), 4)
    0.3729
    """

    def __init__(
        self,
        label_smoothing=0.0,
        reduction="mean_with_sample_weight",
        name="smoothed_sparse_categorical_crossentropy",
    ):
        super().__init__(name=name, reduction=reduction)
        self.label_smoothing = _validation.rate("label_smoothing", label_smoothing)

    def __call__(self, y_true, y_pred, sample_weight=None):
        if self.reduction != "mean_with_sample_weight" or sample_weight is None:
            return super().__call__(y_true, y_pred, sample_weight=sample_weight)
        with tf.name_scope(self.name):
            values = self.call(y_true, y_pred)
            weights = tf.broadcast_to(tf.cast(sample_weight, tf.float32), tf.shape(values))
            mask = getattr(y_pred, "_keras_mask", None)
            if mask is not None:
                weights *= tf.cast(mask, tf.float32)
            # Not scaled by 1 / replicas afterwards (Keras does that for its own
            # reductions): the global denominator already shares the loss out.
            return tf.math.divide_no_nan(
                tf.reduce_sum(values * weights), global_sum(tf.reduce_sum(weights))
            )

    def call(self, y_true, y_pred):
        logits = tf.cast(y_pred, tf.float32)
        labels = tf.cast(y_true, tf.int32)
        # The fused op (as Keras' own sparse cross-entropy uses), bit for bit.
        nll = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        if not self.label_smoothing:
            return nll
        uniform = -tf.reduce_mean(tf.nn.log_softmax(logits, axis=-1), axis=-1)
        return (1.0 - self.label_smoothing) * nll + self.label_smoothing * uniform

    def get_config(self):
        return {
            "label_smoothing": self.label_smoothing,
            "reduction": self.reduction,
            "name": self.name,
        }
