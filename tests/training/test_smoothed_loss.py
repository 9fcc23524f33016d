"""The smoothed cross-entropy under a distribution strategy and on weight-0 infinite losses."""

import numpy as np
import pytest
import tensorflow as tf

from tfnlp import training


def _per_replica(strategy, first, second):
    return strategy.experimental_distribute_values_from_function(
        lambda context: tf.constant(first if context.replica_id_in_sync_group == 0 else second)
    )


@pytest.mark.parametrize("weighting", ["none", "keras_mask", "sample_weight"])
def test_smoothed_loss_of_the_replicas_adds_up_to_the_single_device_loss(mirrored_strategy, weighting):
    # The replicas count different numbers of positions (4 and 1), weighted
    # by a Keras mask, by sample weights, or not at all (unequal batches).
    rng = np.random.default_rng(0)
    logits = [rng.normal(size=(2, 2, 5)).astype("float32"), rng.normal(size=(1, 2, 5)).astype("float32")]
    labels = [np.array([[1, 2], [3, 4]], "int32"), np.array([[0, 1]], "int32")]
    weights = [np.ones((2, 2), "float32"), np.array([[1.0, 0.0]], "float32")]
    if weighting == "none":
        weights[1] = np.ones((1, 2), "float32")
    loss = training.SmoothedSparseCategoricalCrossentropy(label_smoothing=0.1)

    def replica_loss(y, logits, w):
        if weighting == "keras_mask":
            logits = tf.identity(logits)
            logits._keras_mask = w > 0
            return loss(y, logits)
        return loss(y, logits, sample_weight=w if weighting == "sample_weight" else None)

    per_replica = mirrored_strategy.run(replica_loss, args=tuple(
        _per_replica(mirrored_strategy, *pair) for pair in (labels, logits, weights)))
    total = mirrored_strategy.reduce("SUM", per_replica, axis=None)
    values = np.concatenate([
        training.sparse_softmax_cross_entropy(y, x, 0.1).numpy().ravel() for y, x in zip(labels, logits, strict=True)])
    w = np.concatenate([x.ravel() for x in weights])
    np.testing.assert_allclose(float(total), (values * w).sum() / w.sum(), rtol=1e-6)


def test_smoothed_loss_drops_weight_zero_positions_of_infinite_loss():
    # A decoder that rules out [PAD] (id 0) with -inf logits, and padded targets 0 of weight 0.
    logits = tf.constant([[[-np.inf, 1.0, 0.0], [-np.inf, 0.0, 2.0]]])
    labels, weights = tf.constant([[2, 0]]), tf.constant([[1.0, 0.0]])
    value = training.SmoothedSparseCategoricalCrossentropy()(labels, logits, sample_weight=weights)
    np.testing.assert_allclose(float(value), np.log1p(np.e), rtol=1e-6)  # the first position's only


def test_sparse_cross_entropy_checks_label_smoothing_and_classes():
    logits = tf.zeros((2, 3))
    with pytest.raises(ValueError, match="`label_smoothing`"):
        training.sparse_softmax_cross_entropy(tf.constant([0, 1]), logits, label_smoothing=1.5)
    with pytest.raises(ValueError, match="at least one class"):
        training.sparse_softmax_cross_entropy(tf.constant([0, 1]), tf.zeros((2, 0)))
