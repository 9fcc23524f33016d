import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.harness import assert_allclose, run_layer_test
from tfnlp.layers import ScalarMix

RNG = np.random.default_rng(0)
MASK = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], np.int32)


def _normal(*shape, scale=1.0, loc=0.0):
    return (loc + scale * RNG.normal(size=shape)).astype("float32")


def _softmax(w):
    e = np.exp(w - np.max(w))
    return e / e.sum()


def _layers(batch=2, num_layers=3, steps=5, width=4):
    # Layers with different offsets and scales, so normalisation matters.
    offsets = np.arange(num_layers, dtype=np.float32)[None, :, None, None] * 3.0
    return _normal(batch, num_layers, steps, width, scale=2.0) + offsets


@pytest.mark.parametrize(
    "init, use_mask",
    [
        ({}, False),
        ({"initial_weights": [0.5, -1.0, 2.0], "initial_scale": 0.5}, False),
        ({"layer_norm": True}, True),
    ],
)
def test_harness(init, use_mask):
    data = {"inputs": _layers()}
    if use_mask:
        data["padding_mask"] = MASK
    run_layer_test(
        ScalarMix,
        init,
        data,
        expected_output_shape=(2, 5, 4),
        expected_num_trainable_weights=2,
    )


def test_weighted_sum_by_hand():
    x = _layers()
    layer = ScalarMix()
    layer(x)
    w, gamma = np.array([0.3, -1.2, 2.0], np.float32), np.float32(1.7)
    layer.set_weights([w, gamma])
    expected = gamma * np.einsum("l,blti->bti", _softmax(w), x)
    assert_allclose(layer(x), expected, atol=1e-5)
    assert_allclose(layer.mixing_weights(), _softmax(w), atol=1e-6)


def test_initial_weights_and_scale():
    x = _layers()
    layer = ScalarMix(initial_weights=[1.0, 0.0, -1.0], initial_scale=2.0)
    expected = 2.0 * np.einsum("l,blti->bti", _softmax(np.array([1.0, 0.0, -1.0])), x)
    assert_allclose(layer(x), expected, atol=1e-5)


def test_equal_weights_give_the_scaled_mean():
    x = _layers()
    layer = ScalarMix(initial_scale=3.0)
    assert_allclose(layer(x), 3.0 * x.mean(axis=1), atol=1e-5)
    layer.layer_weights.assign([0.7, 0.7, 0.7])  # any equal values
    assert_allclose(layer(x), 3.0 * x.mean(axis=1), atol=1e-5)


def _normalized_by_hand(x, mask):
    """Each (sequence, layer) normalised over its real tokens and all features."""
    out = np.zeros_like(x, dtype=np.float64)
    for b in range(x.shape[0]):
        n = int(mask[b].sum())
        for j in range(x.shape[1]):
            real = x[b, j, :n].astype(np.float64)
            out[b, j, :n] = (real - real.mean()) / np.sqrt(real.var() + 1e-12)
    return out


def test_layer_norm_by_hand():
    x = _layers()
    layer = ScalarMix(layer_norm=True)
    layer(x)
    w, gamma = np.array([0.3, -1.2, 2.0], np.float32), np.float32(0.8)
    layer.set_weights([w, gamma])
    normalized = _normalized_by_hand(x, MASK)
    expected = gamma * np.einsum("l,blti->bti", _softmax(w), normalized)
    out = layer(x, padding_mask=MASK).numpy()
    assert_allclose(out[MASK == 1], expected[MASK == 1], atol=1e-5)
    # Without a mask: every token is real.
    full = _normalized_by_hand(x, np.ones_like(MASK))
    assert_allclose(layer(x), gamma * np.einsum("l,blti->bti", _softmax(w), full), atol=1e-5)


def test_layer_norm_ignores_padding_and_the_rest_of_the_batch():
    x = _layers()
    layer = ScalarMix(initial_weights=[0.3, -1.2, 2.0], layer_norm=True)
    out = layer(x, padding_mask=MASK).numpy()
    garbage = x.copy()
    garbage[1, :, 3:] = 1e3 * RNG.normal(size=(3, 2, 4))
    assert_allclose(layer(garbage, padding_mask=MASK)[MASK == 1], out[MASK == 1], atol=1e-5)
    # Each sequence alone (without its padding) gives its output in the batch.
    for b, n in enumerate(MASK.sum(axis=1)):
        alone = layer(x[b : b + 1, :, :n], padding_mask=np.ones((1, n), np.int32))
        assert_allclose(alone[0], out[b, :n], atol=1e-5)
    # A very different batch mate changes nothing.
    other = np.stack([x[0], _normal(3, 5, 4, scale=50.0, loc=-20.0)])
    assert_allclose(layer(other, padding_mask=MASK)[0], out[0], atol=1e-5)


def test_mixed_precision_keeps_float32_weights():
    layer = ScalarMix(initial_weights=[0.1, 0.2], dtype="mixed_bfloat16")
    x = tf.constant(_normal(2, 2, 3, 4), tf.bfloat16)
    out = layer(x)
    assert out.dtype == tf.bfloat16
    assert layer.layer_weights.dtype == "float32"
    assert layer.scale.dtype == "float32"
    assert layer.mixing_weights().dtype == tf.float32
    assert_allclose(layer.mixing_weights(), _softmax(np.array([0.1, 0.2])), atol=1e-7)


def test_works_on_other_ranks():
    x = _normal(2, 3, 4)  # (B, L, D)
    assert_allclose(ScalarMix()(x), x.mean(axis=1), atol=1e-6)
    x = _normal(2, 3, 2, 5, 4)  # (B, L, S, T, D)
    assert_allclose(ScalarMix()(x), x.mean(axis=1), atol=1e-6)


@pytest.mark.parametrize("initial_weights", [[0.0, 1.0], [0.0] * 4, []])
def test_wrong_number_of_initial_weights(initial_weights):
    with pytest.raises(ValueError, match="initial_weights"):
        ScalarMix(initial_weights=initial_weights)(_layers())


@pytest.mark.parametrize("shape", [(2, 4), (5,)])
def test_inputs_need_rank_3(shape):
    with pytest.raises(ValueError, match="stacked on axis 1"):
        ScalarMix()(tf.ones(shape))


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"initial_weights": ["a", "b"]}, "initial_weights"),
        ({"initial_weights": 3}, "initial_weights"),
        ({"initial_scale": "1"}, "initial_scale"),
        ({"initial_scale": True}, "initial_scale"),
    ],
)
def test_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        ScalarMix(**kwargs)


def test_config_keeps_initial_weights():
    layer = ScalarMix(initial_weights=[1, 2, 3], initial_scale=2, layer_norm=True)
    restored = ScalarMix.from_config(layer.get_config())
    assert restored.initial_weights == [1.0, 2.0, 3.0]
    assert restored.initial_scale == 2.0 and restored.layer_norm
    assert isinstance(keras.saving.serialize_keras_object(layer), dict)
