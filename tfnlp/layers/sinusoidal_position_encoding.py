"""Fixed sinusoidal position encoding."""

import keras
import tensorflow as tf

from tfnlp import _checks


@keras.saving.register_keras_serializable(package="tfnlp")
class SinusoidalPositionEncoding(keras.layers.Layer):
    """The fixed sine/cosine position encoding of "Attention Is All You Need".

    `PE(pos, 2i) = sin(pos / max_wavelength^(2i/d))` and
    `PE(pos, 2i+1) = cos(pos / max_wavelength^(2i/d))`, for any length and
    any (also odd) feature size `d`. The layer has no weights. The table is
    always computed in float32, then cast to the compute dtype, so positions
    stay exact under a `mixed_bfloat16` or `mixed_float16` policy.

    Args:
        max_wavelength: float, the base of the geometric progression of
            wavelengths (10000 in the paper).
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: tensor `(B, T, D)` (only its shape is used).
        start_index: int or scalar int tensor, the position of the first
            input step (for cached decoding). Defaults to 0.

    Returns:
        Tensor `(B, T, D)` in the layer's compute dtype.

    Example:

    >>> embeddings = keras.ops.zeros((2, 10, 8))
    >>> encoding = SinusoidalPositionEncoding()(embeddings)
    >>> float(encoding[0, 0, 1])  # cos(0)
    1.0

    References:
        Vaswani et al., "Attention Is All You Need", 2017, section 3.5.
    """

    def __init__(self, max_wavelength=10000.0, **kwargs):
        super().__init__(**kwargs)
        self.max_wavelength = _checks.positive_float("max_wavelength", max_wavelength)
        self.supports_masking = True  # the mask of the inputs passes through
        self.built = True

    @_checks.errors_without_input_dump()
    def call(self, inputs, start_index=0):
        _checks.tensors(("inputs", inputs, "...TD", None))
        _checks.static_index("start_index", start_index)  # a known index must be >= 0
        shape = tf.shape(inputs)
        length, depth = shape[-2], shape[-1]
        positions = tf.cast(tf.range(length) + tf.cast(start_index, tf.int32), tf.float32)
        dims = tf.range(depth)
        even_dims = tf.cast(dims - dims % 2, tf.float32)  # 2i for both 2i and 2i+1
        inverse_wavelengths = tf.pow(
            tf.constant(self.max_wavelength, tf.float32),
            -even_dims / tf.cast(depth, tf.float32),
        )
        angles = positions[:, None] * inverse_wavelengths[None, :]  # (T, D)
        encoding = tf.where(dims[None, :] % 2 == 0, tf.sin(angles), tf.cos(angles))
        return tf.broadcast_to(tf.cast(encoding, self.compute_dtype), shape)

    def compute_output_shape(self, inputs_shape):
        return inputs_shape

    def get_config(self):
        config = super().get_config()
        config.update({"max_wavelength": self.max_wavelength})
        return config
