"""CRF equivalence tests: every quantity against brute-force enumeration of the tag sequences."""

import itertools
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.harness import assert_allclose, assert_finite, run_layer_test
from tfnlp.layers import CRF, bio_transitions

RNG = np.random.default_rng(0)
BIO = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


def _crf(num_tags, allowed_transitions=None, **kwargs):
    """A built CRF with random weights (zeros would hide transposed or swapped weights)."""
    crf = CRF(num_tags, allowed_transitions=allowed_transitions, **kwargs)
    crf.build((None, None, num_tags))
    for weight in crf.weights:
        weight.assign(RNG.normal(size=weight.shape).astype("float32"))
    return crf


def _batch(num_tags, lengths, steps=None):
    """Random potentials `(B, T, N)` and a prefix mask of `lengths`."""
    steps = max(lengths) if steps is None else steps
    potentials = RNG.normal(size=(len(lengths), steps, num_tags)).astype("float32")
    mask = (np.arange(steps)[None] < np.array(lengths)[:, None]).astype("int32")
    return potentials, mask


# --- The reference: every tag sequence, in float64 ---


def _allowed(sequence, allowed):
    if allowed is None:
        return True
    return (
        allowed["start"][sequence[0]]
        and allowed["end"][sequence[-1]]
        and all(allowed["transitions"][a][b] for a, b in itertools.pairwise(sequence))
    )


def _score(crf, emissions, sequence):
    transitions, start, end = (w.numpy().astype(np.float64) for w in crf.weights)
    return (
        start[sequence[0]]
        + sum(emissions[t, tag] for t, tag in enumerate(sequence))
        + sum(transitions[a, b] for a, b in itertools.pairwise(sequence))
        + end[sequence[-1]]
    )


def _brute_force(crf, emissions, allowed=None):
    """`{sequence: score}` over every (allowed) tag sequence of `emissions` `(n, N)`, n >= 1."""
    emissions = np.asarray(emissions, np.float64)
    return {
        sequence: _score(crf, emissions, sequence)
        for sequence in itertools.product(range(crf.num_tags), repeat=len(emissions))
        if _allowed(sequence, allowed)
    }


def _log_partition(scores):
    values = np.array(list(scores.values()))
    return values.max() + np.log(np.exp(values - values.max()).sum())


def _real(potentials, mask, b):
    return potentials[b][mask[b].astype(bool)]


# --- Log-likelihood, partition function and Viterbi against brute force ---


@pytest.mark.parametrize("num_tags, lengths", [(3, [5, 3, 1, 0]), (4, [4, 2, 4])])
def test_log_likelihood_matches_brute_force(num_tags, lengths):
    crf = _crf(num_tags)
    potentials, mask = _batch(num_tags, lengths)
    tags = RNG.integers(0, num_tags, size=mask.shape).astype("int32")
    got = crf.log_likelihood(potentials, tags, mask).numpy()
    for b, n in enumerate(lengths):
        if n == 0:
            assert got[b] == 0.0  # the empty sequence is certain
            continue
        scores = _brute_force(crf, _real(potentials, mask, b))
        expected = scores[tuple(tags[b, :n])] - _log_partition(scores)
        np.testing.assert_allclose(got[b], expected, atol=1e-5)
    assert_allclose(crf.loss(potentials, tags, mask), -got.mean(), atol=1e-6)


@pytest.mark.parametrize("steps", [1, 2, 4])
def test_probabilities_of_all_sequences_sum_to_one(steps):
    crf = _crf(3)
    potentials, _ = _batch(3, [steps])
    sequences = np.array(list(itertools.product(range(3), repeat=steps)), np.int32)  # (3^T, T)
    tiled = np.repeat(potentials, len(sequences), axis=0)
    log_p = crf.log_likelihood(tiled, sequences).numpy().astype(np.float64)
    np.testing.assert_allclose(np.exp(log_p).sum(), 1.0, atol=1e-5)


@pytest.mark.parametrize("num_tags, lengths", [(3, [5, 3, 1, 0]), (4, [4, 2, 4])])
def test_viterbi_matches_brute_force(num_tags, lengths):
    crf = _crf(num_tags)
    potentials, mask = _batch(num_tags, lengths)
    tags, scores = crf.decode(potentials, mask)
    assert tags.dtype == tf.int32 and scores.dtype == tf.float32
    assert_allclose(crf(potentials, padding_mask=mask), tags, atol=0)
    for b, n in enumerate(lengths):
        np.testing.assert_array_equal(tags[b, n:], 0)  # padding
        if n == 0:
            assert scores[b] == 0.0
            continue
        brute = _brute_force(crf, _real(potentials, mask, b))
        best = max(brute, key=brute.get)
        assert tuple(tags[b, :n].numpy()) == best
        np.testing.assert_allclose(scores[b], brute[best], atol=1e-5)


def test_real_tokens_need_not_be_a_prefix():
    """A scattered mask (e.g. first WordPieces) = the same CRF on the real tokens alone."""
    crf = _crf(3)
    potentials, _ = _batch(3, [6, 6])
    mask = np.array([[0, 1, 0, 1, 1, 0], [1, 0, 0, 1, 0, 0]], np.int32)
    tags = RNG.integers(0, 3, size=mask.shape).astype("int32")
    tags[mask == 0] = -100  # ignored, as Hugging Face pads labels
    decoded, scores = crf.decode(potentials, mask)
    likelihood = crf.log_likelihood(potentials, tags, mask)
    for b in range(2):
        real = mask[b].astype(bool)
        compact = potentials[b : b + 1, real]
        alone_tags, alone_score = crf.decode(compact)
        np.testing.assert_array_equal(decoded[b][real], alone_tags[0])
        np.testing.assert_array_equal(decoded[b][~real], 0)
        assert_allclose(scores[b], alone_score[0], atol=1e-5)
        scores_b = _brute_force(crf, compact[0])
        expected = scores_b[tuple(tags[b][real])] - _log_partition(scores_b)
        np.testing.assert_allclose(likelihood[b], expected, atol=1e-5)


def test_padding_potentials_change_nothing():
    crf = _crf(3)
    potentials, mask = _batch(3, [4, 2, 0])
    tags = RNG.integers(0, 3, size=mask.shape).astype("int32")
    garbage = potentials.copy()
    garbage[mask == 0] = 1e4
    garbage[2] = np.nan  # a row without real tokens
    for p in (potentials, garbage):
        assert np.all(np.isfinite(crf.log_likelihood(p, tags, mask)))
    assert_allclose(crf.log_likelihood(garbage, tags, mask), crf.log_likelihood(potentials, tags, mask))
    assert_allclose(crf(garbage, padding_mask=mask), crf(potentials, padding_mask=mask), atol=0)


def test_keras_mask_of_potentials_is_used():
    crf = _crf(3)
    potentials, mask = _batch(3, [4, 2])
    masked = keras.layers.Masking()(tf.where(mask[:, :, None] == 1, potentials, 0.0))
    tags = crf(masked)
    assert_allclose(tags, crf(potentials, padding_mask=mask), atol=0)
    np.testing.assert_array_equal(tags._keras_mask, mask)  # passed on to the tags


def test_no_steps_and_no_real_tokens_are_safe():
    crf = _crf(3)
    empty = np.zeros((2, 0, 3), np.float32)
    tags, scores = crf.decode(empty)
    assert tags.shape == (2, 0) and np.all(scores.numpy() == 0)
    np.testing.assert_array_equal(crf.log_likelihood(empty, np.zeros((2, 0), np.int32)), [0, 0])
    potentials = tf.constant(RNG.normal(size=(2, 3, 3)), tf.float32)
    none_real = np.zeros((2, 3), np.int32)
    with tf.GradientTape() as tape:
        tape.watch(potentials)
        loss = crf.loss(potentials, np.zeros((2, 3), np.int32), none_real)
    gradients = tape.gradient(loss, [potentials, *crf.trainable_weights])
    assert float(loss) == 0.0
    assert all(np.all(g.numpy() == 0) for g in gradients)


# --- BIO constraints ---


def test_bio_transitions():
    allowed = bio_transitions(BIO)
    forbidden = {
        (a, b)
        for a, b in itertools.product(BIO, BIO)
        if not allowed["transitions"][BIO.index(a)][BIO.index(b)]
    }
    assert forbidden == {
        ("O", "I-PER"), ("O", "I-LOC"), ("B-LOC", "I-PER"), ("I-LOC", "I-PER"),
        ("B-PER", "I-LOC"), ("I-PER", "I-LOC"),
    }
    assert allowed["start"] == [True, True, False, True, False]
    assert allowed["end"] == [True] * 5


def test_constrained_decoding_never_breaks_iob2_even_when_the_potentials_want_it():
    allowed = bio_transitions(BIO)
    crf = _crf(5, allowed)
    potentials, mask = _batch(5, [4, 3, 1])
    potentials[:, :, BIO.index("I-PER")] += 50.0  # `I-PER` everywhere, first position included
    tags, scores = crf.decode(potentials, mask)
    for b, n in enumerate(mask.sum(axis=1)):
        path = tuple(tags[b, :n].numpy())
        assert _allowed(path, allowed), [BIO[t] for t in path]
        brute = _brute_force(crf, _real(potentials, mask, b), allowed)
        best = max(brute, key=brute.get)
        assert path == best
        np.testing.assert_allclose(scores[b], brute[best], atol=1e-4)
    # Unconstrained, the same weights pick I-PER at the start.
    free = CRF(5)
    free(potentials)
    free.set_weights(crf.get_weights())
    assert BIO[int(free(potentials)[0, 0])] == "I-PER"


def test_constrained_log_likelihood_normalises_over_allowed_sequences_only():
    allowed = bio_transitions(BIO)
    crf = _crf(5, allowed)
    potentials, mask = _batch(5, [4, 2, 1])
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["O", "B-LOC", "O", "O"], ["B-PER", "O", "O", "O"]]
    tags = np.array([[BIO.index(t) for t in row] for row in gold], np.int32)
    got = crf.log_likelihood(potentials, tags, mask).numpy()
    assert np.all(np.isfinite(got))
    for b, n in enumerate(mask.sum(axis=1)):
        scores = _brute_force(crf, _real(potentials, mask, b), allowed)
        expected = scores[tuple(tags[b, :n])] - _log_partition(scores)
        np.testing.assert_allclose(got[b], expected, atol=1e-5)
    # A forbidden gold sequence (`O I-PER`) is impossible: -inf, gradients still finite.
    bad = tags.copy()
    bad[0, :2] = [BIO.index("O"), BIO.index("I-PER")]
    with tf.GradientTape() as tape:
        likelihood = crf.log_likelihood(potentials, bad, mask)
        loss = -tf.reduce_sum(likelihood[1:])
    assert likelihood[0] == -np.inf and np.all(np.isfinite(likelihood[1:]))
    gradients = tape.gradient(loss, crf.trainable_weights)
    assert all(np.all(np.isfinite(tf.convert_to_tensor(g))) for g in gradients)


def test_unreachable_tags_keep_gradients_finite():
    """A tag no allowed path reaches has -inf forward scores at every step, yet no NaN."""
    allowed = bio_transitions(["O", "I-PER", "B-LOC"])  # I-PER without B-PER: unreachable
    crf = _crf(3, allowed)
    potentials = tf.constant(RNG.normal(size=(2, 4, 3)), tf.float32)
    tags = np.array([[0, 2, 0, 0], [2, 2, 0, 2]], np.int32)
    with tf.GradientTape() as tape:
        tape.watch(potentials)
        loss = crf.loss(potentials, tags)
    gradients = tape.gradient(loss, [potentials, *crf.trainable_weights])
    assert np.isfinite(float(loss))
    assert all(np.all(np.isfinite(g.numpy())) for g in gradients)
    assert np.all(gradients[0].numpy()[:, :, 1] == 0)  # no probability on the unreachable tag


# --- Gradients ---


def _marginals(crf, emissions, allowed=None):
    """Brute-force expected tag counts `(n, N)` and transition counts `(N, N)`, float64."""
    scores = _brute_force(crf, emissions, allowed)
    log_z = _log_partition(scores)
    tags, moves = np.zeros(emissions.shape), np.zeros((crf.num_tags,) * 2)
    for sequence, score in scores.items():
        p = np.exp(score - log_z)
        tags[np.arange(len(sequence)), sequence] += p
        for a, b in itertools.pairwise(sequence):
            moves[a, b] += p
    return tags, moves


@pytest.mark.parametrize("allowed", [None, bio_transitions(BIO[:3])], ids=["free", "bio"])
def test_gradients_are_brute_force_expectations_minus_gold_counts(allowed):
    """d(-log p(y)) / d potentials = p(y_t = k) - [y_t = k]; for A: expected - gold moves."""
    crf = _crf(3, allowed)
    potentials, mask = _batch(3, [4, 2])
    tags = np.array([[0, 1, 2, 0], [1, 2, 0, 0]], np.int32)
    x = tf.constant(potentials)
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = -tf.reduce_sum(crf.log_likelihood(x, tags, mask))
    by_potentials, by_transitions = tape.gradient(loss, [x, crf.transitions])
    expected_potentials, expected_transitions = np.zeros(potentials.shape), 0.0
    for b, n in enumerate(mask.sum(axis=1)):
        tag_marginals, moves = _marginals(crf, _real(potentials, mask, b), allowed)
        expected_potentials[b, :n] = tag_marginals - np.eye(3)[tags[b, :n]]
        gold_moves = np.zeros((3, 3))
        np.add.at(gold_moves, (tags[b, : n - 1], tags[b, 1:n]), 1.0)
        expected_transitions = expected_transitions + moves - gold_moves
    assert_allclose(by_potentials, expected_potentials, atol=1e-5)
    assert_allclose(by_transitions, expected_transitions, atol=1e-5)


# --- Graphs, XLA, SavedModel, mixed precision ---


def test_xla_gives_the_eager_outputs_and_gradients():
    """Traced with unknown batch and length; compiled for one shape (XLA compiles per shape)."""
    crf = _crf(4, bio_transitions(BIO[:3] + ["B-LOC"]))
    potentials, mask = _batch(4, [5, 3, 0])
    tags = RNG.integers(0, 2, size=mask.shape).astype("int32")  # O and B-PER: allowed

    def outputs(potentials, mask, tags):
        with tf.GradientTape() as tape:
            tape.watch(potentials)
            loss = crf.loss(potentials, tags, mask)
        decoded, scores = crf.decode(potentials, mask)
        likelihood = crf.log_likelihood(potentials, tags, mask)
        by_weights = [tf.convert_to_tensor(g) for g in tape.gradient(loss, [potentials, *crf.weights])]
        return decoded, scores, likelihood, by_weights

    spec = [tf.TensorSpec([None, None, 4]), *[tf.TensorSpec([None, None], tf.int32)] * 2]
    compiled = tf.function(outputs, input_signature=spec, jit_compile=True)
    got = compiled(potentials, mask, tags)
    eager = outputs(tf.constant(potentials), mask, tags)
    np.testing.assert_array_equal(got[0], eager[0])
    assert_allclose(got[1:], eager[1:], atol=1e-5)
    assert_finite(got)


def test_saved_model_decodes_as_in_memory(tmp_path):
    crf = _crf(3, bio_transitions(BIO[:3]))
    module = tf.Module()
    module.crf = crf
    module.decode = tf.function(
        lambda p, m: crf(p, padding_mask=m),
        input_signature=[tf.TensorSpec([None, None, 3]), tf.TensorSpec([None, None], tf.int32)],
    )
    tf.saved_model.save(module, str(tmp_path))
    restored = tf.saved_model.load(str(tmp_path))
    for lengths in ([4, 2], [3, 1, 0]):
        potentials, mask = _batch(3, lengths)
        np.testing.assert_array_equal(restored.decode(potentials, mask), crf(potentials, padding_mask=mask))


def test_mixed_precision_keeps_float32_weights_and_computation():
    crf = _crf(5, bio_transitions(BIO), dtype="mixed_bfloat16")
    assert all(w.dtype == "float32" for w in crf.weights)
    potentials, mask = _batch(5, [4, 2])
    tags = np.zeros(mask.shape, np.int32)
    low = tf.constant(potentials, tf.bfloat16)
    likelihood = crf.log_likelihood(low, tags, mask)
    assert likelihood.dtype == tf.float32 and np.all(np.isfinite(likelihood))
    assert crf(low, padding_mask=mask).dtype == tf.int32
    # Exactly the float32 result on the bfloat16-rounded potentials.
    rounded = tf.cast(low, tf.float32)
    assert_allclose(likelihood, crf.log_likelihood(rounded, tags, mask), atol=1e-6)
    # float32 potentials (a float32 head's) are not rounded to bfloat16 on the way in:
    # 10.0 and 10.001 are one bfloat16 number, and the tie would decode to tag 0.
    close = np.zeros((1, 2, 5), np.float32)
    close[0, :, 0], close[0, :, 1] = 10.0, 10.001
    free = CRF(5, dtype="mixed_bfloat16")
    np.testing.assert_array_equal(free(close), [[1, 1]])
    np.testing.assert_array_equal(free(tf.cast(close, tf.bfloat16)), [[0, 0]])


# --- Keras: harness, saving, training ---


def test_harness():
    potentials, mask = _batch(3, [4, 2])
    run_layer_test(
        CRF,
        {"num_tags": 3, "allowed_transitions": bio_transitions(BIO[:3])},
        {"potentials": potentials, "padding_mask": mask},
        expected_output_shape=(2, 4),
        expected_num_trainable_weights=3,
        run_training=False,  # int tags: trained through `loss`, see below
        run_mixed_precision=False,  # int output: see the mixed-precision test
    )


def test_keras_file_round_trip_decodes_identically(tmp_path):
    crf = _crf(5, bio_transitions(BIO), name="crf")
    config = crf.get_config()
    assert CRF.from_config(config).get_config() == config
    inputs = keras.Input((None, 5)), keras.Input((None,), dtype="int32")
    model = keras.Model(inputs, crf(inputs[0], padding_mask=inputs[1]))
    path = os.path.join(tmp_path, "crf.keras")
    model.save(path)
    restored = keras.saving.load_model(path, safe_mode=True)
    assert restored.get_layer("crf").allowed_transitions == crf.allowed_transitions
    potentials, mask = _batch(5, [5, 3, 1])
    potentials[:, :, 2] += 5.0  # constrained paths matter
    np.testing.assert_array_equal(restored([potentials, mask]), model([potentials, mask]))


class Tagger(keras.Model):
    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        return self.get_layer("crf").loss(y_pred["potentials"], y, padding_mask=x["padding_mask"])


def test_a_tagger_trains_with_the_loss_in_compute_loss():
    """The pattern of the class docstring (its gradients under XLA: the test above)."""
    keras.utils.set_random_seed(0)
    token_ids = keras.Input((None,), dtype="int32", name="token_ids")
    padding_mask = keras.Input((None,), dtype="int32", name="padding_mask")
    potentials = keras.layers.Dense(3)(keras.layers.Embedding(10, 4)(token_ids))
    crf = CRF(3, allowed_transitions=bio_transitions(BIO[:3]), name="crf")
    outputs = {"potentials": potentials, "tags": crf(potentials, padding_mask=padding_mask)}
    tagger = Tagger({"token_ids": token_ids, "padding_mask": padding_mask}, outputs)
    tagger.compile(optimizer=keras.optimizers.Adam(0.1), jit_compile=False)
    x = {"token_ids": np.array([[1, 2, 3, 4], [5, 1, 2, 0]]),
         "padding_mask": np.array([[1, 1, 1, 1], [1, 1, 1, 0]])}
    y = np.array([[1, 2, 0, 1], [0, 1, 2, -100]])
    before = [w.numpy().copy() for w in tagger.trainable_weights]
    losses = tagger.fit(x, y, batch_size=2, epochs=8, verbose=0).history["loss"]
    assert all(np.isfinite(losses)) and losses[-1] < 0.2 * losses[0], losses
    for old, new in zip(before, tagger.trainable_weights, strict=True):
        assert not np.array_equal(old, new.numpy()), f"{new.path} did not train"
    np.testing.assert_array_equal(tagger(x)["tags"], np.where(y < 0, 0, y))


# --- Bad arguments ---


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"num_tags": 0}, "`num_tags`"),
        ({"num_tags": 2.5}, "`num_tags`"),
        ({"num_tags": 3, "allowed_transitions": [[True] * 3] * 3}, "`allowed_transitions`"),
        ({"num_tags": 3, "allowed_transitions": {"moves": []}}, "`allowed_transitions`"),
        ({"num_tags": 3, "allowed_transitions": bio_transitions(BIO)},
         r"`allowed_transitions\['transitions'\]` must have shape \(3, 3\)"),
        ({"num_tags": 2, "allowed_transitions": {"start": [True, True, True]}},
         r"`allowed_transitions\['start'\]` must have shape \(2,\)"),
        ({"num_tags": 2, "allowed_transitions": {"end": [[True], [True, False]]}},
         r"`allowed_transitions\['end'\]` must have shape"),
        ({"num_tags": 2, "allowed_transitions": {"transitions": [[0.5, 1], [1, 1]]}},
         r"`allowed_transitions\['transitions'\]` must hold booleans"),
        ({"num_tags": 2, "allowed_transitions": {"start": [False, False]}},
         r"`allowed_transitions\['start'\]` lets no tag begin"),
    ],
)
def test_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        CRF(**kwargs)


@pytest.mark.parametrize(
    "tag_names, name",
    [
        (["O", "S-PER"], r"`tag_names\[1\]` must be 'O', 'B-TYPE' or 'I-TYPE'"),
        (["O", "PER"], r"`tag_names\[1\]`"),
        (["B-"], r"`tag_names\[0\]`"),
        (["O", 3], r"`tag_names\[1\]`"),
        (["O", "B-PER", "O"], r"`tag_names` has 'O' twice"),
        ([], "`tag_names`"),
        ("O B-PER", "`tag_names`"),
    ],
)
def test_bad_tag_names(tag_names, name):
    with pytest.raises(ValueError, match=name):
        bio_transitions(tag_names)


@pytest.mark.parametrize(
    "call, error, name",
    [
        (lambda crf: crf(tf.ones((2, 4))), ValueError, r"`potentials` must have shape \(B, T, N\)"),
        (lambda crf: crf(tf.ones((2, 4, 5))), ValueError, r"`potentials` .* must be 3 \(as in `num_tags`\)"),
        (lambda crf: crf(tf.ones((2, 4, 3), tf.int32)), TypeError, "`potentials` must be a floating"),
        (lambda crf: crf(tf.ones((2, 4, 3)), padding_mask=tf.ones((2, 5))), ValueError, "`padding_mask`"),
        (lambda crf: crf.log_likelihood(tf.ones((2, 4, 3)), tf.zeros((2, 5), tf.int32)), ValueError,
         r"`tags` has shape \(2, 5\)"),
        (lambda crf: crf.log_likelihood(tf.ones((2, 4, 3)), tf.zeros((2, 4))), TypeError,
         "`tags` must be an integer"),
        (lambda crf: crf.log_likelihood(tf.ones((1, 2, 3)), [[0, 3]]), ValueError,
         r"`tags` must be in \[0, 3\)"),
    ],
)
def test_bad_calls_name_the_argument(call, error, name):
    crf = CRF(3)
    with pytest.raises(error, match=name) as info:
        call(crf)
    assert "Arguments received" not in str(info.value)
