import numpy as np
import pytest

from tests.harness import assert_allclose, run_layer_test
from tfnlp.layers import Highway

RNG = np.random.default_rng(0)


def _normal(*shape):
    return RNG.normal(size=shape).astype("float32")


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


@pytest.mark.parametrize("shape", [(2, 5, 6), (3, 4)])
def test_harness(shape):
    run_layer_test(
        Highway,
        {"gate_bias": -1.0},
        {"inputs": _normal(*shape)},
        expected_output_shape=shape,
        expected_num_trainable_weights=2,
    )


def test_matches_formula():
    layer = Highway()
    x = _normal(2, 3, 4)
    layer(x)
    kernel, bias = _normal(4, 8), _normal(8)
    layer.set_weights([kernel, bias])
    transform = np.maximum(x @ kernel[:, :4] + bias[:4], 0.0)
    gate = _sigmoid(x @ kernel[:, 4:] + bias[4:])
    assert_allclose(layer(x), gate * transform + (1.0 - gate) * x, atol=1e-5)


def test_initial_gate_bias():
    layer = Highway(gate_bias=-3.5)
    layer.build((None, 5))
    assert layer.kernel.shape == (5, 10)
    np.testing.assert_array_equal(layer.bias.numpy(), [0.0] * 5 + [-3.5] * 5)
    # With a zero kernel the gate is sigmoid(gate_bias) and the transform relu(0) = 0.
    layer.kernel.assign(np.zeros((5, 10), np.float32))
    x = _normal(3, 5)
    assert_allclose(layer(x), (1.0 - _sigmoid(-3.5)) * x, atol=1e-6)


@pytest.mark.parametrize("gate_bias", ["-2", None, True, [1.0]])
def test_bad_gate_bias(gate_bias):
    with pytest.raises(ValueError, match="gate_bias"):
        Highway(gate_bias=gate_bias)


def test_unknown_width():
    with pytest.raises(ValueError, match="inputs"):
        Highway().build((None, None))


def test_numpy_float_gate_bias_is_a_number():
    layer = Highway(gate_bias=np.float32(-1.0))
    assert layer.get_config()["gate_bias"] == -1.0 and type(layer.get_config()["gate_bias"]) is float
