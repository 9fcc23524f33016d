"""tfnlp: NLP layers and models for TensorFlow and Keras 3.

Importing `tfnlp` registers every tfnlp class with Keras, so saved `.keras`
files load with `keras.saving.load_model` after a plain `import tfnlp`.

Imported before TensorFlow (and Keras), `tfnlp` also chooses two settings
that are read only then, each unless already set: the Keras backend
(`KERAS_BACKEND=tensorflow`) and, on x86-64 Linux, TensorFlow's oneDNN
CPU kernels (`TF_ENABLE_ONEDNN_OPTS=1`; measured faster for every tfnlp
model on CPUs where TensorFlow leaves them off; see `tfnlp._cpu_defaults`).
"""

import os

from tfnlp import _cpu_defaults

# tfnlp is built on TensorFlow ops (tf.data, tensorflow-text, SavedModel).
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
_cpu_defaults.enable_onednn()

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
