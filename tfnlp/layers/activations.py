"""GELU with a written-out gradient, its tanh approximation, and the switch that puts GELU under Keras' "gelu"."""

import math

import keras
import tensorflow as tf

_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


@keras.saving.register_keras_serializable(package="tfnlp")
def gelu(x):
    """Exact GELU, `x Φ(x)`, with a written-out gradient: faster BERT training on CPU.

    `Φ(x) = (1 + erf(x / √2)) / 2` is the standard normal CDF (Hendrycks &
    Gimpel, 2016; BERT's activation). The same function as
    `keras.activations.gelu(x, approximate=False)` (which is
    `tf.nn.gelu`), computed like it in the input's dtype. Faster because
    it computes `erf`, which TensorFlow's CPU kernels vectorize (not
    `tf.nn.gelu`'s `erfc`), and writes its gradient out,
    `Φ(x) + x φ(x)` with `φ` the normal density, reusing the forward's
    `Φ(x)` instead of differentiating op by op; the BERT training steps it
    speeds up are measured in `benchmarks/README.md` (BERT section, "GELU").
    As `(1 + erf)` cancels where `Φ(x)`
    is small, the result is exact to a few ulps of 1 times `|x|` rather than
    of `x Φ(x)` itself for `x < 0`: in float32 at most `2.5e-7 max(|x|, 1)`
    off, and the gradient at most 2e-7 off, everywhere (tested).

    At infinities: `gelu(inf)` is inf and `gelu(-inf)` NaN (Keras' gives
    NaN too), except that TensorFlow's float64 `erf` kernel returns NaN at
    ±inf, so outside XLA `gelu(inf)` is NaN in float64.

    tfnlp's blocks and heads built with `activation="gelu"` use this
    function; their config still says `"gelu"`.

    Args:
        x: a floating-point tensor, `tf.RaggedTensor` or symbolic
            `keras.KerasTensor` (which gets an `Activation` layer, so a
            Functional model using it saves and loads).

    Returns:
        A tensor of the shape, dtype and kind of `x`.

    Example:

    >>> [round(float(v), 4) for v in gelu(tf.constant([-1.0, 0.0, 1.0]))]
    [-0.1587, 0.0, 0.8413]
    """
    return _elementwise(gelu, _gelu, x)


@tf.custom_gradient
def _gelu(x):
    cdf = 0.5 + 0.5 * tf.math.erf(x * tf.constant(_SQRT_HALF, x.dtype))

    def grad(upstream):
        density = tf.constant(_INV_SQRT_2PI, x.dtype) * tf.exp(-0.5 * tf.square(x))
        return upstream * (cdf + x * density)

    return x * cdf, grad


@keras.saving.register_keras_serializable(package="tfnlp")
def gelu_approximate(x):
    """GELU's tanh approximation, `x (1 + tanh(√(2/π) (x + 0.044715 x³))) / 2`.

    What google-research/bert's `modeling.py` computes for `"gelu"` since
    2019-02-07 (commit bee6030; its October 2018 code computed the exact
    erf form), Hugging Face's `"gelu_new"` / `"gelu_pytorch_tanh"` and
    `keras.activations.gelu(x, approximate=True)`. It differs from the
    exact `gelu` by up to about 4.7e-4 (near `|x| = 2.7`); which released
    checkpoints were trained with which is in `docs/weights.md`.

    Args:
        x: a floating-point tensor, `tf.RaggedTensor` or symbolic
            `keras.KerasTensor`.

    Returns:
        A tensor of the shape, dtype and kind of `x`.

    Example:

    >>> [round(float(v), 4) for v in gelu_approximate(tf.constant([-1.0, 0.0, 1.0]))]
    [-0.1588, 0.0, 0.8412]
    """
    return _elementwise(gelu_approximate, _gelu_approximate, x)


def _gelu_approximate(x):
    # (1 + tanh(z)) / 2 as sigmoid(2z), the same function: it does not cancel
    # where tanh(z) nears -1, which in bfloat16 cost half of the value at x = -3.
    inner = tf.constant(2.0 * _SQRT_2_OVER_PI, x.dtype) * (x + tf.constant(0.044715, x.dtype) * x * x * x)
    return x * tf.sigmoid(inner)


def _elementwise(activation, compute, x):
    """`compute(x)` for a float tensor; an `Activation` layer for a symbolic `x`, per value if ragged."""
    if isinstance(x, keras.KerasTensor):
        return keras.layers.Activation(activation, dtype=x.dtype)(x)
    if isinstance(x, tf.RaggedTensor):
        return tf.ragged.map_flat_values(activation, x)
    x = tf.convert_to_tensor(x)
    if not x.dtype.is_floating:
        raise TypeError(f"`x` must be a floating-point tensor, got dtype {x.dtype.name}.")
    return compute(x)


def fast(activation):
    """The activation tfnlp computes for `activation`: `gelu` above for Keras' exact GELU.

    Any other activation (including the tanh approximation, which Keras
    only reaches through `approximate=True`) is returned unchanged.

    Example:

    >>> fast(keras.activations.get("gelu")) is gelu
    True
    >>> fast(keras.activations.relu) is keras.activations.relu
    True
    """
    return gelu if activation is keras.activations.gelu else activation
