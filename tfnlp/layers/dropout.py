"""Dropout drawing 16 random bits per element instead of a float32 uniform."""

import keras
import tensorflow as tf

from tfnlp import _checks, _devices

_LEVELS = 1 << 16


@keras.saving.register_keras_serializable(package="tfnlp")
class Dropout(keras.layers.Dropout):
    """`keras.layers.Dropout`, about twice as fast on CPU.

    Keras draws one float32 uniform per element (32 random bits), then
    compares, scales and selects in separate passes. This layer splits each
    32-bit word of the same stateless Philox stream into two 16-bit draws,
    so it generates half the random bits, and keeps an element when its
    draw is at least `round(rate * 65536)`: the drop probability is `rate`
    rounded to a multiple of 1/65,536 (0.1 becomes 0.100006; a rate below
    1/131,072 drops nothing, one above 1 - 1/65,536 keeps 1/65,536). Kept
    elements are scaled by `1 / (1 - rounded rate)`, so the expected output
    is exactly the input; `rate=1` gives zeros, as in Keras. It is faster
    than Keras' dropout on attention-weight tensors (benchmarks/README.md).
    The draws name the Philox algorithm (the bits TensorFlow's default gives
    on CPUs and GPUs), which XLA on a CPU generates far faster than the
    default (`_devices.random_algorithm`): the masks are the same with and
    without `jit_compile`.

    Same arguments, seeding (the layer's `SeedGenerator`, so dropout
    masks are reproducible and their state is checkpointed), `noise_shape`
    and config as `keras.layers.Dropout`; with `training=False` or
    `rate=0` the input is returned unchanged.

    Args:
        rate: float in [0, 1], the fraction of elements to drop.
        noise_shape: optional shape of the keep mask, broadcast to the
            input (e.g. `(batch, 1, features)`).
        seed: optional int.
        **kwargs: base layer arguments.

    Call arguments:
        inputs: a tensor of any shape and float dtype.
        training: bool; dropout happens only when true.

    Returns:
        A tensor like `inputs`: each element zeroed with probability `rate`
        (rounded as above), otherwise scaled by `1 / (1 - rounded rate)`.

    Example:

    >>> layer = Dropout(0.5, seed=1)
    >>> outputs = layer(tf.ones((2, 1000)), training=True)
    >>> sorted(set(outputs.numpy().ravel().tolist()))
    [0.0, 2.0]
    >>> layer(tf.ones((2, 3)), training=False).numpy().tolist()
    [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]
    """

    @_checks.errors_without_input_dump()
    def call(self, inputs, training=False):
        if not training or self.rate == 0:
            return inputs
        inputs = tf.convert_to_tensor(inputs)
        _checks.tensors(("inputs", inputs, None, "float"))  # ints would not be rescaled
        if self.noise_shape is not None and inputs.shape.rank is not None:
            _check_noise_shape(self.noise_shape, inputs.shape)
        if self.rate >= 1:
            return tf.zeros_like(inputs)  # as Keras
        return apply_keep_mask(inputs, *self._keep_mask(tf.shape(inputs)))

    def _keep_mask(self, shape):
        """The next boolean keep mask of `shape` (`noise_shape` applied), and the scale.

        The scale `1 / (1 - rounded rate)` is a Python float, so that the
        expectation stays exactly the input. For `0 < rate < 1` only.
        """
        if self.noise_shape is not None:
            shape = tf.stack(
                [shape[i] if dim is None else dim for i, dim in enumerate(self.noise_shape)]
            )
        size = tf.reduce_prod(shape)
        seed = tf.cast(self.seed_generator.next(), tf.int32)
        words = tf.random.stateless_uniform(
            [(size + 1) // 2], seed, minval=None, maxval=None, dtype=tf.uint32,
            alg=_devices.random_algorithm(),  # the same bits, faster under XLA on CPUs
        )
        threshold = min(int(round(self.rate * _LEVELS)), _LEVELS - 1)
        # The low and high halves of each word are two independent 16-bit
        # draws; "high half >= t" is "word >= t * 2^16", one comparison.
        low = tf.bitwise.bitwise_and(words, _LEVELS - 1) >= threshold
        high = words >= tf.constant(threshold * _LEVELS, tf.uint32)
        keep = tf.reshape(tf.concat([low, high], 0)[:size], shape)
        return keep, _LEVELS / (_LEVELS - threshold)


def apply_keep_mask(inputs, keep, scale):
    """`inputs * scale` where `keep` (broadcast), else 0: dropout by a drawn mask."""
    return tf.where(keep, inputs * tf.cast(scale, inputs.dtype), tf.zeros((), inputs.dtype))


def _check_noise_shape(noise_shape, shape):
    """Each entry of `noise_shape` must be None, 1 or the input's size on that axis."""
    if len(noise_shape) != shape.rank or any(
        dim not in (None, 1, size) for dim, size in zip(noise_shape, shape, strict=True)
        if size is not None
    ):
        raise ValueError(
            f"`noise_shape` {tuple(noise_shape)} does not broadcast to the input's shape "
            f"{shape}: it needs one entry per axis, each None, 1 or the input's size."
        )
