"""`WordPieceTokenizer.tokenize_words`: BERT's words, their ids, and their spans in the text as given.

The oracle is an independent pure-Python BasicTokenizer (google-research/bert's
`tokenization.py` rules, the predicates from its port in
`google_bert_tokenization.py`) in which every character carries the index of
the input character it came from; its words are checked against Google's own
port before its offsets are used. Nothing here is shared with tfnlp's tables.
"""

import codecs
import unicodedata

import hypothesis
import hypothesis.strategies as st
import pytest
import tensorflow as tf

from tests.data import google_bert_tokenization as google
from tfnlp import data

# Text that normalisation rewrites, and the ways a span can go wrong.
HOSTILE = [
    "Café café CAFÉ Cafe\u0301 cafe\u0301\u0302! e\u0301",  # composed and decomposed accents
    "İstanbul'da IŞIK ıslak İİ Iİ",  # 'İ'.lower() is two characters
    "Straße STRASSE ß ẞ",
    "ΟΔΟΣ ΟΔΟΣ. ΣΑ Σ AΣ' Σ̈Α ΑΣ̈ ΑΣ'Α",  # final sigma in context
    "北京abc市Ｘ中文mixed漢字 ｶﾀｶﾅ ㍿ 豈",  # CJK among Latin, half-width kana, a compatibility ideograph
    "１９９８年，ＧＤＰ增长了７．８％…… ＡＢＣ ａｂｃ",  # full-width forms
    "I ❤️ NY 🗽👍🏽 👨\u200d👩\u200d👧 🏳️\u200d🌈 🇫🇷 x😀y",  # emoji: ZWJ, skin tone, flags, VS16
    "\u0301 \u0301\u0302x a\u0301\u0302 !\u0301 猫\u0301 x\u0301\u0301\u0301 \u0301",  # marks alone
    "a\x00b \x07c\u200bd\u200e e\ufeff\u00adf \ufffdg h\u200b \u200bi \x00",  # control, zero-width
    "tab\there\nnew\r\nline\u00a0nbsp\u2028ls\u3000ideo\u2003em  \t ",  # whitespace of all kinds
    "a≠b ≮ x\u1fefy \u037e Å Å Ǆemal ǅ ﬁnance ½ x²",  # normalisation makes punctuation
    "x\U0001d15e\u0301y \U0001d160\u0308 a\u0301\U0001d165\u0316b",  # canonical reordering
    "한국어 서울특별시 \u1100\u1161\u11a8",  # Hangul syllables and jamo
    "नमस्ते दुनिया ภาษาไทย مَرْحَبًا שָׁלוֹם Nguyễn Thị",  # marks kept or stripped
    "a" * 150 + " ok " + "é" * 101,  # words over 100 characters: one [UNK]
    "",
    " \t\n\u3000\u00a0 ",
    "\x00\x01\u200b\u200d\ufeff",
    "!!!...",
]
INVALID = [  # bytes that are not UTF-8, where they can be
    b"ab\xffcd \xe4\xbd x\xed\xa0\x80y \xc3",
    b"\x80\x80caf\xc3\xa9\xff \xf0\x9f\x98\x80\xf0\x9f \xc0\xafz\xf4\x90\x80\x80",
    b"\xff",
    b"\xe4\xbd\xa0\xe4\xbd",
]


_BAD_BYTES = []  # (start, end) of each byte sequence the decoder replaced


def _record_bad_bytes(error):
    _BAD_BYTES.append((error.start, error.end))
    return "\ufffd", error.end


codecs.register_error("tfnlp_test_record", _record_bad_bytes)


def _decode(raw):
    """`raw.decode("utf-8", "replace")`, and the byte offset of each of its characters and of its end."""
    _BAD_BYTES.clear()
    text = raw.decode("utf-8", "tfnlp_test_record")
    assert text == raw.decode("utf-8", "replace")
    bad, offsets = dict(_BAD_BYTES), [0]
    for char in text:
        offsets.append(bad.get(offsets[-1], offsets[-1] + len(char.encode("utf-8"))))
    assert offsets[-1] == len(raw)
    return text, offsets


def reference_words(text, lower_case):
    """BERT's BasicTokenizer with each character's input index: [(word, start, end)], code points.

    A word spans its first to its last contributing input character, then
    the characters right after it that accent stripping removed entirely.
    """
    cleaned = []  # _clean_text: (character, input index)
    for index, char in enumerate(text):
        if ord(char) == 0 or ord(char) == 0xFFFD or google._is_control(char):
            continue
        cleaned.append((" " if google._is_whitespace(char) else char, index))
    spaced = []  # _tokenize_chinese_chars
    for char, index in cleaned:
        spaced += [(" ", None), (char, index), (" ", None)] if google._is_chinese_char(ord(char)) else [(char, index)]
    words = []
    for token in _split_on_space(spaced):  # whitespace_tokenize
        if lower_case:
            token = _lower_and_strip_accents(token)
        for word in _split_on_punctuation(token):
            words += _split_on_space(word)  # whitespace_tokenize(" ".join(split_tokens))
    used = {index for word in words for _, index in word}
    position = {index: k for k, (_, index) in enumerate(cleaned)}
    spans = []
    for word in words:
        start, last = min(i for _, i in word), max(i for _, i in word)
        for char, index in cleaned[position[last] + 1:]:  # removed marks right after the word
            if index in used or char.isspace():
                break
            last = index
        spans.append(("".join(c for c, _ in word), start, last + 1))
    assert [w for w, _, _ in spans] == google.BasicTokenizer(lower_case).tokenize(text)  # Google's words
    return spans


def _split_on_space(chars):
    words, word = [], []
    for char, index in chars:
        if char.isspace():
            words, word = words + [word] if word else words, []
        else:
            word.append((char, index))
    return words + [word] if word else words


def _lower_and_strip_accents(token):
    """`token.lower()` then `_run_strip_accents`, each output character tagged with its input's index."""
    whole = "".join(c for c, _ in token).lower()  # in context: final sigma
    lengths = [len(c.lower()) for c, _ in token]
    assert sum(lengths) == len(whole)  # only the final sigma differs, and it is one character
    decomposed, at = [], 0
    for (_, index), length in zip(token, lengths, strict=True):
        decomposed += [(d, index) for d in unicodedata.normalize("NFD", whole[at:at + length])]
        at += length
    # NFD of the whole token = canonical reordering of the characters' decompositions.
    ordered, run = [], []
    for char, index in decomposed + [("", None)]:
        if char and unicodedata.combining(char):
            run.append((char, index))
            continue
        ordered += sorted(run, key=lambda c: unicodedata.combining(c[0])) + ([(char, index)] if char else [])
        run = []
    stripped = [(c, i) for c, i in ordered if unicodedata.category(c) != "Mn"]
    assert "".join(c for c, _ in stripped) == google.BasicTokenizer(True)._run_strip_accents(whole)
    return stripped


def _split_on_punctuation(token):
    words, new_word = [], True
    for char, index in token:
        if google._is_punctuation(char):
            words.append([(char, index)])
            new_word = True
        else:
            if new_word:
                words.append([])
            new_word = False
            words[-1].append((char, index))
    return words


def _expected(raws, lower_case):
    """[[(word, byte_start, byte_end, char_start, char_end)]] of each text, by the reference."""
    expected = []
    for raw in raws:
        text, offsets = _decode(raw)
        expected.append([(w.encode("utf-8"), offsets[s], offsets[e], s, e) for w, s, e in reference_words(text, lower_case)])
    return expected


def _got(result):
    return [_list(result[k]) for k in ("byte_starts", "byte_ends", "char_starts", "char_ends")]


def _list(tensor):
    return tensor.to_list() if isinstance(tensor, tf.RaggedTensor) else tensor.numpy().tolist()


def _vocabulary(raws, lower_case):
    """Characters, suffixes and half the words of the texts: words spelled in one or several pieces."""
    words = sorted({w for raw in raws for w, *_ in reference_words(_decode(raw)[0], lower_case)})
    tokens = VOCABULARY + sorted({c for w in words for c in w})
    tokens += sorted({"##" + c for w in words for c in w[1:]}) + words[::2]
    return list(dict.fromkeys(tokens))


RAWS = [t.encode("utf-8") for t in HOSTILE] + INVALID
VOCABULARY = list(data.SPECIAL_TOKENS) + ["a", "b", "##c"]


def _check(tokenizer, raws, lower_case, vocabulary=None):
    """tokenize_words == the reference, word by word, piece by piece, span by span."""
    result = tokenizer.tokenize_words(tf.constant(raws, tf.string))
    expected = _expected(raws, lower_case)
    starts, ends, char_starts, char_ends = _got(result)
    got = [list(zip(*spans, strict=True)) for spans in zip(starts, ends, char_starts, char_ends, strict=True)]
    assert got == [[tuple(span) for _, *span in row] for row in expected]
    ids = result["token_ids"].to_list()
    if vocabulary is not None:  # each word's pieces are Google's WordPiece of the reference word
        pieces = google.WordpieceTokenizer({t: i for i, t in enumerate(vocabulary)})
        assert ids == [[[vocabulary.index(p) for p in pieces.tokenize(w.decode("utf-8"))] for w, *_ in row]
                       for row in expected]
    flat = [[i for word in row for i in word] for row in ids]
    assert flat == tokenizer(tf.constant(raws, tf.string)).to_list()  # the ids of `call`
    return result, expected


@pytest.mark.parametrize("lower_case", [True, False])
def test_hostile_text_gives_the_reference_s_words_ids_and_offsets(lower_case):
    vocabulary = _vocabulary(RAWS, lower_case)
    tokenizer = data.WordPieceTokenizer(vocabulary, lower_case=lower_case)
    result, expected = _check(tokenizer, RAWS, lower_case, vocabulary)
    # One at a time (a batch of one) gives what the batch gave: no text leaks into the next.
    for raw, row in zip(RAWS, expected, strict=True):
        one = tokenizer.tokenize_words(tf.constant(raw))  # a scalar: one text
        assert list(zip(*_got(one), strict=True)) == [tuple(span) for _, *span in row]
    assert result["token_ids"].shape.rank == 3 and result["byte_starts"].dtype == tf.int64
    unk = vocabulary.index("[UNK]")
    words = [w for row in expected for w, *_ in row]
    assert len(words) > 120
    assert [ids for row in result["token_ids"].to_list() for ids in row].count([unk]) == 2  # the 2 long words


@pytest.mark.parametrize("lower_case", [True, False])
def test_each_span_of_the_input_normalises_to_its_word(lower_case):
    """`text[start:end]` alone gives back the word (up to the final sigma, which depends on the
    characters around it), sliced in Python and with `tf.strings.substr` in bytes and characters."""
    tokenizer = data.WordPieceTokenizer(VOCABULARY, lower_case=lower_case)
    result = tokenizer.tokenize_words(tf.constant(RAWS))
    starts, ends, char_starts, char_ends = _got(result)
    texts = tf.constant(RAWS)
    rows = result["byte_starts"].value_rowids()
    in_bytes = tf.strings.substr(tf.gather(texts, rows), result["byte_starts"].flat_values,
                                 result["byte_ends"].flat_values - result["byte_starts"].flat_values, unit="BYTE")
    valid = tf.constant([t.encode("utf-8") for t in HOSTILE])
    char_rows = result["char_starts"][:len(HOSTILE)]
    in_chars = tf.strings.substr(tf.gather(valid, char_rows.value_rowids()), char_rows.flat_values,
                                 result["char_ends"][:len(HOSTILE)].flat_values - char_rows.flat_values,
                                 unit="UTF8_CHAR")
    sliced, basic = [], google.BasicTokenizer(lower_case)
    for raw, row in zip(RAWS, zip(starts, ends, char_starts, char_ends, strict=True), strict=True):
        text = raw.decode("utf-8", "replace")
        words = basic.tokenize(text)
        for word, start, end, char_start, char_end in zip(words, *row, strict=True):
            assert raw[start:end].decode("utf-8", "replace") == text[char_start:char_end]
            sliced.append(raw[start:end])
            alone = basic.tokenize(text[char_start:char_end])
            assert [w.replace("ς", "σ") for w in alone] == [word.replace("ς", "σ")], (word, alone)
    assert in_bytes.numpy().tolist() == sliced
    assert in_chars.numpy().tolist() == sliced[:len(in_chars.numpy())]


def test_spans_of_named_cases():
    tokenizer = data.WordPieceTokenizer(VOCABULARY)

    def spans(text):
        result = tokenizer.tokenize_words(tf.constant(text))
        return [text[s:e] for s, e in zip(result["char_starts"].numpy(), result["char_ends"].numpy(), strict=True)]

    assert spans("Cafe\u0301 na\u0308ive") == ["Cafe\u0301", "na\u0308ive"]  # the mark is the word's
    assert spans("İstanbul ＧＤＰ１９９８") == ["İstanbul", "ＧＤＰ１９９８"]
    assert spans("👨\u200d👩\u200d👧 👍🏽!") == ["👨\u200d👩\u200d👧", "👍🏽", "!"]  # ZWJ inside: one word
    assert spans("a\x00b \u200bc\u200b 猫猫x") == ["a\x00b", "c", "猫", "猫", "x"]
    assert spans("\u0301 \t\n ") == [] and spans("") == []


def test_words_past_max_input_bytes_are_absent():
    tokenizer = data.WordPieceTokenizer(VOCABULARY, max_input_bytes=100_000)
    megabyte = ("Ünïcödé 猫 " + "x\u0301" * 3 + " ") * 50_000  # 1.1 MB
    raw = megabyte.encode("utf-8")
    cut = raw[:100_000]
    while True:  # the longest prefix of whole characters
        try:
            cut.decode("utf-8")
            break
        except UnicodeDecodeError:
            cut = cut[:-1]
    result = tokenizer.tokenize_words(tf.constant([raw, b"ok"]))
    starts, ends, char_starts, char_ends = _got(result)
    expected = _expected([cut, b"ok"], True)
    assert list(zip(starts[0], ends[0], char_starts[0], char_ends[0], strict=True)) == [tuple(s) for _, *s in expected[0]]
    assert max(ends[0]) <= 100_000 and len(starts[0]) > 10_000 and starts[1] == [0]


def test_empty_batches_and_texts():
    tokenizer = data.WordPieceTokenizer(VOCABULARY)
    for texts in ([], ["", " ", "\x00"]):
        result = tokenizer.tokenize_words(tf.constant(texts, tf.string))
        assert result["token_ids"].to_list() == [[]] * len(texts)
        assert all(result[k].to_list() == [[]] * len(texts) for k in result)


def test_works_in_tf_data_in_tf_function_and_after_a_saved_model_round_trip(tmp_path):
    vocabulary = _vocabulary(RAWS, True)
    tokenizer = data.WordPieceTokenizer(vocabulary)
    eager = tokenizer.tokenize_words(tf.constant(RAWS))

    def same(result, expected=eager):
        assert {k: v.to_list() for k, v in result.items()} == {k: v.to_list() for k, v in expected.items()}

    signature = [tf.TensorSpec([None], tf.string)]
    same(tf.function(tokenizer.tokenize_words, input_signature=signature)(tf.constant(RAWS)))
    batches = tf.data.Dataset.from_tensor_slices(RAWS).batch(7).map(tokenizer.tokenize_words)
    batched = list(batches)
    same({k: tf.concat([b[k] for b in batched], 0) for k in eager})
    ones = list(tf.data.Dataset.from_tensor_slices(RAWS[:3]).map(tokenizer.tokenize_words))  # scalars
    same({k: tf.ragged.stack([o[k] for o in ones]) for k in eager}, {k: v[:3] for k, v in eager.items()})

    module = tf.Module()
    module.tokenizer = tokenizer
    module.words = tf.function(tokenizer.tokenize_words, input_signature=signature)
    tf.saved_model.save(module, str(tmp_path / "words"))
    same(tf.saved_model.load(str(tmp_path / "words")).words(tf.constant(RAWS)))


def test_bad_arguments_are_named():
    tokenizer = data.WordPieceTokenizer(VOCABULARY)
    with pytest.raises(TypeError, match="`texts` must be tf.string"):
        tokenizer.tokenize_words(tf.constant([1, 2]))
    with pytest.raises(ValueError, match="`texts` must be a scalar or 1-D"):
        tokenizer.tokenize_words(tf.constant([["a"]]))
    with pytest.raises(ValueError, match='normalization="bert"'):
        data.WordPieceTokenizer(VOCABULARY, normalization="nfkc").tokenize_words(tf.constant(["a"]))


_TOKENIZERS = {lc: data.WordPieceTokenizer(VOCABULARY + list("cdef"), lower_case=lc)
               for lc in (True, False)}


# Characters, each followed by what normalisation drops or keeps around it; any text; any bytes.
_CHARACTERS = st.sampled_from(list("aZéİIıΣσß猫Ｇ１，!'. \t\u00a0\u3000\u2028\ufffd≠Å한") + ["\U0001f44d", "\U00020000"])
_AFTER = st.sampled_from(list("\u0301\u0308\u0345\u0316\x00\u200b\u200d\ufe0f") + ["\U0001d165", "\U0001f3fd"])
_TEXTS = (st.lists(st.tuples(_CHARACTERS, st.text(_AFTER, max_size=3)).map("".join), max_size=6).map("".join)
          | st.text(max_size=12) | st.binary(max_size=12).map(lambda b: b.decode("latin-1")))


@hypothesis.settings(max_examples=50, deadline=None, derandomize=True)
@hypothesis.given(texts=st.lists(_TEXTS, min_size=1, max_size=4),
                  raw_bytes=st.lists(st.binary(max_size=10), max_size=2),
                  lower_case=st.booleans())
def test_any_unicode_and_any_bytes_give_the_reference_s_offsets(texts, raw_bytes, lower_case):
    _check(_TOKENIZERS[lower_case], [t.encode("utf-8") for t in texts] + raw_bytes, lower_case)
