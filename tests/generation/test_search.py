"""Greedy and beam search on Markov decoders whose every probability is known."""

import itertools

import numpy as np
import pytest
import tensorflow as tf

from tfnlp.generation import beam_search, greedy_search, length_penalty_factor

END, PAD, START = 1, 0, 2


def markov_step(table):
    """A decoder whose next-token logits depend only on the input token."""
    table = tf.constant(table, tf.float32)

    def step_fn(token_ids, index, state, context):
        # `state` counts the steps, so that state handling is exercised too.
        return tf.gather(table, token_ids), state + 1

    return step_fn


def random_table(seed, vocabulary_size=7, temperature=2.0):
    return np.random.default_rng(seed).normal(size=(vocabulary_size, vocabulary_size)) * temperature


def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def sequence_log_prob(table, tokens):
    """Sum of the log-probabilities of `tokens` after START under the Markov table."""
    log_probs = log_softmax(np.asarray(table, np.float64))
    total, previous = 0.0, START
    for token in tokens:
        total += log_probs[previous, token]
        previous = token
    return total


def strip(tokens):
    tokens = list(tokens)
    return tokens[: tokens.index(END) + 1] if END in tokens else tokens


@pytest.mark.parametrize("seed", range(8))
def test_beam_size_one_is_greedy(seed):
    step = markov_step(random_table(seed))
    start = tf.fill([3], START)
    state = tf.zeros([3], tf.int32)
    greedy = greedy_search(step, start, 9, END, state=state)
    beam = beam_search(step, start, 9, END, beam_size=1, state=state)
    np.testing.assert_array_equal(beam["token_ids"][:, 0], greedy["token_ids"])
    np.testing.assert_array_equal(beam["lengths"][:, 0], greedy["lengths"])
    np.testing.assert_allclose(beam["scores"][:, 0], greedy["scores"], atol=1e-5)


@pytest.mark.parametrize("alpha", [0.0, 0.6, -0.5])
@pytest.mark.parametrize("seed", range(4))
def test_wide_beam_finds_the_exhaustive_optimum(seed, alpha):
    """With a beam as wide as the search space, beam search is exact."""
    vocabulary_size, max_length = 4, 4
    table = random_table(seed, vocabulary_size, temperature=1.0)
    best = -np.inf
    for length in range(1, max_length + 1):
        for tokens in itertools.product(range(vocabulary_size), repeat=length):
            ended = tokens[-1] == END
            if END in tokens[:-1] or (not ended and length < max_length):
                continue
            score = sequence_log_prob(table, tokens) / ((5 + length) / 6) ** alpha
            best = max(best, score)
    result = beam_search(markov_step(table), tf.constant([START]), max_length, END,
                         beam_size=vocabulary_size**max_length, length_penalty=alpha,
                         state=tf.zeros([1], tf.int32))
    np.testing.assert_allclose(result["scores"][0, 0], best, rtol=1e-5)


@pytest.mark.parametrize("beam_size, alpha", [(3, 0.0), (4, 1.0)])
def test_beam_scores_are_the_log_probabilities_of_their_tokens(beam_size, alpha):
    table = random_table(3)
    result = beam_search(markov_step(table), tf.fill([2], START), 8, END, beam_size=beam_size,
                         length_penalty=alpha, state=tf.zeros([2], tf.int32))
    for b in range(2):
        scores = result["scores"][b].numpy()
        assert np.all(np.diff(scores) <= 1e-6), "hypotheses must be sorted best first"
        for k in range(beam_size):
            tokens = strip(result["token_ids"][b, k].numpy())
            assert len(tokens) == result["lengths"][b, k]
            log_prob = sequence_log_prob(table, tokens)
            np.testing.assert_allclose(result["log_probs"][b, k], log_prob, atol=1e-4)
            factor = length_penalty_factor(len(tokens), alpha).numpy()
            np.testing.assert_allclose(scores[k], log_prob / factor, atol=1e-4)
            assert set(result["token_ids"][b, k, len(tokens):].numpy()) <= {PAD}


def cycling_table(vocabulary_size=8):
    """Strongly prefers 3 -> 4 -> 5 -> 3 ..., so sequences repeat unless blocked."""
    table = np.zeros((vocabulary_size, vocabulary_size))
    for a, b in ((START, 3), (3, 4), (4, 5), (5, 3)):
        table[a, b] = 8.0
    table[:, END] = -4.0
    return table


def trigrams(tokens):
    tokens = [t for t in strip(tokens) if t != END]
    return [tuple(tokens[i : i + 3]) for i in range(len(tokens) - 2)]


@pytest.mark.parametrize("beam_size", [1, 3])
def test_trigram_blocking_never_repeats_a_trigram(beam_size):
    step = markov_step(cycling_table())
    state = tf.zeros([2], tf.int32)

    def run(n):
        result = beam_search(step, tf.fill([2], START), 20, END, beam_size=beam_size, state=state,
                             no_repeat_ngram_size=n)
        return result["token_ids"].numpy().reshape(-1, 20)

    unblocked = [trigrams(t) for t in run(0)]
    assert any(len(set(t)) < len(t) for t in unblocked), "the test decoder must repeat itself"
    for tokens in run(3):
        found = trigrams(tokens)
        assert len(found) >= 3 and len(set(found)) == len(found), tokens


def test_greedy_blocking_of_bigrams_and_unigrams():
    step = markov_step(cycling_table())
    for n in (1, 2):
        tokens = greedy_search(step, tf.constant([START]), 7, END, state=tf.zeros([1], tf.int32),
                               no_repeat_ngram_size=n)["token_ids"][0].numpy()
        tokens = [t for t in strip(tokens) if t != END]
        grams = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
        assert len(set(grams)) == len(grams), tokens


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_batch_entries_finish_independently(search):
    """Each sequence equals its result decoded alone; ended ones are padded."""
    table = random_table(11)
    table[6, END] = 30.0  # start token 6 ends at once; the others run longer
    starts = [6, START, 4, 5]

    def run(start_ids):
        state = tf.zeros([len(start_ids)], tf.int32)
        if search == "greedy":
            return greedy_search(markov_step(table), tf.constant(start_ids), 10, END,
                                 state=state)
        return beam_search(markov_step(table), tf.constant(start_ids), 10, END, beam_size=3,
                           length_penalty=0.6, state=state)

    together = run(starts)
    assert together["lengths"].numpy().ravel()[0] == 1
    for i, start in enumerate(starts):
        alone = run([start])
        for name in ("token_ids", "lengths"):
            np.testing.assert_array_equal(together[name][i], alone[name][0])
        np.testing.assert_allclose(together["scores"][i], alone["scores"][0], atol=1e-5)


def test_state_and_context_reach_the_step_and_follow_the_beams():
    """A decoder whose logits depend on its state: beam reordering must carry it."""
    vocabulary_size = 6

    def step_fn(token_ids, index, state, context):
        # The state is the running sum of the tokens of the hypothesis.
        state = state + token_ids
        logits = tf.one_hot((state + context) % vocabulary_size, vocabulary_size) * 3.0
        return logits, state

    def reference(start, offset, length):
        tokens, total, token = [], 0, start
        for _ in range(length):
            total += token
            token = (total + offset) % vocabulary_size
            tokens.append(token)
            if token == END:
                break
        return tokens

    start = tf.constant([START, 3])
    context = tf.constant([1, 2])
    greedy = greedy_search(step_fn, start, 6, END, state=tf.zeros([2], tf.int32), context=context)
    beam = beam_search(step_fn, start, 6, END, beam_size=2, state=tf.zeros([2], tf.int32),
                       context=context)
    for b, (s, c) in enumerate(((START, 1), (3, 2))):
        expected = reference(s, c, 6)
        assert strip(greedy["token_ids"][b].numpy()) == expected
        assert strip(beam["token_ids"][b, 0].numpy()) == expected


def test_compiles_with_xla_and_traces_once():
    table = random_table(5)

    @tf.function(jit_compile=True, input_signature=[tf.TensorSpec([None], tf.int32)])
    def search(start_ids):
        state = tf.zeros_like(start_ids)
        return beam_search(markov_step(table), start_ids, 8, END, beam_size=3, state=state,
                           no_repeat_ngram_size=3)

    eager = beam_search(markov_step(table), tf.constant([START, 4]), 8, END, beam_size=3,
                        state=tf.zeros([2], tf.int32), no_repeat_ngram_size=3)
    compiled = search(tf.constant([START, 4]))
    search(tf.constant([START, 4, 5]))
    np.testing.assert_array_equal(compiled["token_ids"], eager["token_ids"])
    assert search.experimental_get_tracing_count() == 1


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"max_length": 0}, "max_length"),
        ({"end_id": -1}, "end_id"),
        ({"pad_id": 1.5}, "pad_id"),
        ({"no_repeat_ngram_size": -1}, "no_repeat_ngram_size"),
        ({"beam_size": 0}, "beam_size"),
        ({"length_penalty": "long"}, "length_penalty"),
        ({"early_stopping": 0}, "`early_stopping` must be True or False, got 0"),
        ({"early_stopping": None}, "`early_stopping` must be True or False, got None"),
        ({"early_stopping": tf.constant(1)}, "`early_stopping` must be a bool scalar"),
    ],
)
def test_bad_arguments_name_themselves(kwargs, message):
    arguments = {"max_length": 5, "end_id": END, "beam_size": 2, **kwargs}
    with pytest.raises(ValueError, match=message):
        beam_search(markov_step(random_table(0)), tf.constant([START]), **arguments)


def test_bad_start_ids_and_logits():
    step = markov_step(random_table(0))
    with pytest.raises(TypeError, match="start_ids"):
        greedy_search(step, tf.constant([2.0]), 5, END)
    with pytest.raises(ValueError, match="start_ids"):
        greedy_search(step, tf.constant([[2]]), 5, END)

    def bad_step(token_ids, index, state, context):
        return tf.zeros([1, 2, 3]), state

    with pytest.raises(ValueError, match="vocabulary_size"):
        greedy_search(bad_step, tf.constant([2]), 5, END)

    def one_token_step(token_ids, index, state, context):
        return tf.zeros([1, 1]), state

    with pytest.raises(ValueError, match="at least 2 tokens"):
        beam_search(one_token_step, tf.constant([0]), 5, 0)


@pytest.mark.parametrize("alpha", [-0.8, 0.0, 0.6, 2.0])
@pytest.mark.parametrize("beam_size", [2, 3])
def test_early_stopping_changes_nothing(alpha, beam_size):
    """Stopping early returns the hypotheses of running every step to max_length."""
    for seed in range(5):
        table = random_table(seed, temperature=1.5)
        table[:, END] += 1.0  # end often, so that early stops happen
        runs = [
            beam_search(markov_step(table), tf.fill([3], START), 10, END, beam_size=beam_size,
                        length_penalty=alpha, state=tf.zeros([3], tf.int32),
                        early_stopping=early)
            for early in (True, False)
        ]
        for name in ("token_ids", "lengths"):
            np.testing.assert_array_equal(runs[0][name], runs[1][name])
        np.testing.assert_allclose(runs[0]["scores"], runs[1]["scores"], atol=1e-5)


def test_unreachable_beam_slots_are_padding_with_minus_infinity():
    result = beam_search(markov_step(random_table(0, vocabulary_size=3)), tf.constant([START]),
                         1, END, beam_size=5, pad_id=7, state=tf.zeros([1], tf.int32))
    reachable = 3  # one step over 3 tokens
    assert np.all(np.isfinite(result["scores"][0, :reachable]))
    assert np.all(result["scores"][0, reachable:] == -np.inf)
    assert np.all(result["log_probs"][0, reachable:] == -np.inf)
    assert np.all(result["token_ids"][0, reachable:] == 7)


def test_numpy_token_ids_are_accepted():
    result = greedy_search(markov_step(random_table(0)), tf.constant([START]), np.int64(5),
                           np.int64(END), pad_id=np.int32(0), state=tf.zeros([1], tf.int32))
    assert result["token_ids"].dtype == tf.int32


class _Device:
    def __init__(self, device_type):
        self.device_type = device_type


def test_jit_compile_auto_follows_the_visible_devices(monkeypatch):
    from tfnlp.generation._common import resolve_jit_compile

    assert resolve_jit_compile(True) is True and resolve_jit_compile(False) is False
    visible = [_Device("CPU")]
    monkeypatch.setattr(tf.config, "list_physical_devices", lambda *args: visible)
    assert resolve_jit_compile("auto") is False
    visible.append(_Device("GPU"))
    assert resolve_jit_compile("auto") is True
    for bad in ("yes", "AUTO", 1, None, np.bool_(True)):
        with pytest.raises(ValueError, match="`jit_compile` must be True, False or 'auto'"):
            resolve_jit_compile(bad)


def _state_step(change):
    """A 5-token decoder whose returned state is `change(state)`."""
    return lambda token_ids, index, state, context: (tf.one_hot(token_ids, 5) * 3.0, change(state))


BAD_STEPS = [
    ("logits only", lambda token_ids, index, state, context: tf.one_hot(token_ids, 5), 3,
     r"`step_fn` must return a pair \(logits, state\), got .*Tensor"),
    ("three values", lambda token_ids, index, state, context: (tf.one_hot(token_ids, 5), state, 0),
     3, r"`step_fn` must return a pair \(logits, state\), got tuple of length 3"),
    ("state structure", _state_step(lambda state: (state, state)), 3,
     r"`step_fn` must return the state with the nested structure it was given"),
    ("state grows", _state_step(lambda state: tf.concat([state, state], 1)), 3,
     r"`step_fn` changed state tensor 0 from \(\d+, 3\) float32 to \(\d+, 6\) float32"),
    ("state dtype", _state_step(lambda state: tf.cast(state, tf.int32)), 3,
     r"`step_fn` changed state tensor 0 from \(\d+, 3\) float32 to \(\d+, 3\) int32"),
    ("end_id outside the vocabulary", _state_step(lambda state: state), 7,
     r"`end_id` \(7\) is not one of the 5 tokens `step_fn` scores"),
]


@pytest.mark.parametrize("graph", [False, True], ids=["eager", "tf.function"])
@pytest.mark.parametrize("search", ["greedy", "beam"])
@pytest.mark.parametrize("name, step_fn, end_id, message", BAD_STEPS, ids=[c[0] for c in BAD_STEPS])
def test_a_bad_step_fn_is_refused_with_an_error_naming_it(name, step_fn, end_id, message, search,
                                                           graph):
    def run():
        arguments = {"max_length": 4, "end_id": end_id, "state": tf.zeros([2, 3])}
        if search == "beam":
            return beam_search(step_fn, tf.constant([0, 1]), beam_size=2, **arguments)
        return greedy_search(step_fn, tf.constant([0, 1]), **arguments)

    with pytest.raises(ValueError, match=message):
        tf.function(run)() if graph else run()


def test_a_step_fn_that_is_not_callable_is_refused():
    with pytest.raises(ValueError, match="`step_fn` must be callable"):
        greedy_search("decoder", tf.constant([0]), max_length=2, end_id=1)


@pytest.mark.parametrize("n, possible", [(1, [[3], [1, 3]]), (2, [[3], [1, 3], [1, 1, 3]])])
def test_beam_slots_only_banned_hypotheses_could_fill_are_empty(n, possible):
    # Only token 1 and the end token 3 have nonzero probability: with every
    # n-gram banned from repeating, fewer than 4 hypotheses are possible.
    logits = [[-np.inf, 0.0, -np.inf, -3.0]] * 4
    result = beam_search(markov_step(logits), tf.constant([1]), 6, 3, beam_size=4,
                         state=tf.zeros([1], tf.int32), no_repeat_ngram_size=n)
    count = len(possible)
    lengths = result["lengths"][0].numpy()
    found = [list(t[:length]) for t, length in zip(result["token_ids"][0].numpy(), lengths, strict=True)]
    assert found[:count] == possible
    assert np.all(np.isfinite(result["scores"][0, :count]))
    assert np.all(lengths[count:] == 0)
    assert np.all(result["token_ids"][0, count:] == 0)
    assert np.all(result["scores"][0, count:] == -np.inf)
    assert np.all(result["log_probs"][0, count:] == -np.inf)


def test_early_stopping_may_be_a_bool_tensor():
    arguments = {"max_length": 8, "end_id": END, "beam_size": 3, "state": tf.zeros([2], tf.int32)}
    for value in (True, False):
        expected = beam_search(markov_step(random_table(3)), tf.fill([2], START), early_stopping=value,
                               **arguments)
        got = beam_search(markov_step(random_table(3)), tf.fill([2], START),
                          early_stopping=tf.constant(value), **arguments)
        np.testing.assert_array_equal(got["token_ids"], expected["token_ids"])
