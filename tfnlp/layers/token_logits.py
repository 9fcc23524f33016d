"""Projection of hidden states onto a vocabulary, tied to an embedding or not."""

import keras
import tensorflow as tf

from tfnlp import _checks
from tfnlp.layers import _vocabulary


@keras.saving.register_keras_serializable(package="tfnlp")
class TokenLogits(keras.layers.Layer):
    """Vocabulary logits `h Wᵀ + b` of every position, in float32.

    Tied to `token_embedding` (a `keras.layers.Embedding` of the same width),
    `W` is the embedding matrix itself, as in "Attention Is All You Need"
    (section 3.4) where the decoder's embedding and pre-softmax projection
    share one matrix; otherwise the layer owns a `(hidden, vocabulary_size)`
    kernel. The logits are float32 under mixed precision so the softmax
    cross-entropy runs in float32. The embedding is not part of the config:
    models that tie (e.g. `TransformerSeq2Seq`) pass it again when they are
    rebuilt from their config.

    Args:
        vocabulary_size: int, number of output tokens.
        token_embedding: optional `keras.layers.Embedding` to tie to.
        use_bias: bool, add a per-token bias.
        kernel_initializer: initializer of the kernel (untied only).
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: tensor `(..., hidden)`.

    Returns:
        float32 logits `(..., vocabulary_size)`.

    Example:

    >>> embedding = keras.layers.Embedding(100, 16)
    >>> embedding.build((None,))
    >>> logits = TokenLogits(100, token_embedding=embedding)
    >>> logits(keras.ops.ones((2, 5, 16))).shape
    TensorShape([2, 5, 100])
    """

    def __init__(
        self,
        vocabulary_size,
        token_embedding=None,
        use_bias=True,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocabulary_size = _checks.positive_int("vocabulary_size", vocabulary_size)
        self.token_embedding = _checks.tied_embedding(token_embedding, self.vocabulary_size)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = _checks.initializer("kernel_initializer", kernel_initializer)

    def build(self, inputs_shape):
        hidden_dim = _checks.last_dim("inputs", inputs_shape)
        if self.token_embedding is not None:
            if self.token_embedding.output_dim != hidden_dim:
                raise ValueError(
                    f"The tied `token_embedding` has width {self.token_embedding.output_dim}, "
                    f"but `inputs` have hidden size {hidden_dim}."
                )
        else:
            self.kernel = self.add_weight(
                name="kernel",
                shape=(hidden_dim, self.vocabulary_size),
                initializer=self.kernel_initializer,
            )
        if self.use_bias:
            self.bias = self.add_weight(
                name="bias", shape=(self.vocabulary_size,), initializer="zeros"
            )
        self.built = True

    @_checks.errors_without_input_dump()
    def call(self, inputs):
        hidden_dim = (
            self.kernel.shape[0] if self.token_embedding is None else self.token_embedding.output_dim
        )
        _checks.tensors(("inputs", inputs, "...H", "float"), H=hidden_dim)
        # One 2-D matmul over all positions (a batched matmul would broadcast
        # the vocabulary matrix, see MaskedLMHead).
        flat = tf.reshape(inputs, [-1, tf.shape(inputs)[-1]])  # (N, H)
        if self.token_embedding is not None:
            kernel = _vocabulary.embedding_table(self.token_embedding, flat.dtype)
            logits = _vocabulary.tied_logits(flat, kernel)  # (N, V)
        else:
            logits = tf.matmul(flat, tf.cast(self.kernel, flat.dtype))
        logits = tf.cast(logits, tf.float32)
        if self.use_bias:
            logits += tf.cast(self.bias, tf.float32)
        return tf.reshape(logits, tf.concat([tf.shape(inputs)[:-1], [self.vocabulary_size]], 0))

    def compute_output_spec(self, inputs):
        return keras.KerasTensor(tuple(inputs.shape[:-1]) + (self.vocabulary_size,), "float32")

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "use_bias": self.use_bias,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config
