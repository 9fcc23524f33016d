import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.harness import run_layer_test
from tfnlp.layers import LayerNormalization

RNG = np.random.default_rng(0)


def test_harness():
    run_layer_test(
        LayerNormalization,
        {"epsilon": 1e-12},
        {"inputs": RNG.normal(size=(2, 5, 8)).astype("float32")},
        expected_output_shape=(2, 5, 8),
        expected_num_trainable_weights=2,
    )


def _pair(**kwargs):
    ours, theirs = LayerNormalization(**kwargs), keras.layers.LayerNormalization(**kwargs)
    x = tf.constant(RNG.normal(size=(3, 7, 16)) * 4 + 2, tf.float32)
    ours.build(x.shape)
    theirs.build(x.shape)
    theirs.set_weights([RNG.normal(size=w.shape).astype("float32") for w in theirs.weights])
    ours.set_weights(theirs.get_weights())
    return ours, theirs, x


@pytest.mark.parametrize("epsilon", [1e-12, 1e-3])
def test_equals_keras_with_gradients(epsilon):
    ours, theirs, x = _pair(epsilon=epsilon)
    upstream = tf.constant(RNG.normal(size=x.shape), tf.float32)
    results = []
    for layer in (ours, theirs):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x)
            loss = tf.reduce_sum(y * upstream)
        results.append([y] + tape.gradient(loss, [x] + layer.trainable_weights))
    for a, b in zip(*results, strict=True):
        np.testing.assert_allclose(a, b, atol=2e-5)


def test_constant_rows_are_finite():
    layer = LayerNormalization(epsilon=1e-12)
    x = tf.fill((2, 8), 3.0)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x)
    assert np.all(np.isfinite(y)) and np.all(np.isfinite(tape.gradient(y, x)))


def test_mixed_precision_computes_in_float32():
    layer = LayerNormalization(dtype="mixed_bfloat16")
    x = tf.cast(tf.constant(RNG.normal(size=(4, 32)) * 100 + 1000, tf.float32), tf.bfloat16)
    y = layer(x)
    assert y.dtype == tf.bfloat16
    reference = keras.layers.LayerNormalization(dtype="mixed_bfloat16")(x)
    np.testing.assert_allclose(tf.cast(y, tf.float32), tf.cast(reference, tf.float32), atol=2e-2)


@pytest.mark.parametrize("kwargs", [{"axis": 1}, {"rms_scaling": True}, {"center": False}])
def test_other_settings_fall_back_to_keras(kwargs):
    ours, theirs, x = _pair(**kwargs)
    np.testing.assert_allclose(ours(x), theirs(x), atol=1e-5)


def test_float64_is_computed_in_float64():
    x = tf.constant(RNG.normal(size=(4, 64)) + 1e4, tf.float64)
    ours = LayerNormalization(dtype="float64")(x)
    mean = x.numpy().mean(-1, keepdims=True)
    expected = (x.numpy() - mean) / np.sqrt(x.numpy().var(-1, keepdims=True) + 1e-3)
    np.testing.assert_allclose(ours, expected, atol=1e-9)
