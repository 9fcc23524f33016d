import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests import families
from tfnlp import training

TWO_CPUS = ["/cpu:0", "/cpu:1"]


@pytest.fixture
def mirrored(mirrored_strategy):
    return mirrored_strategy


def _train(family, strategy, steps=3, use_keras_fit=False):
    keras.utils.set_random_seed(7)
    with strategy.scope():
        model = families.model(family)
    dataset = families.batches(family)
    if use_keras_fit:
        history = model.fit(dataset, steps_per_epoch=steps, epochs=1, verbose=0).history
        losses = history["loss"]
    else:
        losses = training.fit(model, dataset, steps=steps, verbose=0)["loss"]
    return np.array(losses), [w.numpy() for w in model.weights]


@pytest.mark.parametrize("family", families.FAMILIES)
def test_mirrored_training_equals_single_device_training(family, mirrored):
    """Same losses and weights (1e-5) with the batch split over two replicas."""
    losses, weights = _train(family, tf.distribute.get_strategy())
    mirrored_losses, mirrored_weights = _train(family, mirrored)
    np.testing.assert_allclose(mirrored_losses, losses, atol=1e-5, rtol=1e-5)
    for a, b in zip(mirrored_weights, weights, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)
    assert np.all(np.isfinite(losses)) and losses[-1] != losses[0]


@pytest.mark.parametrize("family", ["transformer_classifier", "elmo"])
def test_keras_fit_under_mirrored_strategy_matches_too(family, mirrored):
    losses, weights = _train(family, tf.distribute.get_strategy(), use_keras_fit=True)
    mirrored_losses, mirrored_weights = _train(family, mirrored, use_keras_fit=True)
    np.testing.assert_allclose(mirrored_losses, losses, atol=1e-5, rtol=1e-5)
    for a, b in zip(mirrored_weights, weights, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_strategy_picks_from_the_environment(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    monkeypatch.delenv("TPU_NAME", raising=False)
    assert training.strategy() is tf.distribute.get_strategy()
    picked = training.strategy(devices=TWO_CPUS)
    assert isinstance(picked, tf.distribute.MirroredStrategy) and picked.num_replicas_in_sync == 2
    config = {"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}, "task": {"type": "worker", "index": 1}}
    assert training.cluster_size(json.dumps(config)) == 2
    monkeypatch.setenv("TF_CONFIG", "{not json")
    with pytest.raises(ValueError, match="TF_CONFIG"):
        training.strategy()
    with pytest.raises(ValueError, match="kind"):
        training.strategy("gpu")
    with pytest.raises(ValueError, match="devices"):
        training.strategy("default", devices=TWO_CPUS)


def test_fit_checks_its_arguments(mirrored):
    model = families.model("transformer_classifier")
    with pytest.raises(ValueError, match="steps"):
        training.fit(model, families.batches("transformer_classifier"), steps=0)
    with pytest.raises(ValueError, match="dataset"):
        training.fit(model, [1, 2, 3], steps=2)
    with pytest.raises(ValueError, match="ran out"):
        training.fit(model, families.batches("transformer_classifier").take(2), steps=5, verbose=0)
    with pytest.raises(ValueError, match="compiled"):
        training.fit(keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)]),
                     families.batches("transformer_classifier"), steps=1)
    with mirrored.scope():
        with pytest.raises(ValueError, match="scope"):
            training.fit(model, families.batches("transformer_classifier"), steps=1)


def test_resuming_a_per_replica_dataset_function_under_mirrored(mirrored, tmp_path):
    """Each pipeline feeds two replicas per step: the skip on resume must count both."""

    def dataset_fn(context):
        # One pipeline for both local replicas: per-replica batches, in order.
        return families.batches("transformer_classifier", count=6).unbatch().batch(
            families.BATCH // context.num_replicas_in_sync
        )

    def train(steps, directory):
        keras.utils.set_random_seed(7)
        with mirrored.scope():
            model = families.model("transformer_classifier")
        history = training.fit(model, dataset_fn, steps=steps, checkpoint_dir=str(directory),
                               checkpoint_every=1, verbose=0)
        return model, history

    straight, straight_history = train(6, tmp_path / "straight")
    train(3, tmp_path / "resumed")
    resumed, resumed_history = train(6, tmp_path / "resumed")
    np.testing.assert_allclose(resumed_history["loss"], straight_history["loss"][3:], rtol=1e-6)
    for a, b in zip(resumed.weights, straight.weights, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-7)


def test_fit_honours_callbacks_that_stop_training():
    class StopAtTwo(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 2:
                self.model.stop_training = True

    model = families.model("transformer_classifier")
    history = training.fit(model, families.batches("transformer_classifier"), steps=6,
                           callbacks=[StopAtTwo()], verbose=0)
    assert history["steps"] == 2 and len(history["loss"]) == 2
