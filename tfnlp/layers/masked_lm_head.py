"""Masked-language-model head applied at the masked positions only."""

import keras
import tensorflow as tf

from tfnlp import _checks
from tfnlp.layers import _vocabulary, activations
from tfnlp.layers.layer_normalization import LayerNormalization


@keras.saving.register_keras_serializable(package="tfnlp")
class MaskedLMHead(keras.layers.Layer):
    """BERT's masked-LM head, computed only at the gathered masked positions.

    Gathers the `P` masked positions of the sequence first, then applies
    `Dense(hidden, activation) -> LayerNorm -> vocabulary projection + bias`.
    Projecting `P` vectors instead of all `T` makes the vocabulary-sized
    matmul (and its gradient) `T / P` times cheaper (6.4x for 128 / 20).

    The projection is tied to the token embedding when `token_embedding` (a
    `keras.layers.Embedding`) is given: logits = `h Eᵀ + b`. Without it the
    head owns a `(hidden, vocabulary_size)` kernel. The embedding is not part
    of the config: models that tie (e.g. `BertPretrainer`) pass it again when
    they are rebuilt from their config.

    Args:
        vocabulary_size: int, number of output classes.
        token_embedding: optional `keras.layers.Embedding` to tie to.
        activation: activation of the transform (`"gelu"` in BERT).
        layer_norm_epsilon: float.
        kernel_initializer: initializer of the kernels.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: tensor `(B, T, hidden)`, the encoder's sequence output.
        masked_positions: int tensor `(B, P)`, positions in `[0, T)`; others
            raise a ValueError (in a graph, an `InvalidArgumentError` at run
            time; not checked under XLA). `None`: `inputs` are already the
            `(B, P, hidden)` outputs at the masked positions (as a
            `TransformerBlock` with `output_positions` returns them).

    Returns:
        Logits `(B, P, vocabulary_size)`, float32 under mixed precision (so
        the softmax cross-entropy runs in float32).

    Example:

    >>> head = MaskedLMHead(vocabulary_size=100)
    >>> sequence = keras.ops.ones((2, 16, 32))
    >>> head(sequence, masked_positions=tf.constant([[1, 5], [0, 3]])).shape
    TensorShape([2, 2, 100])

    References:
        Devlin et al., "BERT", 2019, appendix A.1 (the gathered, tied head as
        in the released code).
    """

    def __init__(
        self,
        vocabulary_size,
        token_embedding=None,
        activation="gelu",
        layer_norm_epsilon=1e-12,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocabulary_size = _checks.positive_int("vocabulary_size", vocabulary_size)
        self.token_embedding = _checks.tied_embedding(token_embedding, self.vocabulary_size)
        self.activation = _checks.activation("activation", activation)
        self.layer_norm_epsilon = _checks.positive_float(
            "layer_norm_epsilon", layer_norm_epsilon
        )
        self.kernel_initializer = _checks.initializer("kernel_initializer", kernel_initializer)

    def build(self, inputs_shape, masked_positions_shape=None):
        hidden_dim = _checks.last_dim("inputs", inputs_shape)
        if self.token_embedding is not None and self.token_embedding.output_dim != hidden_dim:
            raise ValueError(
                f"The tied `token_embedding` has width {self.token_embedding.output_dim}, "
                f"but `inputs` have hidden size {hidden_dim}."
            )
        self._transform = keras.layers.Dense(
            hidden_dim,
            activation=activations.fast(self.activation),
            kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy,
            name="transform",
        )
        self._transform.build((None, None, hidden_dim))
        self._norm = LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name="transform_norm"
        )
        self._norm.build((None, None, hidden_dim))
        if self.token_embedding is None:
            self.output_kernel = self.add_weight(
                name="output_kernel",
                shape=(hidden_dim, self.vocabulary_size),
                initializer=self.kernel_initializer,
            )
        self.output_bias = self.add_weight(
            name="output_bias", shape=(self.vocabulary_size,), initializer="zeros"
        )
        self.built = True

    @_checks.errors_without_input_dump()
    def call(self, inputs, masked_positions=None):
        _checks.tensors(
            ("inputs", inputs, "BTH", "float"),
            ("masked_positions", masked_positions, "BP", "int"),
            H=self._transform.kernel.shape[0],
        )
        gathered = inputs
        if masked_positions is not None:
            masked_positions = _checks.positions_in_range(
                "masked_positions", masked_positions, inputs, "the length of `inputs`"
            )
            gathered = tf.gather(inputs, masked_positions, batch_dims=1)  # (B, P, H)
        hidden = self._norm(self._transform(gathered))
        # One 2-D matmul: a (B, P, H) x (V, H) batched matmul would broadcast
        # the vocabulary matrix and reduce a per-batch gradient of it (slower:
        # benchmarks/README.md, BERT section, "The masked-LM head's product").
        flat = tf.reshape(hidden, [-1, tf.shape(hidden)[-1]])  # (B * P, H)
        if self.token_embedding is not None:
            kernel = _vocabulary.embedding_table(self.token_embedding, hidden.dtype)
            logits = _vocabulary.tied_logits(flat, kernel)  # (B * P, V)
        else:
            logits = tf.matmul(flat, tf.cast(self.output_kernel, hidden.dtype))
        logits = tf.cast(logits, tf.float32) + tf.cast(self.output_bias, tf.float32)
        return tf.reshape(logits, tf.concat([tf.shape(hidden)[:-1], [self.vocabulary_size]], 0))

    def compute_output_spec(self, inputs, masked_positions=None):
        rows = inputs.shape[:2] if masked_positions is None else masked_positions.shape
        return keras.KerasTensor(tuple(rows) + (self.vocabulary_size,), dtype="float32")

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "activation": keras.activations.serialize(self.activation),
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config
