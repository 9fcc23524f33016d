"""Highway layer (Srivastava et al., 2015), as used after ELMo's character CNN."""

import keras
import tensorflow as tf

from tfnlp import _checks


@keras.saving.register_keras_serializable(package="tfnlp")
class Highway(keras.layers.Layer):
    """`y = t ⊙ g(W_h x + b_h) + (1 - t) ⊙ x` with `t = sigmoid(W_t x + b_t)`.

    The transform gate `t` decides, per feature, how much of the non-linear
    transform replaces the input; the rest of the input is carried through
    unchanged. Its bias starts at `gate_bias` (-2 by default, as in bilm-tf
    and the paper's advice), so a new highway layer mostly carries its input
    and deep stacks train from the start. Input and output have the same
    width.

    Args:
        activation: the transform's activation (`"relu"` in ELMo).
        gate_bias: float, initial bias of the transform gate.
        kernel_initializer: initializer of both kernels.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: tensor `(..., width)`.

    Returns:
        Tensor `(..., width)`.

    Example:

    >>> highway = Highway()
    >>> highway(keras.ops.ones((2, 5, 8))).shape
    TensorShape([2, 5, 8])

    References:
        Srivastava et al., "Training Very Deep Networks", 2015.
    """

    def __init__(self, activation="relu", gate_bias=-2.0, kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        self.activation = _checks.activation("activation", activation)
        self.gate_bias = _checks.finite_float("gate_bias", gate_bias)
        self.kernel_initializer = _checks.initializer("kernel_initializer", kernel_initializer)

    def build(self, inputs_shape):
        width = _checks.last_dim("inputs", inputs_shape)
        # One (width, 2 * width) kernel: the transform and the gate in one matmul.
        self.kernel = self.add_weight(
            name="kernel", shape=(width, 2 * width), initializer=self.kernel_initializer
        )
        self.bias = self.add_weight(
            name="bias",
            shape=(2 * width,),
            initializer=keras.initializers.Constant([0.0] * width + [self.gate_bias] * width),
        )
        self.built = True

    @_checks.errors_without_input_dump()
    def call(self, inputs):
        width = self.kernel.shape[0]
        _checks.tensors(("inputs", inputs, "...W", "float"), W=width)
        flat = tf.reshape(inputs, [-1, width])
        projected = tf.matmul(flat, tf.cast(self.kernel, flat.dtype)) + tf.cast(self.bias, flat.dtype)
        transform = self.activation(projected[:, :width])
        gate = tf.sigmoid(projected[:, width:])
        outputs = gate * transform + (1.0 - gate) * flat
        return tf.reshape(outputs, tf.shape(inputs))

    def compute_output_shape(self, inputs_shape):
        return tuple(inputs_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "activation": keras.activations.serialize(self.activation),
                "gate_bias": self.gate_bias,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config
