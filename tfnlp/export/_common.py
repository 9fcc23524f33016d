"""What every exporter shares: argument checks and the TF Serving layout."""

import numbers
import os

import tensorflow as tf

from tfnlp.data.bert_preprocessor import BertPreprocessor
from tfnlp.layers import _validation


def model_setting(model, name):
    """`model.NAME`, else its backbone's, as an int; None where neither says."""
    for owner in (model, getattr(model, "backbone", None)):
        value = getattr(owner, name, None)
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            return int(value)
    return None


def check_preprocessor(preprocessor, model):
    """Refuses a preprocessor that is not a `BertPreprocessor` or does not fit `model`.

    Its tokenizer may not have more tokens than the model's vocabulary
    (where the model, or its backbone, has a `vocabulary_size`): the
    export would serve some texts and fail on others with out-of-range
    ids. Fewer is allowed: some released checkpoints pad their embedding
    table beyond their `vocab.txt` (`models.bert_checkpoints`).
    """
    if not isinstance(preprocessor, BertPreprocessor):
        raise ValueError(f"`preprocessor` must be a BertPreprocessor, got {type(preprocessor).__name__}.")
    size = model_setting(model, "vocabulary_size")
    tokens = preprocessor.tokenizer.vocabulary_size()
    if size is not None and tokens > size:
        raise ValueError(
            f"`preprocessor`'s tokenizer has {tokens} tokens but the model's vocabulary has "
            f"only {size}: export with the vocabulary the model was trained with."
        )


def takes_pairs(model):
    """Whether `model` can encode text pairs: a segment table of 2 or more rows (or unknown)."""
    segments = model_setting(model, "num_segments")
    return segments is None or segments >= 2


def pair_texts(text_a, text_b):
    """`text_a`, `text_b`, checked at run time to hold the same number of texts."""
    check = tf.debugging.assert_equal(
        tf.size(text_a), tf.size(text_b),
        message="`text_a` and `text_b` must hold the same number of texts",
    )
    with tf.control_dependencies([check]):
        return tf.identity(text_a), tf.identity(text_b)


def save(module, export_dir, version, signatures):
    """Saves `module` to `export_dir/VERSION/` and returns that path."""
    version = _validation.positive_int("version", version)
    path = os.path.join(export_dir, str(version))
    tf.saved_model.save(module, path, signatures=signatures)
    return path
