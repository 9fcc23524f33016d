"""ELMo's task-specific weighting of a model's layers."""

import keras
import tensorflow as tf

from tfnlp import _checks


@keras.saving.register_keras_serializable(package="tfnlp")
class ScalarMix(keras.layers.Layer):
    """`γ · Σ_j softmax(w)_j · h_j` over the layers `h_j` of a model.

    Each task learns its own mix of a pretrained model's layers (Peters et
    al., 2018, eq. 1): scalar weights `w` (one per layer, normalised by a
    softmax) and a global scale `γ`. With `layer_norm=True` each layer is
    first normalised to zero mean and unit variance over the real tokens
    and features of its own sequence (AllenNLP normalises over the whole
    batch; per sequence keeps a sentence's vectors independent of what it
    is batched with and of padding).

    The weights are float32 whatever the dtype policy, and the sum is taken
    in float32.

    Args:
        initial_weights: optional list of floats, `w` at the start (default
            zeros: the mean of the layers).
        initial_scale: float, `γ` at the start.
        layer_norm: bool.
        **kwargs: base layer arguments (`name`, `dtype`, `trainable`, ...).

    Call arguments:
        inputs: tensor `(B, L, ..., D)`: the `L` layers stacked on axis 1.
        padding_mask: optional `(B, ...)` (1 real, 0 padding), used by the
            layer normalisation only.

    Returns:
        Tensor `(B, ..., D)` in the layer's compute dtype.

    Example:

    >>> mix = ScalarMix()
    >>> layers = tf.stack([tf.ones((2, 5, 8)), 3 * tf.ones((2, 5, 8))], axis=1)
    >>> float(mix(layers)[0, 0, 0])  # equal weights: the mean
    2.0
    """

    def __init__(self, initial_weights=None, initial_scale=1.0, layer_norm=False, **kwargs):
        super().__init__(**kwargs)
        if initial_weights is not None:
            if isinstance(initial_weights, (str, bytes)) or not hasattr(initial_weights, "__iter__"):
                raise ValueError(
                    f"`initial_weights` must be a list of numbers, got {initial_weights!r}."
                )
            initial_weights = [
                _checks.finite_float(f"initial_weights[{i}]", w)
                for i, w in enumerate(initial_weights)
            ]
        self.initial_weights = initial_weights
        self.initial_scale = _checks.finite_float("initial_scale", initial_scale)
        self.layer_norm = bool(layer_norm)

    def build(self, inputs_shape, padding_mask_shape=None):
        if inputs_shape is None or len(inputs_shape) < 3 or inputs_shape[1] is None:
            raise ValueError(
                "`inputs` must be the layers stacked on axis 1, (batch, layers, ..., features), "
                f"with a known number of layers; got shape {inputs_shape}."
            )
        num_layers = int(inputs_shape[1])
        initial = self.initial_weights
        if initial is None:  # not `or`: an empty list is a wrong length, not the default
            initial = [0.0] * num_layers
        if len(initial) != num_layers:
            raise ValueError(
                f"`initial_weights` has {len(initial)} entries but `inputs` have {num_layers} layers."
            )
        self.layer_weights = self.add_weight(
            name="layer_weights",
            shape=(num_layers,),
            initializer=keras.initializers.Constant(initial),
            dtype="float32",
            autocast=False,
        )
        self.scale = self.add_weight(
            name="scale",
            shape=(),
            initializer=keras.initializers.Constant(self.initial_scale),
            dtype="float32",
            autocast=False,
        )
        self.built = True

    def mixing_weights(self):
        """`softmax(w)`, float32 `(L,)`."""
        return tf.nn.softmax(tf.convert_to_tensor(self.layer_weights))

    @_checks.errors_without_input_dump()
    def call(self, inputs, padding_mask=None):
        rank = tf.TensorShape(inputs.shape).rank
        middle = "TUVWXYZ"[: max((rank or 3) - 3, 0)]  # the "..." axes of (B, L, ..., D)
        _checks.tensors(
            ("inputs", inputs, "BL" + middle + "D", "number"),
            ("padding_mask", padding_mask, None if rank is None else "B" + middle, "mask"),
            L=(self.layer_weights.shape[0], "the layers the mix was built for"),
        )
        x = tf.cast(inputs, tf.float32)  # (B, L, ..., D)
        rank = x.shape.rank
        if self.layer_norm:
            if padding_mask is None:
                shape = tf.shape(x)
                mask = tf.ones(tf.concat([shape[:1], shape[2:-1]], 0), tf.float32)
            else:
                mask = tf.cast(padding_mask, tf.float32)
            mask = mask[:, None, ..., None]  # (B, 1, ..., 1)
            axes = list(range(2, rank))
            count = tf.reduce_sum(mask, axis=axes, keepdims=True) * tf.cast(tf.shape(x)[-1], tf.float32)
            count = tf.maximum(count, 1.0)
            mean = tf.reduce_sum(x * mask, axis=axes, keepdims=True) / count
            variance = tf.reduce_sum(tf.square(x - mean) * mask, axis=axes, keepdims=True) / count
            x = (x - mean) * tf.math.rsqrt(variance + 1e-12) * mask
        weights = tf.reshape(self.mixing_weights(), [1, -1] + [1] * (rank - 2))
        mixed = self.scale * tf.reduce_sum(weights * x, axis=1)
        return tf.cast(mixed, self.compute_dtype)

    def compute_output_shape(self, inputs_shape, padding_mask_shape=None):
        return (inputs_shape[0],) + tuple(inputs_shape[2:])

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "initial_weights": self.initial_weights,
                "initial_scale": self.initial_scale,
                "layer_norm": self.layer_norm,
            }
        )
        return config
