import re

import numpy as np
import pytest

from tfnlp import data


def test_learned_vocabulary_layout(corpus_vocabulary):
    vocabulary = corpus_vocabulary
    assert vocabulary[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert 3000 < len(vocabulary) <= 4000
    assert len(set(vocabulary)) == len(vocabulary)
    assert "the" in vocabulary and "The" not in vocabulary  # lower-cased
    assert any(t.startswith("##") for t in vocabulary)
    chinese = [t for t in vocabulary if any("\u4e00" <= c <= "\u9fff" for c in t)]
    assert len(chinese) > 500  # the common characters of the poems
    assert all(len(t.removeprefix("##")) == 1 for t in chinese)  # CJK: one character each


def test_cased_vocabulary_keeps_case():
    vocabulary = data.learn_wordpiece_vocabulary(["Paris is in France"] * 5, 50, lower_case=False,
                                                 progress=False)
    assert "Paris" in vocabulary and "paris" not in vocabulary


def test_progress_is_shown(capsys):
    data.learn_wordpiece_vocabulary(["one two three"] * 10, 30, progress=True)
    assert "words" in capsys.readouterr().out


def test_accepts_datasets_of_texts_and_of_documents():
    import tensorflow as tf

    texts = ["a b c", "b c d", "c d e"] * 4
    from_list = data.learn_wordpiece_vocabulary(texts, 30, progress=False)
    from_texts = data.learn_wordpiece_vocabulary(tf.data.Dataset.from_tensor_slices(texts), 30,
                                                 progress=False)
    documents = tf.data.Dataset.from_tensor_slices(tf.ragged.constant([texts[:5], texts[5:]]))
    from_documents = data.learn_wordpiece_vocabulary(documents, 30, progress=False)
    assert from_list == from_texts == from_documents


def test_save_and_load_round_trip(tmp_path, corpus_vocabulary):
    path = tmp_path / "sub" / "vocab.txt"
    data.save_vocabulary(corpus_vocabulary, path)
    assert data.load_vocabulary(path) == corpus_vocabulary
    learned = data.learn_wordpiece_vocabulary(["x y"] * 3, 20, output_path=tmp_path / "v.txt",
                                              progress=False)
    assert data.load_vocabulary(tmp_path / "v.txt") == learned


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "empty"),
        (b"[PAD]\n\n[UNK]\n", "empty tokens on lines \\[2\\]"),
        (b"[PAD]\na\nb\na\n", "repeats tokens: 'a' \\(line 4\\)"),
        (b"[PAD]\n\xff\xfe\n", "not UTF-8"),
    ],
)
def test_corrupt_vocabulary_files_are_clear_errors(tmp_path, content, message):
    path = tmp_path / "vocab.txt"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=message):
        data.load_vocabulary(path)


@pytest.mark.parametrize(
    "texts, size, message",
    [([], 100, "no words"), (["   "], 100, "no words"), (["a"], 3, "must exceed"),
     (["a"], 10.5, "vocabulary_size"), ([1, 2], 100, "iterable of strings")],
)
def test_bad_learning_arguments(texts, size, message):
    with pytest.raises(ValueError, match=message):
        data.learn_wordpiece_vocabulary(texts, size, progress=False)


def test_a_numpy_integer_size_is_an_integer():
    vocabulary = data.learn_wordpiece_vocabulary(["the cat sat"] * 3, np.int64(30), progress=False)
    assert "cat" in vocabulary and len(vocabulary) <= 30


def test_a_cut_vocabulary_still_spells_every_word_of_its_texts():
    import tensorflow as tf

    from tfnlp import datasets
    from tfnlp.data import _wordpiece_learner
    from tfnlp.data import vocabulary as vocabulary_lib

    documents = datasets.load_documents("en_novels", "validation").take(3)
    counts = data.count_words(documents, progress=False)
    words = tf.constant(list(counts))
    for size in (330, 596):  # sizes where the learner overshoots on these texts
        learned = _wordpiece_learner.learn(counts.items(), size, list(data.SPECIAL_TOKENS),
                                           **vocabulary_lib._learner_options(size))
        assert len(learned) > size
        vocabulary = data.learn_wordpiece_vocabulary(documents, size, progress=False)
        assert len(vocabulary) == size and set(vocabulary) <= set(learned)
        # Cutting the learner's tail instead dropped "##u", "##v", ...: 179
        # of the 1,445 distinct words became [UNK] at size 337 (before the learner left out
        # unemittable suffixes).
        ids = data.WordPieceTokenizer(vocabulary)(words).flat_values.numpy()
        assert (ids != vocabulary.index("[UNK]")).all(), size


def test_a_size_too_small_for_the_alphabet_is_a_clear_error():
    # 150 characters (kept as they are: not lower-cased, accents not stripped),
    # each inside a word: 5 + 151 + 150 tokens to spell them all.
    texts = [" ".join("a" + chr(0x100 + i) for i in range(150))] * 3
    with pytest.raises(ValueError, match=r"`vocabulary_size` \(200\) is too small .* 306 tokens"):
        data.learn_wordpiece_vocabulary(texts, 200, lower_case=False, progress=False)


def _chinese_like_texts(characters, sentences, seed=0):
    """Sentences over `characters` CJK characters with Zipf-like frequencies, and ASCII words."""
    rng = np.random.default_rng(seed)
    alphabet = [chr(0x4E00 + i) for i in range(characters)]
    weights = 1.0 / np.arange(1, characters + 1)
    weights /= weights.sum()
    texts = []
    for _ in range(sentences):
        chars = rng.choice(alphabet, rng.integers(8, 30), p=weights)
        texts.append("".join(chars) + "，GDP " + str(rng.integers(0, 10**6)) + "。")
    return texts, alphabet


def test_the_character_budget_follows_the_vocabulary_size_on_cjk_text():
    texts, _ = _chinese_like_texts(1500, 6000)
    seen = {c for t in texts for c in t.lower() if not c.isspace()}
    vocabulary = data.learn_wordpiece_vocabulary(texts, 3200, progress=False)
    # Half the vocabulary is room for every character seen (the old quarter
    # kept 800 of them, and every word with another one became [UNK]).
    assert len(vocabulary) > 0.95 * 3200
    assert len(seen - set(vocabulary)) == 0
    held_out, _ = _chinese_like_texts(1500, 300, seed=1)
    rate = data.unknown_rate(data.WordPieceTokenizer(vocabulary), held_out)
    assert rate["unknown_tokens"] < 0.01 and rate["tokens"] > 5000


def test_no_vocabulary_is_spent_on_pieces_the_tokenizer_cannot_emit():
    texts, _ = _chinese_like_texts(300, 2000)
    vocabulary = data.learn_wordpiece_vocabulary(texts, 600, progress=False)
    suffixes = [t for t in vocabulary if t.startswith("##")]
    assert suffixes  # the digits and "gdp" have inner characters
    for token in suffixes:
        assert not ("\u4e00" <= token[2] <= "\u9fff" or token[2] in "，。,.")
    # ... and what is left still spells every held-out word it can.
    tokenizer = data.WordPieceTokenizer(vocabulary)
    held_out, _ = _chinese_like_texts(300, 100, seed=2)
    assert data.unknown_rate(tokenizer, held_out)["unknown_tokens"] < 0.01


def test_a_character_seen_only_first_in_words_can_still_end_a_new_word():
    texts = ["xi met a man at the dam", "the man and xi ran"] * 20
    vocabulary = data.learn_wordpiece_vocabulary(texts, 40, progress=False)
    assert "##x" in vocabulary and "##r" in vocabulary
    tokenizer = data.WordPieceTokenizer(vocabulary)
    assert data.unknown_rate(tokenizer, ["max", "dax ax"])["unknown_tokens"] == 0


def test_characters_left_out_are_counted_in_a_warning_that_says_how_to_keep_them():
    texts, _ = _chinese_like_texts(1500, 3000)
    with pytest.warns(UserWarning, match=r"distinct characters, more than `max_unique_characters` "
                                         r"\(300\): the [\d,]+ rarest .* raise `max_unique_characters`"):
        data.learn_wordpiece_vocabulary(texts, 400, progress=False)


def test_progress_reports_the_size_reached(capsys):
    data.learn_wordpiece_vocabulary(["the cat sat on the mat"] * 5, 40, progress=True)
    assert re.search(r"Learned \d+ tokens \(asked for 40\)", capsys.readouterr().out)


def test_unknown_rate_counts_tokens_and_texts():
    tokenizer = data.WordPieceTokenizer(list(data.SPECIAL_TOKENS) + ["a", "b"])
    assert data.unknown_rate(tokenizer, ["a b", "a c", "", "c c"]) == {
        "tokens": 6, "unknown_tokens": 0.5, "texts_with_unknown": 2 / 3}


def test_the_requested_size_is_reached_on_classical_chinese():
    """The bundled poems: 5,832 distinct characters, nearly every word one character."""
    from tfnlp import datasets

    train = [s for d in datasets.read_documents("zh_poems", "train") for s in d]
    test = [s for d in datasets.read_documents("zh_poems", "test") for s in d]
    vocabulary = data.learn_wordpiece_vocabulary(train, 6000, progress=False)
    # Half the vocabulary for characters gave 3,089 tokens: the budget grows
    # by what is missing when there are no words to fill it.
    assert len(vocabulary) >= 0.95 * 6000
    rate = data.unknown_rate(data.WordPieceTokenizer(vocabulary), test)
    assert rate["unknown_tokens"] < 0.01  # characters never seen in training
