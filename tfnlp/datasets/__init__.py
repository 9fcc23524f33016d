"""Small real corpora shipped with tfnlp, as `tf.data.Dataset`s.

Nothing here downloads anything: the files live in `tfnlp/datasets/data/`
with their provenance and licences in `LICENSES.md` beside them.
"""

import csv
import gzip
import os
import zlib

import tensorflow as tf

DATA_DIR = os.path.join(os.path.dirname(__file__), "data")

FINE_FOOD_LABELS = ("other", "great")
_FINE_FOOD_SPLITS = ("train", "validation", "test")


def list_datasets():
    """Names of the bundled data sets.

    Example:

    >>> "fine_food_reviews" in list_datasets()
    True
    """
    return ["fine_food_reviews"]


def _read_fine_food_rows():
    path = os.path.join(DATA_DIR, "en_fine_foods_reviews.tsv.gz")
    with gzip.open(path, "rt", encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def _in_validation(text):
    return zlib.crc32(text.encode("utf-8")) % 10 == 0


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
    if split not in _FINE_FOOD_SPLITS:
        raise ValueError(f"`split` must be one of {_FINE_FOOD_SPLITS}, got {split!r}.")
    rows = _read_fine_food_rows()
    train = [row for row in rows if row["split"] == "train"]
    if split == "test":
        chosen = [row for row in rows if row["split"] == "test"]
    else:
        chosen = [row for row in train if _in_validation(row["review"]) == (split == "validation")]
    texts = [row["review"] for row in chosen]
    labels = [FINE_FOOD_LABELS.index(row["label"]) for row in chosen]
    return tf.data.Dataset.from_tensor_slices(
        (tf.constant(texts, tf.string), tf.constant(labels, tf.int32))
    )
