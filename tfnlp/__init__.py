"""tfnlp: NLP layers and models for TensorFlow and Keras 3.

Importing `tfnlp` registers every tfnlp class with Keras, so saved `.keras`
files load with `keras.saving.load_model` after a plain `import tfnlp`.
"""

import os

# tfnlp is built on TensorFlow ops (tf.data, tensorflow-text, SavedModel).
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from tfnlp import layers  # noqa: E402
from tfnlp import data  # noqa: E402
from tfnlp import datasets  # noqa: E402
from tfnlp import generation  # noqa: E402
from tfnlp import metrics  # noqa: E402
from tfnlp import models  # noqa: E402
from tfnlp import training  # noqa: E402
from tfnlp import export  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "data",
    "datasets",
    "export",
    "generation",
    "layers",
    "metrics",
    "models",
    "training",
    "__version__",
]
