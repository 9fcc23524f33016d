import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.harness import run_layer_test
from tfnlp.layers import SinusoidalPositionEncoding


def _reference(length, depth, start=0, wavelength=10000.0):
    table = np.zeros((length, depth))
    for pos in range(length):
        for i in range(0, depth, 2):
            angle = (pos + start) / wavelength ** (i / depth)
            table[pos, i] = np.sin(angle)
            if i + 1 < depth:
                table[pos, i + 1] = np.cos(angle)
    return table


def test_harness():
    run_layer_test(
        SinusoidalPositionEncoding,
        {},
        {"inputs": np.zeros((2, 7, 6), np.float32)},
        expected_output_shape=(2, 7, 6),
        expected_num_trainable_weights=0,
        run_training=False,
    )


@pytest.mark.parametrize("length, depth", [(50, 16), (7, 5), (1, 1), (300, 64)])
def test_matches_the_paper_formula(length, depth):
    out = SinusoidalPositionEncoding()(tf.zeros((2, length, depth))).numpy()
    np.testing.assert_allclose(out[1], _reference(length, depth), atol=2e-5)


def test_start_index_and_wavelength():
    out = SinusoidalPositionEncoding(max_wavelength=100)(tf.zeros((1, 3, 8)), start_index=40)
    np.testing.assert_allclose(out[0], _reference(3, 8, start=40, wavelength=100), atol=2e-5)


def test_computed_in_float32_under_mixed_precision():
    keras.config.set_dtype_policy("mixed_bfloat16")
    layer = SinusoidalPositionEncoding()
    out = layer(tf.zeros((1, 512, 32), tf.bfloat16))
    assert out.dtype == tf.bfloat16
    # Exactly the float32 table rounded once to bfloat16 (positions up to 511
    # in bfloat16 arithmetic would be off by up to 2).
    expected = tf.cast(tf.constant(_reference(512, 32), tf.float32), tf.bfloat16)
    np.testing.assert_allclose(
        out[0].numpy().astype(np.float32), expected.numpy().astype(np.float32), atol=1e-2
    )


@pytest.mark.parametrize("value", [0, -1.0, float("inf"), "big"])
def test_bad_max_wavelength(value):
    with pytest.raises(ValueError, match="max_wavelength"):
        SinusoidalPositionEncoding(max_wavelength=value)
