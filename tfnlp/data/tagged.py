"""A user's tagged files (CoNLL-U, CoNLL/IOB2 token-per-line) read for sequence tagging.

Plain Python and NumPy: TensorFlow is imported only by `TaggedData.as_dataset`,
when it is called. A file is read whole before anything is returned, so a
malformed line fails the read (naming the file and the line) instead of giving
half a corpus.
"""

import dataclasses
import gzip
import os
import re
import zlib

import numpy as np

from tfnlp.data.labelled import decode_utf8

CONLLU_COLUMNS = ("id", "form", "lemma", "upos", "xpos", "feats", "head", "deprel", "deps", "misc")
DOCUMENT_START = "-DOCSTART-"
_KEY_VALUE_COMMENT = re.compile(r"# *[^\s=]+ *=")
_WORD_ID = re.compile(r"[1-9][0-9]*")
_MULTIWORD_ID = re.compile(r"[1-9][0-9]*-[1-9][0-9]*")
_EMPTY_NODE_ID = re.compile(r"[0-9]+\.[1-9][0-9]*")
_SHOWN = 5  # unknown tags listed in an error


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class TaggedData:
    """The sentences of one tagged file, as `read_conllu` and `read_conll` return them.

    Args:
        words: list of sentences, each a list of `str` words (the file's
            tokens, as written).
        tags: list of sentences, each a list of `str` tags, one per word; or
            None when the file was read without tags.
        tag_names: list of `str`, the tag vocabulary; id `i` is
            `tag_names[i]` (empty when `tags` is None).
        path: `str`, the file read.
        sentence_ids: list of `str` or None per sentence, from the
            sentence's `# sent_id = ...` comment.
        texts: list of `str` or None per sentence, from the sentence's
            `# text = ...` comment (CoNLL-U's raw sentence text).

    Returns:
        `x` is `words` and `y` is `tags`: what a tagger's `fit` takes.
        `len()` is the number of sentences, `num_words` the number of words,
        `tag_ids` the tags as int32 ids into `tag_names`, and `as_dataset()`
        gives the sentences as a `tf.data.Dataset`.

    Example:

    >>> data = TaggedData([["Ada", "wrote"], ["Hi"]], [["PROPN", "VERB"], ["INTJ"]],
    ...                   ["INTJ", "PROPN", "VERB"], "train.conllu")
    >>> len(data), data.num_words, [ids.tolist() for ids in data.tag_ids]
    (2, 3, [[1, 2], [0]])
    >>> data
    TaggedData(path='train.conllu', sentences=2, words=3, tag_names=['INTJ', 'PROPN', 'VERB'])
    """

    words: list
    tags: list | None
    tag_names: list
    path: str
    sentence_ids: list | None = None
    texts: list | None = None

    def __post_init__(self):
        count = len(self.words)
        for name in ("sentence_ids", "texts"):
            value = getattr(self, name)
            if value is None:
                object.__setattr__(self, name, [None] * count)
            elif len(value) != count:
                raise ValueError(f"`{name}` has {len(value)} entries, `words` has {count} sentences.")
        if self.tags is None:
            return
        if len(self.tags) != count:
            raise ValueError(f"`tags` has {len(self.tags)} sentences, `words` has {count}.")
        for i, (words, tags) in enumerate(zip(self.words, self.tags, strict=True)):
            if len(words) != len(tags):
                raise ValueError(f"Sentence {i} has {len(words)} words but {len(tags)} tags.")
        known = set(self.tag_names)
        unknown = sorted({tag for tags in self.tags for tag in tags if tag not in known})
        if unknown:
            raise ValueError(f"Tags not in `tag_names`: {unknown[:_SHOWN]}.")

    @property
    def x(self):
        """The words: a tagger's `fit`/`predict` input."""
        return self.words

    @property
    def y(self):
        """The tags, one list of `str` per sentence (None when read without tags)."""
        return self.tags

    @property
    def num_words(self):
        """The number of words in all sentences."""
        return sum(len(words) for words in self.words)

    @property
    def tag_ids(self):
        """The tags as ids into `tag_names`: one int32 NumPy array per sentence."""
        if self.tags is None:
            raise ValueError(f"{self.path} was read without tags (`tag_column=None`).")
        index = {name: i for i, name in enumerate(self.tag_names)}
        return [np.array([index[tag] for tag in tags], np.int32) for tags in self.tags]

    def __len__(self):
        return len(self.words)

    def __repr__(self):
        return (
            f"TaggedData(path={self.path!r}, sentences={len(self)}, words={self.num_words}, "
            f"tag_names={self.tag_names!r})"
        )

    def as_dataset(self):
        """The sentences as a `tf.data.Dataset`, in file order, unbatched.

        Elements are `(words, tag_ids)`: a `tf.string` vector `(W,)` and an
        `int32` vector `(W,)`; or `words` alone when the file was read
        without tags. Autotuning is off, as for every tfnlp pipeline.

        Returns:
            `tf.data.Dataset` of `len(self)` elements.
        """
        import tensorflow as tf

        from tfnlp.data.tuning import static_tuning

        lengths = [len(words) for words in self.words]
        words = tf.RaggedTensor.from_row_lengths(
            tf.constant([w for sentence in self.words for w in sentence], tf.string, shape=[sum(lengths)]),
            tf.constant(lengths, tf.int64))
        if self.tags is None:
            return static_tuning(tf.data.Dataset.from_tensor_slices(words))
        ids = np.concatenate(self.tag_ids + [np.zeros([0], np.int32)])
        tags = tf.RaggedTensor.from_row_lengths(tf.constant(ids, tf.int32), tf.constant(lengths, tf.int64))
        return static_tuning(tf.data.Dataset.from_tensor_slices((words, tags)))


def read_conllu(path, tag_column="upos", tag_names=None):
    """Reads a CoNLL-U file (Universal Dependencies) into words and tags.

    Each word line has CoNLL-U's ten tab-separated fields (`ID FORM LEMMA
    UPOS XPOS FEATS HEAD DEPREL DEPS MISC`); the words are the FORMs of the
    syntactic words, whose IDs count 1, 2, ... in each sentence. A multiword
    token's range line (`1-2 don't ...`) and empty nodes (`8.1`) are skipped:
    the words they cover follow as lines of their own, and those are what is
    tagged. Comment lines (`# ...`) are kept only for `# sent_id = ` and
    `# text = `; a blank line ends a sentence (the last one may lack it).

    The file must be UTF-8 (a byte-order mark is allowed); a name ending in
    `.gz` is decompressed. Without `tag_names` the tag vocabulary is the
    file's distinct tags, sorted (`"O"` first when present); for validation
    and test files pass the training file's `tag_names`, so ids agree; a tag
    outside them is an error.

    Args:
        path: `str` or path-like, the file.
        tag_column: the column of the tags: a name (`"upos"`, `"xpos"`,
            `"deprel"`, ... any of `CONLLU_COLUMNS`, any case) or its index
            (0-9); None reads the words alone (to predict).
        tag_names: optional list of `str`, the tag vocabulary to use.

    Returns:
        A `TaggedData`.

    Raises:
        FileNotFoundError: `path` does not exist.
        TypeError: an argument of the wrong type.
        ValueError: the file cannot be read as asked; the message names the
            file and the line.

    Example:

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "train.conllu")
    >>> rows = ["# sent_id = 1", "# text = I don't.",
    ...         "1\\tI\\tI\\tPRON\\tPRP\\t_\\t3\\tnsubj\\t_\\t_",
    ...         "2-3\\tdon't\\t_\\t_\\t_\\t_\\t_\\t_\\t_\\t_",
    ...         "2\\tdo\\tdo\\tAUX\\tVBP\\t_\\t3\\taux\\t_\\t_",
    ...         "3\\tn't\\tnot\\tPART\\tRB\\t_\\t0\\troot\\t_\\tSpaceAfter=No",
    ...         "4\\t.\\t.\\tPUNCT\\t.\\t_\\t3\\tpunct\\t_\\t_", ""]
    >>> with open(path, "w", encoding="utf-8") as f:
    ...     _ = f.write("\\n".join(rows))
    >>> data = read_conllu(path)
    >>> data.words, data.tags, data.tag_names, data.texts
    ([['I', 'do', "n't", '.']], [['PRON', 'AUX', 'PART', 'PUNCT']], ['AUX', 'PART', 'PRON', 'PUNCT'], ["I don't."])
    >>> read_conllu(path, tag_column="xpos").tags
    [['PRP', 'VBP', 'RB', '.']]
    """
    path = _checked_path(path)
    column = _conllu_column(tag_column)
    tag_names = _checked_tag_names(tag_names)
    text = _read_file(path)
    column_name = None if column is None else CONLLU_COLUMNS[column].upper()
    sentences = _Sentences(path, tag_names, column_name)
    for line_number, line in _lines(text):
        if not line.strip():
            sentences.end()
        elif line.startswith("#"):
            sentences.comment(line)
        else:
            fields = line.split("\t")
            if len(fields) != len(CONLLU_COLUMNS):
                raise ValueError(
                    f"{path}, line {line_number}: {len(fields)} tab-separated fields; a CoNLL-U word "
                    f"line has {len(CONLLU_COLUMNS)} (ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL "
                    "DEPS MISC). Spaces do not separate fields in CoNLL-U.")
            word_id = fields[0]
            if _MULTIWORD_ID.fullmatch(word_id) or _EMPTY_NODE_ID.fullmatch(word_id):
                continue
            if not _WORD_ID.fullmatch(word_id):
                raise ValueError(f"{path}, line {line_number}: the ID {word_id!r} is not a word ID "
                                 "(1, 2, ...), a multiword range (1-2) or an empty node (1.1).")
            if int(word_id) != sentences.size + 1:
                raise ValueError(
                    f"{path}, line {line_number}: word ID {word_id} where {sentences.size + 1} was "
                    "expected (IDs count 1, 2, ... in each sentence; is a blank line missing "
                    "between two sentences?).")
            tag = None if column is None else fields[column]
            if tag == "_" and column in (3, 4):  # elsewhere (FEATS, MISC, ...) "_" is a value
                raise ValueError(
                    f"{path}, line {line_number}: the {column_name} field is '_' (unspecified); "
                    f"this file has no {column_name} tags to learn: choose another `tag_column`.")
            sentences.add(line_number, fields[1], tag)
    return sentences.result()


def read_conll(path, word_column=0, tag_column=-1, tag_names=None, delimiter=None):
    """Reads a CoNLL/IOB2 token-per-line file (one word per line) into words and tags.

    One word per line with its fields (word, tags, ...); a blank line ends a
    sentence. This reads CoNLL-2000/2003 files, IOB2 entity files such as
    UniversalNER's (`index token tag ...`), and two-column `word<TAB>tag`
    files. Fields are split at tabs when the file's first word line has one,
    else at runs of spaces; every word line must have as many fields as the
    first. A line `-DOCSTART- ...` (a document boundary in CoNLL-2003) is
    skipped. Before a sentence's first word, a line that starts with `#` is
    a comment when it comes before the file's first word line, has a
    different number of fields than word lines, or reads `# key = value`
    (`# sent_id = ` and `# text = ` are kept); elsewhere (inside a sentence,
    or a token `#` with its tags) it is a word line.

    Tags are kept as written; IOB2 structure is not checked here (entity
    metrics and the CRF's constraints handle it). The file must be UTF-8 (a
    byte-order mark is allowed); a name ending in `.gz` is decompressed.
    Without `tag_names` the vocabulary is the file's distinct tags, sorted
    with `"O"` first when present; for validation and test files pass the
    training file's `tag_names`.

    Args:
        path: `str` or path-like, the file.
        word_column: int, the field of the words (negative counts from the
            end).
        tag_column: int, the field of the tags (default the last); None reads
            the words alone (to predict).
        tag_names: optional list of `str`, the tag vocabulary to use.
        delimiter: None (tab or spaces, see above), `"\\t"` or `" "`.

    Returns:
        A `TaggedData`.

    Raises:
        FileNotFoundError: `path` does not exist.
        TypeError: an argument of the wrong type.
        ValueError: the file cannot be read as asked; the message names the
            file and the line.

    Example:

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "train.iob2")
    >>> with open(path, "w", encoding="utf-8") as f:
    ...     _ = f.write("# sent_id = a-1\\n1\\tAda\\tB-PER\\n2\\tLovelace\\tI-PER\\n3\\twrote\\tO\\n\\n"
    ...                 "1\\tParis\\tB-LOC\\n")
    >>> data = read_conll(path, word_column=1, tag_column=2)
    >>> data.words, data.tags
    ([['Ada', 'Lovelace', 'wrote'], ['Paris']], [['B-PER', 'I-PER', 'O'], ['B-LOC']])
    >>> data.tag_names, data.sentence_ids
    (['O', 'B-LOC', 'B-PER', 'I-PER'], ['a-1', None])
    """
    path = _checked_path(path)
    word_column = _field_index("word_column", word_column)
    tag_column = None if tag_column is None else _field_index("tag_column", tag_column)
    if delimiter not in (None, "\t", " "):
        raise ValueError(f'`delimiter` must be None, "\\t" or " ", got {delimiter!r}.')
    tag_names = _checked_tag_names(tag_names)
    text = _read_file(path)
    sentences = _Sentences(path, tag_names, None if tag_column is None else "tag")
    width = None
    first_line = None
    for line_number, line in _lines(text):
        if not line.strip():
            sentences.end()
            continue
        if delimiter is None and width is None and not line.startswith("#"):
            delimiter = "\t" if "\t" in line else " "
        fields = _split(line, delimiter or ("\t" if "\t" in line else " "))
        if line.startswith("#") and sentences.size == 0 and (
                width is None or len(fields) != width or _KEY_VALUE_COMMENT.match(line)):
            sentences.comment(line)
            continue
        if width is None:
            width, first_line = len(fields), line_number
            for argument, index in (("word_column", word_column), ("tag_column", tag_column)):
                if index is not None and not -width <= index < width:
                    raise ValueError(
                        f"{path}, line {line_number}: `{argument}` is {index}, but word lines have "
                        f"{width} fields (delimiter {delimiter!r}).")
            if tag_column is not None and word_column % width == tag_column % width:
                raise ValueError(
                    f"`word_column` ({word_column}) and `tag_column` ({tag_column}) are the same "
                    f"field of {path}'s {width}.")
        elif len(fields) != width:
            raise ValueError(
                f"{path}, line {line_number}: {len(fields)} fields, but the first word line "
                f"(line {first_line}) has {width} (delimiter {delimiter!r}).")
        word = fields[word_column]
        if word == DOCUMENT_START:
            continue
        sentences.add(line_number, word, None if tag_column is None else fields[tag_column])
    return sentences.result()


class _Sentences:
    """Collects the sentences of one file, checking each word and tag as it comes."""

    def __init__(self, path, tag_names, column_name):
        self.path = path
        self.given_names = tag_names
        self.known = None if tag_names is None else set(tag_names)
        self.column_name = column_name
        self.words, self.tags, self.ids, self.texts = [], [], [], []
        self.first_lines = {}
        self._start()

    def _start(self):
        self.sentence_words, self.sentence_tags = [], []
        self.sentence_id = self.text = None

    @property
    def size(self):
        return len(self.sentence_words)

    def comment(self, line):
        key, equals, value = line[1:].partition("=")
        key = key.strip()
        if equals and key == "sent_id":
            self.sentence_id = value.strip()
        elif equals and key == "text":
            self.text = value.strip()

    def add(self, line_number, word, tag):
        if not word.strip():
            raise ValueError(f"{self.path}, line {line_number}: the word is empty.")
        self.sentence_words.append(word)
        if tag is None:
            return
        if not tag or tag != tag.strip():
            raise ValueError(
                f"{self.path}, line {line_number}: the {self.column_name} field {tag!r} is empty "
                "or has surrounding spaces.")
        if self.known is not None and tag not in self.known:
            shown = self.given_names[:20]
            more = f" ... ({len(self.given_names)} in all)" if len(self.given_names) > 20 else ""
            raise ValueError(
                f"{self.path}, line {line_number}: the tag {tag!r} is not in `tag_names` "
                f"{shown}{more}. Pass the training file's `tag_names`, or tag this word with one "
                "of them.")
        self.first_lines.setdefault(tag, line_number)
        self.sentence_tags.append(tag)

    def end(self):
        if self.sentence_words:
            self.words.append(self.sentence_words)
            self.tags.append(self.sentence_tags)
            self.ids.append(self.sentence_id)
            self.texts.append(self.text)
        self._start()

    def result(self):
        self.end()
        if not self.words:
            raise ValueError(f"{self.path}: the file has no word lines.")
        if self.column_name is None:  # read without tags
            return TaggedData(self.words, None, [], self.path, self.ids, self.texts)
        tag_names = self.given_names
        if tag_names is None:
            tag_names = _sorted_tags(self.first_lines)
            if len(tag_names) < 2:
                raise ValueError(
                    f"{self.path}: every word has the tag {tag_names[0]!r}; a tagger needs at least "
                    "2 distinct tags. To read a file of one tag, pass the training file's "
                    "`tag_names`.")
        return TaggedData(self.words, self.tags, list(tag_names), self.path, self.ids, self.texts)


def _lines(text):
    for number, line in enumerate(text.split("\n"), 1):
        yield number, line[:-1] if line.endswith("\r") else line


def _split(line, delimiter):
    return line.split("\t") if delimiter == "\t" else line.split()


def _sorted_tags(tags):
    return sorted(tags, key=lambda tag: (tag != "O", tag))


def _checked_path(path):
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"`path` must be a str or path-like, got {type(path).__name__}.")
    path = os.fspath(path)
    if not isinstance(path, str):
        raise TypeError(f"`path` must be a str or path-like, got bytes {path!r}.")
    return path


def _read_file(path):
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(".gz"):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:
            raise ValueError(f"{path}: cannot be decompressed as gzip ({e}).") from None
    return decode_utf8(path, data)


def _conllu_column(tag_column):
    if tag_column is None:
        return None
    if isinstance(tag_column, str):
        if tag_column.lower() not in CONLLU_COLUMNS:
            raise ValueError(
                f"`tag_column` must be one of {list(CONLLU_COLUMNS)} (or its index 0-9), got "
                f"{tag_column!r}.")
        column = CONLLU_COLUMNS.index(tag_column.lower())
    elif isinstance(tag_column, (int, np.integer)) and not isinstance(tag_column, bool):
        if not 0 <= tag_column < len(CONLLU_COLUMNS):
            raise ValueError(f"`tag_column` must be in [0, 9] (or a column name), got {tag_column}.")
        column = int(tag_column)
    else:
        raise TypeError(f"`tag_column` must be a column name or index, got {tag_column!r}.")
    if column in (0, 1):
        raise ValueError(f"`tag_column` {tag_column!r} is the {CONLLU_COLUMNS[column].upper()} column, "
                         "not a tag.")
    return column


def _field_index(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"`{name}` must be an int (a field index), got {value!r}.")
    return int(value)


def _checked_tag_names(tag_names):
    if tag_names is None:
        return None
    if isinstance(tag_names, (str, bytes)) or not hasattr(tag_names, "__iter__"):
        raise TypeError(f"`tag_names` must be a list of str, got {type(tag_names).__name__}.")
    tag_names = list(tag_names)
    for name in tag_names:
        if not isinstance(name, str) or not name or name != name.strip():
            raise TypeError(f"`tag_names` must hold non-empty strings without surrounding spaces, "
                            f"got {name!r}.")
    if len(set(tag_names)) != len(tag_names):
        duplicated = sorted({n for n in tag_names if tag_names.count(n) > 1})
        raise ValueError(f"`tag_names` has duplicated tags: {duplicated}.")
    if len(tag_names) < 2:
        raise ValueError(f"`tag_names` must hold at least 2 tags, got {tag_names}.")
    return tag_names
