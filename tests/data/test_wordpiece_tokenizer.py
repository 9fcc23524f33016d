import json

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text as tf_text

from tests.data import google_bert_tokenization
from tfnlp import data, datasets


def _google(vocabulary, lower_case=True):
    """google-research/bert's FullTokenizer (ported in tests/data/google_bert_tokenization.py)."""
    tokenizer = google_bert_tokenization.FullTokenizer(vocabulary, do_lower_case=lower_case)
    return lambda texts: [tokenizer.ids(t.decode("utf-8")) for t in texts.numpy().tolist()]


def _reference(vocabulary, lower_case=True):
    """tensorflow-text's reference (slow) BertTokenizer: what `normalization="nfkc"` matches."""
    table = tf.lookup.StaticVocabularyTable(
        tf.lookup.KeyValueTensorInitializer(
            vocabulary, tf.range(len(vocabulary), dtype=tf.int64)), num_oov_buckets=1)
    reference = tf_text.BertTokenizer(table, lower_case=lower_case, token_out_type=tf.int64,
                                      unknown_token="[UNK]")
    return lambda texts: tf.cast(reference.tokenize(texts).merge_dims(-2, -1), tf.int32).to_list()


def _corpus_samples():
    samples = [s for d in datasets.read_documents("en_novels", "test") for s in d][:1500]
    samples += [s for d in datasets.read_documents("zh_poems", "test") for s in d][:800]
    samples += [t for t, _ in datasets.read_fine_food_reviews("test")][:300]
    samples += [t for pair in datasets.read_text_pairs("bible_en_es", "test")[:300] for t in pair]
    return samples


def test_agrees_with_google_s_bert_tokenizer_on_bundled_corpora(corpus_vocabulary):
    texts = tf.constant(_corpus_samples())
    ours = data.WordPieceTokenizer(corpus_vocabulary)(texts).to_list()
    assert ours == _google(corpus_vocabulary)(texts)
    assert sum(map(len, ours)) > 50_000
    assert sum(i == 1 for ids in ours for i in ids) < 0.02 * sum(map(len, ours))  # [UNK] rare


def test_nfkc_normalization_is_tensorflow_text_s_bert_tokenizer(corpus_vocabulary):
    texts = tf.constant(_corpus_samples())
    ours = data.WordPieceTokenizer(corpus_vocabulary, normalization="nfkc")(texts).to_list()
    assert ours == _reference(corpus_vocabulary)(texts)


def _standard_bert_vocabulary():
    """The layout of Google's released vocab.txt: [PAD], [unused*], [UNK]=100 ..."""
    tokens = ["[PAD]"] + [f"[unused{i}]" for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokens += list("!\"#$%&'(),-./:;?abcdefghijklmnopqrstuvwxyz") + ["春", "眠", "不", "觉", "晓"]
    tokens += ["the", "un", "##aff", "##able", "running", "##ing", "run", "play", "##ed"]
    tokens += ["##" + c for c in "abcdefghijklmnopqrstuvwxyz"]
    return tokens


@pytest.mark.parametrize("lower_case", [True, False])
def test_loads_a_standard_bert_vocab_file(tmp_path, lower_case):
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(_standard_bert_vocabulary()) + "\n", encoding="utf-8")
    tokenizer = data.WordPieceTokenizer(str(path), lower_case=lower_case)
    assert (tokenizer.pad_id, tokenizer.unk_id, tokenizer.cls_id, tokenizer.sep_id,
            tokenizer.mask_id) == (0, 100, 101, 102, 103)
    texts = tf.constant(["The unaffable runnings played!", "春眠不觉晓，处处闻啼鸟。", "Ünïcödé ÀB"])
    vocabulary = _standard_bert_vocabulary()
    assert tokenizer(texts).to_list() == _google(vocabulary, lower_case)(texts)
    pieces = [vocabulary[i] for i in tokenizer(tf.constant(["unaffable"]))[0].numpy()]
    assert pieces == ["un", "##aff", "##able"]


BAD_INPUTS = {
    "empty": ("", []),
    "whitespace only": (" \t\n\r  ", []),
    "control characters are dropped": ("the\x00\x07\x1b cat", "the cat"),
    "invalid UTF-8 is dropped, as BERT drops U+FFFD": (b"the \xff\xfe cat", "the cat"),
    "emoji are unknown": ("the \U0001F600 cat", "the [UNK] cat"),
    "right-to-left and combining marks": ("שלום cafe\u0301", "[UNK] cafe"),
    "mixed scripts": ("the猫cat", "the 猫 cat"),
}


@pytest.mark.parametrize("name", BAD_INPUTS)
def test_bad_input_never_fails_and_gives_the_documented_result(name):
    text, expected = BAD_INPUTS[name]
    vocabulary = list(data.SPECIAL_TOKENS) + ["the", "cat", "cafe", "猫"]
    tokenizer = data.WordPieceTokenizer(vocabulary)
    ids = tokenizer(tf.constant([text]))[0].numpy().tolist()
    if isinstance(expected, list):
        assert ids == expected
    else:
        assert [vocabulary[i] for i in ids] == expected.split()


def test_huge_input_is_cut_before_tokenizing():
    tokenizer = data.WordPieceTokenizer(list(data.SPECIAL_TOKENS) + ["ab"], max_input_bytes=1000)
    megabyte = tf.constant(["ab " * 350_000])
    ids = tokenizer(megabyte)
    assert ids.shape[0] == 1 and len(ids[0]) == 334  # 1000 bytes of "ab " -> 333 words + "a"
    cat = data.WordPieceTokenizer(list(data.SPECIAL_TOKENS) + ["ab", "猫"], max_input_bytes=7)
    # 7 bytes = "ab" + one 3-byte 猫 + 2 bytes of the next: the partial one is dropped.
    assert cat(tf.constant(["ab猫猫"]))[0].numpy().tolist() == [5, 6]


def _coerce_then_cut(tokenizer, texts):
    """The tokenizer as it was before the cut moved first: repair, cut, drop a split character."""
    text = tf_text.coerce_to_structurally_valid_utf8(texts, replacement_char="\ufffd")
    text = tf.strings.substr(text, 0, tokenizer.max_input_bytes, unit="BYTE")
    text = tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="ignore")
    return tokenizer._tokenize(text).to_list()


@pytest.mark.parametrize("normalization", ["bert", "nfkc"])
@pytest.mark.parametrize("max_input_bytes", [1, 2, 3, 4, 5, 7, 16])
def test_cutting_first_changes_nothing_below_the_cut(max_input_bytes, normalization):
    vocabulary = list(data.SPECIAL_TOKENS) + ["ab", "the", "cat", "cafe", "猫", "é"]
    tokenizer = data.WordPieceTokenizer(vocabulary, max_input_bytes=max_input_bytes,
                                        normalization=normalization)
    rng = np.random.default_rng(max_input_bytes)
    valid = ["a", "b", " ", "the", "cat", "猫", "é", "\u0301", "\U0001F600", "\x00", "!"]
    broken = [b"\xff", b"\x80", b"\xe7\x8c", b"\xf0\x9f"]  # stray, continuation, truncated
    pieces = [p.encode() for p in valid] + broken
    texts = [b"".join(rng.choice(pieces, rng.integers(0, 9))) for _ in range(2000)]
    ours = tokenizer(tf.constant(texts)).to_list()
    before = _coerce_then_cut(tokenizer, tf.constant(texts))
    repaired = tf_text.coerce_to_structurally_valid_utf8(tf.constant(texts), replacement_char="\ufffd")
    short = tf.strings.length(repaired).numpy() <= max_input_bytes
    assert short.sum() > 200 and (~short).sum() > 200
    # Every text that was not cut before (broken bytes included) gives what it gave before.
    assert [o for o, s in zip(ours, short, strict=True) if s] == [
        b for b, s in zip(before, short, strict=True) if s]
    # Valid UTF-8 gives what it gave before at any length, cut or not.
    texts = [b"".join(p.encode() for p in rng.choice(valid, rng.integers(0, 12)))
             for _ in range(2000)]
    assert tokenizer(tf.constant(texts)).to_list() == _coerce_then_cut(tokenizer, tf.constant(texts))


def _whole_character_prefix(text, max_bytes):
    return text.encode()[:max_bytes].decode("utf-8", errors="ignore")


@pytest.mark.parametrize("script", ["ascii", "cjk", "emoji"])
def test_megabyte_input_gives_the_tokens_of_its_prefix(corpus_vocabulary, script):
    tokenizer = data.WordPieceTokenizer(corpus_vocabulary + ["\U0001F600"])  # cut at 100,000 bytes
    sentences = {
        "ascii": [s for d in datasets.read_documents("en_novels", "test") for s in d][:200],
        "cjk": [s for d in datasets.read_documents("zh_poems", "test") for s in d][:200],
        "emoji": ["the \U0001F600 cat \U0001F600\U0001F600 sat"],
    }[script]
    text = " ".join(sentences)
    if script == "ascii":
        text = text.encode("ascii", errors="ignore").decode()
    text = (text + " ") * (1_000_000 // len(text.encode()) + 1)
    if script != "ascii":  # move the cut inside a multi-byte character
        while text.encode()[100_000] & 0xC0 != 0x80:
            text = "x" + text
    assert len(text.encode()) > 1_000_000
    prefix = _whole_character_prefix(text, 100_000)
    if script == "ascii":
        assert len(prefix.encode()) == 100_000
    else:
        assert 99_996 < len(prefix.encode()) < 100_000
    ids = tokenizer(tf.constant([text, prefix]))
    assert ids[0].numpy().tolist() == ids[1].numpy().tolist()
    assert len(ids[0]) > 10_000
    assert tokenizer(tf.constant(text)).numpy().tolist() == ids[1].numpy().tolist()  # scalar


@pytest.mark.parametrize("offset", [1, 2, 3])
def test_a_character_split_by_the_cut_is_dropped(offset):
    vocabulary = list(data.SPECIAL_TOKENS) + ["ab", "\U0001F600", "猫"]
    emoji = "\U0001F600"  # 4 bytes
    tokenizer = data.WordPieceTokenizer(vocabulary, max_input_bytes=3 + offset)
    # "ab " + `offset` bytes of the emoji: the partial emoji is dropped, not [UNK].
    texts = tf.constant(["ab " + emoji + " ab", "ab " + emoji, "ab"])
    assert tokenizer(texts).to_list() == [[5], [5], [5]]
    exact = data.WordPieceTokenizer(vocabulary, max_input_bytes=7)  # the whole emoji fits
    assert exact(texts).to_list() == [[5, 6], [5, 6], [5]]


def test_invalid_utf8_is_still_replaced_around_the_cut():
    vocabulary = list(data.SPECIAL_TOKENS) + ["ab", "猫"]
    texts = tf.constant([
        b"ab \xff ab ab ab",  # cut; broken byte before the cut -> U+FFFD
        b"ab ab \xe7\x8c",  # not cut; truncated at its own end -> U+FFFD, not dropped by the cut
        b"ab ab \xe7\x8c\x8c",  # 9 bytes: the cut splits a valid 猫 -> dropped
        b"ab ab \x80\x80\x80 ab",  # cut among stray continuation bytes -> U+FFFD
        b"\xff" * 1_000_000,  # a megabyte of garbage
    ])
    # Under "nfkc" U+FFFD is [UNK], which shows where the replacement happened ...
    nfkc = data.WordPieceTokenizer(vocabulary, max_input_bytes=8, normalization="nfkc")
    assert nfkc(texts).to_list() == [[5, 1, 5], [5, 5, 1], [5, 5], [5, 5, 1], [1]]
    # ... BERT drops it.
    bert = data.WordPieceTokenizer(vocabulary, max_input_bytes=8)
    assert bert(texts).to_list() == [[5, 5], [5, 5], [5, 5], [5, 5], []]


def test_detokenize_round_trip_and_special_tokens():
    vocabulary = list(data.SPECIAL_TOKENS) + ["the", "cat", "sat", "##s", "on", "mat"]
    tokenizer = data.WordPieceTokenizer(vocabulary)
    texts = tf.constant(["the cats sat on the mat", "the mat"])
    ids = tokenizer(texts)
    np.testing.assert_array_equal(tokenizer.detokenize(ids).numpy(), texts.numpy())
    padded = tf.constant([[2, 5, 6, 3, 0, 0], [2, 4, 7, 3, 0, 999]])  # [MASK] and an id out of range
    assert tokenizer.detokenize(padded).numpy().tolist() == [b"the cat", b"sat [UNK]"]
    # int64 ids beyond int32 are out of range too, not wrapped around to
    # "the", [CLS] and "cat".
    wide = tf.constant([[2**32 + 5, 5, 2**32 + 2, -(2**32) + 6]], tf.int64)
    assert tokenizer.detokenize(wide).numpy().tolist() == [b"[UNK] the [UNK] [UNK]"]


def test_detokenize_takes_every_rank_it_documents():
    vocabulary = list(data.SPECIAL_TOKENS) + ["the", "cat", "sat", "##s"]
    tokenizer = data.WordPieceTokenizer(vocabulary)
    # (T,) from a scalar text -> one text
    assert tokenizer.detokenize(tokenizer(tf.constant("the cats"))).numpy() == b"the cats"
    # (B, N, T), dense and ragged -> (B, N)
    nested = tf.constant([[[5, 6, 8], [7, 0, 0]], [[5, 0, 0], [6, 7, 5]]])
    expected = [[b"the cats", b"sat"], [b"the", b"cat sat the"]]
    assert tokenizer.detokenize(nested).numpy().tolist() == expected
    assert tokenizer.detokenize(tf.RaggedTensor.from_tensor(nested)).to_list() == expected
    ragged = tokenizer(tf.constant([["the cats", "sat"], ["the", "cat sat the"]]))
    assert tokenizer.detokenize(ragged).to_list() == expected
    with pytest.raises(ValueError, match="`token_ids` must have a known rank of at least 1"):
        tokenizer.detokenize(tf.constant(5))


def test_works_in_tf_data_and_tf_function(corpus_vocabulary):
    tokenizer = data.WordPieceTokenizer(corpus_vocabulary)
    texts = _corpus_samples()[:64]
    dataset = tf.data.Dataset.from_tensor_slices(texts).batch(16).map(tokenizer)
    from_data = [row for batch in dataset for row in batch.to_list()]
    graph = tf.function(tokenizer, input_signature=[tf.TensorSpec([None], tf.string)])
    assert from_data == graph(tf.constant(texts)).to_list() == tokenizer(tf.constant(texts)).to_list()
    assert tokenizer(tf.constant(texts[0])).numpy().tolist() == from_data[0]  # scalar input


def test_serialization_round_trip(corpus_vocabulary):
    tokenizer = data.WordPieceTokenizer(corpus_vocabulary, lower_case=True, max_input_bytes=500)
    config = json.loads(json.dumps(keras.saving.serialize_keras_object(tokenizer)))
    restored = keras.saving.deserialize_keras_object(config)
    texts = tf.constant(_corpus_samples()[:50])
    assert restored(texts).to_list() == tokenizer(texts).to_list()
    assert restored.get_config() == tokenizer.get_config()


def test_a_tokenizer_saved_before_normalization_existed_keeps_its_ids(corpus_vocabulary):
    config = keras.saving.serialize_keras_object(data.WordPieceTokenizer(corpus_vocabulary))
    del config["config"]["normalization"]  # as every tokenizer saved before it was
    restored = keras.saving.deserialize_keras_object(config)
    assert restored.normalization == "nfkc"
    texts = tf.constant(["１９９８，ＧＤＰ", "plain text"])
    nfkc = data.WordPieceTokenizer(corpus_vocabulary, normalization="nfkc")
    assert restored(texts).to_list() == nfkc(texts).to_list()


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"vocabulary": list(data.SPECIAL_TOKENS), "normalization": "NFKC"}, ValueError, "`normalization`"),
        ({"vocabulary": ["a", "b"]}, ValueError, "lacks the special tokens"),
        ({"vocabulary": list(data.SPECIAL_TOKENS) + ["a", "a"]}, ValueError, "duplicated"),
        ({"vocabulary": list(data.SPECIAL_TOKENS), "max_input_bytes": 0}, ValueError, "max_input_bytes"),
    ],
)
def test_bad_configuration(kwargs, error, message):
    with pytest.raises(error, match=message):
        data.WordPieceTokenizer(**kwargs)


def test_non_string_input_and_lookups():
    tokenizer = data.WordPieceTokenizer(list(data.SPECIAL_TOKENS) + ["a"])
    with pytest.raises(TypeError, match="tf.string"):
        tokenizer(tf.constant([1, 2]))
    assert tokenizer.token_to_id("a") == 5 and tokenizer.id_to_token(5) == "a"
    with pytest.raises(KeyError, match="'zzz'"):
        tokenizer.token_to_id("zzz")
    assert tokenizer.vocabulary_size() == 6


@pytest.mark.parametrize("normalization", ["bert", "nfkc"])
def test_empty_dimensions_keep_the_input_shape(normalization):
    tokenizer = data.WordPieceTokenizer(list(data.SPECIAL_TOKENS) + ["a"], normalization=normalization)
    assert tokenizer(tf.zeros([2, 0], tf.string)).shape.as_list() == [2, 0, None]
    assert tokenizer(tf.zeros([2, 0, 3], tf.string)).shape.as_list() == [2, 0, 3, None]
    assert tokenizer(tf.constant([["a", ""], ["a a", "b"]])).to_list() == [[[5], []], [[5, 5], [1]]]


def test_an_input_of_unknown_rank_is_a_clear_error():
    tokenizer = data.WordPieceTokenizer(list(data.SPECIAL_TOKENS) + ["a"])
    traced = tf.function(lambda x: tokenizer(x).flat_values,
                         input_signature=[tf.TensorSpec(None, tf.string)])
    with pytest.raises(ValueError, match="`inputs` must have a known rank"):
        traced.get_concrete_function()


def test_many_short_texts_next_to_a_long_one_cost_what_their_characters_do():
    # RaggedTensor.value_rowids() took memory of (texts x longest text): 13 GB
    # for this batch (the pieces of fill-mask's "[MASK] " * 150_000 beside a
    # 100 kB word), and a served fill-mask export was killed for it.
    tokenizer = data.WordPieceTokenizer(list(data.SPECIAL_TOKENS) + ["x", "##x"])
    texts = tf.constant(["x" * 100_000] + [" "] * 14_000 + ["x x"])
    ids = tf.function(lambda t: tokenizer(t))(texts)
    assert ids.shape[0] == 14_002
    assert ids[0].numpy().tolist() == [1]  # a word of more than 100 characters: [UNK]
    assert ids[-1].numpy().tolist() == [5, 5] and ids[1:-1].flat_values.shape[0] == 0
