"""A user's labelled text file (TSV, CSV or JSONL) read for classification.

Plain Python (`csv`, `json`) and NumPy: TensorFlow is imported only by
`LabelledData.as_dataset` and `suggest_sequence_length`, when they are called.
"""

import codecs
import csv
import dataclasses
import io
import json
import numbers
import os
import re

import numpy as np

from tfnlp import _checks

_FORMATS = ("tsv", "csv", "jsonl")
_EXTENSIONS = {".tsv": "tsv", ".csv": "csv", ".jsonl": "jsonl", ".json": "jsonl"}
_INTEGER = re.compile(r"[+-]?[0-9]+")
_FIELD_SIZE_LIMIT = 2**31 - 1  # the largest value csv accepts on every platform
_SHOWN = 5  # unseen labels listed in an error


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class LabelledData:
    """The examples of one labelled file, as `read_labelled` returns them.

    Args:
        texts: list of `str`, one per example.
        text_pairs: list of `str` (the second text of each pair), or None.
        labels: int32 NumPy array of class ids, indices into `label_names`
            (read-only).
        label_names: list of `str`, the label vocabulary; id `i` is
            `label_names[i]`.
        path: `str`, the file read.

    Returns:
        `x` is `texts`, or `(texts, text_pairs)` for pairs: what a text
        classifier's `fit` and `predict` take. `len()` is the number of
        examples, and `as_dataset()` gives them as a `tf.data.Dataset`.

    Example:

    >>> data = LabelledData(["good", "bad"], None, np.array([1, 0], np.int32),
    ...                     ["neg", "pos"], "reviews.tsv")
    >>> len(data), data.x, data
    (2, ['good', 'bad'], LabelledData(path='reviews.tsv', examples=2, label_names=['neg', 'pos']))
    """

    texts: list
    text_pairs: list | None
    labels: np.ndarray
    label_names: list
    path: str

    def __post_init__(self):
        labels = np.array(self.labels, dtype=np.int32)  # a copy, so read-only does not leak
        labels.setflags(write=False)
        object.__setattr__(self, "labels", labels)
        if labels.ndim != 1 or len(labels) != len(self.texts):
            raise ValueError(
                f"`labels` must be 1-D with one id per text ({len(self.texts)}), "
                f"got shape {labels.shape}."
            )
        if self.text_pairs is not None and len(self.text_pairs) != len(self.texts):
            raise ValueError(
                f"`text_pairs` has {len(self.text_pairs)} texts, `texts` has {len(self.texts)}."
            )
        if len(labels) and (labels.min() < 0 or labels.max() >= len(self.label_names)):
            raise ValueError(f"`labels` must be in [0, {len(self.label_names)}) (`label_names`).")

    @property
    def x(self):
        """`texts`, or `(texts, text_pairs)` when the file has text pairs."""
        return self.texts if self.text_pairs is None else (self.texts, self.text_pairs)

    def __len__(self):
        return len(self.texts)

    def __repr__(self):
        pairs = ", pairs=True" if self.text_pairs is not None else ""
        return (
            f"LabelledData(path={self.path!r}, examples={len(self)}{pairs}, "
            f"label_names={self.label_names!r})"
        )

    def as_dataset(self):
        """The examples as a `tf.data.Dataset`, in file order, unbatched.

        Elements are `(text, label)`, or `((text_a, text_b), label)` for
        pairs: `tf.string` scalars and an `int32` scalar, the input
        `tfnlp.data.classification_dataset` takes. Autotuning is off, as for
        every tfnlp pipeline (`tfnlp.data.static_tuning`).

        Returns:
            `tf.data.Dataset` of `len(self)` elements.
        """
        import tensorflow as tf

        from tfnlp.data.tuning import static_tuning

        texts = tf.constant(self.texts, tf.string)
        x = texts if self.text_pairs is None else (texts, tf.constant(self.text_pairs, tf.string))
        labels = tf.constant(self.labels, tf.int32)
        return static_tuning(tf.data.Dataset.from_tensor_slices((x, labels)))


def read_labelled(path, text_column, label_column, text_pair_column=None, label_names=None,
                  format=None):
    """Reads a labelled TSV, CSV or JSONL file into texts and class ids.

    TSV and CSV: the first row is the header and columns are picked by name.
    Both follow Python's `csv` rules (delimiter tab or comma): a field that
    starts with a double quote is a quoted field, which may hold the
    delimiter, newlines and doubled quotes (`""`); a quote inside an
    unquoted field is kept as it is. A field that starts with a quote but is
    not a well-formed quoted field is an error, not silently re-read. Blank
    lines are skipped. JSONL: one JSON object per line, blank lines skipped;
    texts must be JSON strings.

    The file must be UTF-8 (a byte-order mark at its start is allowed).
    Texts are kept exactly as written, except that one trailing `"\\r"` is
    removed from a TSV/CSV field (left by mixed line endings). An empty or
    whitespace-only text is an error.

    Labels are read as strings (a JSON number or boolean becomes `str` of
    it: `3` gives "3"). Without `label_names`, the label vocabulary is this
    file's distinct labels, sorted as integers when all of them are integer
    literals ("2" before "10"), else as strings; it must hold at least 2
    labels. For validation and test files pass the training file's
    `label_names`, so ids agree; a label outside them is an error.

    Args:
        path: `str` or path-like, the file.
        text_column: `str`, the column (JSON key) of the texts.
        label_column: `str`, the column (JSON key) of the labels.
        text_pair_column: optional `str`, the column of second texts, for
            text-pair classification.
        label_names: optional list of `str`, the label vocabulary to use
            (e.g. `train.label_names`).
        format: "tsv", "csv" or "jsonl"; None infers it from the extension
            (`.tsv`, `.csv`, `.jsonl`, `.json`).

    Returns:
        A `LabelledData`: `texts`, `text_pairs` (or None), `labels` (int32
        ids), `label_names`, `path`, and `x` for a classifier's `fit`.

    Raises:
        FileNotFoundError: `path` does not exist.
        TypeError: an argument of the wrong type.
        ValueError: the file cannot be read as asked; the message names the
            file, the line and the column or argument at fault.

    Example:

    >>> import os, shutil, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> path = os.path.join(folder, "train.tsv")
    >>> with open(path, "w", encoding="utf-8") as f:
    ...     _ = f.write("review\\tstars\\nA fine film\\t10\\nDull\\t2\\nCafé, 好\\t10\\n")
    >>> train = read_labelled(path, "review", "stars")
    >>> train.label_names, train.labels.tolist(), train.x
    (['2', '10'], [1, 0, 1], ['A fine film', 'Dull', 'Café, 好'])
    >>> [(t.numpy().decode(), int(y)) for t, y in train.as_dataset().take(1)]
    [('A fine film', 1)]
    >>> shutil.rmtree(folder)
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"`path` must be a str or path-like, got {type(path).__name__}.")
    path = os.fspath(path)
    if not isinstance(path, str):
        raise TypeError(f"`path` must be a str or path-like, got bytes {path!r}.")
    columns = {"text_column": text_column, "label_column": label_column}
    if text_pair_column is not None:
        columns["text_pair_column"] = text_pair_column
    for argument, name in columns.items():
        if not isinstance(name, str) or not name:
            raise TypeError(f"`{argument}` must be a non-empty str, got {name!r}.")
    arguments = list(columns)
    for i, first in enumerate(arguments):
        for second in arguments[i + 1:]:
            if columns[first] == columns[second]:
                raise ValueError(
                    f"`{first}` and `{second}` are both {columns[first]!r}; "
                    "each must name a different column."
                )
    label_names = _checked_label_names(label_names)
    texts, pairs, labels, lines = _read_examples(path, columns, format)

    if label_names is None:
        label_names = _sorted_labels(set(labels))
        if len(label_names) < 2:
            raise ValueError(
                f"{path}: every example has the label {label_names[0]!r} (column "
                f"{label_column!r}, `label_column`); a classifier needs at least 2 distinct "
                "labels. To read a file of one class, pass the training file's `label_names`."
            )
    else:
        known = set(label_names)
        unseen = {}
        for label, line in zip(labels, lines, strict=True):
            if label not in known and label not in unseen:
                unseen[label] = line
        if unseen:
            shown = list(unseen)[:_SHOWN]
            more = f" and {len(unseen) - _SHOWN} more" if len(unseen) > _SHOWN else ""
            raise ValueError(
                f"{path}: labels in column {label_column!r} (`label_column`) that are not in "
                f"`label_names`: {shown}{more} (first at line {unseen[shown[0]]}); the known "
                f"labels are {label_names}."
            )
    index = {name: i for i, name in enumerate(label_names)}
    ids = np.array([index[label] for label in labels], dtype=np.int32)
    return LabelledData(
        texts=texts,
        text_pairs=pairs if text_pair_column is not None else None,
        labels=ids,
        label_names=list(label_names),
        path=path,
    )


def read_texts(path, text_column, text_pair_column=None, format=None):
    """The texts of a TSV, CSV or JSONL file (no labels needed): to predict, or to pretrain on.

    Read as by `read_labelled`, with the same checks on the file, its
    columns and its texts.

    Args:
        path: str, a `.tsv`, `.csv`, `.jsonl` or `.json` file (or any name,
            with `format`).
        text_column: str, the column (JSONL key) of the texts.
        text_pair_column: optional str, the column of the second texts.
        format: None (from the extension), `"tsv"`, `"csv"` or `"jsonl"`.

    Returns:
        A list of texts, or `(texts, text_pairs)` with `text_pair_column`.

    Example:

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "new.jsonl")
    >>> with open(path, "w", encoding="utf-8") as f:
    ...     _ = f.write('{"text": "Great value"}\\n{"text": "Stale"}\\n')
    >>> read_texts(path, text_column="text")
    ['Great value', 'Stale']
    """
    columns = {"text_column": text_column}
    if text_pair_column is not None:
        columns["text_pair_column"] = text_pair_column
    for argument, name in columns.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"`{argument}` must be a non-empty column name, got {name!r}.")
    if text_pair_column == text_column:
        raise ValueError(
            f"`text_column` and `text_pair_column` are both {text_column!r}; each must name a "
            "different column."
        )
    texts, pairs, _, _ = _read_examples(path, columns, format)
    return texts if text_pair_column is None else (texts, pairs)


def suggest_sequence_length(tokenizer, texts, text_pairs=None, percentile=95, multiple_of=8,
                            max_length=512):
    """A `sequence_length` and bucket boundaries from the texts' token counts.

    Each example's length is its WordPiece token count plus the special
    tokens a `BertPreprocessor` adds: 2 for one text (`[CLS] A [SEP]`), 3 for
    a pair (`[CLS] A [SEP] B [SEP]`). Percentiles are observed lengths
    (NumPy's `method="higher"`), so at least `percentile`% of the examples
    are no longer than the `percentile`-th percentile.

    `sequence_length` is the `percentile`-th percentile rounded up to a
    multiple of `multiple_of` (dense shapes that suit accelerators), then
    clipped to `[8, max_length]`; longer examples are truncated by the
    preprocessor. `bucket_boundaries` are the 50th and 75th percentiles,
    rounded up the same way, without duplicates and kept only when strictly
    between 0 and `sequence_length` (possibly none): pass them to
    `classification_dataset(..., bucket_boundaries=...)` so batches of short
    texts are padded to a short length.

    Args:
        tokenizer: a `tfnlp.data.WordPieceTokenizer` (any callable mapping a
            `tf.string` vector to a `tf.RaggedTensor` of tokens).
        texts: non-empty list of `str`, e.g. `LabelledData.texts`.
        text_pairs: optional list of `str`, the second texts, as long as
            `texts`.
        percentile: number in (0, 100], the share of examples that should
            fit without truncation.
        multiple_of: positive int, the rounding unit.
        max_length: int >= 8, the longest `sequence_length` suggested (the
            backbone's position limit, 512 for BERT).

    Returns:
        A dict `{"sequence_length": int, "bucket_boundaries": [int, ...],
        "percentiles": {50: int, 90: int, 95: int, 99: int, 100: int}}`,
        lengths in tokens including the special tokens.

    Example:

    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"]
    >>> tokenizer = tfnlp.data.WordPieceTokenizer(vocab)
    >>> texts = ["a"] * 11 + ["a b " * 10] * 9  # 3 and 22 tokens with [CLS], [SEP]
    >>> suggest_sequence_length(tokenizer, texts)
    {'sequence_length': 24, 'bucket_boundaries': [8],
     'percentiles': {50: 3, 90: 22, 95: 22, 99: 22, 100: 22}}
    """
    import tensorflow as tf

    if not callable(tokenizer):
        raise TypeError(f"`tokenizer` must be callable (a WordPieceTokenizer), got {tokenizer!r}.")
    texts = _checked_texts("texts", texts)
    if text_pairs is not None:
        text_pairs = _checked_texts("text_pairs", text_pairs)
        if len(text_pairs) != len(texts):
            raise ValueError(
                f"`text_pairs` must be as long as `texts` ({len(texts)}), got {len(text_pairs)}."
            )
    if (not isinstance(percentile, numbers.Real) or isinstance(percentile, bool)
            or not 0 < percentile <= 100):
        raise ValueError(f"`percentile` must be a number in (0, 100], got {percentile!r}.")
    multiple_of = _checks.positive_int("multiple_of", multiple_of)
    max_length = _checks.positive_int("max_length", max_length)
    if max_length < 8:
        raise ValueError(f"`max_length` must be at least 8, got {max_length}.")

    def counts(strings):
        chunks = []
        for start in range(0, len(strings), 1024):
            tokens = tokenizer(tf.constant(strings[start:start + 1024], tf.string))
            if not hasattr(tokens, "row_lengths"):
                raise TypeError(
                    f"`tokenizer` must return a tf.RaggedTensor, got {type(tokens).__name__}."
                )
            chunks.append(np.asarray(tokens.row_lengths(), dtype=np.int64))
        return np.concatenate(chunks)

    lengths = counts(texts) + 2
    if text_pairs is not None:
        lengths += counts(text_pairs) + 1

    def at(q):
        return int(np.percentile(lengths, q, method="higher"))

    def rounded(value):
        return -(-value // multiple_of) * multiple_of

    sequence_length = min(max(rounded(at(percentile)), 8), max_length)
    boundaries = sorted({rounded(at(q)) for q in (50, 75)})
    return {
        "sequence_length": sequence_length,
        "bucket_boundaries": [b for b in boundaries if 0 < b < sequence_length],
        "percentiles": {q: at(q) for q in (50, 90, 95, 99, 100)},
    }


def _read_examples(path, columns, format):
    """`_examples` of the file at `path` (its format from `format` or the extension), checked."""
    format = _format(path, format)
    if not os.path.exists(path):
        raise FileNotFoundError(f"`path` {path!r} does not exist.")
    if os.path.isdir(path):
        raise ValueError(f"`path` {path!r} is a directory, not a file.")
    text = _read_utf8(path)
    limit = csv.field_size_limit(_FIELD_SIZE_LIMIT)  # long texts; restored below
    try:
        return _examples(path, text, columns, format)
    finally:
        csv.field_size_limit(limit)


def _examples(path, text, columns, format):
    """Lists `(texts, pairs, labels, lines)` of a file's text, checking each row."""
    if format == "jsonl":
        rows = _jsonl_rows(path, text, columns)
    else:
        rows = _table_rows(path, text, columns, "\t" if format == "tsv" else ",", format.upper())
    texts, pairs, labels, lines = [], [], [], []
    for line, row in rows:
        for argument in columns:
            value = row[argument]
            if argument != "label_column" and not value.strip():
                raise ValueError(
                    f"{path}, line {line}: the text in column {columns[argument]!r} "
                    f"(`{argument}`) is empty."
                )
        if "label_column" in columns and not row["label_column"].strip():
            raise ValueError(
                f"{path}, line {line}: the label in column {columns['label_column']!r} "
                "(`label_column`) "
                "is empty."
            )
        texts.append(row["text_column"])
        pairs.append(row.get("text_pair_column"))
        labels.append(row.get("label_column"))
        lines.append(line)
    return texts, pairs, labels, lines


def _format(path, format):
    if format is not None:
        if not isinstance(format, str) or format.lower() not in _FORMATS:
            raise ValueError(f"`format` must be 'tsv', 'csv', 'jsonl' or None, got {format!r}.")
        return format.lower()
    extension = os.path.splitext(path)[1].lower()
    if extension not in _EXTENSIONS:
        raise ValueError(
            f"Cannot tell the format of `path` {path!r} from its extension {extension!r} "
            "(known: .tsv, .csv, .jsonl, .json); pass `format` ('tsv', 'csv' or 'jsonl')."
        )
    return _EXTENSIONS[extension]


def _checked_label_names(label_names):
    if label_names is None:
        return None
    if isinstance(label_names, (str, bytes)) or not hasattr(label_names, "__iter__"):
        raise TypeError(f"`label_names` must be a list of str, got {type(label_names).__name__}.")
    label_names = list(label_names)
    for name in label_names:
        if not isinstance(name, str) or not name.strip():
            raise TypeError(f"`label_names` must hold non-empty strings, got {name!r}.")
    if len(set(label_names)) != len(label_names):
        duplicated = sorted({n for n in label_names if label_names.count(n) > 1})
        raise ValueError(f"`label_names` has duplicated labels: {duplicated}.")
    if len(label_names) < 2:
        raise ValueError(f"`label_names` must hold at least 2 labels, got {label_names}.")
    return label_names


def _read_utf8(path):
    with open(path, "rb") as f:
        return decode_utf8(path, f.read())


def decode_utf8(path, data):
    """The text of file `path`'s bytes `data` (a leading byte-order mark skipped), or a
    ValueError naming the file, the line and the byte that is not UTF-8."""
    skipped = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        return data[skipped:].decode("utf-8")
    except UnicodeDecodeError as e:
        offset = skipped + e.start
        line = data.count(b"\n", 0, offset) + 1
        raise ValueError(
            f"{path}, line {line}: not valid UTF-8 at byte offset {offset} "
            f"({data[offset:offset + 1]!r}: {e.reason}). Save `path` as UTF-8."
        ) from None


def _table_rows(path, text, columns, delimiter, kind):
    """Yields `(line, {argument: value})` for each row of a TSV/CSV text."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)

    def records():
        while True:
            start = reader.line_num + 1
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as e:
                raise ValueError(
                    f"{path}, line {start}: cannot parse this {kind} record ({e}). A field "
                    "that starts with a double quote is read as a quoted field: quote the "
                    'whole field and double the quotes inside it ("" for ").'
                ) from None
            if row:  # a blank line gives []
                yield start, row

    rows = records()
    first = next(rows, None)
    if first is None:
        raise ValueError(f"{path}: the file is empty; it needs a header row and example rows.")
    header = first[1]
    positions = {}
    for argument, name in columns.items():
        if name not in header:
            raise ValueError(
                f"{path}: no column {name!r} (`{argument}`); the file's columns are {header}."
            )
        if header.count(name) > 1:
            raise ValueError(
                f"{path}: the header has {header.count(name)} columns named {name!r} "
                f"(`{argument}`); rename the duplicates."
            )
        positions[argument] = header.index(name)
    width = len(header)
    count = 0
    for line, row in rows:
        if len(row) != width:
            raise ValueError(
                f"{path}, line {line}: {len(row)} fields, but the header (line {first[0]}) "
                f"has {width}: {header}. A field that holds the delimiter "
                f"({delimiter!r}) or a newline must be quoted."
            )
        count += 1
        yield line, {a: _without_cr(row[i]) for a, i in positions.items()}
    if count == 0:
        raise ValueError(f"{path}: the file has a header but no example rows.")


def _without_cr(value):
    return value[:-1] if value.endswith("\r") else value


def _jsonl_rows(path, text, columns):
    """Yields `(line, {argument: value})` for each non-blank line of a JSONL text."""
    seen = False
    for line, raw in enumerate(text.split("\n"), 1):
        if not raw.strip():
            continue
        seen = True
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as e:
            raise ValueError(
                f"{path}, line {line}: not a JSON object ({e.msg} at column {e.colno})."
            ) from None
        if not isinstance(record, dict):
            raise ValueError(
                f"{path}, line {line}: not a JSON object (a JSON {_json_type(record)})."
            )
        row = {}
        for argument, name in columns.items():
            if name not in record:
                raise ValueError(
                    f"{path}, line {line}: no key {name!r} (`{argument}`); this object's keys "
                    f"are {list(record)}."
                )
            value = record[name]
            if argument == "label_column":
                if value is None:
                    raise ValueError(
                        f"{path}, line {line}: the label in key {name!r} (`label_column`) is "
                        "missing (null)."
                    )
                if not isinstance(value, (str, int, float, bool)):
                    raise ValueError(
                        f"{path}, line {line}: the label in key {name!r} (`label_column`) must "
                        f"be a JSON string, number or boolean, got a JSON {_json_type(value)}."
                    )
                value = str(value)
            elif not isinstance(value, str):
                raise ValueError(
                    f"{path}, line {line}: the text in key {name!r} (`{argument}`) must be a "
                    f"JSON string, got a JSON {_json_type(value)}: {str(value)[:40]!r}."
                )
            row[argument] = value
        yield line, row
    if not seen:
        raise ValueError(f"{path}: the file is empty; it needs one JSON object per line.")


def _json_type(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object"}[type(value)]


def _sorted_labels(labels):
    if all(_INTEGER.fullmatch(label) for label in labels):
        return sorted(labels, key=lambda label: (int(label), label))
    return sorted(labels)


def _checked_texts(name, texts):
    if isinstance(texts, (str, bytes)):
        raise TypeError(f"`{name}` must be a list of str, got a single {type(texts).__name__}.")
    texts = list(texts)
    if not texts:
        raise ValueError(f"`{name}` must not be empty.")
    for i, text in enumerate(texts):
        if not isinstance(text, (str, bytes)):
            raise TypeError(f"`{name}[{i}]` must be a str, got {type(text).__name__}.")
    return texts

