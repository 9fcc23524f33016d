"""Sampling: the drawn distribution, seeds, the greedy limits, the processors against Hugging Face."""

import numpy as np
import pytest
import tensorflow as tf

from tfnlp.generation import _philox, greedy_search, sample, sampling

VOCABULARY = 12
TABLE = tf.constant(np.random.default_rng(0).normal(0, 2.0, (VOCABULARY, VOCABULARY)), tf.float32)


def markov_step(token_ids, index, state, context):
    """A toy LM: the next token's logits depend on the previous token."""
    return tf.gather(TABLE, token_ids), state


def fixed_step(logits):
    def step_fn(token_ids, index, state, context):
        return tf.broadcast_to(logits, [tf.shape(token_ids)[0], len(logits)]), state
    return step_fn


def expected_distribution(logits, temperature=1.0, top_k=0, top_p=1.0):
    """The truncated, renormalised softmax, in float64 NumPy (the reference)."""
    z = np.asarray(logits, np.float64) / temperature
    order = np.argsort(-z, kind="stable")
    keep = np.zeros(len(z), bool)
    keep[order[: top_k or len(z)]] = True
    p = np.exp(z - z[keep].max()) * keep
    p /= p.sum()
    cumulative = 0.0
    nucleus = np.zeros(len(z), bool)
    for i in order:
        if keep[i] and cumulative < top_p:
            nucleus[i] = True
            cumulative += p[i]
    p = p * nucleus
    return p / p.sum()


# --- Philox ---

@pytest.mark.parametrize("counter, key, words", [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
])
@pytest.mark.parametrize("jit_compile", [False, True])
def test_philox_gives_random123s_known_answers_with_and_without_xla(counter, key, words,
                                                                      jit_compile):
    as_words = lambda values: tuple(tf.constant(v, tf.uint32) for v in values)  # noqa: E731
    function = tf.function(_philox.philox_words, jit_compile=jit_compile)
    assert tuple(int(w) for w in function(as_words(counter), as_words(key))) == words


def test_philox_equals_tensorflows_cpu_philox():
    # TensorFlow's CPU kernel: key (k1 << 32 | k0), counter (c1 << 32 | c0, c3 << 32 | c2).
    ours = _philox.philox_words(
        (tf.cast(tf.range(64), tf.uint32), tf.fill([64], tf.constant(5, tf.uint32)),
         tf.zeros([64], tf.uint32), tf.zeros([64], tf.uint32)),
        (tf.constant(123, tf.uint32), tf.constant(7, tf.uint32)),
    )
    theirs = tf.raw_ops.StatelessRandomUniformFullIntV2(
        shape=[256], key=tf.constant([7 << 32 | 123], tf.uint64),
        counter=tf.constant([5 << 32, 0], tf.uint64), alg=1, dtype=tf.uint32)
    np.testing.assert_array_equal(tf.stack(ours, axis=-1).numpy().reshape(-1), theirs.numpy())


def test_the_numbers_of_some_tokens_are_those_of_the_whole_vocabulary():
    seeds = tf.constant([3, 2**62 + 11], tf.int64)
    every = _philox.uniform(seeds, tf.constant(7), 1001).numpy()
    token_ids = tf.constant([[0, 1, 2, 3, 4, 1000, 517], [999, 5, 5, 6, 7, 8, 12]])
    some = _philox.uniform_at(seeds, tf.constant(7), token_ids).numpy()
    np.testing.assert_array_equal(some, np.take_along_axis(every, token_ids.numpy(), axis=1))


def test_uniform_numbers_are_never_0_or_1_even_for_the_extreme_words():
    extremes = _philox.to_unit_interval(tf.constant([0, 0xFFFFFFFF], tf.uint32)).numpy()
    assert 0 < extremes[0] < 1e-6 and 1 - 1e-6 < extremes[1] < 1
    assert np.isfinite(-np.log(-np.log(extremes))).all()


def test_uniform_rows_depend_on_their_own_seed_only_and_not_on_xla():
    seeds = tf.constant([3, 2**62 + 11, 0], tf.int64)
    eager = _philox.uniform(seeds, tf.constant(4), 1001).numpy()
    xla = tf.function(_philox.uniform, jit_compile=True)(seeds, tf.constant(4), 1001).numpy()
    np.testing.assert_array_equal(eager, xla)
    np.testing.assert_array_equal(eager[1:2], _philox.uniform(seeds[1:2], tf.constant(4), 1001))
    assert eager.min() > 0 and eager.max() < 1 and abs(eager.mean() - 0.5) < 0.02
    assert not np.array_equal(eager, _philox.uniform(seeds, tf.constant(5), 1001).numpy())


# --- The drawn distribution ---

LOGITS = [2.0, 1.5, 1.0, 0.6, 0.3, 0.0, -0.5, -1.0]


@pytest.mark.parametrize("options", [
    {}, {"temperature": 0.5}, {"temperature": 2.0}, {"top_k": 3}, {"top_p": 0.7},
    {"top_k": 5, "top_p": 0.8, "temperature": 1.5},
], ids=str)
def test_drawn_tokens_follow_the_truncated_renormalised_softmax(options):
    from scipy.stats import chisquare

    draws = 40_000
    result = sample(fixed_step(tf.constant(LOGITS)), tf.zeros([draws], tf.int32), max_length=1,
                    end_id=0, seed=12345, **options)
    counts = np.bincount(result["token_ids"][:, 0].numpy(), minlength=len(LOGITS))
    expected = expected_distribution(LOGITS, **options) * draws
    assert not counts[expected == 0].any(), (counts, expected)  # truncated tokens: never
    kept = expected > 0
    assert chisquare(counts[kept], expected[kept]).pvalue > 1e-3, (counts, expected)
    # Scores are the model's own log-probabilities, before processing.
    log_probs = tf.nn.log_softmax(tf.constant(LOGITS)).numpy()
    np.testing.assert_allclose(result["scores"], log_probs[result["token_ids"][:, 0]], rtol=1e-6)


def test_processing_equals_hugging_faces_processors_and_warpers():
    torch = pytest.importorskip("torch")
    from transformers.generation import logits_process as hf

    rng = np.random.default_rng(1)
    logits = rng.normal(0, 3, (6, 50)).astype(np.float32)
    previous = rng.integers(0, 50, (6, 9))
    sequences = tf.constant(np.concatenate([np.zeros((6, 1)), previous, np.zeros((6, 4))], 1),
                            tf.int32)  # start token, 9 generated, room for more
    for temperature, top_k, top_p, penalty in [(0.7, 10, 0.9, 1.3), (1.3, 0, 0.5, 0.8),
                                               (1.0, 4, 1.0, 1.0), (0.5, 0, 0.95, 2.0)]:
        options = sampling.sampling_options(6, temperature, top_k, top_p, penalty)
        ours = sampling.processed_logits(tf.constant(logits), sequences, tf.constant(9), options)
        scores = torch.tensor(logits)
        ids = torch.tensor(previous)
        processors = [hf.RepetitionPenaltyLogitsProcessor(penalty),
                      hf.TemperatureLogitsWarper(temperature)]
        processors += [hf.TopKLogitsWarper(top_k)] if top_k else []
        processors += [hf.TopPLogitsWarper(top_p)] if top_p < 1 else []
        for processor in processors:
            scores = processor(ids, scores)
        np.testing.assert_allclose(ours.numpy(), scores.numpy(), rtol=1e-5, atol=1e-6)


def test_ranking_only_the_largest_logits_keeps_the_same_tokens_as_sorting_all():
    rng = np.random.default_rng(2)
    logits = np.round(rng.normal(0, 2, (8, 300)), 1).astype(np.float32)  # many ties
    top_k = tf.constant([1, 2, 5, 17, 40, 64, 64, 3])
    top_p = tf.constant([1.0, 0.5, 0.9, 0.3, 0.99, 1.0, 0.7, 0.2])
    everything = sampling.truncated(tf.constant(logits), top_k, top_p)
    capped = sampling.truncated(tf.constant(logits), top_k, top_p, cap=64)
    np.testing.assert_array_equal(everything.numpy(), capped.numpy())
    assert sampling.static_top_k_cap([40, 3], 8000) == 64
    assert sampling.static_top_k_cap([0, 3], 8000) is None  # top-k off for a row: sort
    assert sampling.static_top_k_cap(tf.constant(40), 8000) is None


def test_repetition_penalty_counts_the_generated_tokens_and_the_prompt():
    logits = tf.constant([[2.0, -1.0, 0.5, 3.0]])
    sequences = tf.constant([[3, 0, 1, 0]])  # start token 3 (not counted), then 0, 1
    penalized = sampling.repetition_penalized(logits, sequences, tf.constant(2), tf.constant([2.0]),
                                              penalized_ids=tf.constant([[2, -1]]))
    np.testing.assert_allclose(penalized.numpy(), [[1.0, -2.0, 0.25, 3.0]])


# --- Seeds, limits, the greedy limit, graphs ---

def test_the_same_seed_gives_the_same_tokens_and_rows_do_not_depend_on_their_batch():
    start = tf.zeros([3], tf.int32)
    first = sample(markov_step, start, 10, end_id=0, seed=[5, 6, 7])["token_ids"].numpy()
    again = sample(markov_step, start, 10, end_id=0, seed=[5, 6, 7])["token_ids"].numpy()
    np.testing.assert_array_equal(first, again)
    alone = sample(markov_step, start[:1], 10, end_id=0, seed=[6])["token_ids"].numpy()
    np.testing.assert_array_equal(alone[0], first[1])
    other = sample(markov_step, start, 10, end_id=0, seed=[8, 9, 10])["token_ids"].numpy()
    assert not np.array_equal(first, other)
    # An int seed gives each row its own seed, in [0, 2**63) and shared by no
    # row of the next int's: a loop over seed=0, 1, ... draws new samples.
    rows = sampling.seeds(5, 3).numpy()
    assert (rows >= 0).all() and len(set(rows)) == 3
    np.testing.assert_array_equal(sample(markov_step, start, 10, end_id=0, seed=5)["token_ids"],
                                  sample(markov_step, start, 10, end_id=0, seed=rows)["token_ids"])
    assert not set(sampling.seeds(0, 8).numpy()) & set(sampling.seeds(1, 8).numpy())


def test_eager_function_and_xla_sample_the_same_tokens():
    def run(seed, temperature, top_p):
        return sample(markov_step, tf.zeros([4], tf.int32), 12, end_id=0, seed=seed,
                      temperature=temperature, top_k=6, top_p=top_p, repetition_penalty=1.2,
                      no_repeat_ngram_size=2)

    arguments = (tf.constant([1, 2, 3, 4], tf.int64), tf.constant(0.9), tf.constant(0.8))
    eager = run(*arguments)
    for jit_compile in (False, True):
        graph = tf.function(run, jit_compile=jit_compile)(*arguments)
        for name in ("token_ids", "lengths"):
            np.testing.assert_array_equal(graph[name], eager[name])
        np.testing.assert_allclose(graph["scores"], eager["scores"], rtol=1e-5)


def test_top_k_one_is_greedy_on_tied_logits_too():
    tied = fixed_step(tf.constant([0.0, 2.0, 1.0, 2.0, 2.0]))  # three tokens tie for the top
    greedy = greedy_search(tied, tf.zeros([64], tf.int32), 3, end_id=0)
    sampled = sample(tied, tf.zeros([64], tf.int32), 3, end_id=0, seed=0, top_k=1)
    np.testing.assert_array_equal(sampled["token_ids"], greedy["token_ids"])
    assert (greedy["token_ids"].numpy() == 1).all()  # argmax: the lowest id of the tie
    # top-k 2 keeps exactly two of the three tied tokens: ids 1 and 3.
    kept = sample(tied, tf.zeros([4000], tf.int32), 1, end_id=0, seed=0, top_k=2)
    assert set(kept["token_ids"][:, 0].numpy()) == {1, 3}


def test_options_at_their_off_value_are_still_checked():
    start = tf.zeros([2], tf.int32)
    for options, message in (({"top_p": [1.0, 1.0, 1.0]}, "one value per sequence"),
                             ({"temperature": True}, "must be a number"),
                             ({"top_k": 0.0}, "must be an int"),
                             ({"top_k": [[0, 0]]}, "one number per sequence")):
        with pytest.raises(ValueError, match=message):
            sample(markov_step, start, 4, end_id=0, seed=1, **options)
    with pytest.raises(ValueError, match="one value per sequence"):
        greedy_search(markov_step, start, 4, end_id=0, repetition_penalty=[1.0, 1.0, 1.0])


@pytest.mark.parametrize("blocking, penalty", [(0, 1.0), (2, 1.0), (0, 1.5), (2, 1.5)])
def test_top_k_one_and_a_tiny_temperature_are_greedy_search(blocking, penalty):
    start = tf.constant([0, 3, 5, 7, 11], tf.int32)
    settings = {"end_id": 1, "no_repeat_ngram_size": blocking, "repetition_penalty": penalty}
    greedy = greedy_search(markov_step, start, 15, **settings)
    for options in ({"top_k": 1}, {"temperature": 1e-4}, {"top_p": 1e-6}):
        sampled = sample(markov_step, start, 15, seed=99, **settings, **options)
        np.testing.assert_array_equal(sampled["token_ids"], greedy["token_ids"])
        np.testing.assert_allclose(sampled["scores"], greedy["scores"], rtol=1e-6)


def test_max_new_tokens_ends_each_row_after_its_own_limit():
    never_ends = fixed_step(tf.constant([0.0, -9.0, 1.0, 1.0]))  # end id 1: almost never
    result = sample(never_ends, tf.zeros([3], tf.int32), 8, end_id=1, seed=3,
                    max_new_tokens=[2, 8, 5])
    np.testing.assert_array_equal(result["lengths"], [2, 8, 5])
    assert (result["token_ids"].numpy()[0, 2:] == 0).all()
    greedy = greedy_search(never_ends, tf.zeros([2], tf.int32), 8, end_id=1, max_new_tokens=3)
    np.testing.assert_array_equal(greedy["lengths"], [3, 3])


@pytest.mark.parametrize("name, value, message", [
    ("temperature", 0.0, "`temperature` must be a finite number > 0"),
    ("temperature", float("nan"), "`temperature` must be a finite number > 0"),
    ("top_k", -1, "`top_k` must be an int >= 0"),
    ("top_k", 2.5, "`top_k` must be an int"),
    ("top_p", 0.0, r"`top_p` must be a number in \(0, 1\]"),
    ("top_p", 1.5, r"`top_p` must be a number in \(0, 1\]"),
    ("repetition_penalty", -1.0, "`repetition_penalty` must be a finite number > 0"),
    ("seed", -3, r"`seed` must be an int in \[0, 2\*\*63\)"),
    ("seed", 1.5, "`seed` must be an int"),
    ("seed", None, "`seed` is required"),
    ("max_new_tokens", 9, r"`max_new_tokens` must be an int in \[1, 8\]"),
    ("top_k", [1, 2], r"`top_k` must hold one value per sequence \(3\), got 2"),
])
def test_bad_options_get_errors_that_name_them(name, value, message):
    settings = {"seed": 1, name: value}
    with pytest.raises(ValueError, match=message):
        sample(markov_step, tf.zeros([3], tf.int32), 8, end_id=0, **settings)


@pytest.mark.parametrize("name, value", [("temperature", -1.0), ("top_p", 2.0), ("top_k", -2),
                                         ("repetition_penalty", float("inf")),
                                         ("max_new_tokens", 0)])
def test_bad_option_tensors_fail_when_run_with_the_same_message(name, value):
    @tf.function
    def run(option):
        return sample(markov_step, tf.zeros([2], tf.int32), 8, end_id=0, seed=1, **{name: option})

    with pytest.raises(tf.errors.InvalidArgumentError, match=f"`{name}` must be"):
        run(tf.constant(value, tf.int32 if name in ("top_k", "max_new_tokens") else tf.float32))
