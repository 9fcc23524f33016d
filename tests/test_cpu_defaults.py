"""tfnlp's TensorFlow CPU settings: chosen before TensorFlow is imported, never over the user's."""

import ast
import doctest
import os
import pathlib
import platform
import subprocess
import sys

import pytest

from tfnlp import _cpu_defaults

ROOT = pathlib.Path(__file__).parents[1]
EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*.py") if p.name != "__init__.py")
# Modules that import TensorFlow when imported.
TENSORFLOW_IMPORTERS = ("keras", "tensorflow", "tensorflow_text", "keras_hub", "tf_keras")


@pytest.mark.parametrize(
    "environ, system, machine, modules, expected",
    [
        ({}, "Linux", "x86_64", {}, {"TF_ENABLE_ONEDNN_OPTS": "1"}),
        ({}, "Linux", "AMD64", {}, {"TF_ENABLE_ONEDNN_OPTS": "1"}),
        ({"TF_ENABLE_ONEDNN_OPTS": "0"}, "Linux", "x86_64", {}, {"TF_ENABLE_ONEDNN_OPTS": "0"}),
        ({"TF_ENABLE_ONEDNN_OPTS": ""}, "Linux", "x86_64", {}, {"TF_ENABLE_ONEDNN_OPTS": ""}),
        ({}, "Linux", "aarch64", {}, {}),
        ({}, "Darwin", "arm64", {}, {}),
        ({}, "Windows", "AMD64", {}, {}),  # not measured there
        ({}, "Linux", "x86_64", {"tensorflow": object()}, {}),  # too late: TensorFlow read it
    ],
)
def test_onednn_is_requested_only_where_unset_on_x86_linux_before_tensorflow(
        environ, system, machine, modules, expected):
    was_unset = "TF_ENABLE_ONEDNN_OPTS" not in environ
    changed = _cpu_defaults.enable_onednn(environ, system, machine, modules)
    assert environ == expected
    assert changed is (was_unset and "TF_ENABLE_ONEDNN_OPTS" in environ)


def test_docstring_example_runs():
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner()
    for test in finder.find(_cpu_defaults):
        runner.run(test)
    assert runner.tries > 0 and runner.failures == 0


@pytest.mark.skipif(platform.system() != "Linux" or platform.machine().lower() != "x86_64",
                    reason="x86-64 Linux only")
def test_importing_tfnlp_first_turns_onednn_on():
    # A new process: this one imported TensorFlow long ago. The assertion on
    # the variable fails if tfnlp imported TensorFlow before choosing it
    # (TensorFlow's own answer, the second value, is True anyway on CPUs
    # where oneDNN is its default).
    code = (
        "import os, tfnlp\n"
        "from tensorflow.python.util import _pywrap_util_port as port\n"
        "print(os.environ.get('TF_ENABLE_ONEDNN_OPTS'), bool(port.IsMklEnabled()))\n"
    )
    environ = {k: v for k, v in os.environ.items() if k != "TF_ENABLE_ONEDNN_OPTS"}
    environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    completed = subprocess.run([sys.executable, "-c", code], env=environ, cwd=ROOT,
                               capture_output=True, text=True, check=False, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert completed.stdout.split()[-2:] == ["1", "True"], completed.stdout


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_import_tfnlp_before_tensorflow(path):
    imported = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            imported += [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.append(node.module.split(".")[0])
    assert "tfnlp" in imported, path.name
    frameworks = [i for i, name in enumerate(imported) if name in TENSORFLOW_IMPORTERS]
    assert not frameworks or imported.index("tfnlp") < frameworks[0], path.name
