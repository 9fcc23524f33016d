"""Losses."""

import keras
import tensorflow as tf

from tfnlp import _checks, _devices
from tfnlp.training.distribute import global_sum


def sparse_softmax_cross_entropy(labels, logits, label_smoothing=0.0):
    """Per-position cross-entropy from logits, faster on CPU than TensorFlow's fused op.

    `loss = lse - (1 - ε) l_y - ε mean(l)` with `lse = log Σ_v exp(l_v)`;
    with `ε = 0` it is `tf.nn.sparse_softmax_cross_entropy_with_logits`
    (equal to within float32 rounding, ~1e-6 relative). The log-sum-exp
    comes from one oneDNN softmax: on CPUs `lse - l_y = -log(p_y)` while
    every `p_y` of the batch is at least 1e-30 (the usual case: losses
    below 69 nats), else, and always where a GPU or TPU is visible,
    `lse = max(l) - log(max(p))` (the largest probability is at least
    `1 / V`, so its log is exact; two more passes over the logits). The
    two agree to float32 rounding (~1e-7 relative), so a row's loss can
    move by that much with the rest of its batch. The gradient
    `p - (1 - ε) onehot(y) - ε / V` reuses `p`. At BERT's masked-LM
    logits this forward pass takes a fraction of the fused op's time, whose
    row reductions and exponentials run on one thread
    (`benchmarks/bert_benchmark.py --profile`; figures in benchmarks/README.md).

    Computed in float32 whatever the logits' dtype. An out-of-range label
    raises `InvalidArgumentError` (from the gather) on CPU; on GPU, where a
    gather out of range reads 0, it gives a finite wrong loss (the fused op
    gives NaN), so validate labels in the input pipeline.

    Args:
        labels: int tensor `(...)`, values in `[0, V)`.
        logits: float tensor `(..., V)`.
        label_smoothing: float in [0, 1).

    Returns:
        float32 tensor `(...)`.

    Example:

    >>> logits = tf.constant([[2.0, 0.0, 0.0]])
    >>> round(float(sparse_softmax_cross_entropy(tf.constant([0]), logits)[0]), 4)
    0.2395
    """
    label_smoothing = _checks.rate("label_smoothing", label_smoothing)
    logits = tf.cast(logits, tf.float32)
    labels = tf.cast(labels, tf.int32)
    if logits.shape.rank is not None and logits.shape[-1] == 0:
        raise ValueError(f"`logits` must have at least one class on its last axis, got {logits.shape}.")
    if (labels.shape.rank is not None and logits.shape.rank is not None
            and not labels.shape.is_compatible_with(logits.shape[:-1])):
        raise ValueError(
            f"`labels` must have the shape of `logits` without its last axis "
            f"({logits.shape[:-1]}), got {labels.shape}."
        )
    shape = tf.shape(labels)
    classes = logits.shape[-1] if logits.shape[-1] is not None else tf.shape(logits)[-1]
    flat_logits = tf.reshape(logits, [-1, classes])
    loss = _cross_entropy(flat_logits, tf.reshape(labels, [-1]), float(label_smoothing))
    return tf.reshape(loss, shape)


# Below this the softmax's p_y may be subnormal (or 0) and lose precision.
_SMALLEST_PROBABILITY = 1e-30


def _cross_entropy(logits, labels, smoothing):
    @tf.custom_gradient
    def forward(logits):
        accelerator = _devices.accelerator_visible()
        # XLA lacks the in-place scatter, and TensorFlow compiles the gradient
        # of an XLA-compiled forward pass with XLA too, even when it builds
        # that gradient outside any XLA context: the forward's context counts.
        copying_scatter = accelerator or _devices.in_xla_context()
        probabilities = tf.nn.softmax(logits)
        label_logits = tf.gather(logits, labels, batch_dims=1)

        def from_logits():
            # lse - l_y = (max - l_y) - log(max p), max p >= 1 / V: exact for
            # any logits, at the price of two more passes.
            return (tf.reduce_max(logits, -1) - label_logits) - tf.math.log(
                tf.reduce_max(probabilities, -1)
            )

        if accelerator:
            # No branch on a GPU/TPU: without XLA its condition is read on
            # the host, stalling the step, and the two reductions are cheap.
            loss = from_logits()
        else:
            # lse - l_y = -log p_y, to float32 rounding while p_y is normal:
            # the usual case, and no pass over the logits beyond the softmax.
            picked = tf.gather(probabilities, labels, batch_dims=1)
            loss = tf.cond(
                tf.reduce_all(picked >= _SMALLEST_PROBABILITY),
                lambda: -tf.math.log(picked),
                from_logits,
            )
        if smoothing:
            # (1 - ε)(lse - l_y) + ε (lse - mean(l)) = (lse - l_y) + ε (l_y - mean(l)).
            loss += _smoothing_term(logits, label_logits, smoothing)

        def grad(upstream):  # float32, as the loss
            with tf.name_scope("cross_entropy_gradient"):  # named for profiles
                scaled = upstream[:, None] * probabilities
                if smoothing:
                    scaled -= upstream[:, None] * (
                        smoothing / tf.cast(tf.shape(logits)[-1], tf.float32)
                    )
                in_place = not (copying_scatter or _devices.in_xla_context())
                return _subtract_at_labels(scaled, labels, (1.0 - smoothing) * upstream, in_place)

        return loss, grad

    return forward(logits)


def _subtract_at_labels(values, labels, amounts, in_place):
    """`values` with `amounts[i]` taken off `values[i, labels[i]]`: the gradient's one-hot part.

    `tensor_scatter_nd_sub` copies its whole input first: an extra pass over
    BERT's whole masked-LM gradient, a large share of its time
    (`benchmarks/scatter_benchmark.py`). `ScatterNdNonAliasingAdd` of `-amounts` works in the
    buffer of `values` when nothing else holds it (a refcount check, so a
    buffer shared after Grappler merged two equal products is copied, not
    changed under another reader); the values are bit for bit the same
    (`x - a == x + (-a)`). XLA has no kernel for it, and GPUs/TPUs were not
    measured with it, so the caller asks for it only on CPUs outside XLA.
    Not covered: a `tf.function` of the loss traced and differentiated
    outside XLA, then called from inside an XLA-compiled function, reuses
    its gradient and fails to compile; trace it inside (or call the loss
    directly there).

    Args:
        values: float32 `(N, V)`, made for this (nothing else reads it).
        labels: int32 `(N,)`.
        amounts: float32 `(N,)`.
        in_place: bool, use `ScatterNdNonAliasingAdd`.
    """
    indices = tf.stack([tf.range(tf.shape(labels)[0]), labels], 1)
    if in_place:
        return tf.raw_ops.ScatterNdNonAliasingAdd(input=values, indices=indices, updates=-amounts)
    return tf.tensor_scatter_nd_sub(values, indices, amounts)


def _smoothing_term(logits, anchor, smoothing):
    """`ε (anchor - mean(logits, -1))`, without overflowing midway.

    `anchor` is one logit of each row (the label's). `reduce_mean` sums
    first: a row of 50 logits of 1e38 (or of both signs near 3e38) sums to
    inf or NaN, and `anchor - mean` can overflow where `ε` times it does
    not; the smoothed loss was then -inf, inf or NaN. Scaling each logit by
    `ε / V` before summing keeps every partial sum within `ε max|l|`, so the
    term overflows only if its true value does. One pass, no branch.
    """
    scale = smoothing / tf.cast(tf.shape(logits)[-1], logits.dtype)
    return smoothing * anchor - tf.reduce_sum(logits * scale, -1)


@keras.saving.register_keras_serializable(package="tfnlp")
class SmoothedSparseCategoricalCrossentropy(keras.losses.Loss):
    """Cross-entropy on logits and integer labels, with label smoothing.

    The target distribution puts `1 - label_smoothing` on the label and
    spreads `label_smoothing` uniformly over all `V` classes (Szegedy et al.,
    2016; "Attention Is All You Need" uses 0.1):
    `loss = -(1 - ε) log p_y - (ε / V) Σ_v log p_v`, computed in float32 from
    the logits. With `ε = 0` it is the plain sparse cross-entropy. The
    default reduction divides by the sum of the sample weights, so padded
    target positions (weight 0) neither add to the loss nor dilute it;
    under a `tf.distribute` strategy it divides by the sum over *all*
    replicas (of the weights, or of the positions when there are none), so
    the replicas' losses add up to exactly the single-device loss however
    the weights or examples fall between them. A position of weight 0 (or
    masked by a Keras mask) drops out even where its loss is inf.

    Args:
        label_smoothing: float in [0, 1).
        reduction: a Keras loss reduction.
        name: str.

    Example:

    >>> loss = SmoothedSparseCategoricalCrossentropy(label_smoothing=0.1)
    >>> logits = tf.constant([[[2.0, 0.0, 0.0], [0.0, 0.0, 0.0]]])
    >>> # Only the first position counts: 0.9 * 0.2395 + 0.1 * (0.2395 + 2 * 2.2395) / 3
    >>> round(float(loss(tf.constant([[0, 1]]), logits, sample_weight=[[1.0, 0.0]])), 4)
    0.3729
    """

    def __init__(
        self,
        label_smoothing=0.0,
        reduction="mean_with_sample_weight",
        name="smoothed_sparse_categorical_crossentropy",
    ):
        super().__init__(name=name, reduction=reduction)
        self.label_smoothing = _checks.rate("label_smoothing", label_smoothing)

    def __call__(self, y_true, y_pred, sample_weight=None):
        if self.reduction != "mean_with_sample_weight":
            return super().__call__(y_true, y_pred, sample_weight=sample_weight)
        with tf.name_scope(self.name):
            values = self.call(y_true, y_pred)
            # Without weights every position counts once: Keras' own reduction
            # would divide by this replica's count and then by the number of
            # replicas, wrong when the replicas' counts differ.
            weights = tf.ones_like(values) if sample_weight is None else tf.broadcast_to(
                tf.cast(sample_weight, tf.float32), tf.shape(values)
            )
            mask = getattr(y_pred, "_keras_mask", None)
            if mask is not None:
                weights *= tf.cast(mask, tf.float32)
            # Not scaled by 1 / replicas afterwards (Keras does that for its own
            # reductions): the global denominator already shares the loss out.
            # A weight-0 position drops out even where its loss is inf (a
            # target the logits rule out with -inf, e.g. padding).
            return tf.math.divide_no_nan(
                tf.reduce_sum(tf.math.multiply_no_nan(values, weights)),
                global_sum(tf.reduce_sum(weights)),
            )

    def call(self, y_true, y_pred):
        return sparse_softmax_cross_entropy(y_true, y_pred, self.label_smoothing)

    def get_config(self):
        return {
            "label_smoothing": self.label_smoothing,
            "reduction": self.reduction,
            "name": self.name,
        }


@keras.saving.register_keras_serializable(package="tfnlp")
class TaggingCrossEntropy(SmoothedSparseCategoricalCrossentropy):
    """A tagger's cross-entropy: the words' tags averaged over every word of the global batch.

    `y_true` holds tag ids `(B, W)` with `-1` where there is no word
    (padding, a word cut by the sequence length:
    `tfnlp.data.TaggerPreprocessor`'s `IGNORED`); those positions drop out.
    The mean is over the words of the whole batch, across `tf.distribute`
    replicas too (`SmoothedSparseCategoricalCrossentropy`'s reduction), so
    N replicas train as one process however the words fall between them.
    `sample_weight` `(B,)` weighs sentences (or `(B, W)` words); a batch
    without words gives 0.

    Args:
        label_smoothing: float in [0, 1).
        name: str.

    Example:

    >>> loss = TaggingCrossEntropy()
    >>> logits = tf.constant([[[2.0, 0.0], [0.0, 0.0], [9.0, -9.0]]])
    >>> round(float(loss(tf.constant([[0, 1, -1]]), logits)), 4)  # (0.1269 + 0.6931) / 2
    0.41
    """

    def __init__(self, label_smoothing=0.0, name="tagging_cross_entropy"):
        super().__init__(label_smoothing=label_smoothing, name=name)

    def __call__(self, y_true, y_pred, sample_weight=None):
        y_true = tf.cast(y_true, tf.int32)
        words = tf.cast(y_true >= 0, tf.float32)
        if sample_weight is not None:
            weights = tf.cast(sample_weight, tf.float32)
            words *= weights[:, None] if weights.shape.rank == 1 else weights
        return super().__call__(tf.maximum(y_true, 0), y_pred, sample_weight=words)

    def get_config(self):
        return {"label_smoothing": self.label_smoothing, "name": self.name}
