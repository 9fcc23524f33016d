"""tfnlp: NLP layers and models for TensorFlow and Keras 3.

Importing `tfnlp` registers every tfnlp class with Keras, so saved `.keras`
files load with `keras.saving.load_model` after a plain `import tfnlp`.
(One exception: in the `tfnlp` command-line program, the subpackages are
imported when first used, so that `tfnlp --help` and a mistyped flag answer
at once instead of waiting seconds for TensorFlow.)

Imported before TensorFlow (and Keras), `tfnlp` also chooses two settings
that are read only then, each unless already set: the Keras backend
(`KERAS_BACKEND=tensorflow`) and, on x86-64 Linux, TensorFlow's oneDNN
CPU kernels (`TF_ENABLE_ONEDNN_OPTS=1`; measured faster for every tfnlp
model on CPUs where TensorFlow leaves them off; see `tfnlp._cpu_defaults`).
"""

import importlib
import os
import sys

from tfnlp import _cpu_defaults

# tfnlp is built on TensorFlow ops (tf.data, tensorflow-text, SavedModel).
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
_cpu_defaults.enable_onednn()

_SUBPACKAGES = ("layers", "data", "datasets", "generation", "metrics", "models", "training", "export")


def _command_line():
    """Whether this process is the `tfnlp` program: the console script or `python -m tfnlp.cli`.

    Read from the interpreter's own command line (`sys.orig_argv`), so that
    a script of another name, or another module run with `-m`, imports
    everything as usual.
    """
    argv = list(getattr(sys, "orig_argv", []))
    if len(argv) > 1 and os.path.basename(argv[1]) == "tfnlp":  # the console script
        return True
    return "-m" in argv[:-1] and argv[argv.index("-m") + 1] == "tfnlp.cli"


def __getattr__(name):  # the command line's lazy subpackages
    if name in _SUBPACKAGES:
        return importlib.import_module(f"tfnlp.{name}")
    raise AttributeError(f"module 'tfnlp' has no attribute {name!r}")


if not _command_line():
    for _name in _SUBPACKAGES:
        importlib.import_module(f"tfnlp.{_name}")
    del _name

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
