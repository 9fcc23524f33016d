"""tfnlp's WordPiece learner == tensorflow-text's, token for token."""

import collections

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as reference

from tfnlp import data, datasets
from tfnlp.data import _wordpiece_learner
from tfnlp.data.vocabulary import _learner_options

RESERVED = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


@pytest.fixture(scope="module")
def corpus_counts():
    """Words of mixed scripts and frequencies from the bundled corpora."""
    texts = [s for d in datasets.read_documents("en_novels", "train")[:6] for s in d]
    texts += [s for d in datasets.read_documents("zh_poems", "train")[:80] for s in d]
    texts += [t for t, _ in datasets.read_fine_food_reviews("train")[:100]]
    return data.count_words(texts, progress=False)


@pytest.mark.parametrize("size, max_unique_chars", [(400, 300), (1500, 60)])
def test_same_vocabulary_as_tensorflow_text_on_the_bundled_corpora(corpus_counts, size, max_unique_chars):
    kwargs = dict(max_unique_chars=max_unique_chars, lower_thresh=1)
    expected = reference.learn(corpus_counts.items(), size, RESERVED, **kwargs)
    learned = _wordpiece_learner.learn(corpus_counts.items(), size, RESERVED, **kwargs)
    assert learned == expected
    assert size * 0.9 < len(learned)  # a real search, not the characters alone


def test_learn_wordpiece_vocabulary_gives_tensorflow_text_s_vocabulary_less_what_is_never_emitted():
    texts = ["the cat sat on the mat", "the dog sat", "春眠不觉晓"] * 20
    counts = data.count_words(texts, progress=False)
    options = {k: v for k, v in _learner_options(60).items() if k != "split_alone"}
    expected = reference.learn(counts.items(), 60, RESERVED, **options)
    never = [t for t in expected if t.startswith("##") and len(t) == 3 and t[2] in "春眠不觉晓"]
    assert len(never) == 5  # CJK characters are words of their own: "##春" is never emitted
    learned = data.learn_wordpiece_vocabulary(texts, 60, progress=False)
    assert learned == [t for t in expected if t not in never][:60]


# Small alphabets make every branch likely: pieces shared between words, words
# that start with the joiner (so a suffix piece and a word are spelled alike),
# reserved tokens and too-long words among the inputs, rare characters.
words = st.text(alphabet="ab#c@é", min_size=0, max_size=9)


@settings(max_examples=300, deadline=None)
@given(
    counts=st.dictionaries(st.one_of(words, st.sampled_from(RESERVED)), st.integers(1, 60),
                           min_size=1, max_size=40),
    size=st.integers(1, 40),
    lower=st.one_of(st.none(), st.integers(0, 12)),
    upper=st.one_of(st.none(), st.integers(1, 200)),
    iterations=st.integers(0, 5),
    max_input_tokens=st.sampled_from([-1, 3, 15, 5_000_000]),
    max_token_length=st.integers(1, 9),
    max_unique_chars=st.integers(1, 7),
    slack=st.sampled_from([0.0, 0.05, 0.5]),
    joiner=st.sampled_from([(True, "##"), (False, "##"), (True, ""), (True, "@")]),
)
def test_same_vocabulary_as_tensorflow_text_for_any_counts_and_settings(
    counts, size, lower, upper, iterations, max_input_tokens, max_token_length, max_unique_chars,
    slack, joiner,
):
    kwargs = dict(
        upper_thresh=upper, lower_thresh=lower, num_iterations=iterations,
        max_input_tokens=max_input_tokens, max_token_length=max_token_length,
        max_unique_chars=max_unique_chars, slack_ratio=slack, include_joiner_token=joiner[0],
        joiner=joiner[1],
    )
    expected = reference.learn(list(counts.items()), size, RESERVED[:2], **kwargs)
    assert _wordpiece_learner.learn(list(counts.items()), size, RESERVED[:2], **kwargs) == expected


# Cases the fuzz rarely reaches, each found to tell a plausible slip from the
# reference: a joined piece spelled like a word ("##a" after "b", and the word
# "##a"), whose count must be the joined one; an empty joiner, where a suffix
# piece and a word-initial piece are one token; a vocabulary exactly `slack`
# short of the target, which ends the search.
@pytest.mark.parametrize(
    "counts, size, kwargs",
    [
        ([("##a", 5), ("ba", 5), ("bb", 7)], 8, dict(num_iterations=1)),
        ([("##a", 9), ("ba", 2), ("b", 8)], 3, dict()),
        ([("a#a#", 2), ("abaa", 1), ("##b", 4), ("#b", 4), ("b", 8), ("bab", 7), ("ab#a", 9), ("aaa", 8)],
         14, dict(joiner="", slack_ratio=0.5)),
        ([("b", 2), ("babb", 3), ("##", 7), ("a", 2), ("#a", 1), ("aab#", 9)], 12,
         dict(joiner="", slack_ratio=0.5)),
    ],
)
def test_same_vocabulary_as_tensorflow_text_in_corner_cases(counts, size, kwargs):
    kwargs = dict(lower_thresh=1, **kwargs)
    expected = reference.learn(counts, size, [], **kwargs)
    assert _wordpiece_learner.learn(counts, size, [], **kwargs) == expected


def test_ties_and_order_of_the_input_do_not_matter_beyond_tensorflow_text():
    counts = collections.Counter({"ab": 5, "ba": 5, "abab": 5, "#a": 5, "a": 2, "b": 2})
    learned = []
    for items in (list(counts.items()), list(reversed(counts.items()))):
        learned.append(_wordpiece_learner.learn(items, 8, [], lower_thresh=1))
        assert learned[-1] == reference.learn(items, 8, [], lower_thresh=1)
    assert learned[0] == learned[1]
    ties = [t for t in learned[0] if counts.get(t) == 5]
    assert ties == ["#a", "ab", "abab", "ba"]  # all four tied pieces kept, alphabetically


@pytest.mark.parametrize("counts", [{}, {"a": 0}, {"a": 3, "b": -1}])
def test_counts_below_one_are_refused(counts):
    with pytest.raises(ValueError, match="every count at least 1"):
        _wordpiece_learner.learn(counts, 10, RESERVED)


def test_thresholds_below_one_are_refused():
    # tensorflow-text would keep pieces whose remaining count is 0 ("ab", "xb").
    with pytest.raises(ValueError, match="`upper_thresh` must be at least 1"):
        _wordpiece_learner.learn({"abc": 3, "xbc": 1}, 50, [], upper_thresh=0)


def test_no_limits_and_any_iterable_of_pairs():
    counts = {"the": 9, "then": 4, "a": 3, "thé": 2}
    expected = reference.learn(list(counts.items()), 30, [], lower_thresh=1, max_input_tokens=-1)
    learned = _wordpiece_learner.learn(iter(counts.items()), 30, [], lower_thresh=1,
                                       max_input_tokens=None, max_unique_chars=None)
    assert learned == expected


def test_a_vocabulary_of_characters_split_alone_ends():
    """Every character split off alone and only characters above the threshold: no token is as
    long as the joiner, and the earlier greedy split looped forever on a two-character word."""
    import threading

    result = []
    worker = threading.Thread(target=lambda: result.append(_wordpiece_learner.learn(
        {"ab": 5, "cd": 3}, 4, [], upper_thresh=100, lower_thresh=100, split_alone=lambda c: True)),
        daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert result == [["a", "b", "c", "d"]]
