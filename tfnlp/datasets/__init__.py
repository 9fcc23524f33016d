"""Small real corpora shipped with tfnlp, as `tf.data.Dataset`s.

Nothing here downloads anything: the files live in `tfnlp/datasets/data/`
with their provenance and licences in `LICENSES.md` beside them. Every split
is fixed (no randomness), so results are comparable across runs.

| name | loader | elements |
|---|---|---|
| `en_novels` | `load_documents` | one chapter: `(num_sentences,)` tf.string |
| `zh_poems` | `load_documents` | one poem or record: `(num_lines,)` tf.string |
| `bible_en_es`, `bible_archaic_modern` | `load_text_pairs` | `(source, target)` tf.string |
| `fine_food_reviews` | `load_fine_food_reviews` | `(text, label)` |
"""

import csv
import functools
import gzip
import os
import zlib

import tensorflow as tf

from tfnlp import _checks
from tfnlp.data._tensors import dense_row as _dense_row

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


def list_datasets():
    """Names of the bundled data sets.

    Example:

    >>> list_datasets()
    ['bible_archaic_modern', 'bible_en_es', 'en_novels', 'fine_food_reviews', 'zh_poems']
    """
    return sorted([*_DOCUMENT_FILES, *_BIBLE_PAIRS, "fine_food_reviews"])


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
