import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.training import families
from tfnlp import training


@pytest.mark.parametrize("family", families.FAMILIES)
def test_every_family_trains_in_float16_with_loss_scaling(family):
    model = families.model(family, dtype="mixed_float16")
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    history = training.fit(model, families.batches(family), steps=3, verbose=0)
    assert np.all(np.isfinite(history["loss"])) and history["steps"] == 3


def test_bfloat16_needs_no_loss_scaling():
    model = families.model("elmo", dtype="mixed_bfloat16")
    assert not isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    assert np.all(np.isfinite(training.fit(model, families.batches("elmo"), steps=2, verbose=0)["loss"]))


def test_the_wrapper_is_applied_once():
    model = families.model("transformer_classifier", dtype="mixed_float16")
    wrapped = model.optimizer
    assert training.with_loss_scaling(wrapped, model) is wrapped
    assert not isinstance(training.with_loss_scaling("sgd", families.model("seq2seq")),
                          keras.optimizers.LossScaleOptimizer)


def _overflowing_float16_model():
    """Loss ~1e8 x the initial loss scale 32768 overflows float16: the first steps are skipped."""
    keras.utils.set_random_seed(3)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, dtype="mixed_float16"),
                              keras.layers.Dense(1, dtype="float32")])
    model.compile(optimizer=training.with_loss_scaling(keras.optimizers.Adam(1e-2), model), loss="mse")
    return model


def _data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 4)).astype("float32")
    return tf.data.Dataset.from_tensor_slices((x, 1e4 * x.sum(1, keepdims=True))).batch(8).repeat()


def test_skipped_float16_steps_still_count_and_resume_exactly(tmp_path):
    straight = _overflowing_float16_model()
    history = training.fit(straight, _data(), steps=8, checkpoint_dir=str(tmp_path / "a"),
                           checkpoint_every=2, verbose=0)
    assert history["steps"] == 8 and len(history["loss"]) == 8
    assert int(straight.optimizer.iterations) < 8  # the loss scaler skipped some
    assert tf.train.latest_checkpoint(str(tmp_path / "a")).endswith("ckpt-8")
    assert training.fit(straight, _data(), steps=8, checkpoint_dir=str(tmp_path / "a"),
                        verbose=0)["steps"] == 8  # nothing left to do

    first = _overflowing_float16_model()
    training.fit(first, _data(), steps=4, checkpoint_dir=str(tmp_path / "b"), checkpoint_every=2, verbose=0)
    resumed = _overflowing_float16_model()
    history = training.fit(resumed, _data(), steps=8, checkpoint_dir=str(tmp_path / "b"),
                           checkpoint_every=2, verbose=0)
    assert history["steps"] == 8 and len(history["loss"]) == 4
    for a, b in zip(resumed.weights, straight.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    with pytest.raises(ValueError, match="beyond `steps`"):
        training.fit(_overflowing_float16_model(), _data(), steps=2,
                     checkpoint_dir=str(tmp_path / "b"), verbose=0)
