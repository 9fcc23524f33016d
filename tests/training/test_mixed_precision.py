import keras
import numpy as np
import pytest
import tensorflow as tf

from tests import families
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


def test_a_checkpoint_of_another_configuration_is_refused_before_anything_is_restored(tmp_path):
    directory = str(tmp_path / "job")
    training.fit(_overflowing_float16_model(), _data(), steps=2, checkpoint_dir=directory, verbose=0)

    keras.utils.set_random_seed(3)
    other = keras.Sequential([keras.Input((4,)), keras.layers.Dense(6), keras.layers.Dense(1)])
    other.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse")  # float32: no loss scale
    other.build((None, 4))
    before = [w.numpy() for w in other.weights]
    with pytest.raises(ValueError) as error:
        training.fit(other, _data(), steps=4, checkpoint_dir=directory, verbose=0)
    message = str(error.value)
    assert "not written by this model" in message
    # Every mismatch at once: both kernels' shapes, and the loss-scale variables.
    assert "the checkpoint has [4, 8] float32, the model [4, 6] float32" in message
    assert "the checkpoint has [8, 1] float32, the model [6, 1] float32" in message
    assert "optimizer: the checkpoint has" in message
    for a, b in zip(other.weights, before, strict=True):
        np.testing.assert_array_equal(a.numpy(), b)  # nothing was restored

    # A checkpoint whose data file was cut short.
    data_file = next((tmp_path / "job").glob("ckpt-2.data-*"))
    data_file.write_bytes(data_file.read_bytes()[:10])
    with pytest.raises(ValueError, match="corrupt or truncated"):
        training.fit(_overflowing_float16_model(), _data(), steps=4, checkpoint_dir=directory,
                     verbose=0)
