import numpy as np
import pytest
import tensorflow as tf

from tests.harness import assert_allclose, run_layer_test
from tfnlp.layers import WordSoftmax

RNG = np.random.default_rng(0)
V, H = 20, 6


def _normal(*shape):
    return RNG.normal(size=shape).astype("float32")


def _inputs():
    return _normal(2, 5, H), RNG.integers(0, V, size=(2, 5)).astype("int32")


def _randomized(layer, hidden, targets):
    layer(hidden, targets)
    layer.set_weights([_normal(V, H), _normal(V)])
    return layer


def _log_uniform(k, vocabulary_size):
    k = np.asarray(k, np.float64)
    return np.log((k + 2.0) / (k + 1.0)) / np.log(vocabulary_size + 1.0)


def _full_nll(layer, hidden, targets):
    kernel, bias = (w.astype(np.float64) for w in layer.get_weights())
    logits = hidden @ kernel.T + bias
    top = logits.max(-1, keepdims=True)
    log_softmax = logits - top - np.log(np.exp(logits - top).sum(-1, keepdims=True))
    return -np.take_along_axis(log_softmax, targets[..., None], -1)[..., 0]


def _sampled_nll(layer, hidden, targets, candidates):
    kernel, bias = (w.astype(np.float64) for w in layer.get_weights())
    num_sampled = len(candidates)
    losses = []
    for h, t in zip(hidden.reshape(-1, H), targets.reshape(-1), strict=True):
        true = h @ kernel[t] + bias[t] - np.log(num_sampled * _log_uniform(t, V))
        sampled = [
            h @ kernel[c] + bias[c] - np.log(num_sampled * _log_uniform(c, V))
            for c in candidates
            if c != t
        ]
        logits = np.array([true] + sampled)
        top = logits.max()
        losses.append(top + np.log(np.exp(logits - top).sum()) - true)
    return np.array(losses).reshape(targets.shape)


@pytest.mark.parametrize("num_sampled", [None, 5])
def test_harness(num_sampled):
    hidden, targets = _inputs()
    run_layer_test(
        WordSoftmax,
        {"vocabulary_size": V, "num_sampled": num_sampled, "seed": 3},
        {"inputs": hidden, "target_ids": targets},
        expected_output_shape=(2, 5),
        expected_num_trainable_weights=2,
        run_mixed_precision=False,  # float32 losses by design: see the test below
    )


def test_full_softmax_matches_numpy():
    hidden, targets = _inputs()
    layer = _randomized(WordSoftmax(V), hidden, targets)
    assert_allclose(layer(hidden, targets), _full_nll(layer, hidden, targets), atol=1e-5)
    kernel, bias = layer.get_weights()
    assert_allclose(layer.logits(hidden), hidden @ kernel.T + bias, atol=1e-5)


def test_sampled_loss_matches_hand_formula():
    hidden, targets = _inputs()
    layer = _randomized(WordSoftmax(V, num_sampled=6), hidden, targets)
    # Duplicates, and candidates equal to some rows' targets.
    candidates = np.array([0, 1, 1, targets[0, 0], targets[1, 3], 17], np.int32)
    assert_allclose(
        layer.sampled_loss(hidden, targets, candidates),
        _sampled_nll(layer, hidden, targets, candidates),
        atol=1e-5,
    )
    # S is the number of candidates given.
    assert_allclose(
        layer.sampled_loss(hidden, targets, candidates[:3]),
        _sampled_nll(layer, hidden, targets, candidates[:3]),
        atol=1e-5,
    )


def test_accidental_hits_are_removed():
    hidden, targets = _inputs()
    layer = _randomized(WordSoftmax(V, num_sampled=4), hidden, targets)
    # Every candidate is the target: nothing left to compare with, the loss is 0.
    targets = np.full((2, 5), 7, np.int32)
    loss = layer.sampled_loss(hidden, targets, np.array([7, 7, 7, 7], np.int32))
    assert_allclose(loss, np.zeros((2, 5)), atol=1e-6)


def test_sample_candidates_in_range_reproducible_and_advancing():
    first = WordSoftmax(50, num_sampled=30, seed=7)
    twin = WordSoftmax(50, num_sampled=30, seed=7)
    other = WordSoftmax(50, num_sampled=30, seed=8)
    draws = [first.sample_candidates().numpy() for _ in range(3)]
    for ids in draws:
        assert ids.dtype == np.int32 and ids.shape == (30,)
        assert ids.min() >= 0 and ids.max() < 50
    np.testing.assert_array_equal(twin.sample_candidates(), draws[0])
    np.testing.assert_array_equal(twin.sample_candidates(), draws[1])
    assert not np.array_equal(draws[0], draws[1])
    assert not np.array_equal(draws[1], draws[2])
    assert not np.array_equal(other.sample_candidates(), draws[0])


def test_candidates_follow_the_log_uniform_distribution():
    vocabulary_size = 1000
    layer = WordSoftmax(vocabulary_size, num_sampled=999, seed=11)
    ids = np.concatenate([layer.sample_candidates().numpy() for _ in range(20)])
    assert ids.min() >= 0 and ids.max() < vocabulary_size
    # P(a <= k < b) = log((b + 1) / (a + 1)) / log(V + 1).
    edges = np.array([0, 1, 2, 3, 5, 8, 15, 30, 60, 120, 250, 500, 1000])
    observed = np.histogram(ids, bins=edges)[0]
    expected = len(ids) * np.log((edges[1:] + 1) / (edges[:-1] + 1)) / np.log(vocabulary_size + 1)
    np.testing.assert_allclose(expected.sum(), len(ids))
    chi_square = np.sum((observed - expected) ** 2 / expected)
    assert chi_square < 35.0, (chi_square, observed, expected)  # 11 dof: p ~ 3e-4
    # The exact probabilities of the first ids.
    frequencies = np.bincount(ids, minlength=vocabulary_size)[:3] / len(ids)
    np.testing.assert_allclose(frequencies, _log_uniform([0, 1, 2], vocabulary_size), atol=0.01)


def test_training_switches_between_sampled_and_full():
    hidden, targets = _inputs()
    layer = _randomized(WordSoftmax(V, num_sampled=5, seed=4), hidden, targets)
    twin = _randomized(WordSoftmax(V, num_sampled=5, seed=4), hidden, targets)
    twin.set_weights(layer.get_weights())
    full = _full_nll(layer, hidden, targets)
    assert_allclose(layer(hidden, targets, training=False), full, atol=1e-5)
    assert_allclose(layer(hidden, targets), full, atol=1e-5)
    candidates = twin.sample_candidates().numpy()
    sampled = layer(hidden, targets, training=True)
    assert_allclose(sampled, _sampled_nll(layer, hidden, targets, candidates), atol=1e-5)
    assert not np.allclose(sampled, full, atol=1e-3)
    # The next training call draws new candidates.
    candidates = twin.sample_candidates().numpy()
    assert_allclose(
        layer(hidden, targets, training=True),
        _sampled_nll(layer, hidden, targets, candidates),
        atol=1e-5,
    )
    # Without `num_sampled`, training uses the full softmax.
    exact = _randomized(WordSoftmax(V), hidden, targets)
    exact.set_weights(layer.get_weights())
    assert_allclose(exact(hidden, targets, training=True), full, atol=1e-5)


def test_float32_under_mixed_precision():
    hidden, targets = _inputs()
    layer = WordSoftmax(V, num_sampled=5, dtype="mixed_bfloat16")
    hidden = tf.constant(hidden, tf.bfloat16)
    assert layer(hidden, targets).dtype == tf.float32
    assert layer.logits(hidden).dtype == tf.float32
    assert layer(hidden, targets, training=True).dtype == tf.float32
    assert layer.bias.dtype == "float32"


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"vocabulary_size": 10, "num_sampled": 10}, "num_sampled"),
        ({"vocabulary_size": 10, "num_sampled": 11}, "num_sampled"),
        ({"vocabulary_size": 10, "num_sampled": 0}, "num_sampled"),
        ({"vocabulary_size": 0}, "vocabulary_size"),
        ({"vocabulary_size": 10, "seed": "1"}, "seed"),
    ],
)
def test_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=f"`{name}`"):
        WordSoftmax(**kwargs)


def test_candidate_probabilities_stay_exact_for_elmo_sized_vocabularies():
    vocabulary_size = 793_471
    layer = WordSoftmax(vocabulary_size, num_sampled=8192)
    ids = np.array([0, 1, 10, 1000, 100_000, 500_000, vocabulary_size - 1])
    exact = np.log1p(1.0 / (ids + 1.0)) / np.log(vocabulary_size + 1.0)
    np.testing.assert_allclose(layer.log_uniform_probabilities(ids).numpy(), exact, rtol=1e-6)
    draws = layer.sample_candidates().numpy()
    assert draws.min() >= 0 and draws.max() < vocabulary_size
    assert (draws > 100_000).any()  # the tail is reachable


def test_full_softmax_is_float32_under_mixed_precision():
    layer = WordSoftmax(40, dtype="mixed_bfloat16")
    hidden = np.random.default_rng(3).normal(size=(2, 5, 8)).astype("float32")
    # bfloat16-representable inputs (a bf16 model's hidden states are): what is
    # checked is that the projection itself is not rounded to bfloat16.
    hidden = tf.cast(tf.cast(hidden, tf.bfloat16), tf.float32).numpy()
    targets = np.random.default_rng(4).integers(0, 40, (2, 5)).astype("int32")
    nll = layer(hidden, targets).numpy()
    logits = hidden.astype("float64") @ layer.kernel.numpy().T.astype("float64") + layer.bias.numpy()
    log_probs = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True)) - logits.max(-1, keepdims=True)
    expected = -np.take_along_axis(log_probs, targets[..., None], -1)[..., 0]
    np.testing.assert_allclose(nll, expected, atol=1e-5)


def test_numpy_integer_seed_is_an_integer():
    layer = WordSoftmax(30, num_sampled=5, seed=np.int64(3))
    assert layer.get_config()["seed"] == 3 and type(layer.get_config()["seed"]) is int
