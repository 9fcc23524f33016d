import numpy as np
import pytest
import tensorflow as tf

from tfnlp import data, datasets


def _word_chars(word, size):
    """bilm-tf's character ids of one word, written out by hand (+1 shift)."""
    body = {"<S>": [256], "</S>": [257]}.get(word, list(word.encode("utf-8"))[: size - 2])
    ids = [258, *body, 259] + [260] * (size - 2 - len(body))
    return [i + 1 for i in ids]


@pytest.mark.parametrize("word", ["cat", "é", "naïve", "<S>", "</S>", "x" * 60, "猫猫"])
def test_character_ids_match_bilm_tf_layout(word):
    np.testing.assert_array_equal(data.character_ids(tf.constant([word]), 50)[0], _word_chars(word, 50))


def test_character_ids_shapes_ragged_and_padding():
    words = tf.ragged.constant([["a", "bb"], ["ccc"]])
    ids = data.character_ids(words, 6)
    assert ids.shape.as_list() == [2, None, 6]
    np.testing.assert_array_equal(ids[1][0], _word_chars("ccc", 6))
    np.testing.assert_array_equal(data.character_ids(tf.constant([["", "a"]]), 5)[0, 0], [0] * 5)
    with pytest.raises(ValueError, match="max_characters"):
        data.character_ids(tf.constant(["a"]), 2)


def test_split_words_keeps_case_and_splits_punctuation():
    words = data.split_words(tf.constant(["Mr. Darcy's  \"pride\"!", "", b"bad\xff"])).to_list()
    assert words[0] == [b"Mr", b".", b"Darcy", b"'", b"s", b'"', b"pride", b'"', b"!"]
    assert words[1] == [] and words[2] == [b"bad", "\ufffd".encode()]  # U+FFFD is a symbol


def test_split_words_splits_on_every_whitespace_python_knows_and_only_there():
    spaces = [chr(c) for c in range(0x110000) if chr(c).isspace()]  # 29, Unicode's included
    others = ["\u200b", "\u200d", "\ufeff", "\u00ad", "x"]  # zero-width and format: not spaces
    words = data.split_words(tf.constant([f"a{c}b" for c in spaces + others])).to_list()
    assert words[: len(spaces)] == [[b"a", b"b"]] * len(spaces)
    assert words[len(spaces) :] == [[f"a{c}b".encode()] for c in others]
    tokens = data.sentence_tokens(tf.constant(["\u3000\u3000", "\u00a0"]), 8).to_list()
    assert tokens == [[b"<S>", b"</S>"]] * 2  # blank text: no words


def test_sentence_tokens_read_at_most_max_input_bytes_and_never_half_a_character():
    texts = tf.constant(["ab é cd", "ab", "x" * 1000, b"ok \xff"])
    tokens = data.sentence_tokens(texts, 6, max_input_bytes=4).to_list()
    # "ab é" is 5 bytes: the cut at 4 would split "é", which is dropped whole.
    assert tokens[0] == [b"<S>", b"ab", b"</S>"]
    assert tokens[1] == [b"<S>", b"ab", b"</S>"]
    assert tokens[2] == [b"<S>", b"xxxx", b"</S>"]
    assert tokens[3] == [b"<S>", b"ok", "\ufffd".encode(), b"</S>"]  # broken bytes kept, replaced
    with pytest.raises(ValueError, match="max_input_bytes"):
        data.sentence_tokens(texts, 6, max_input_bytes=0)


def test_word_vocabulary():
    vocabulary = data.build_word_vocabulary(["the cat", "the dog", "The cat"], max_size=6)
    assert vocabulary == ["<S>", "</S>", "<UNK>", "cat", "the", "The"]
    with pytest.raises(ValueError, match="max_size"):
        data.build_word_vocabulary(["a"], max_size=3)


def test_elmo_dataset_targets_and_static_shapes():
    sentences = [s for d in datasets.read_documents("en_novels", "validation")[:3] for s in d]
    vocabulary = data.build_word_vocabulary(sentences, max_size=800)
    documents = datasets.load_documents("en_novels", "validation").take(3)
    batches = data.elmo_dataset(documents, vocabulary, sequence_length=20, max_characters=16,
                                batch_size=8)
    spec = batches.element_spec
    assert spec["character_ids"].shape == (8, 20, 16)
    assert all(s.shape.is_fully_defined() and s.dtype == tf.int32 for s in spec.values())
    batch = next(iter(batches))
    for row, sentence in enumerate(sentences[:8]):
        words = [w.decode() for w in data.split_words(tf.constant([sentence]))[0].numpy()][:18]
        tokens = ["<S>", *words, "</S>"]
        n = len(tokens)
        ids = [vocabulary.index(t) if t in vocabulary else 2 for t in tokens]
        np.testing.assert_array_equal(batch["word_ids"][row, :n], ids)
        np.testing.assert_array_equal(batch["padding_mask"][row], [1] * n + [0] * (20 - n))
        np.testing.assert_array_equal(batch["next_word_ids"][row, : n - 1], ids[1:])
        np.testing.assert_array_equal(batch["next_word_weights"][row], [1] * (n - 1) + [0] * (21 - n))
        np.testing.assert_array_equal(batch["previous_word_ids"][row, 1:n], ids[:-1])
        np.testing.assert_array_equal(batch["previous_word_weights"][row], [0] + [1] * (n - 1) + [0] * (20 - n))
        np.testing.assert_array_equal(batch["character_ids"][row, n - 1], _word_chars("</S>", 16))
        np.testing.assert_array_equal(batch["character_ids"][row, n:], 0)


def test_elmo_dataset_rejects_a_vocabulary_without_specials_or_with_repeats():
    with pytest.raises(ValueError, match="`word_vocabulary` must start with"):
        data.elmo_dataset(tf.data.Dataset.from_tensor_slices(["a"]), ["a", "b", "c"])
    with pytest.raises(ValueError, match=r"`word_vocabulary` lists words more than once: \['a'\]"):
        data.elmo_dataset(tf.data.Dataset.from_tensor_slices(["a"]), ["<S>", "</S>", "<UNK>", "a", "b", "a"])


def test_text_functions_name_a_wrong_dtype_or_rank():
    with pytest.raises(TypeError, match="`words` must be a tf.string tensor, got dtype int32"):
        data.character_ids(tf.constant([1, 2]))
    with pytest.raises(TypeError, match="`texts` must be a tf.string tensor, got dtype float32"):
        data.split_words(tf.constant([1.0]))
    with pytest.raises(ValueError, match=r"`texts` must have shape \(B,\) \(rank 1\), got shape \(2, 2\)"):
        data.sentence_tokens(tf.constant([["a", "b"], ["c", "d"]]), 8)


@pytest.mark.parametrize("drop_remainder", [True, False])
def test_elmo_dataset_knows_its_number_of_batches_when_the_sentences_count_is_known(drop_remainder):
    sentences = [s for d in datasets.read_documents("en_novels", "validation")[:3] for s in d]
    vocabulary = data.build_word_vocabulary(sentences, max_size=800)
    batches = data.elmo_dataset(tf.data.Dataset.from_tensor_slices(sentences), vocabulary,
                                sequence_length=12, max_characters=8, batch_size=16,
                                shuffle_buffer=50, drop_remainder=drop_remainder)
    expected = len(sentences) // 16 if drop_remainder else -(-len(sentences) // 16)
    assert len(sentences) % 16  # the remainder matters
    assert int(batches.cardinality()) == expected
    assert sum(1 for _ in batches) == expected  # and it is true
    # Documents hold an unknown number of sentences: the count stays unknown.
    documents = data.elmo_dataset(datasets.load_documents("en_novels", "validation").take(3),
                                  vocabulary, sequence_length=12, max_characters=8)
    assert int(documents.cardinality()) == tf.data.UNKNOWN_CARDINALITY
