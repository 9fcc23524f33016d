"""Softmax over a word vocabulary: sampled while training, full otherwise."""

import math

import keras
import tensorflow as tf

from tfnlp.layers import _validation


@keras.saving.register_keras_serializable(package="tfnlp")
class WordSoftmax(keras.layers.Layer):
    """Negative log-likelihood of target words under `softmax(h Wᵀ + b)`.

    With `num_sampled` set and `training=True`, a sampled softmax (Jean et
    al., 2015) replaces the sum over the whole vocabulary: `num_sampled`
    candidate words are drawn per call, shared by every position, from the
    log-uniform (Zipf) distribution `P(k) = log((k + 2) / (k + 1)) /
    log(V + 1)` (so the vocabulary must be sorted by decreasing frequency,
    as `tfnlp.data.build_word_vocabulary` does), each logit is corrected by
    `- log(expected count)`, and a candidate equal to a position's own
    target is removed for that position. This is what bilm-tf trains ELMo
    with (8192 samples of a 793k-word vocabulary). Otherwise (evaluation,
    inference, or `num_sampled=None`) the exact full softmax is used, so
    perplexities are always exact. The draws come from a Keras
    `SeedGenerator` (stateless random ops): reproducible from `seed`, and
    compilable with XLA.

    Logits and losses are float32 whatever the dtype policy.

    Args:
        vocabulary_size: int, `V`.
        num_sampled: int or None, candidates per training call (must be
            below `V`).
        seed: int, seed of the candidate draws.
        kernel_initializer: initializer of `W` `(V, hidden)`.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: tensor `(..., hidden)`.
        target_ids: int tensor `inputs.shape[:-1]`, ids in `[0, V)`.
        training: bool.

    Returns:
        float32 `inputs.shape[:-1]`: `-log p(target)`.

    Example:

    >>> softmax = WordSoftmax(50, num_sampled=10)
    >>> softmax(tf.ones((2, 3, 8)), tf.zeros((2, 3), tf.int32)).shape
    TensorShape([2, 3])
    """

    def __init__(self, vocabulary_size, num_sampled=None, seed=0, kernel_initializer=None, **kwargs):
        super().__init__(**kwargs)
        self.vocabulary_size = _validation.positive_int("vocabulary_size", vocabulary_size)
        self.num_sampled = _validation.positive_int("num_sampled", num_sampled, allow_none=True)
        if self.num_sampled is not None and self.num_sampled >= self.vocabulary_size:
            raise ValueError(
                f"`num_sampled` ({self.num_sampled}) must be smaller than `vocabulary_size` "
                f"({self.vocabulary_size}); use `num_sampled=None` for the full softmax."
            )
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"`seed` must be an integer, got {seed!r}.")
        self.seed = seed
        self.kernel_initializer = keras.initializers.get(
            kernel_initializer or keras.initializers.RandomNormal(stddev=0.02)
        )
        self.seed_generator = keras.random.SeedGenerator(seed, name="candidate_seed")

    def build(self, inputs_shape, target_ids_shape=None):
        hidden_dim = _validation.last_dim("inputs", inputs_shape)
        self.kernel = self.add_weight(
            name="kernel", shape=(self.vocabulary_size, hidden_dim), initializer=self.kernel_initializer
        )
        # float32, never auto-cast: added to float32 logits.
        self.bias = self.add_weight(
            name="bias", shape=(self.vocabulary_size,), initializer="zeros", dtype="float32",
            autocast=False,
        )
        self.built = True

    def logits(self, inputs):
        """Full float32 logits `(..., V)`."""
        flat = tf.cast(tf.reshape(inputs, [-1, self.kernel.shape[1]]), self.compute_dtype)
        logits = tf.matmul(flat, tf.cast(self.kernel, flat.dtype), transpose_b=True)
        logits = tf.cast(logits, tf.float32) + self.bias
        return tf.reshape(logits, tf.concat([tf.shape(inputs)[:-1], [self.vocabulary_size]], 0))

    def log_uniform_probabilities(self, ids):
        """`P(k)` of the candidate distribution, float32."""
        k = tf.cast(ids, tf.float32)
        return (tf.math.log(k + 2.0) - tf.math.log(k + 1.0)) / math.log(self.vocabulary_size + 1.0)

    def sample_candidates(self):
        """Draws `num_sampled` candidate ids (int32), advancing the seed."""
        uniform = keras.random.uniform(
            (self.num_sampled,), dtype="float32", seed=self.seed_generator
        )
        ids = tf.cast(tf.floor(tf.exp(uniform * math.log(self.vocabulary_size + 1.0))), tf.int32) - 1
        return tf.clip_by_value(ids, 0, self.vocabulary_size - 1)

    def sampled_loss(self, inputs, target_ids, candidates):
        """The sampled-softmax NLL for given `candidates` (int32 `(S,)`)."""
        hidden_dim = self.kernel.shape[1]
        flat = tf.cast(tf.reshape(inputs, [-1, hidden_dim]), self.compute_dtype)  # (N, H)
        targets = tf.reshape(tf.cast(target_ids, tf.int32), [-1])  # (N,)
        candidates = tf.cast(candidates, tf.int32)
        kernel = tf.cast(self.kernel, flat.dtype)
        bias = tf.convert_to_tensor(self.bias)
        true_logits = tf.reduce_sum(
            tf.cast(flat * tf.gather(kernel, targets), tf.float32), axis=-1
        ) + tf.gather(bias, targets)  # (N,)
        sampled_logits = tf.cast(
            tf.matmul(flat, tf.gather(kernel, candidates), transpose_b=True), tf.float32
        ) + tf.gather(bias, candidates)  # (N, S)
        num = tf.cast(tf.size(candidates), tf.float32)  # S: the candidates given
        true_logits -= tf.math.log(num * self.log_uniform_probabilities(targets))
        sampled_logits -= tf.math.log(num * self.log_uniform_probabilities(candidates))[None, :]
        hits = tf.equal(targets[:, None], candidates[None, :])
        sampled_logits = tf.where(hits, tf.constant(-1e9, tf.float32), sampled_logits)
        logits = tf.concat([true_logits[:, None], sampled_logits], axis=1)
        loss = tf.reduce_logsumexp(logits, axis=1) - true_logits
        return tf.reshape(loss, tf.shape(target_ids))

    def call(self, inputs, target_ids, training=None):
        if training and self.num_sampled is not None:
            return self.sampled_loss(inputs, target_ids, self.sample_candidates())
        logits = self.logits(inputs)
        target_ids = tf.cast(target_ids, tf.int32)
        return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=target_ids, logits=logits)

    def compute_output_shape(self, inputs_shape, target_ids_shape=None):
        return tuple(inputs_shape[:-1])

    def compute_output_spec(self, inputs, target_ids, training=None):
        return keras.KerasTensor(tuple(inputs.shape[:-1]), "float32")

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "num_sampled": self.num_sampled,
                "seed": self.seed,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config
