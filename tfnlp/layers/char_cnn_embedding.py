"""ELMo's context-independent token vectors from characters."""


import keras
import tensorflow as tf

from tfnlp import _checks
from tfnlp.layers.highway import Highway

# The n-gram filters of the original ELMo: (width, count), 2048 in all.
ELMO_FILTERS = ((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024))


def _positive_int(value):
    return _checks.is_int(value) and value > 0


def _check_filters(filters):
    try:
        pairs = tuple((w, n) for w, n in filters)
    except (TypeError, ValueError):
        raise ValueError(
            f"`filters` must be a sequence of (width, count) pairs, got {filters!r}."
        ) from None
    # Integers only: int() would silently truncate 1.5 or parse "2".
    if not pairs or not all(_positive_int(w) and _positive_int(n) for w, n in pairs):
        raise ValueError(
            f"`filters` must be a non-empty sequence of positive (width, count) pairs, got {filters!r}."
        )
    return tuple((int(w), int(n)) for w, n in pairs)


@keras.saving.register_keras_serializable(package="tfnlp")
class CharCNNEmbedding(keras.layers.Layer):
    """Character ids of each token -> one token vector (Kim et al.; ELMo).

    For every token: character embeddings `(C, character_dim)`, then for
    each `(width, count)` in `filters` a convolution of that width over the
    characters, max-pooled over positions and passed through `activation`
    (one feature per filter: a learned character n-gram detector), the
    features of all widths concatenated, `num_highway_layers` `Highway`
    layers and a linear projection to `output_dim`. Tokens are independent
    of one another: padding tokens (all character ids 0, as produced by
    `tfnlp.data.character_ids` for the empty string) never influence real
    ones, and their output is zeros.

    Args:
        output_dim: int, width of the token vectors.
        filters: sequence of `(width, count)` pairs (default: ELMo's 2048
            filters of widths 1-7).
        character_vocabulary_size: int, number of character ids (262 for
            `tfnlp.data.character_ids`).
        character_dim: int, character embedding width.
        num_highway_layers: int (may be 0).
        activation: activation after max-pooling (`"relu"` in ELMo).
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        character_ids: int tensor `(B, T, C)` with `C` at least the widest
            filter (50 in ELMo; words are truncated to fit by
            `tfnlp.data.character_ids`), ids in `[0,
            character_vocabulary_size)`: a ValueError otherwise (in a graph,
            an `InvalidArgumentError` at run time; not checked under XLA).

    Returns:
        Tensor `(B, T, output_dim)`.

    Example:

    >>> embedding = CharCNNEmbedding(output_dim=16, filters=((1, 4), (2, 8)))
    >>> ids = tfnlp.data.character_ids(tf.constant([["Hello", "world", ""]]), 10)
    >>> embedding(ids).shape
    TensorShape([1, 3, 16])
    """

    def __init__(
        self,
        output_dim,
        filters=ELMO_FILTERS,
        character_vocabulary_size=262,
        character_dim=16,
        num_highway_layers=2,
        activation="relu",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.output_dim = _checks.positive_int("output_dim", output_dim)
        self.filters = _check_filters(filters)
        self.character_vocabulary_size = _checks.positive_int(
            "character_vocabulary_size", character_vocabulary_size
        )
        self.character_dim = _checks.positive_int("character_dim", character_dim)
        self.num_highway_layers = _checks.non_negative_int(
            "num_highway_layers", num_highway_layers
        )
        self.activation = _checks.activation("activation", activation)
        self.num_features = sum(n for _, n in self.filters)

        self.character_embedding = keras.layers.Embedding(
            self.character_vocabulary_size,
            self.character_dim,
            embeddings_initializer=keras.initializers.RandomUniform(-1.0, 1.0),
            dtype=self.dtype_policy,
            name="character_embedding",
        )
        self.convolutions = [
            keras.layers.Conv1D(
                count, width, padding="valid", dtype=self.dtype_policy, name=f"conv_{i}"
            )
            for i, (width, count) in enumerate(self.filters)
        ]
        self.highways = [
            Highway(activation=activation, dtype=self.dtype_policy, name=f"highway_{i}")
            for i in range(self.num_highway_layers)
        ]
        self.projection = keras.layers.Dense(
            self.output_dim, dtype=self.dtype_policy, name="projection"
        )

    def build(self, character_ids_shape):
        if character_ids_shape is None or len(character_ids_shape) != 3 or character_ids_shape[-1] is None:
            raise ValueError(
                "`character_ids` must have shape (batch, tokens, characters) with a known "
                f"number of characters, got {character_ids_shape}."
            )
        num_characters = int(character_ids_shape[-1])
        widest = max(w for w, _ in self.filters)
        if num_characters < widest:
            raise ValueError(
                f"`character_ids` have {num_characters} characters per token, fewer than the "
                f"widest filter ({widest})."
            )
        self.character_embedding.build((None, num_characters))
        for conv in self.convolutions:
            conv.build((None, num_characters, self.character_dim))
        for highway in self.highways:
            highway.build((None, self.num_features))
        self.projection.build((None, self.num_features))
        self.built = True

    @_checks.errors_without_input_dump()
    def call(self, character_ids):
        _checks.tensors(("character_ids", character_ids, "BTC", "int"))
        character_ids = _checks.ids_in_range(
            "character_ids", character_ids, self.character_vocabulary_size,
            "`character_vocabulary_size`",
        )
        if character_ids.shape.rank == 3 and character_ids.shape[1] == 0:
            raise ValueError(
                "`character_ids` has no tokens (shape "
                f"{tuple(character_ids.shape)}); every sentence needs at least one token "
                "(tfnlp pipelines add <S> and </S>)."
            )
        character_ids = tf.cast(character_ids, tf.int32)
        shape = tf.shape(character_ids)
        num_characters = character_ids.shape[-1]
        # One extra all-padding token, cut off below: TensorFlow's CPU
        # convolutions mishandle an empty batch (B*T = 0).
        flat_ids = tf.concat(
            [tf.reshape(character_ids, [-1, num_characters]), tf.zeros([1, num_characters], tf.int32)], 0
        )  # (B*T + 1, C)
        chars = self.character_embedding(flat_ids)  # (B*T, C, E)
        features = [
            self.activation(tf.reduce_max(conv(chars), axis=1)) for conv in self.convolutions
        ]
        x = tf.concat(features, axis=-1) if len(features) > 1 else features[0]  # (B*T, F)
        for highway in self.highways:
            x = highway(x)
        x = self.projection(x)  # (B*T, output_dim)
        is_token = tf.reduce_any(flat_ids != 0, axis=-1)[:, None]
        x = tf.where(is_token, x, tf.zeros_like(x))[:-1]
        return tf.reshape(x, tf.concat([shape[:2], [self.output_dim]], 0))

    def compute_output_shape(self, character_ids_shape):
        return tuple(character_ids_shape[:2]) + (self.output_dim,)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "output_dim": self.output_dim,
                "filters": [list(f) for f in self.filters],
                "character_vocabulary_size": self.character_vocabulary_size,
                "character_dim": self.character_dim,
                "num_highway_layers": self.num_highway_layers,
                "activation": keras.activations.serialize(self.activation),
            }
        )
        return config
