"""Numerics at the edges: fully-masked attention rows, all-padding sequences,
zero-length targets and extreme logits, in float32, float16 and bfloat16.

Every case checks that outputs, losses and gradients are finite (not NaN,
and not inf unless the exact value itself overflows float32), and, where
the exact value is known, that it is that value: a loss over no targets is
0 with gradients exactly 0; a query row that sees no key outputs 0.

Behaviour pinned down here:

* `MultiHeadAttention`: a query row whose every key is masked gets all
  attention weights 0 and an output of exactly 0 (not the mean of the
  values, as Keras' fused path gives), identically with and without a
  key/value cache. An encoder or decoder block therefore adds nothing from
  that sublayer to its residual, and an all-padding encoder memory gets a
  gradient of exactly 0 through the cross-attention. Masked keys get weight 0
  however negative the visible scores are (they were once replaced by
  -1e9, which outweighed visible scores below -1e9).
* Cross-entropy losses are float32 whatever the logits' dtype. A per-position
  loss whose exact value exceeds float32's range (e.g. label at -3e38 and a
  logit at +3e38: 6e38) is +inf, never NaN, and its gradient stays finite
  and exact; such a position would still make a weighted sum NaN even at
  weight 0 (inf * 0), so no finite loss is possible there.
"""

import functools

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests import families
from tests.harness import assert_finite
from tfnlp.layers import MultiHeadAttention, TransformerBlock, TransformerDecoderBlock, WordSoftmax
from tfnlp.training import SmoothedSparseCategoricalCrossentropy, sparse_softmax_cross_entropy

POLICIES = ("float32", "mixed_float16", "mixed_bfloat16")


@pytest.fixture
def rng():
    """Each test's own generator, seeded the same way every time: a test's data
    do not depend on which tests ran before it (order, `-k`, xdist workers)."""
    return np.random.default_rng(0)


def _normal(rng, *shape):
    return rng.normal(size=shape).astype("float32")


def _np(x):
    return np.asarray(tf.convert_to_tensor(x), np.float64)


def _gradients(tape, target, sources):
    gradients = tape.gradient(target, sources)
    assert all(g is not None for g in gradients)
    gradients = [tf.convert_to_tensor(g) for g in gradients]
    assert_finite(gradients)
    return gradients


# --- Fully-masked attention rows ---


def _attention(policy, rng):
    keras.mixed_precision.set_global_policy(policy)
    layer = MultiHeadAttention(num_heads=2, key_dim=4, bias_initializer="random_normal")
    x = tf.constant(_normal(rng, 2, 4, 8))
    layer(x, x)
    return layer, x


def _hidden_rows(mask):
    """(B, T) True where a query row sees no key."""
    return ~np.asarray(mask).any(-1)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("path", ["attention_mask", "value_mask", "self_cache", "cross_cache"])
def test_fully_masked_query_rows_are_zero_on_every_path(policy, path, rng):
    layer, x = _attention(policy, rng)
    mask = np.ones((2, 4, 4), bool)
    mask[0, 1] = False  # one row of one sequence
    mask[1] = False  # every row of the other sequence
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        if path == "attention_mask":
            out = layer(x, x, attention_mask=mask)
        elif path == "value_mask":
            mask = np.broadcast_to(np.array([[1, 1, 1, 1], [0, 0, 0, 0]], bool)[:, None, :], (2, 4, 4))
            out = layer(x, x, value_mask=tf.constant(mask[:, 0]))
        elif path == "self_cache":  # every slot written by this call
            cache = tf.zeros((2, 2, 4, 2, 4), layer.compute_dtype)
            out, _ = layer(x, x, attention_mask=mask, cache=cache, cache_update_index=0)
        else:  # cross-attention over a projected memory
            out, _ = layer(x, x, attention_mask=mask, cache=layer.compute_key_value_cache(x))
        loss = tf.reduce_sum(tf.cast(out, tf.float32) ** 2)
    assert out.dtype == layer.compute_dtype
    assert_finite(out)
    hidden = _hidden_rows(mask)
    np.testing.assert_array_equal(_np(out)[hidden], 0.0)
    assert np.all(np.abs(_np(out)[~hidden]).sum(-1) > 0)
    full = layer(x, x, attention_mask=mask)  # the reference path
    np.testing.assert_allclose(_np(out), _np(full), atol=1e-6 if policy == "float32" else 1e-2)
    _gradients(tape, loss, [x] + layer.trainable_weights)


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_masked_keys_stay_hidden_below_large_negative_scores(policy, rng):
    # Visible scores of about -1.3e10: a masked score replaced by a finite
    # constant such as -1e9 would take all the weight.
    keras.mixed_precision.set_global_policy(policy)
    layer = MultiHeadAttention(num_heads=1, key_dim=4, use_bias=False, kernel_initializer="ones")
    query = tf.fill((1, 1, 8), 1e4)
    key = tf.concat([tf.fill((1, 3, 8), -1e4), tf.fill((1, 1, 8), -9e3)], axis=1)  # key 3 is masked
    value = tf.constant(_normal(rng, 1, 4, 8))
    mask = np.array([[[1, 1, 1, 0]]], bool)
    out, weights = layer(query, value, key=key, attention_mask=mask, return_attention_scores=True)
    np.testing.assert_allclose(_np(weights)[0, 0, 0], [1 / 3, 1 / 3, 1 / 3, 0.0], atol=1e-2)
    visible = layer(query, value[:, :3], key=key[:, :3])
    np.testing.assert_allclose(_np(out), _np(visible), atol=1e-5, rtol=1e-2)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_block_on_all_padding_adds_nothing_from_attention(policy, norm_first, rng):
    keras.mixed_precision.set_global_policy(policy)
    block = TransformerBlock(num_heads=2, intermediate_dim=16, norm_first=norm_first,
                             bias_initializer="random_normal")
    x = tf.constant(_normal(rng, 2, 4, 8))
    padding = np.array([[1, 1, 0, 0], [0, 0, 0, 0]], bool)  # the second sequence is all padding
    with tf.GradientTape() as tape:
        tape.watch(x)
        out = block(x, padding_mask=padding)
        loss = tf.reduce_sum(tf.cast(out, tf.float32) ** 2)
    assert_finite(out)
    _gradients(tape, loss, [x] + block.trainable_weights)
    # Every query of the padded sequence sees no key: attention contributes 0.
    h = tf.cast(x[1:], block.compute_dtype)
    expected = block._feedforward(h if norm_first else block._self_attention_norm(h), False)
    np.testing.assert_allclose(_np(out[1:]), _np(expected), atol=1e-5)
    # The cached path (UniLM decoding) agrees.
    mask = np.broadcast_to(padding[:, None, :], (2, 4, 4))
    cache = tf.zeros((2, 2, 4, 2, 4), block.compute_dtype)
    cached, _ = block(x, attention_mask=mask, cache=cache, cache_update_index=0)
    np.testing.assert_allclose(_np(cached), _np(out), atol=1e-5 if policy == "float32" else 2e-2)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("padded", ["encoder", "decoder", "both"])
def test_decoder_block_on_all_padding(policy, padded, rng):
    keras.mixed_precision.set_global_policy(policy)
    block = TransformerDecoderBlock(num_heads=2, intermediate_dim=16, bias_initializer="random_normal")
    target, source = tf.constant(_normal(rng, 2, 3, 8)), tf.constant(_normal(rng, 2, 5, 8))
    target_padding, source_padding = np.ones((2, 3), bool), np.ones((2, 5), bool)
    if padded in ("encoder", "both"):
        source_padding[1] = False  # cross-attention on an all-padding memory
    if padded in ("decoder", "both"):
        target_padding[1] = False  # causal self-attention sees nothing
    with tf.GradientTape() as tape:
        tape.watch([target, source])
        out = block(target, source, decoder_padding_mask=target_padding,
                    encoder_padding_mask=source_padding)
        loss = tf.reduce_sum(tf.cast(out, tf.float32) ** 2)
    assert_finite(out)
    target_gradient, source_gradient, *_ = _gradients(
        tape, loss, [target, source] + block.trainable_weights
    )
    if padded != "decoder":
        # An all-padding memory has no influence at all.
        np.testing.assert_array_equal(_np(source_gradient)[1], 0.0)
        assert np.abs(_np(source_gradient)[0]).max() > 0
    # The cached cross-attention (generation) agrees with the full one.
    cross_cache = block.compute_cross_attention_cache(source)
    self_cache = tf.zeros((2, 2, 3, 2, 4), block.compute_dtype)
    cached, _ = block(target, decoder_padding_mask=target_padding, encoder_padding_mask=source_padding,
                      self_attention_cache=self_cache, self_attention_cache_update_index=0,
                      cross_attention_cache=cross_cache)
    np.testing.assert_allclose(_np(cached), _np(out), atol=1e-5 if policy == "float32" else 2e-2)


# --- Models on all-padding sequences ---


def _padded_batch(family, rows):
    """A `families` batch whose `rows` are all padding, with no targets there."""
    x, y, weights = (None if part is None else tf.nest.map_structure(np.array, part)  # copies
                     for part in families.first_batch(family, seed=1))
    return families.get(family).padded(x, y, weights, rows)


def _train_step_gradients(model, x, y, weights, training=True):
    """Loss and (loss-scaled, as in `train_step`) gradients of one batch."""
    with tf.GradientTape() as tape:
        y_pred = model(x, training=training)
        loss = model.compute_loss(x, y, y_pred, weights, training=training)
        scaled = model.optimizer.scale_loss(loss)
    assert_finite(y_pred)
    assert loss.dtype == tf.float32 and np.isfinite(float(loss))
    return y_pred, float(loss), _gradients(tape, scaled, model.trainable_variables)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("family", families.FAMILIES)
def test_models_on_all_padding_sequences(family, policy):
    keras.mixed_precision.set_global_policy(policy)
    model = families.model(family)
    # Half the batch is all padding, the other half real: the real rows train.
    x, y, weights = _padded_batch(family, slice(0, families.BATCH // 2))
    y_pred, loss, gradients = _train_step_gradients(model, x, y, weights)
    assert loss > 0 and max(np.abs(_np(g)).max() for g in gradients) > 0
    # The whole batch padding: still finite.
    x, y, weights = _padded_batch(family, slice(None))
    y_pred, loss, gradients = _train_step_gradients(model, x, y, weights)
    expected = families.get(family).loss_on_padding
    if expected == 0.0:  # no target is left
        assert loss == 0.0
        for g in gradients:
            np.testing.assert_array_equal(_np(g), 0.0)
    elif expected is not None:
        np.testing.assert_allclose(loss, expected, rtol=1e-6)


# --- Zero-length targets ---


def _no_targets(family, kind):
    x, y, weights = _padded_batch(family, slice(0, 0))  # real sequences
    return families.get(family).no_targets[kind](x, y, weights)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize(
    "family, kind", [(f, kind) for f in families.FAMILIES for kind in families.get(f).no_targets]
)
def test_zero_targets_give_zero_loss_and_zero_gradients(family, kind, policy):
    keras.mixed_precision.set_global_policy(policy)
    model = families.model(family)
    x, y, weights = _no_targets(family, kind)
    for training in (True, False):  # ELMo: sampled softmax, then the full one
        _, loss, gradients = _train_step_gradients(model, x, y, weights, training=training)
        assert loss == 0.0
        for g in gradients:
            np.testing.assert_array_equal(_np(g), 0.0)


# --- Extreme logits ---

V = 50
# Magnitudes per logits dtype: float16 tops out at 65504, bfloat16 at float32's 3.4e38.
MAGNITUDES = {
    "float32": (1e4, 6e4, 1e30, 1e38, 3e38),
    "float16": (1e4, 6e4),
    "bfloat16": (1e4, 6e4, 1e30, 1e38, 3e38),
}
EXTREME_CASES = [(dtype, m) for dtype, ms in MAGNITUDES.items() for m in ms]
GRADIENT_ATOL = {"float32": 1e-6, "float16": 1e-3, "bfloat16": 1e-2}


def _extreme_logits(magnitude, dtype, rng):
    """Rows (V classes) and labels: mixed signs with the label at the max and at
    the min, all logits equal (+ and -), and a tie of two at the max."""
    mixed = np.linspace(-magnitude, magnitude, V)
    rng.shuffle(mixed)
    rows = [mixed, mixed, np.full(V, magnitude), np.full(V, -magnitude),
            np.where(np.arange(V) < 2, magnitude, -magnitude)]
    labels = [int(np.argmax(mixed)), int(np.argmin(mixed)), 7, 0, 1]
    logits = tf.cast(tf.constant(np.stack(rows), tf.float32), dtype)
    return logits, np.array(labels, np.int32)


def _reference(logits, labels, smoothing):
    """float64 losses and gradients (of their sum) from the logits as given."""
    logits = _np(logits)
    top = logits.max(-1, keepdims=True)
    shifted = logits - top  # exact in float64 for these values
    probabilities = np.exp(shifted) / np.exp(shifted).sum(-1, keepdims=True)
    picked = np.take_along_axis(shifted, labels[:, None], -1)[:, 0]
    lse = np.log(np.exp(shifted).sum(-1))
    losses = lse - (1 - smoothing) * picked - smoothing * shifted.mean(-1)
    onehot = np.eye(logits.shape[-1])[labels]
    return losses, probabilities - (1 - smoothing) * onehot - smoothing / logits.shape[-1], logits


def _assert_losses(actual, expected, logits, smoothing):
    actual = np.asarray(actual, np.float64)
    overflow = np.abs(expected) > np.finfo(np.float32).max
    assert not np.isnan(actual).any()
    np.testing.assert_array_equal(actual[overflow], np.inf)  # the exact value overflows float32
    # Plus float32 rounding of the logits' magnitude (their mean over the classes).
    atol = 1e-5 + smoothing * 1e-6 * np.abs(logits).max(-1)
    error = np.abs(actual - expected)[~overflow]
    bound = (atol + 1e-6 * np.abs(expected))[~overflow]
    assert np.all(error <= bound), (actual, expected)


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("dtype, magnitude", EXTREME_CASES)
def test_cross_entropy_on_extreme_logits(dtype, magnitude, smoothing, rng):
    logits, labels = _extreme_logits(magnitude, dtype, rng)
    with tf.GradientTape() as tape:
        tape.watch(logits)
        losses = sparse_softmax_cross_entropy(labels, logits, smoothing)
    assert losses.dtype == tf.float32
    (gradient,) = _gradients(tape, losses, [logits])  # of the sum, inf rows included
    assert gradient.dtype == logits.dtype
    expected, expected_gradient, as_given = _reference(logits, labels, smoothing)
    _assert_losses(losses.numpy(), expected, as_given, smoothing)
    np.testing.assert_allclose(_np(gradient), expected_gradient, atol=GRADIENT_ATOL[dtype])


def _finite_rows(magnitude, dtype, smoothing, rng):
    """The rows of `_extreme_logits` whose exact loss fits float32, and weights."""
    logits, labels = _extreme_logits(magnitude, dtype, rng)
    expected, _, as_given = _reference(logits, labels, smoothing)
    keep = np.abs(expected) < np.finfo(np.float32).max
    weights = np.where(np.arange(len(labels)) % 2 == 0, 1.0, 0.0)[keep]  # some weights are 0
    return tf.boolean_mask(logits, keep), labels[keep], weights, expected[keep], as_given[keep]


@functools.cache
def _bert_pretrainer():
    return families.model("bert_pretrainer")


def _bert_pretraining_loss(labels, logits, weights):
    """`BertPretrainer`'s compiled loss, the rows of `logits` as one sequence's masked positions."""
    return _bert_pretrainer().compute_loss(
        None, {"mlm": labels[None], "nsp": tf.zeros(1, tf.int32)},
        {"mlm": logits[None], "nsp": tf.zeros((1, 2))},
        {"mlm": weights[None], "nsp": tf.zeros(1)},
    )


@pytest.mark.parametrize(
    "loss_name, smoothing",
    [("mean_with_sample_weight", 0.0), ("mean_with_sample_weight", 0.1), ("bert_pretraining", 0.0)],
)
@pytest.mark.parametrize("dtype, magnitude", EXTREME_CASES)
def test_weighted_losses_on_extreme_logits(dtype, magnitude, loss_name, smoothing, rng):
    logits, labels, weights, expected, as_given = _finite_rows(magnitude, dtype, smoothing, rng)
    weights_t = tf.constant(weights, tf.float32)
    with tf.GradientTape() as tape:
        tape.watch(logits)
        if loss_name == "bert_pretraining":
            loss = _bert_pretraining_loss(tf.constant(labels), logits, weights_t)
            denominator = len(labels)  # Keras' sum over the batch size
        else:
            loss_fn = SmoothedSparseCategoricalCrossentropy(label_smoothing=smoothing)
            loss = loss_fn(labels, logits, sample_weight=weights_t)
            denominator = weights.sum()
    (gradient,) = _gradients(tape, loss, [logits])
    assert loss.dtype == tf.float32 and np.isfinite(float(loss))
    scale = 1e-5 + 1e-6 * (np.abs(as_given).max() if smoothing else 0.0)
    np.testing.assert_allclose(float(loss), (expected * weights).sum() / denominator,
                               rtol=1e-6, atol=scale)
    _, expected_gradient, _ = _reference(logits, labels, smoothing)
    np.testing.assert_allclose(_np(gradient), expected_gradient * weights[:, None] / denominator,
                               atol=GRADIENT_ATOL[dtype])


# WordSoftmax: logits = c_v * h for a hidden state (h, 0) and kernel rows (c_v, 0).
# Up to 3e37, so that the mean loss and the kernel's gradient (sums over the
# positions) fit float32 too; 6e4 fits float16, where the sampled logits and
# their gradients are computed.
WORD_CASES = [(p, m) for p in POLICIES for m in (1e4, 6e4, 1e30, 3e37) if p != "mixed_float16" or m < 7e4]


def _word_softmax(policy, magnitude, bias=0.0):
    keras.mixed_precision.set_global_policy(policy)
    layer = WordSoftmax(8, num_sampled=5)
    inputs = tf.constant([[magnitude, 0.0]] * 4)
    targets = tf.constant([0, 1, 3, 7])  # at the max, the min, 0 and in between
    layer(inputs, targets)
    # Powers of two: c_v * h is exact in every dtype (the sampled logits are
    # computed in the compute dtype).
    c = np.array([1.0, -1.0, 0.5, 0.0, -0.5, 0.25, -0.25, 0.125], np.float32)
    layer.set_weights([np.stack([c, np.zeros(8, np.float32)], 1), np.full(8, bias, np.float32)])
    return layer, tf.cast(inputs, layer.compute_dtype), targets


def _word_reference(layer, inputs, targets, candidates=None):
    kernel, bias = (w.astype(np.float64) for w in layer.get_weights())
    logits = _np(inputs) @ kernel.T + bias
    if candidates is None:
        top = logits.max(-1, keepdims=True)
        picked = logits[np.arange(len(targets)), targets]
        return (top[:, 0] - picked) + np.log(np.exp(logits - top).sum(-1))
    log_q = np.log(len(candidates) * np.log1p(1.0 / (np.arange(8) + 1.0)) / np.log(9.0))
    true = logits[np.arange(len(targets)), targets] - log_q[targets]
    losses = []
    for n, target in enumerate(targets.numpy()):
        row = [true[n]] + [logits[n, c] - log_q[c] for c in candidates if c != target]
        top = max(row)
        losses.append((top - true[n]) + np.log(np.exp(np.array(row) - top).sum()))
    return np.array(losses)


@pytest.mark.parametrize("sampled", [False, True])
@pytest.mark.parametrize("policy, magnitude", WORD_CASES)
def test_word_softmax_on_extreme_logits(policy, magnitude, sampled):
    layer, inputs, targets = _word_softmax(policy, magnitude)
    candidates = tf.constant([0, 1, 1, 3, 6])  # hits targets 0, 1 and 3; a duplicate
    with tf.GradientTape() as tape:
        tape.watch(inputs)
        if sampled:
            losses = layer.sampled_loss(inputs, targets, candidates)
        else:
            losses = layer(inputs, targets)
        total = tf.reduce_mean(losses)
    assert losses.dtype == tf.float32
    _gradients(tape, total, [inputs] + layer.trainable_weights)
    expected = _word_reference(layer, inputs, targets, candidates.numpy() if sampled else None)
    np.testing.assert_allclose(losses.numpy(), expected, rtol=1e-6, atol=1e-5)
    # Random candidates (the training call): finite too.
    with tf.GradientTape() as tape:
        tape.watch(inputs)
        total = tf.reduce_mean(layer(inputs, targets, training=True))
    assert np.isfinite(float(total))
    _gradients(tape, total, [inputs] + layer.trainable_weights)


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_sampled_softmax_removes_hits_below_large_negative_logits(policy):
    # Every logit -1e12: a removed candidate replaced by a finite constant such
    # as -1e9 would dominate the sampled sum (loss ~1e12 instead of ~2).
    layer, inputs, targets = _word_softmax(policy, 0.0, bias=-1e12)
    candidates = tf.constant([0, 1, 1, 3, 6])
    losses = layer.sampled_loss(inputs, targets, candidates)
    expected = _word_reference(layer, inputs, targets, candidates.numpy())
    assert np.all(expected < 3)
    # float32 resolves logits of 1e12 to 2 ** 16: the log-uniform corrections are lost.
    np.testing.assert_allclose(losses.numpy(), expected, atol=1e-6 * 1e12)
