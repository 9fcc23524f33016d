"""Perplexity: every token once, across batches and replicas; its old name in `training`."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfnlp import metrics, training


def test_perplexity_counts_every_token_once_across_batch_shapes():
    metric = metrics.Perplexity()
    metric.update_state([[1.0, 1.0]], sample_weight=[[1, 1]])
    metric.update_state([[3.0] + [7.0] * 9], sample_weight=[[1] + [0] * 9])
    assert float(metric.result()) == pytest.approx(np.exp(5.0 / 3.0), rel=1e-6)
    metric.reset_state()
    assert float(metric.result()) == 1.0  # nothing seen: exp(0), never NaN
    metric.update_state(np.full((2, 3), 2.0))  # no weights: every value counts
    assert float(metric.result()) == pytest.approx(np.exp(2.0), rel=1e-6)


def test_perplexity_serializes():
    metric = metrics.Perplexity(name="forward_perplexity")
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(metric))
    assert isinstance(restored, metrics.Perplexity) and restored.name == "forward_perplexity"


def test_perplexity_sums_replicas(mirrored_strategy):
    strategy = mirrored_strategy
    with strategy.scope():
        metric = metrics.Perplexity()

    def update(values, weights):
        metric.update_state(values, sample_weight=weights)

    values = strategy.experimental_distribute_values_from_function(
        lambda context: tf.constant([[1.0, 1.0]]) if context.replica_id_in_sync_group == 0 else tf.constant([[4.0, 0.0]])
    )
    weights = strategy.experimental_distribute_values_from_function(
        lambda context: tf.constant([[1.0, 1.0]]) if context.replica_id_in_sync_group == 0 else tf.constant([[1.0, 0.0]])
    )
    strategy.run(update, args=(values, weights))
    assert float(metric.result()) == pytest.approx(np.exp(2.0), rel=1e-6)


def test_perplexity_drops_weight_zero_tokens_of_infinite_loss():
    metric = metrics.Perplexity()
    metric.update_state([[1.0, np.inf]], sample_weight=[[1, 0]])
    assert float(metric.result()) == pytest.approx(np.e, rel=1e-6)


def test_the_old_name_in_training_still_works_with_a_deprecation_warning():
    with pytest.warns(DeprecationWarning, match="tfnlp.metrics.Perplexity"):
        assert training.Perplexity is metrics.Perplexity
    assert "Perplexity" not in training.__all__
    from tfnlp.training import metrics as old_module

    with pytest.warns(DeprecationWarning, match="tfnlp.metrics.Perplexity"):
        assert old_module.Perplexity is metrics.Perplexity
    with pytest.raises(AttributeError, match="no attribute 'Nonexistent'"):
        training.Nonexistent  # noqa: B018
    # Files saved before the move name the class the same way, and load.
    assert keras.saving.get_registered_name(metrics.Perplexity) == "tfnlp>Perplexity"
    saved_before = {"module": "tfnlp.training.metrics", "class_name": "Perplexity",
                    "config": {"name": "p", "dtype": "float32"}, "registered_name": "tfnlp>Perplexity"}
    assert isinstance(keras.saving.deserialize_keras_object(saved_before, safe_mode=True),
                      metrics.Perplexity)
