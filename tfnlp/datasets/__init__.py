"""Small real corpora shipped with tfnlp, as `tf.data.Dataset`s and tagged sentences.

Nothing here downloads anything: the files live in `tfnlp/datasets/data/`
with their provenance and licences in `LICENSES.md` beside them. Every split
is fixed (no randomness), so results are comparable across runs.

| name | loader | elements |
|---|---|---|
| `en_novels` | `load_documents` | one chapter: `(num_sentences,)` tf.string |
| `zh_poems` | `load_documents` | one poem or record: `(num_lines,)` tf.string |
| `bible_en_es`, `bible_archaic_modern` | `load_text_pairs` | `(source, target)` tf.string |
| `fine_food_reviews` | `load_fine_food_reviews` | `(text, label)` |
| `en_ewt_upos`, `en_uner_ewt` | `load_tagged` | a `tfnlp.data.TaggedData`: words and tags per sentence (`.as_dataset()`) |
"""

import csv
import functools
import gzip
import os
import zlib

import tensorflow as tf

from tfnlp import _checks
from tfnlp.data._tensors import dense_row as _dense_row
from tfnlp.data.tagged import read_conll

DATA_DIR = os.path.join(os.path.dirname(__file__), "data")
SPLITS = ("train", "validation", "test")

FINE_FOOD_LABELS = ("other", "great")

_DOCUMENT_FILES = {
    "en_novels": ("en_austen_sentences.txt.gz", "en_novels_misc_sentences.txt.gz"),
    "zh_poems": ("zh_fortunes_poems.txt.gz",),
}
# Bible books held out whole, so no verse of a held-out book is seen in training.
_BIBLE_HELD_OUT = {
    "validation": ("Esth", "Joel", "Titus", "1John"),
    "test": ("Ruth", "Jonah", "Mark", "Phil", "Jas"),
}
_BIBLE_PAIRS = {
    "bible_en_es": ("web_en", "rv1909_es"),
    "bible_archaic_modern": ("kjv_en", "web_en"),
}

# The 17 Universal Dependencies part-of-speech tags, and UniversalNER's IOB2
# tags; both in the order `tfnlp.data.read_conll` gives a file's tags.
UPOS_TAGS = (
    "ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON", "PROPN",
    "PUNCT", "SCONJ", "SYM", "VERB", "X",
)
UNER_TAGS = ("O", "B-LOC", "B-ORG", "B-PER", "I-LOC", "I-ORG", "I-PER")
# name -> (file of a split, tag names); made by benchmarks/data/build_tagging_corpora.py
# (see LICENSES.md).
_TAGGED = {
    "en_ewt_upos": ("en_ewt_upos_{}.tsv.gz", UPOS_TAGS),
    "en_uner_ewt": ("en_uner_ewt_{}.tsv.gz", UNER_TAGS),
}
_TAGGED_FILE_SPLITS = {"train": "train", "validation": "dev", "test": "test"}
_TAGGED_NOT_BUNDLED = {
    ("en_uner_ewt", "train"): (
        "UniversalNER's English-EWT train file could not be had whole when tfnlp's data was "
        "built (see tfnlp/datasets/data/LICENSES.md). Train on split='validation' (2,001 "
        "sentences) and test on 'test', or download en_ewt-ud-train.iob2 from "
        "https://github.com/UniversalNER/UNER_English-EWT and read it with "
        "tfnlp.data.read_conll(path, word_column=1, tag_column=2, "
        "tag_names=tfnlp.datasets.UNER_TAGS)."
    ),
}


def list_datasets():
    """Names of the bundled data sets.

    Example:

    >>> list_datasets()  # doctest: +NORMALIZE_WHITESPACE
    ['bible_archaic_modern', 'bible_en_es', 'en_ewt_upos', 'en_novels', 'en_uner_ewt',
     'fine_food_reviews', 'zh_poems']
    """
    return sorted([*_DOCUMENT_FILES, *_BIBLE_PAIRS, *_TAGGED, "fine_food_reviews"])


def _open(filename):
    return gzip.open(os.path.join(DATA_DIR, filename), "rt", encoding="utf-8", newline="")


def _hash_split(text):
    """test / validation / train for 1 / 1 / 18 twentieths, by a hash of the text.

    Hashing the text (not the position) keeps duplicated documents together.
    """
    return {10: "test", 15: "validation"}.get(zlib.crc32(text.encode("utf-8")) % 20, "train")


@functools.cache
def _read_documents(name):
    documents = []
    for filename in _DOCUMENT_FILES[name]:
        with _open(filename) as f:
            blocks = f.read().split("\n\n")
        for block in blocks:
            lines = [line.strip() for line in block.split("\n") if line.strip()]
            if lines:
                documents.append(lines)
    return tuple(tuple(d) for d in documents)


def read_documents(name, split):
    """The documents of a corpus as Python lists of sentences.

    Args:
        name: `"en_novels"` (Jane Austen's six novels and four other
            public-domain novels; a document is a chapter, 536 in all) or
            `"zh_poems"` (Tang and Song poems and other classical Chinese
            records; a document is one record, split into lines).
        split: `"train"`, `"validation"` or `"test"`: documents are held out
            whole, about 1/20 each for test and validation, chosen by the
            CRC-32 of the document's text so that the corpora's duplicated
            records never straddle two splits.

    Returns:
        A list of documents, each a list of sentence strings.
    """
    _checks.one_of("name", name, tuple(_DOCUMENT_FILES))
    _checks.one_of("split", split, tuple(SPLITS))
    documents = _read_documents(name)
    return [list(d) for d in documents if _hash_split("\n".join(d)) == split]


def load_documents(name, split):
    """A corpus as a `tf.data.Dataset` of documents.

    Args:
        name: `"en_novels"` or `"zh_poems"` (see `read_documents`).
        split: `"train"`, `"validation"` or `"test"`.

    Returns:
        A `tf.data.Dataset` whose elements are 1-D `tf.string` tensors, the
        sentences of one document in order.

    Example:

    >>> chapter = next(iter(load_documents("en_novels", "train")))
    >>> chapter[0].numpy()
    b'The family of Dashwood had long been settled in Sussex.'
    """
    documents = read_documents(name, split)
    dataset = tf.data.Dataset.from_tensor_slices(tf.ragged.constant(documents, tf.string))
    return dataset.map(_dense_row)


@functools.cache
def _read_bible():
    with _open("bible_kjv_web_rv1909.tsv.gz") as f:
        return tuple(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def _bible_split(verse_id):
    book = verse_id.split(".")[0]
    for split, books in _BIBLE_HELD_OUT.items():
        if book in books:
            return split
    return "train"


def read_text_pairs(name, split):
    """Aligned Bible verses as Python `(source, target)` string pairs.

    Args:
        name: `"bible_en_es"` (modern English -> Spanish Reina-Valera 1909)
            or `"bible_archaic_modern"` (King James English -> modern
            English).
        split: `"train"`, `"validation"` (the books Esther, Joel, Titus and
            1 John) or `"test"` (Ruth, Jonah, Mark, Philippians and James).
            Verses missing in either version are left out.

    Returns:
        A list of `(source, target)` tuples.
    """
    _checks.one_of("name", name, tuple(_BIBLE_PAIRS))
    _checks.one_of("split", split, tuple(SPLITS))
    source, target = _BIBLE_PAIRS[name]
    return [
        (row[source], row[target])
        for row in _read_bible()
        if row[source] and row[target] and _bible_split(row["verse_id"]) == split
    ]


def load_text_pairs(name, split):
    """Aligned Bible verses as a `tf.data.Dataset` of `(source, target)`.

    Args:
        name: `"bible_en_es"` or `"bible_archaic_modern"` (see
            `read_text_pairs`).
        split: `"train"`, `"validation"` or `"test"` (held-out books).

    Returns:
        A `tf.data.Dataset` of `(tf.string scalar, tf.string scalar)`.

    Example:

    >>> source, target = next(iter(load_text_pairs("bible_archaic_modern", "train")))
    >>> source.numpy()
    b'In the beginning God created the heaven and the earth.'
    >>> target.numpy()
    b'In the beginning, God created the heavens and the earth.'
    """
    pairs = read_text_pairs(name, split)
    sources, targets = zip(*pairs, strict=True)
    return tf.data.Dataset.from_tensor_slices(
        (tf.constant(sources, tf.string), tf.constant(targets, tf.string))
    )


@functools.cache
def _read_fine_food_rows():
    with _open("en_fine_foods_reviews.tsv.gz") as f:
        return tuple(csv.DictReader(f, delimiter="\t"))


def _in_validation(text):
    return zlib.crc32(text.encode("utf-8")) % 10 == 0


def read_fine_food_reviews(split):
    """Fine-food reviews as Python `(text, label)` pairs; see `load_fine_food_reviews`.

    Args:
        split: one of `"train"`, `"validation"`, `"test"`.

    Returns:
        A list of `(text, label)` tuples, label 1 = "great".
    """
    _checks.one_of("split", split, tuple(SPLITS))
    rows = _read_fine_food_rows()
    if split == "test":
        chosen = [row for row in rows if row["split"] == "test"]
    else:
        chosen = [
            row for row in rows
            if row["split"] == "train" and _in_validation(row["review"]) == (split == "validation")
        ]
    return [(row["review"], FINE_FOOD_LABELS.index(row["label"])) for row in chosen]


def load_fine_food_reviews(split):
    """Fine-food reviews as `(text, label)` pairs; label 1 = "great".

    Splits are fixed: `"test"` is the original 1,000-review test set;
    `"validation"` holds the reviews of the original training set whose
    CRC-32 is divisible by 10 (394), `"train"` the other 3,606. Splitting by
    the text keeps the data's few duplicated reviews on one side. About 65%
    of every split is "great".

    Args:
        split: one of `"train"`, `"validation"`, `"test"`.

    Returns:
        A `tf.data.Dataset` of `(tf.string scalar, tf.int32 scalar)`.

    Example:

    >>> text, label = next(iter(load_fine_food_reviews("test")))
    >>> text.dtype, int(label) in (0, 1)
    (tf.string, True)
    """
    texts, labels = zip(*read_fine_food_reviews(split), strict=True)
    return tf.data.Dataset.from_tensor_slices(
        (tf.constant(texts, tf.string), tf.constant(labels, tf.int32))
    )


def load_tagged(name, split):
    """A tagged corpus: the words of each sentence with one tag per word.

    Both corpora are the English Web Treebank's sentences (weblogs,
    newsgroups, emails, reviews, Yahoo! answers), split as released:

    | name | tags | train | validation | test |
    |---|---|---|---|---|
    | `en_ewt_upos` | `UPOS_TAGS`, the 17 Universal Dependencies part-of-speech tags | 12,544 sentences / 204,577 words | 2,001 / 25,147 | 2,077 / 25,094 |
    | `en_uner_ewt` | `UNER_TAGS`, IOB2 `PER`, `ORG`, `LOC` | not bundled | 2,001 / 25,149 | 2,077 / 25,097 |

    `en_ewt_upos` is Universal Dependencies English-EWT v2.16; its words are
    the syntactic words (`don't` is `do` + `n't`). `en_uner_ewt` is
    UniversalNER's English-EWT, made on EWT v2.9 (a few words differ from
    v2.16). UniversalNER's train split is not bundled (LICENSES.md says why):
    train on its `"validation"` split and test on `"test"`, or read your own
    copy of `en_ewt-ud-train.iob2` with `tfnlp.data.read_conll(path,
    word_column=1, tag_column=2, tag_names=UNER_TAGS)`.

    Args:
        name: `"en_ewt_upos"` or `"en_uner_ewt"`.
        split: `"train"`, `"validation"` (the released dev set) or `"test"`.

    Returns:
        A `tfnlp.data.TaggedData` (`.words`, `.tags`, `.tag_names`,
        `.sentence_ids`), as `tfnlp.data.read_conll` returns it; `tag_names`
        is `UPOS_TAGS` or `UNER_TAGS` for every split, so tag ids agree.

    Example:

    >>> data = load_tagged("en_uner_ewt", "test")
    >>> len(data), data.num_words
    (2077, 25097)
    >>> data.words[1], data.tags[1]
    (['It', 'is', 'a', 'place', 'in', 'Argentina', 'lol'], ['O', 'O', 'O', 'O', 'O', 'B-LOC', 'O'])
    """
    _checks.one_of("name", name, tuple(_TAGGED))
    _checks.one_of("split", split, tuple(SPLITS))
    if (name, split) in _TAGGED_NOT_BUNDLED:
        raise ValueError(
            f"`split` {split!r} of {name!r} is not bundled: {_TAGGED_NOT_BUNDLED[name, split]}")
    pattern, tag_names = _TAGGED[name]
    path = os.path.join(DATA_DIR, pattern.format(_TAGGED_FILE_SPLITS[split]))
    return read_conll(path, word_column=0, tag_column=1, tag_names=list(tag_names))
