"""Learned position embedding."""

import keras
import tensorflow as tf

from tfnlp import _checks


@keras.saving.register_keras_serializable(package="tfnlp")
class PositionEmbedding(keras.layers.Layer):
    """A learned embedding for each position up to `sequence_length`.

    Takes a sequence of vectors `(B, T, D)` and returns the position
    embeddings of positions `start_index .. start_index + T - 1`, broadcast to
    the input's shape, ready to be added to it. `start_index` lets a cached
    decoder embed the one new token at position `t` alone.

    Args:
        sequence_length: int, the number of positions in the table (the
            longest sequence the layer accepts).
        initializer: initializer of the `(sequence_length, D)` table.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: tensor `(B, T, D)` (only its shape is used).
        start_index: int or scalar int tensor, the position of the first
            input step. Defaults to 0.

    Returns:
        Tensor `(B, T, D)` in the layer's compute dtype.

    Raises:
        ValueError: when `start_index + T` exceeds `sequence_length` or
            `start_index` is negative (at trace time if they are static or
            eager, otherwise at run time as an `InvalidArgumentError`), or
            when the feature size differs from the built table's.

    Example:

    >>> tokens = keras.ops.ones((2, 5, 16))
    >>> layer = PositionEmbedding(sequence_length=128)
    >>> layer(tokens).shape
    TensorShape([2, 5, 16])
    >>> layer(tokens[:, :1], start_index=4).shape  # the fifth position only
    TensorShape([2, 1, 16])

    References:
        Devlin et al., "BERT: Pre-training of Deep Bidirectional Transformers
        for Language Understanding", 2019.
    """

    def __init__(self, sequence_length, initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        self.sequence_length = _checks.positive_int("sequence_length", sequence_length)
        self.initializer = _checks.initializer("initializer", initializer)
        self.supports_masking = True  # the mask of the inputs passes through

    def build(self, inputs_shape):
        feature_size = _checks.last_dim("inputs", inputs_shape)
        self.position_embeddings = self.add_weight(
            name="embeddings",
            shape=(self.sequence_length, feature_size),
            initializer=self.initializer,
            trainable=True,
        )
        super().build(inputs_shape)

    @_checks.errors_without_input_dump()
    def call(self, inputs, start_index=0):
        _checks.tensors(("inputs", inputs, "...TD", None), D=self.position_embeddings.shape[1])
        shape = tf.shape(inputs)
        length = shape[-2]
        static_length = inputs.shape[-2]
        static_start = _checks.static_index("start_index", start_index)
        if (
            static_length is not None
            and static_start is not None
            and static_start + static_length > self.sequence_length
        ):
            raise ValueError(
                f"The input has {static_length} positions starting at "
                f"start_index={static_start}, but `sequence_length` is "
                f"{self.sequence_length}: the position table is too short."
            )
        start_index = tf.cast(start_index, tf.int32)
        end = start_index + length
        with tf.control_dependencies(
            [
                tf.debugging.assert_less_equal(
                    end,
                    self.sequence_length,
                    message=(
                        "PositionEmbedding: start_index + input length exceeds "
                        f"sequence_length={self.sequence_length}"
                    ),
                ),
                tf.debugging.assert_non_negative(
                    start_index, message="PositionEmbedding: `start_index` must be >= 0"
                ),
            ]
        ):
            table = tf.slice(
                tf.convert_to_tensor(self.position_embeddings),
                tf.stack([start_index, 0]),
                tf.stack([length, -1]),
            )
        return tf.broadcast_to(tf.cast(table, self.compute_dtype), shape)

    def compute_output_shape(self, inputs_shape):
        return inputs_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "sequence_length": self.sequence_length,
                "initializer": keras.initializers.serialize(self.initializer),
            }
        )
        return config
