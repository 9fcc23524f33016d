import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfnlp import layers
from tfnlp.layers import activations
from tfnlp.layers.activations import gelu

# float64 points, dense where Φ changes fastest, out into both tails.
X = np.concatenate([np.linspace(-12.0, 12.0, 24001), [-40.0, -6.5, 0.0, 1e-30, 40.0]])


def reference(x):
    """x Φ(x) and its derivative Φ(x) + x φ(x), from Python's float64 erf/erfc."""
    cdf = np.array([0.5 * math.erfc(-v / math.sqrt(2.0)) for v in x])
    density = np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    return x * cdf, cdf + x * density


def value_and_gradient(fn, x):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = fn(x)
    return y, tape.gradient(y, x)


def test_float64_matches_python_erf_to_the_last_digits():
    y, g = value_and_gradient(gelu, tf.constant(X))
    want_y, want_g = reference(X)
    # Absolute in the negative tail (1 + erf cancels there: ~1e-16 off),
    # relative elsewhere.
    np.testing.assert_allclose(y.numpy(), want_y, rtol=1e-14, atol=4e-15)
    np.testing.assert_allclose(g.numpy(), want_g, rtol=1e-14, atol=4e-15)


def test_float32_within_rounding_of_the_exact_value_and_of_keras():
    x = tf.constant(X, tf.float32)
    y, g = value_and_gradient(gelu, x)
    z = x.numpy().astype(np.float64)
    want_y, want_g = reference(z)
    # Where Φ(x) >= 1/2: within 2.5 float32 ulps of the result.
    upper = z >= 0.0
    np.testing.assert_allclose(y.numpy()[upper], want_y[upper], rtol=2.5e-7, atol=1e-30)
    # Everywhere: 1 + erf cancels as Φ(x) -> 0, so a few ulps of 1, times |x|.
    assert np.all(np.abs(y.numpy() - want_y) <= 2.5e-7 * np.maximum(np.abs(z), 1.0))
    np.testing.assert_allclose(g.numpy(), want_g, rtol=0, atol=2e-7)
    keras_y, keras_g = value_and_gradient(lambda v: keras.activations.gelu(v), x)
    np.testing.assert_allclose(y.numpy(), keras_y.numpy(), rtol=0, atol=2e-6)
    np.testing.assert_allclose(g.numpy(), keras_g.numpy(), rtol=0, atol=3e-7)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_is_as_close_to_the_exact_value_as_keras(dtype):
    x = tf.cast(tf.constant(np.linspace(-8.0, 8.0, 4001)), dtype)
    exact_y, exact_g = reference(tf.cast(x, tf.float64).numpy())
    errors = []
    for fn in (gelu, keras.activations.gelu):
        y, g = value_and_gradient(fn, x)
        assert y.dtype == x.dtype and g.dtype == x.dtype
        errors.append((np.abs(tf.cast(y, tf.float64).numpy() - exact_y).max(),
                       np.abs(tf.cast(g, tf.float64).numpy() - exact_g).max()))
    ours, theirs = errors
    # Keras measured 1.6e-3 / 1.0e-3 (float16), 9.8e-3 / 7.9e-3 (bfloat16).
    assert ours[0] <= 1.25 * theirs[0] and ours[1] <= 1.25 * theirs[1], (ours, theirs)
    assert ours[0] < 0.01 * 8 and ours[1] < 0.02, ours  # a few ulps at |y| = 8


def test_second_derivative_matches_the_closed_form():
    x = tf.constant(np.linspace(-6.0, 6.0, 241))
    with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = gelu(x)
        g = inner.gradient(y, x)
    second = outer.gradient(g, x).numpy()
    z = x.numpy()
    density = np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    np.testing.assert_allclose(second, (2.0 - z * z) * density, rtol=1e-12, atol=1e-14)


def test_upstream_gradient_is_multiplied_in_and_shapes_are_kept():
    x = tf.random.stateless_normal((3, 4, 5), seed=(1, 2))
    upstream = tf.random.stateless_normal((3, 4, 5), seed=(3, 4))
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = gelu(x)
    g = tape.gradient(y, x, upstream)
    _, want = reference(x.numpy().astype(np.float64).ravel())
    np.testing.assert_allclose(g.numpy().ravel(), upstream.numpy().ravel() * want, rtol=1e-5,
                               atol=1e-6)
    assert y.shape == x.shape


def test_graph_and_xla_within_the_documented_bounds():
    # XLA has its own erf: not bit-equal to the eager kernel in the tail.
    x = tf.constant(np.linspace(-8.0, 8.0, 1601), tf.float32)
    z = x.numpy().astype(np.float64)
    want_y, want_g = reference(z)
    for jit in (False, True):
        y, g = tf.function(lambda v: value_and_gradient(gelu, v), jit_compile=jit)(x)
        assert np.all(np.abs(y.numpy() - want_y) <= 2.5e-7 * np.maximum(np.abs(z), 1.0)), jit
        np.testing.assert_allclose(g.numpy(), want_g, rtol=0, atol=2e-7)


def test_integer_input_is_refused_naming_the_argument():
    with pytest.raises(TypeError, match=r"`x` must be a floating-point tensor, got dtype int32"):
        gelu(tf.constant([1, 2]))


def test_serialization_round_trip_and_keras_file(tmp_path):
    assert keras.activations.deserialize(keras.activations.serialize(gelu)) is gelu
    assert layers.gelu is gelu
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation=gelu)])
    model.save(tmp_path / "gelu.keras")
    loaded = keras.saving.load_model(tmp_path / "gelu.keras", safe_mode=True)
    assert loaded.layers[0].activation is gelu
    x = np.linspace(-3.0, 3.0, 8, dtype="float32").reshape(2, 4)
    np.testing.assert_array_equal(loaded(x).numpy(), model(x).numpy())


def test_fast_swaps_only_keras_exact_gelu():
    assert activations.fast(keras.activations.get("gelu")) is gelu
    for other in ("relu", "tanh", "linear", None):
        activation = keras.activations.get(other)
        assert activations.fast(activation) is activation


@pytest.mark.parametrize("make", [
    lambda: layers.TransformerBlock(num_heads=2, intermediate_dim=16, activation="gelu"),
    lambda: layers.TransformerDecoderBlock(num_heads=2, intermediate_dim=16, activation="gelu"),
])
def test_blocks_compute_gelu_with_it_and_keep_gelu_in_their_config(make):
    block = make()
    x = tf.random.stateless_normal((2, 5, 8), seed=(5, 6))
    if isinstance(block, layers.TransformerDecoderBlock):
        block(x, x)
    else:
        block(x)
    assert block._intermediate_dense.activation is gelu
    assert block.get_config()["activation"] == "gelu"
    rebuilt = type(block).from_config(block.get_config())
    assert rebuilt.activation is keras.activations.gelu


def test_masked_lm_head_computes_gelu_with_it():
    head = layers.MaskedLMHead(vocabulary_size=11)
    head(tf.ones((2, 5, 8)), masked_positions=tf.constant([[1, 2], [0, 3]]))
    assert head._transform.activation is gelu
    assert head.get_config()["activation"] == "gelu"


def test_symbolic_and_ragged_inputs(tmp_path):
    inputs = keras.Input((4,))
    model = keras.Model(inputs, gelu(inputs))
    x = np.linspace(-3.0, 3.0, 8, dtype="float32").reshape(2, 4)
    np.testing.assert_array_equal(model(x).numpy(), gelu(tf.constant(x)).numpy())
    model.save(tmp_path / "symbolic.keras")
    loaded = keras.saving.load_model(tmp_path / "symbolic.keras", safe_mode=True)
    np.testing.assert_array_equal(loaded(x).numpy(), model(x).numpy())
    half = keras.Input((4,), dtype="bfloat16")
    assert keras.Model(half, gelu(half))(x.astype("float32")).dtype == tf.bfloat16
    ragged = tf.ragged.constant([[1.0, -1.0], [0.5]])
    out = gelu(ragged)
    assert isinstance(out, tf.RaggedTensor)
    np.testing.assert_array_equal(out.flat_values.numpy(), gelu(ragged.flat_values).numpy())


def test_infinities():
    y = gelu(tf.constant([-np.inf, np.inf, np.nan], tf.float32)).numpy()
    assert np.isnan(y[0]) and y[1] == np.inf and np.isnan(y[2])


def test_the_tanh_approximation_is_googles_and_keras_and_up_to_4_7e_4_from_the_exact_gelu(tmp_path):
    x = tf.constant(X)
    # google-research/bert modeling.py since 2019-02-07, in float64.
    google = X * 0.5 * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (X + 0.044715 * X**3)))
    np.testing.assert_allclose(activations.gelu_approximate(x).numpy(), google, rtol=1e-14, atol=1e-14)
    x32 = tf.constant(X, tf.float32)
    np.testing.assert_allclose(activations.gelu_approximate(x32).numpy(),
                               keras.activations.gelu(x32, approximate=True).numpy(), atol=2e-6)
    difference = np.abs(google - reference(X)[0]).max()
    assert 4.6e-4 < difference < 4.8e-4
    assert layers.gelu_approximate is activations.gelu_approximate
    with pytest.raises(TypeError, match=r"`x` must be a floating-point tensor, got dtype int32"):
        activations.gelu_approximate(tf.constant([1, 2]))
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation=activations.gelu_approximate)])
    model.save(tmp_path / "gelu_approximate.keras")
    loaded = keras.saving.load_model(tmp_path / "gelu_approximate.keras", safe_mode=True)
    assert loaded.layers[0].activation is activations.gelu_approximate
