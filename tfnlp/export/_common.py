"""What every exporter shares: argument checks and the TF Serving layout."""

import os

import tensorflow as tf

from tfnlp.data.bert_preprocessor import BertPreprocessor
from tfnlp.layers import _validation


def check_preprocessor(preprocessor):
    if not isinstance(preprocessor, BertPreprocessor):
        raise ValueError(f"`preprocessor` must be a BertPreprocessor, got {type(preprocessor).__name__}.")


def save(module, export_dir, version, signatures):
    """Saves `module` to `export_dir/VERSION/` and returns that path."""
    version = _validation.positive_int("version", version)
    path = os.path.join(export_dir, str(version))
    tf.saved_model.save(module, path, signatures=signatures)
    return path
