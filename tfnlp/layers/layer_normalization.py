"""Layer normalization over the last axis with a hand-written gradient."""

import keras
import tensorflow as tf

from tfnlp import _checks


@keras.saving.register_keras_serializable(package="tfnlp")
class LayerNormalization(keras.layers.LayerNormalization):
    """`keras.layers.LayerNormalization`, with a faster backward pass over the last axis.

    `y = γ (x - μ) / √(σ² + ε) + β`, statistics over the last axis,
    computed in float32 under mixed precision (as Keras does) and in
    float64 for float64 inputs. The gradient with respect to `x` is
    written out,
    `dx = (g - mean(g) - x̂ mean(g x̂)) / √(σ² + ε)` with `g = γ dy`,
    instead of being derived op by op through the moments, which is faster
    on a CPU than Keras' (benchmarks/README.md, "BERT pretraining", item
    5). Other axes, RMS scaling, or `center`/`scale` off fall back to
    Keras' own computation. Same arguments, weights and config as
    `keras.layers.LayerNormalization`.

    Args:
        axis: int or list of ints (default -1).
        epsilon: positive float added to the variance.
        center: bool, add the learned offset β.
        scale: bool, multiply by the learned scale γ.
        beta_initializer: initializer of β.
        gamma_initializer: initializer of γ.
        beta_regularizer: optional regularizer of β.
        gamma_regularizer: optional regularizer of γ.
        beta_constraint: optional constraint on β.
        gamma_constraint: optional constraint on γ.
        **kwargs: base layer arguments (`rms_scaling`, `dtype`, `name`, ...).

    Call arguments:
        inputs: a float tensor.

    Returns:
        The normalized tensor, in the layer's compute dtype.

    Example:

    >>> layer = LayerNormalization(epsilon=1e-12)
    >>> y = layer(tf.constant([[1.0, 2.0, 3.0, 6.0]]))
    >>> [round(float(v), 4) for v in y[0]]
    [-1.069, -0.5345, 0.0, 1.6036]
    """

    def __init__(self, axis=-1, epsilon=1e-3, **kwargs):
        epsilon = _checks.positive_float("epsilon", epsilon)
        super().__init__(axis=axis, epsilon=epsilon, **kwargs)

    @_checks.errors_without_input_dump()
    def call(self, inputs):
        _checks.tensors(("inputs", inputs, None, "number"))
        axis = self.axis if isinstance(self.axis, int) else (
            self.axis[0] if len(self.axis) == 1 else None
        )
        rank = inputs.shape.rank if hasattr(inputs.shape, "rank") else len(inputs.shape)
        if rank is None or axis not in (-1, rank - 1) or self.rms_scaling or not (
            self.center and self.scale
        ):
            return super().call(inputs)
        _checks.tensors(("inputs", inputs, "...D", None), D=self.gamma.shape[0])
        # float16/bfloat16 are normalized in float32 (as Keras); float64 stays float64.
        dtype = tf.float64 if inputs.dtype == tf.float64 else tf.float32
        normalized = _normalize(tf.cast(inputs, dtype), float(self.epsilon))
        outputs = normalized * tf.cast(self.gamma, dtype) + tf.cast(self.beta, dtype)
        return tf.cast(outputs, self.compute_dtype)


def _normalize(x, epsilon):
    @tf.custom_gradient
    def forward(x):
        centered = x - tf.reduce_mean(x, -1, keepdims=True)
        inverse = tf.math.rsqrt(tf.reduce_mean(tf.square(centered), -1, keepdims=True) + epsilon)
        normalized = centered * inverse

        def grad(upstream):
            mean_upstream = tf.reduce_mean(upstream, -1, keepdims=True)
            mean_projection = tf.reduce_mean(upstream * normalized, -1, keepdims=True)
            return inverse * (upstream - mean_upstream - normalized * mean_projection)

        return normalized, grad

    return forward(x)
