"""Softmax over a word vocabulary: sampled while training, full otherwise."""

import math

import keras
import tensorflow as tf

from tfnlp import _checks


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
    target is removed for that position. bilm-tf trains ELMo with the same
    distribution (8192 samples of a 793k-word vocabulary) but draws unique
    candidates; here they are drawn with replacement (both estimators are
    consistent). Otherwise (evaluation, inference, or `num_sampled=None`)
    the exact full softmax is used, in float32 whatever the policy, so
    perplexities are exact. The draws come from a Keras
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
        target_ids: int tensor `inputs.shape[:-1]`, ids in `[0, V)`; others
            raise a ValueError (in a graph, an `InvalidArgumentError` at run
            time; not checked under XLA).
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
        self.vocabulary_size = _checks.positive_int("vocabulary_size", vocabulary_size)
        self.num_sampled = _checks.positive_int("num_sampled", num_sampled, allow_none=True)
        if self.num_sampled is not None and self.num_sampled >= self.vocabulary_size:
            raise ValueError(
                f"`num_sampled` ({self.num_sampled}) must be smaller than `vocabulary_size` "
                f"({self.vocabulary_size}); use `num_sampled=None` for the full softmax."
            )
        self.seed = _checks.integer("seed", seed)
        self.kernel_initializer = _checks.initializer(
            "kernel_initializer", kernel_initializer or keras.initializers.RandomNormal(stddev=0.02)
        )
        self.seed_generator = keras.random.SeedGenerator(self.seed, name="candidate_seed")

    def build(self, inputs_shape, target_ids_shape=None):
        hidden_dim = _checks.last_dim("inputs", inputs_shape)
        # Never auto-cast: rows are gathered first, then cast (cheap), and the
        # full softmax runs in float32.
        self.kernel = self.add_weight(
            name="kernel", shape=(self.vocabulary_size, hidden_dim), initializer=self.kernel_initializer,
            autocast=False,
        )
        # float32, never auto-cast: added to float32 logits.
        self.bias = self.add_weight(
            name="bias", shape=(self.vocabulary_size,), initializer="zeros", dtype="float32",
            autocast=False,
        )
        self.built = True

    def logits(self, inputs):
        """Full logits `(..., V)`, computed in float32 whatever the policy."""
        flat = tf.cast(tf.reshape(inputs, [-1, self.kernel.shape[1]]), tf.float32)
        kernel = tf.convert_to_tensor(self.kernel)
        logits = tf.matmul(flat, kernel, transpose_b=True) + self.bias
        return tf.reshape(logits, tf.concat([tf.shape(inputs)[:-1], [self.vocabulary_size]], 0))

    def log_uniform_probabilities(self, ids):
        """`P(k)` of the candidate distribution, float32.

        Computed as `log1p(1 / (k + 1))` in float64: the difference of two
        nearly equal logarithms loses most of its digits in float32 for
        vocabularies of ELMo's size.
        """
        k = tf.cast(ids, tf.float64)
        p = tf.math.log1p(1.0 / (k + 1.0)) / math.log(self.vocabulary_size + 1.0)
        return tf.cast(p, tf.float32)

    def sample_candidates(self):
        """Draws `num_sampled` candidate ids (int32, with replacement), advancing the seed.

        Inverse-CDF sampling in float64, so that every id of a large
        vocabulary can be drawn with its probability.
        """
        uniform = keras.random.uniform(
            (self.num_sampled,), dtype="float64", seed=self.seed_generator
        )
        ids = tf.floor(tf.exp(uniform * math.log(self.vocabulary_size + 1.0))) - 1.0
        return tf.clip_by_value(tf.cast(ids, tf.int32), 0, self.vocabulary_size - 1)

    def sampled_loss(self, inputs, target_ids, candidates):
        """The sampled-softmax NLL for given `candidates` (int32 `(S,)`)."""
        hidden_dim = self.kernel.shape[1]
        flat = tf.cast(tf.reshape(inputs, [-1, hidden_dim]), self.compute_dtype)  # (N, H)
        targets = tf.reshape(tf.cast(target_ids, tf.int32), [-1])  # (N,)
        candidates = tf.cast(candidates, tf.int32)
        kernel = tf.convert_to_tensor(self.kernel)  # float32: rows are gathered, then cast
        bias = tf.convert_to_tensor(self.bias)
        true_rows = tf.gather(kernel, targets)  # (N, H)
        true_logits = tf.reduce_sum(tf.cast(flat, tf.float32) * true_rows, axis=-1) + tf.gather(
            bias, targets
        )  # (N,), float32
        sampled_rows = tf.cast(tf.gather(kernel, candidates), flat.dtype)  # (S, H)
        sampled_logits = tf.cast(
            tf.matmul(flat, sampled_rows, transpose_b=True), tf.float32
        ) + tf.gather(bias, candidates)  # (N, S)
        num = tf.cast(tf.size(candidates), tf.float32)  # S: the candidates given
        true_logits -= tf.math.log(num * self.log_uniform_probabilities(targets))
        sampled_logits -= tf.math.log(num * self.log_uniform_probabilities(candidates))[None, :]
        hits = tf.equal(targets[:, None], candidates[None, :])
        # The lowest float32, not e.g. -1e9: a removed candidate must never
        # outweigh logits below -1e9 (finite, so no inf - inf in the sum).
        sampled_logits = tf.where(hits, tf.constant(tf.float32.min, tf.float32), sampled_logits)
        logits = tf.concat([true_logits[:, None], sampled_logits], axis=1)
        loss = tf.reduce_logsumexp(logits, axis=1) - true_logits
        return tf.reshape(loss, tf.shape(target_ids))

    @_checks.errors_without_input_dump()
    def call(self, inputs, target_ids, training=None):
        rank = tf.TensorShape(inputs.shape).rank
        lead = "BTUVWXYZ"[: max((rank or 1) - 1, 0)]  # the axes of `target_ids`
        _checks.tensors(
            ("inputs", inputs, lead + "H", "number"),
            ("target_ids", target_ids, None if rank is None else lead, "int"),
            H=self.kernel.shape[1],
        )
        target_ids = _checks.ids_in_range(
            "target_ids", target_ids, self.vocabulary_size, "`vocabulary_size`"
        )
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
