"""Token accuracy of a tagger, a Keras metric (inside `fit` and `evaluate`)."""

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="tfnlp")
class TagAccuracy(keras.metrics.Metric):
    """The fraction of words tagged right, over every word seen (positions with tag `-1` skipped).

    `y_true` holds tag ids `(B, W)`, `-1` where there is no word (padding,
    a word cut by the sequence length: `tfnlp.data.TaggerPreprocessor`'s
    `IGNORED`); `y_pred` holds either scores `(B, W, num_tags)` (the
    highest is the prediction) or predicted tag ids `(B, W)` (a CRF's best
    path). Every word counts once, whatever the batch it came in (a mean
    of per-batch accuracies would weigh short batches more); `sample_weight`
    `(B,)` or `(B, W)` weighs sentences or words. Under a `tf.distribute`
    strategy the replicas' counts are added when read. This is
    part-of-speech accuracy; for entities use `tfnlp.metrics.entity_report`.

    Args:
        name: str.
        dtype: the metric's dtype.

    Example:

    >>> metric = TagAccuracy()
    >>> metric.update_state([[0, 2, -1]], [[[5.0, 0, 0], [0, 0, 1], [9, 0, 0]]])
    >>> metric.update_state([[1, -1, -1]], [[0, 0, 0]])
    >>> round(float(metric.result()), 4)  # 2 right of 3 words
    0.6667
    """

    def __init__(self, name="accuracy", dtype="float32"):
        super().__init__(name=name, dtype=dtype)
        self.correct = self.add_variable(shape=(), initializer="zeros", dtype="float32", name="correct")
        self.count = self.add_variable(shape=(), initializer="zeros", dtype="float32", name="count")

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true = tf.cast(y_true, tf.int32)
        y_pred = tf.convert_to_tensor(y_pred)
        if y_pred.shape.rank == y_true.shape.rank + 1:
            y_pred = tf.argmax(y_pred, axis=-1, output_type=tf.int32)
        weights = tf.cast(y_true >= 0, tf.float32)
        if sample_weight is not None:
            sample_weight = tf.cast(sample_weight, tf.float32)
            if sample_weight.shape.rank == 1:
                sample_weight = sample_weight[:, None]
            weights *= tf.broadcast_to(sample_weight, tf.shape(weights))
        right = tf.cast(tf.equal(tf.cast(y_pred, tf.int32), y_true), tf.float32)
        self.correct.assign_add(tf.reduce_sum(right * weights))
        self.count.assign_add(tf.reduce_sum(weights))

    def result(self):
        return tf.math.divide_no_nan(self.correct, self.count)

    def reset_state(self):
        self.correct.assign(0.0)
        self.count.assign(0.0)
