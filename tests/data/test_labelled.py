import csv
import json
import re

import numpy as np
import pytest
import tensorflow as tf

from tfnlp import data
from tfnlp.data import LabelledData, read_labelled, suggest_sequence_length

UNICODE_TEXTS = ["Café crème, très bon", "猫が好き 🐱", "naïve – “quotes” 'and' émoji 👍🏽"]


def write(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return str(path)


def write_csv(tmp_path, name, rows, delimiter=","):
    path = tmp_path / name
    with open(path, "w", encoding="utf-8", newline="") as f:
        csv.writer(f, delimiter=delimiter).writerows(rows)
    return str(path)


def write_jsonl(tmp_path, name, records):
    return write(tmp_path, name, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))


# --- Reading ---


def test_tsv_keeps_unicode_text_exactly_and_sorts_string_labels(tmp_path):
    rows = [("id", "text", "label")] + [
        (str(i), text, label) for i, (text, label) in enumerate(zip(UNICODE_TEXTS, "bab", strict=True))
    ]
    path = write(tmp_path, "train.tsv", "".join("\t".join(r) + "\n" for r in rows))
    result = read_labelled(path, "text", "label")
    assert isinstance(result, LabelledData)
    assert result.texts == UNICODE_TEXTS
    assert result.text_pairs is None
    assert result.label_names == ["a", "b"]
    assert result.labels.dtype == np.int32 and result.labels.tolist() == [1, 0, 1]
    assert result.path == path and len(result) == 3 and result.x is result.texts
    assert not result.labels.flags.writeable
    assert "examples=3" in repr(result) and "['a', 'b']" in repr(result)


@pytest.mark.parametrize("delimiter,name", [(",", "train.csv"), ("\t", "train.tsv")])
def test_quoted_fields_hold_delimiters_newlines_and_quotes(tmp_path, delimiter, name):
    texts = ['one, two\tthree', 'line one\nline two\r\nline three', 'she said "hi"', '"quoted"']
    rows = [["text", "label"]] + [[t, str(i % 2)] for i, t in enumerate(texts)]
    path = write_csv(tmp_path, name, rows, delimiter)
    assert read_labelled(path, "text", "label").texts == texts


def test_a_quote_inside_an_unquoted_field_is_kept(tmp_path):
    path = write(tmp_path, "train.tsv", 'text\tlabel\nHe said "hi" twice\tx\n5" tall\ty\n')
    assert read_labelled(path, "text", "label").texts == ['He said "hi" twice', '5" tall']


def test_line_numbers_count_physical_lines_after_a_multiline_field(tmp_path):
    path = write(tmp_path, "train.csv", 'text,label\n"a\nb\nc",x\nfine,y\n,x\n')
    with pytest.raises(ValueError, match=r"train\.csv, line 6: the text in column 'text'"):
        read_labelled(path, "text", "label")


def test_bom_and_crlf_line_endings(tmp_path):
    content = "\ufefftext\tlabel\r\nCafé\tpos\r\n猫 🐱\tneg\r\n"
    path = write(tmp_path, "train.tsv", content)
    result = read_labelled(path, "text", "label")
    assert result.texts == ["Café", "猫 🐱"]
    assert result.label_names == ["neg", "pos"]
    jsonl = write(tmp_path, "train.jsonl", '\ufeff{"t": "a", "y": 1}\r\n\r\n{"t": "b", "y": 2}\r\n')
    assert read_labelled(jsonl, "t", "y").texts == ["a", "b"]


def test_a_trailing_carriage_return_is_stripped_from_a_field(tmp_path):
    path = write(tmp_path, "train.csv", 'text,label\n"a\r",x\nb,y\r\r\n')
    result = read_labelled(path, "text", "label")
    assert result.texts == ["a", "b"] and result.label_names == ["x", "y"]


def test_blank_lines_are_skipped(tmp_path):
    path = write(tmp_path, "train.csv", "\ntext,label\n\na,x\n\n\nb,y\n\n")
    assert read_labelled(path, "text", "label").texts == ["a", "b"]


def test_long_texts_beyond_the_default_csv_field_limit(tmp_path):
    limit = csv.field_size_limit()
    long_text = "word " * 60_000  # 300 kB, above csv's default 128 kB limit
    path = write_csv(tmp_path, "train.csv", [["text", "label"], [long_text, "a"], ["b", "b"]])
    assert read_labelled(path, "text", "label").texts[0] == long_text
    assert csv.field_size_limit() == limit  # restored


def test_jsonl_with_pairs_numbers_and_blank_lines(tmp_path):
    records = [
        {"premise": "Un chat 🐱", "hypothesis": "猫", "label": 2, "extra": [1]},
        {"premise": "b", "hypothesis": "c\n\td", "label": 10},
        {"premise": "e", "hypothesis": "f", "label": "2"},
    ]
    path = write(tmp_path, "dev.json", "\n".join(json.dumps(r) for r in records[:2]) + "\n\n  \n"
                 + json.dumps(records[2], ensure_ascii=False))
    result = read_labelled(path, "premise", "label", text_pair_column="hypothesis")
    assert result.texts == ["Un chat 🐱", "b", "e"]
    assert result.text_pairs == ["猫", "c\n\td", "f"]
    assert result.label_names == ["2", "10"]
    assert result.labels.tolist() == [0, 1, 0]
    assert result.x == (result.texts, result.text_pairs)


def test_jsonl_booleans_and_floats_become_strings(tmp_path):
    path = write_jsonl(tmp_path, "a.jsonl", [{"t": "a", "y": True}, {"t": "b", "y": 1.5},
                                             {"t": "c", "y": False}])
    assert read_labelled(path, "t", "y").label_names == ["1.5", "False", "True"]


@pytest.mark.parametrize(
    "labels,expected",
    [
        (["10", "2", "1", "2"], ["1", "2", "10"]),
        (["-1", "0", "1", "-1"], ["-1", "0", "1"]),
        (["10", "2", "b", "a"], ["10", "2", "a", "b"]),  # not all integers: string order
        (["1.5", "10", "2"], ["1.5", "10", "2"]),
        (["pos", "neg", "neutral"], ["neg", "neutral", "pos"]),
    ],
)
def test_label_vocabulary_order(tmp_path, labels, expected):
    path = write_csv(tmp_path, "train.csv", [["text", "label"]] + [[f"t{i}", y] for i, y in enumerate(labels)])
    result = read_labelled(path, "text", "label")
    assert result.label_names == expected
    assert [result.label_names[i] for i in result.labels] == labels


def test_given_label_names_fix_the_ids_and_allow_a_single_class(tmp_path):
    path = write_csv(tmp_path, "test.csv", [["text", "label"], ["a", "pos"], ["b", "pos"]])
    result = read_labelled(path, "text", "label", label_names=("pos", "neg", "neutral"))
    assert result.label_names == ["pos", "neg", "neutral"]
    assert result.labels.tolist() == [0, 0]


def test_unseen_labels_name_the_file_the_labels_the_line_and_the_known_labels(tmp_path):
    rows = [["text", "label"], ["a", "pos"], ["b", "meh"], ["c", "neg"], ["d", "ugh"], ["e", "meh"]]
    path = write_csv(tmp_path, "dev.csv", rows)
    with pytest.raises(ValueError) as info:
        read_labelled(path, "text", "label", label_names=["neg", "pos"])
    message = str(info.value)
    assert path in message and "`label_names`" in message and "'label'" in message
    assert "['meh', 'ugh']" in message and "first at line 3" in message
    assert "known labels are ['neg', 'pos']" in message


def test_many_unseen_labels_are_cut_short(tmp_path):
    rows = [["text", "label"]] + [[f"t{i}", f"l{i}"] for i in range(9)]
    path = write_csv(tmp_path, "dev.csv", rows)
    with pytest.raises(ValueError, match=r"\['l0', 'l1', 'l2', 'l3', 'l4'\] and 4 more"):
        read_labelled(path, "text", "label", label_names=["a", "b"])


@pytest.mark.parametrize(
    "name,format,content",
    [
        ("data.txt", "tsv", "text\tlabel\na\tx\nb\ty\n"),
        ("data.tsv", "CSV", "text,label\na,x\nb,y\n"),
        ("DATA.TSV", None, "text\tlabel\na\tx\nb\ty\n"),
        ("data", "jsonl", '{"text": "a", "label": "x"}\n{"text": "b", "label": "y"}'),
        ("data.json", None, '{"text": "a", "label": "x"}\n{"text": "b", "label": "y"}'),
        ("data.jsonl", None, '{"text": "a", "label": "x"}\n{"text": "b", "label": "y"}'),
    ],
)
def test_format_from_the_argument_or_the_extension(tmp_path, name, format, content):
    path = write(tmp_path, name, content)
    result = read_labelled(path, "text", "label", format=format)
    assert result.texts == ["a", "b"] and result.label_names == ["x", "y"]


def test_path_may_be_a_pathlib_path(tmp_path):
    path = tmp_path / "train.csv"
    path.write_text("text,label\na,x\nb,y\n", encoding="utf-8")
    assert read_labelled(path, "text", "label").path == str(path)


# --- Errors: each names the file or argument, the line and the column ---

TSV_ERRORS = [
    # (file name, content, keyword arguments, error type, message pattern)
    ("train.tsv", "", {}, ValueError, r"train\.tsv: the file is empty"),
    ("train.tsv", "\n\n", {}, ValueError, r"train\.tsv: the file is empty"),
    ("train.jsonl", "\n  \n", {}, ValueError, r"train\.jsonl: the file is empty"),
    ("train.tsv", "text\tlabel\n", {}, ValueError, r"train\.tsv: the file has a header but no example rows"),
    ("train.tsv", "text\tlabel\n\n", {}, ValueError, r"header but no example rows"),
    ("train.tsv", "txt\tlabel\na\tx\n", {}, ValueError,
     r"train\.tsv: no column 'text' \(`text_column`\); the file's columns are \['txt', 'label'\]"),
    ("train.tsv", "text\tlabel\na\tx\n", {"text_pair_column": "b"}, ValueError,
     r"no column 'b' \(`text_pair_column`\)"),
    ("train.tsv", "text\tlabel\tlabel\na\tx\ty\n", {}, ValueError,
     r"train\.tsv: the header has 2 columns named 'label' \(`label_column`\)"),
    ("train.tsv", "text\tlabel\na\tx\n\ty\n", {}, ValueError,
     r"train\.tsv, line 3: the text in column 'text' \(`text_column`\) is empty"),
    ("train.tsv", "text\tlabel\na\tx\n  \ty\n", {}, ValueError, r"line 3: the text in column 'text'"),
    ("train.tsv", "text\tlabel\tb\na\tx\tc\nd\ty\t\n", {"text_pair_column": "b"}, ValueError,
     r"line 3: the text in column 'b' \(`text_pair_column`\) is empty"),
    ("train.tsv", "text\tlabel\na\tx\nb\t\n", {}, ValueError,
     r"train\.tsv, line 3: the label in column 'label' \(`label_column`\) is empty"),
    ("train.tsv", "text\tlabel\na\tx\nb\tc\ty\n", {}, ValueError,
     r"train\.tsv, line 3: 3 fields, but the header \(line 1\) has 2: \['text', 'label'\]"),
    ("train.csv", "text,label\na,x\nno label\n", {}, ValueError, r"train\.csv, line 3: 1 fields"),
    ("train.csv", 'text,label\na,x\n"Great" movie,y\n', {}, ValueError,
     r"train\.csv, line 3: cannot parse this CSV record"),
    ("train.tsv", 'text\tlabel\na\tx\n"unterminated\ty\nb\tz\n', {}, ValueError,
     r"train\.tsv, line 3: cannot parse this TSV record"),
    ("train.tsv", "text\tlabel\na\tx\nb\tx\n", {}, ValueError,
     r"train\.tsv: every example has the label 'x' \(column 'label', `label_column`\); "
     r"a classifier needs at least 2"),
    ("train.jsonl", '{"text": "a", "label": 1}\nnot json\n', {}, ValueError,
     r"train\.jsonl, line 2: not a JSON object \(Expecting value at column 1\)"),
    ("train.jsonl", '{"text": "a", "label": 1}\n\n["a", 1]\n', {}, ValueError,
     r"train\.jsonl, line 3: not a JSON object \(a JSON array\)"),
    ("train.jsonl", '{"text": "a", "label": 1}\n"a"\n', {}, ValueError,
     r"line 2: not a JSON object \(a JSON string\)"),
    ("train.jsonl", '{"text": "a", "label": 1}\n{"text": 3, "label": 1}\n', {}, ValueError,
     r"train\.jsonl, line 2: the text in key 'text' \(`text_column`\) must be a JSON string, "
     r"got a JSON number"),
    ("train.jsonl", '{"text": "a", "label": 1}\n{"text": null, "label": 1}\n', {}, ValueError,
     r"line 2: the text in key 'text' \(`text_column`\) must be a JSON string, got a JSON null"),
    ("train.jsonl", '{"text": "a", "label": 1}\n{"text": "", "label": 1}\n', {}, ValueError,
     r"line 2: the text in column 'text' \(`text_column`\) is empty"),
    ("train.jsonl", '{"text": "a", "label": 1}\n{"text": "b", "label": null}\n', {}, ValueError,
     r"line 2: the label in key 'label' \(`label_column`\) is missing \(null\)"),
    ("train.jsonl", '{"text": "a", "label": 1}\n{"text": "b", "label": ""}\n', {}, ValueError,
     r"line 2: the label in column 'label' \(`label_column`\) is empty"),
    ("train.jsonl", '{"text": "a", "label": 1}\n{"text": "b", "label": [1]}\n', {}, ValueError,
     r"line 2: the label in key 'label' \(`label_column`\) must be a JSON string, number or "
     r"boolean, got a JSON array"),
    ("train.jsonl", '{"text": "a", "label": 1}\n{"txt": "b", "label": 2}\n', {}, ValueError,
     r"train\.jsonl, line 2: no key 'text' \(`text_column`\); this object's keys are "
     r"\['txt', 'label'\]"),
    ("train.tsv", b"text\tlabel\na\tx\nb\xe9\ty\n", {}, ValueError,
     r"train\.tsv, line 3: not valid UTF-8 at byte offset 16 \(b'\\xe9'"),
    ("train.tsv", b"\xef\xbb\xbftext\tlabel\n\xff\tx\n", {}, ValueError,
     r"line 2: not valid UTF-8 at byte offset 14"),
    ("data.txt", "text\tlabel\na\tx\n", {}, ValueError,
     r"Cannot tell the format of `path` .*data\.txt.* from its extension '\.txt'"),
    ("train.tsv", "text\tlabel\na\tx\n", {"format": "xml"}, ValueError,
     r"`format` must be 'tsv', 'csv', 'jsonl' or None, got 'xml'"),
    ("train.tsv", "text\tlabel\na\tx\n", {"label_column": "text"}, ValueError,
     r"`text_column` and `label_column` are both 'text'"),
    ("train.tsv", "text\tlabel\na\tx\n", {"text_pair_column": "label"}, ValueError,
     r"`label_column` and `text_pair_column` are both 'label'"),
    ("train.tsv", "text\tlabel\na\tx\n", {"text_column": ""}, TypeError,
     r"`text_column` must be a non-empty str"),
    ("train.tsv", "text\tlabel\na\tx\n", {"label_names": ["x"]}, ValueError,
     r"`label_names` must hold at least 2 labels"),
    ("train.tsv", "text\tlabel\na\tx\n", {"label_names": ["x", "x", "y"]}, ValueError,
     r"`label_names` has duplicated labels: \['x'\]"),
    ("train.tsv", "text\tlabel\na\tx\n", {"label_names": "xy"}, TypeError,
     r"`label_names` must be a list of str"),
    ("train.tsv", "text\tlabel\na\tx\n", {"label_names": [0, 1]}, TypeError,
     r"`label_names` must hold non-empty strings, got 0"),
]


@pytest.mark.parametrize("name,content,kwargs,error,pattern", TSV_ERRORS,
                         ids=[f"{i}-{case[0]}" for i, case in enumerate(TSV_ERRORS)])
def test_errors_name_the_file_the_line_and_the_column(tmp_path, name, content, kwargs, error, pattern):
    path = write(tmp_path, name, content)
    arguments = dict({"text_column": "text", "label_column": "label"}, **kwargs)
    with pytest.raises(error) as info:
        read_labelled(path, **arguments)
    assert type(info.value) is error
    assert re.search(pattern, str(info.value)), str(info.value)
    if not str(info.value).startswith(("`", "Cannot")):  # about the file's content
        assert str(info.value).startswith(path)


def test_a_missing_file_or_a_directory_names_path(tmp_path):
    missing = str(tmp_path / "nope.tsv")
    with pytest.raises(FileNotFoundError, match=r"`path` '.*nope\.tsv' does not exist"):
        read_labelled(missing, "text", "label")
    (tmp_path / "folder.csv").mkdir()
    with pytest.raises(ValueError, match=r"`path` '.*folder\.csv' is a directory"):
        read_labelled(str(tmp_path / "folder.csv"), "text", "label")
    with pytest.raises(TypeError, match="`path` must be a str or path-like, got int"):
        read_labelled(3, "text", "label")


# --- as_dataset ---


def test_as_dataset_gives_text_label_elements(tmp_path):
    path = write(tmp_path, "train.tsv", "text\tlabel\nCafé 🐱\tb\nb\ta\n")
    dataset = read_labelled(path, "text", "label").as_dataset()
    assert dataset.element_spec == (tf.TensorSpec([], tf.string), tf.TensorSpec([], tf.int32))
    assert [(t.decode(), y) for t, y in dataset.as_numpy_iterator()] == [("Café 🐱", 1), ("b", 0)]
    assert dataset.options().autotune.enabled is False
    assert int(dataset.cardinality()) == 2


def test_as_dataset_gives_pairs(tmp_path):
    path = write_jsonl(tmp_path, "nli.jsonl", [{"a": "x", "b": "y", "l": "e"}, {"a": "z", "b": "w", "l": "c"}])
    dataset = read_labelled(path, "a", "l", text_pair_column="b").as_dataset()
    string = tf.TensorSpec([], tf.string)
    assert dataset.element_spec == ((string, string), tf.TensorSpec([], tf.int32))
    (a, b), label = next(dataset.as_numpy_iterator())
    assert (a, b, label) == (b"x", b"y", 1)


def test_as_dataset_feeds_classification_dataset(tmp_path):
    path = write(tmp_path, "train.tsv", "text\tlabel\nthe cat\tb\na dog\ta\n")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat"]
    preprocessor = data.BertPreprocessor(data.WordPieceTokenizer(vocab), 8)
    batches = data.classification_dataset(read_labelled(path, "text", "label").as_dataset(),
                                          preprocessor, batch_size=2)
    inputs, labels = next(iter(batches))
    assert inputs["token_ids"].numpy().tolist()[0] == [2, 5, 6, 3, 0, 0, 0, 0]
    assert labels.numpy().tolist() == [1, 0]


# --- suggest_sequence_length ---

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "##c"]


@pytest.fixture(scope="module")
def tokenizer():
    return data.WordPieceTokenizer(VOCAB)


def texts_of(lengths):
    return [" ".join(["a"] * n) for n in lengths]


def test_sequence_length_from_known_token_counts(tokenizer):
    # 100 texts of 1..100 tokens ("bc" is 2 tokens: b ##c): lengths 3..102 with [CLS], [SEP].
    texts = ["bc " + " ".join(["a"] * (n - 2)) if n >= 2 else "a" for n in range(1, 101)]
    result = suggest_sequence_length(tokenizer, texts)
    assert result["percentiles"] == {50: 53, 90: 93, 95: 98, 99: 102, 100: 102}
    assert result["sequence_length"] == 104
    assert result["bucket_boundaries"] == [56, 80]  # 53 -> 56, 78 -> 80
    assert json.loads(json.dumps(result, default=None)) == {  # plain ints, JSON-ready
        "sequence_length": 104, "bucket_boundaries": [56, 80],
        "percentiles": {"50": 53, "90": 93, "95": 98, "99": 102, "100": 102},
    }


def test_pairs_count_three_special_tokens(tokenizer):
    result = suggest_sequence_length(tokenizer, texts_of([4] * 5), text_pairs=texts_of([6] * 5),
                                     multiple_of=1)
    assert result["percentiles"][100] == 13 and result["sequence_length"] == 13
    assert result["bucket_boundaries"] == []  # 13 is not strictly below 13


def test_sequence_length_is_clipped_to_8_and_max_length(tokenizer):
    assert suggest_sequence_length(tokenizer, ["a", "b"])["sequence_length"] == 8
    long = suggest_sequence_length(tokenizer, texts_of([100, 300]), max_length=128, percentile=100)
    assert long["sequence_length"] == 128 and long["percentiles"][100] == 302
    assert long["bucket_boundaries"] == []  # both percentiles are over 128
    assert suggest_sequence_length(tokenizer, texts_of([5, 5, 30]), multiple_of=16,
                                   percentile=50)["sequence_length"] == 16


def test_token_counts_over_several_chunks(tokenizer):
    lengths = [i % 7 for i in range(2500)]  # more than two chunks of 1024; empty texts count 2
    result = suggest_sequence_length(tokenizer, texts_of(lengths), multiple_of=1)
    assert result["percentiles"][100] == 8 and result["percentiles"][50] == 5


@pytest.mark.parametrize(
    "kwargs,error,pattern",
    [
        ({"texts": []}, ValueError, r"`texts` must not be empty"),
        ({"texts": "a b"}, TypeError, r"`texts` must be a list of str"),
        ({"texts": ["a", 3]}, TypeError, r"`texts\[1\]` must be a str"),
        ({"text_pairs": ["a"]}, ValueError, r"`text_pairs` must be as long as `texts` \(2\), got 1"),
        ({"percentile": 0}, ValueError, r"`percentile` must be a number in \(0, 100\]"),
        ({"percentile": 101}, ValueError, r"`percentile`"),
        ({"multiple_of": 0}, ValueError, r"`multiple_of` must be a positive int"),
        ({"max_length": 4}, ValueError, r"`max_length` must be at least 8"),
        ({"tokenizer": "vocab.txt"}, TypeError, r"`tokenizer` must be callable"),
    ],
)
def test_suggest_sequence_length_checks_its_arguments(tokenizer, kwargs, error, pattern):
    arguments = dict({"tokenizer": tokenizer, "texts": ["a", "a b"]}, **kwargs)
    with pytest.raises(error, match=pattern):
        suggest_sequence_length(**arguments)


def test_reexported_from_tfnlp_data():
    assert data.read_labelled is read_labelled
    assert data.suggest_sequence_length is suggest_sequence_length
    assert data.LabelledData is LabelledData
