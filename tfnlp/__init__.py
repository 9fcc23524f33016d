"""tfnlp: NLP layers and models for TensorFlow and Keras 3."""

import os

# tfnlp is built on TensorFlow ops (tf.data, tensorflow-text, SavedModel).
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from tfnlp import layers  # noqa: E402

__version__ = "0.1.0"

__all__ = ["layers", "__version__"]
