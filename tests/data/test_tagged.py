"""The tagged-file readers: CoNLL-U and CoNLL/IOB2 files a user writes, read whole or refused by line."""

import gzip
import random

import numpy as np
import pytest

from tfnlp.data import TaggedData, read_conll, read_conllu

UPOS = ["ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON", "PROPN",
        "PUNCT", "SCONJ", "SYM", "VERB", "X"]
WORDS = ["the", "Café", "#", "#love", "猫", "👍🏽", "n't", "-", "=", "e\u0301", "1,000", "_", "Ⅻ"]


def _write(path, text, encoding="utf-8"):
    path.write_bytes(text.encode(encoding) if isinstance(text, str) else text)
    return str(path)


def _conllu_line(i, word, upos, xpos="_"):
    return f"{i}\t{word}\t{word.lower()}\t{upos}\t{xpos}\t_\t0\troot\t_\t_"


def _random_sentences(seed, count=20):
    rng = random.Random(seed)
    words = [[rng.choice(WORDS) for _ in range(rng.randint(1, 8))] for _ in range(count)]
    tags = [[rng.choice(UPOS[:5]) for _ in sentence] for sentence in words]
    return words, tags


def test_conllu_round_trip_of_random_sentences(tmp_path):
    words, tags = _random_sentences(0)
    lines = []
    for n, (sentence, sentence_tags) in enumerate(zip(words, tags, strict=True)):
        lines += [f"# sent_id = s{n}", f"# text = {' '.join(sentence)}"]
        lines += [_conllu_line(i, w, t, xpos=t.lower()) for i, (w, t) in enumerate(zip(sentence, sentence_tags, strict=True), 1)]
        lines.append("")
    path = _write(tmp_path / "random.conllu", "\n".join(lines))
    data = read_conllu(path)
    assert data.words == words and data.tags == tags
    assert data.tag_names == sorted({t for s in tags for t in s})
    assert data.sentence_ids == [f"s{n}" for n in range(len(words))]
    assert data.texts == [" ".join(s) for s in words]
    assert read_conllu(path, tag_column="XPOS").tags == [[t.lower() for t in s] for s in tags]
    assert read_conllu(path, tag_column=4).tags == [[t.lower() for t in s] for s in tags]
    untagged = read_conllu(path, tag_column=None)
    assert untagged.words == words and untagged.tags is None and untagged.tag_names == []


def test_conllu_skips_multiword_ranges_and_empty_nodes_and_reads_gzip_bom_crlf(tmp_path):
    rows = ["# newdoc id = d1", "# sent_id = 1", "1-2\tdon't\t_\t_\t_\t_\t_\t_\t_\t_",
            _conllu_line(1, "do", "AUX"), _conllu_line(2, "n't", "PART"),
            "2.1\tgo\tgo\tVERB\t_\t_\t_\t_\t0:root\t_", _conllu_line(3, "go", "VERB"), "", "", "",
            _conllu_line(1, "Hi", "INTJ")]  # the last sentence without a blank line after it
    text = "\r\n".join(rows)
    plain = read_conllu(_write(tmp_path / "a.conllu", "\ufeff" + text))
    assert plain.words == [["do", "n't", "go"], ["Hi"]]
    assert plain.tags == [["AUX", "PART", "VERB"], ["INTJ"]]
    assert plain.sentence_ids == ["1", None]
    packed = read_conllu(_write(tmp_path / "a.conllu.gz", gzip.compress(text.encode())))
    assert packed.words == plain.words and packed.tags == plain.tags


@pytest.mark.parametrize("rows, message", [
    ([_conllu_line(1, "a", "X"), "2 b b X _ _ 0 root _ _"], r"a\.conllu, line 2: 1 tab-separated fields"),
    ([_conllu_line(1, "a", "X"), _conllu_line(3, "b", "X")], r"line 2: word ID 3 where 2 was expected"),
    ([_conllu_line(1, "a", "X"), _conllu_line(1, "b", "X")], r"line 2: word ID 1 where 2 .*blank line missing"),
    (["x" + _conllu_line(1, "a", "X")], r"line 1: the ID 'x1' is not a word ID"),
    ([_conllu_line(1, "a", "X"), _conllu_line(2, "b", "_")], r"line 2: the UPOS field is '_' \(unspecified\)"),
    ([_conllu_line(1, "a", "X"), _conllu_line(2, " ", "X")], r"line 2: the word is empty"),
    ([_conllu_line(1, "a", "X"), _conllu_line(2, "b", "X ")], r"line 2: the UPOS field 'X ' is empty or has"),
    ([_conllu_line(1, "a", "X"), _conllu_line(2, "b", "X")], r"every word has the tag 'X'.*at least 2"),
    (["# only a comment", ""], r"a\.conllu: the file has no word lines"),
    ([], r"a\.conllu: the file has no word lines"),
])
def test_conllu_refuses_malformed_files_by_line(tmp_path, rows, message):
    with pytest.raises(ValueError, match=message):
        read_conllu(_write(tmp_path / "a.conllu", "\n".join(rows)))


def test_conllu_unknown_tags_invalid_utf8_and_bad_arguments(tmp_path):
    good = _write(tmp_path / "a.conllu", "\n".join([_conllu_line(1, "a", "NOUN"), _conllu_line(2, "b", "VERB")]))
    assert read_conllu(good, tag_names=UPOS).tag_names == UPOS
    with pytest.raises(ValueError, match=r"a\.conllu, line 2: the tag 'VERB' is not in `tag_names`"):
        read_conllu(good, tag_names=["NOUN", "ADJ"])
    bad = _write(tmp_path / "b.conllu", _conllu_line(1, "a", "X").encode() + b"\n2\t\xff\tb\tX\t_\t_\t0\troot\t_\t_")
    with pytest.raises(ValueError, match=r"b\.conllu, line 2: not valid UTF-8"):
        read_conllu(bad)
    not_gzip = _write(tmp_path / "c.conllu.gz", "plain")
    with pytest.raises(ValueError, match=r"c\.conllu\.gz: cannot be decompressed as gzip"):
        read_conllu(not_gzip)
    packed = bytearray(gzip.compress(("\n".join([_conllu_line(1, "a", "X")] * 50)).encode()))
    packed[12:16] = b"\xff\xff\xff\xff"  # a corrupt deflate stream (zlib.error, not OSError)
    with pytest.raises(ValueError, match=r"d\.conllu\.gz: cannot be decompressed as gzip"):
        read_conllu(_write(tmp_path / "d.conllu.gz", bytes(packed)))
    # "_" is a value in FEATS (no features): read, not refused as an unspecified tag.
    features = _write(tmp_path / "f.conllu", "1\ta\ta\tNOUN\t_\tNumber=Sing\t0\troot\t_\t_\n"
                                            "2\tof\tof\tADP\t_\t_\t1\tcase\t_\t_\n")
    assert read_conllu(features, tag_column="feats").tags == [["Number=Sing", "_"]]
    with pytest.raises(ValueError, match=r"line 1: the XPOS field is '_' \(unspecified\)"):
        read_conllu(features, tag_column="xpos")
    with pytest.raises(FileNotFoundError):
        read_conllu(tmp_path / "missing.conllu")
    for tag_column, error, message in [
            ("pos", ValueError, r"`tag_column` must be one of \['id', 'form'"),
            (10, ValueError, r"`tag_column` must be in \[0, 9\]"),
            ("form", ValueError, r"`tag_column` 'form' is the FORM column"),
            (True, TypeError, r"`tag_column` must be a column name or index")]:
        with pytest.raises(error, match=message):
            read_conllu(good, tag_column=tag_column)
    for tag_names, error, message in [
            ("NOUN", TypeError, "`tag_names` must be a list of str"),
            (["NOUN", "NOUN"], ValueError, r"`tag_names` has duplicated tags: \['NOUN'\]"),
            (["NOUN"], ValueError, "at least 2 tags"),
            (["NOUN", " VERB"], TypeError, "without surrounding spaces")]:
        with pytest.raises(error, match=message):
            read_conllu(good, tag_names=tag_names)
    with pytest.raises(TypeError, match="`path` must be a str or path-like"):
        read_conllu(3)


def test_iob2_files_as_universal_ner_writes_them(tmp_path):
    text = ("# global.columns = ID FORM NER\n# sent_id = ans-1\n# text = Ada in Paris\n"
            "1\tAda\tB-PER\t-\tanno\n2\tin\tO\t-\tanno\n3\tParis\tB-LOC\t-\tanno\n\n"
            "# sent_id = ans-2\n1\t#\tO\t-\tanno\n2\t#love\tO\t-\tanno\n3\tNew\tB-LOC\t-\tanno\n"
            "4\tYork\tI-LOC\t-\tanno\n")
    data = read_conll(_write(tmp_path / "en.iob2", text), word_column=1, tag_column=2)
    assert data.words == [["Ada", "in", "Paris"], ["#", "#love", "New", "York"]]
    assert data.tags == [["B-PER", "O", "B-LOC"], ["O", "O", "B-LOC", "I-LOC"]]
    assert data.tag_names == ["O", "B-LOC", "B-PER", "I-LOC"]
    assert data.sentence_ids == ["ans-1", "ans-2"] and data.texts == ["Ada in Paris", None]
    ids = [x.tolist() for x in data.tag_ids]
    assert ids == [[2, 0, 1], [0, 0, 1, 3]]
    elements = [(w.numpy().tolist(), t.numpy().tolist()) for w, t in data.as_dataset()]
    assert elements == [([w.encode() for w in s], i) for s, i in zip(data.words, ids, strict=True)]


def test_conll2003_space_separated_with_document_starts(tmp_path):
    text = ("-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\n"
            "-DOCSTART- -X- -X- O\n\n# NN B-NP O\nPeter NNP B-NP B-PER\n")
    path = _write(tmp_path / "train.txt", text)
    data = read_conll(path)
    assert data.words == [["EU", "rejects"], ["#", "Peter"]]
    assert data.tags == [["B-ORG", "O"], ["O", "B-PER"]]
    assert read_conll(path, tag_column=1).tags == [["NNP", "VBZ"], ["NN", "NNP"]]
    assert read_conll(path, tag_column=None).tags is None


def test_two_column_file_round_trip_of_random_sentences(tmp_path):
    words, tags = _random_sentences(1)
    lines = []
    for sentence, sentence_tags in zip(words, tags, strict=True):
        lines += [f"{w}\t{t}" for w, t in zip(sentence, sentence_tags, strict=True)] + [""]
    data = read_conll(_write(tmp_path / "pos.tsv.gz", gzip.compress("\n".join(lines).encode())), tag_column=1)
    assert data.words == words and data.tags == tags and data.num_words == sum(map(len, words))


@pytest.mark.parametrize("text, kwargs, message", [
    ("a\tO\tx\nb\tO\n", {}, r"f\.iob2, line 2: 2 fields, but the first word line \(line 1\) has 3"),
    ("a\tO\n", {"tag_column": 2}, r"line 1: `tag_column` is 2, but word lines have 2 fields"),
    ("a\tO\n", {"word_column": -3}, r"line 1: `word_column` is -3"),
    ("a\tO\n", {"word_column": 1}, r"`word_column` \(1\) and `tag_column` \(-1\) are the same field"),
    ("a\tB-X\nb\tZ\n", {"tag_names": ["O", "B-X"]}, r"line 2: the tag 'Z' is not in `tag_names`"),
    ("a\tO\n\tO\n", {"word_column": 0, "tag_column": 1}, r"line 2: the word is empty"),
])
def test_conll_refuses_malformed_files_by_line(tmp_path, text, kwargs, message):
    with pytest.raises(ValueError, match=message):
        read_conll(_write(tmp_path / "f.iob2", text), **kwargs)


def test_conll_argument_checks(tmp_path):
    path = _write(tmp_path / "f.iob2", "a\tO\nb\tB-X\n")
    with pytest.raises(TypeError, match="`word_column` must be an int"):
        read_conll(path, word_column="word")
    with pytest.raises(TypeError, match="`tag_column` must be an int"):
        read_conll(path, tag_column=1.0)
    with pytest.raises(ValueError, match="`delimiter` must be None"):
        read_conll(path, delimiter=",")


def test_tagged_data_checks_itself():
    with pytest.raises(ValueError, match="Sentence 0 has 2 words but 1 tags"):
        TaggedData([["a", "b"]], [["X"]], ["X", "Y"], "p")
    with pytest.raises(ValueError, match=r"Tags not in `tag_names`: \['Z'\]"):
        TaggedData([["a"]], [["Z"]], ["X", "Y"], "p")
    with pytest.raises(ValueError, match="was read without tags"):
        _ = TaggedData([["a"]], None, [], "p").tag_ids
    untagged = TaggedData([["a", "b"], ["c"]], None, [], "p")
    assert [w.numpy().tolist() for w in untagged.as_dataset()] == [[b"a", b"b"], [b"c"]]
    assert np.array_equal(TaggedData([["a"]], [["Y"]], ["X", "Y"], "p").tag_ids[0], [1])
