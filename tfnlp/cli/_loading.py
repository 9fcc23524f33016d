"""TensorFlow, loaded once a command's settings are valid, and quietly.

The command modules name TensorFlow, Keras and tfnlp's subpackages through
the `LazyModule`s below (`from tfnlp.cli._loading import data, tf`), so that
building the parser (`tfnlp --help`) and checking a configuration import
none of them; `tfnlp.cli.main` calls `import_quietly` before it runs a
command (the pattern of TensorFlow's own `LazyLoader`).
"""

import importlib
import logging
import os
import sys
import types


class LazyModule(types.ModuleType):
    """The module `name`, imported at the first look-up of one of its attributes."""

    def __getattr__(self, attribute):
        if attribute.startswith("__"):  # introspection (repr, doc tools) imports nothing
            raise AttributeError(attribute)
        return getattr(importlib.import_module(self.__name__), attribute)


tf = LazyModule("tensorflow")
keras = LazyModule("keras")
data = LazyModule("tfnlp.data")
datasets = LazyModule("tfnlp.datasets")
export_lib = LazyModule("tfnlp.export")
metrics = LazyModule("tfnlp.metrics")
models = LazyModule("tfnlp.models")
training = LazyModule("tfnlp.training")
LAZY = (tf, keras, data, datasets, export_lib, metrics, models, training)


def _import_all():
    for module in LAZY:
        importlib.import_module(module.__name__)


def import_quietly(verbose):
    """Imports TensorFlow and the `LAZY` modules: quietly unless `verbose`.

    TensorFlow's C++ libraries print start-up lines to the process' stderr
    as they load (before any log level applies: oneDNN, "Could not find
    cuda drivers", twice), then probe for a GPU ("failed call to cuInit" on
    a CPU machine) and log graph-optimizer notes while training. Quiet, the
    loading is done with file descriptor 2 pointed at a temporary file (its
    content is replayed if the import fails), TensorFlow's C++ logging is
    limited to fatal errors (`TF_CPP_MIN_LOG_LEVEL=3`, unless set already)
    and its Python logger to errors (no tf.function retracing notes). Python
    exceptions and warnings are not affected.
    """
    if verbose or "tensorflow" in sys.modules:
        _import_all()
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tempfile

    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            _import_all()
        except BaseException:
            os.dup2(saved, 2)
            captured.seek(0)
            sys.stderr.write(captured.read().decode("utf-8", "replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)
    # TensorFlow's Python warnings (tf.function retracing notes) likewise.
    logging.getLogger("tensorflow").setLevel(logging.ERROR)
