"""Losses."""

import keras
import tensorflow as tf

from tfnlp.layers import _validation


@keras.saving.register_keras_serializable(package="tfnlp")
class SmoothedSparseCategoricalCrossentropy(keras.losses.Loss):
    """Cross-entropy on logits and integer labels, with label smoothing.

    The target distribution puts `1 - label_smoothing` on the label and
    spreads `label_smoothing` uniformly over all `V` classes (Szegedy et al.,
    2016; "Attention Is All You Need" uses 0.1):
    `loss = -(1 - ε) log p_y - (ε / V) Σ_v log p_v`, computed in float32 from
    the logits. With `ε = 0` it is the plain sparse cross-entropy. The
    default reduction divides by the sum of the sample weights, so padded
    target positions (weight 0) neither add to the loss nor dilute it.

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

    def call(self, y_true, y_pred):
        logits = tf.cast(y_pred, tf.float32)
        log_probs = tf.nn.log_softmax(logits, axis=-1)
        labels = tf.cast(y_true, tf.int32)
        nll = -tf.gather(log_probs, labels[..., None], batch_dims=labels.shape.rank)[..., 0]
        if not self.label_smoothing:
            return nll
        uniform = -tf.reduce_mean(log_probs, axis=-1)
        return (1.0 - self.label_smoothing) * nll + self.label_smoothing * uniform

    def get_config(self):
        return {
            "label_smoothing": self.label_smoothing,
            "reduction": self.reduction,
            "name": self.name,
        }
