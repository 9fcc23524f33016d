"""TensorFlow CPU settings that tfnlp chooses before TensorFlow is imported.

Nothing here imports TensorFlow: these settings are read once, when
TensorFlow is first imported, so `tfnlp/__init__.py` applies them first.
"""

import os
import platform
import sys

ONEDNN_VARIABLE = "TF_ENABLE_ONEDNN_OPTS"
_X86_64 = ("x86_64", "amd64")  # as platform.machine() names it


def enable_onednn(environ=None, system=None, machine=None, modules=None):
    """Turn on TensorFlow's oneDNN CPU kernels on x86-64 Linux unless the user chose.

    TensorFlow's x86 builds use oneDNN by default only on CPUs with
    deep-learning instructions (AVX-512 VNNI or BF16, AMX, ...: Intel
    Cascade Lake and newer, AMD Zen 4); elsewhere (AVX2-only CPUs, e.g.
    AMD Zen 2/3 or older Intel Xeons) their matmuls run on Eigen, which
    is slower for BERT's masked-LM logits product. On such a CPU every
    tfnlp training step and forward pass measured faster in float32 with
    oneDNN on (`benchmarks/onednn_benchmark.py`; figures in
    `benchmarks/README.md`). So importing `tfnlp` before TensorFlow sets
    `TF_ENABLE_ONEDNN_OPTS=1` when:

    - the variable is unset (set it to `0` to keep Eigen; any value you set
      is left alone),
    - the system is Linux on x86-64 (the case measured; oneDNN on Arm is a
      different backend), and
    - TensorFlow is not imported yet (it reads the variable once, at
      import; `keras` and `tensorflow_text` import it too; afterwards
      setting it would change nothing but the environment of child
      processes).

    On CPUs where oneDNN is already TensorFlow's default this changes
    nothing. The variable is inherited by processes this one starts. oneDNN
    may round float32 results differently from Eigen (another summation
    order), as on every CPU where it is TensorFlow's default.

    Args:
        environ: the environment to read and update (default `os.environ`).
        system: the operating system (default `platform.system()`).
        machine: the machine name (default `platform.machine()`).
        modules: the imported modules (default `sys.modules`).

    Returns:
        True when this call set the variable.

    Example:

    >>> env = {}
    >>> enable_onednn(env, system="Linux", machine="x86_64", modules={})
    True
    >>> env
    {'TF_ENABLE_ONEDNN_OPTS': '1'}
    >>> enable_onednn({"TF_ENABLE_ONEDNN_OPTS": "0"}, "Linux", "x86_64", modules={})
    False
    """
    environ = os.environ if environ is None else environ
    system = platform.system() if system is None else system
    machine = platform.machine() if machine is None else machine
    modules = sys.modules if modules is None else modules
    if (ONEDNN_VARIABLE in environ or system != "Linux" or machine.lower() not in _X86_64
            or "tensorflow" in modules):
        return False
    environ[ONEDNN_VARIABLE] = "1"
    return True
