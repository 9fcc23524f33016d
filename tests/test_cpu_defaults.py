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

EXAMPLES = sorted((pathlib.Path(__file__).parents[1] / "examples").glob("*.py"))


@pytest.mark.parametrize(
    "environ, machine, modules, expected",
    [
        ({}, "x86_64", {}, {"TF_ENABLE_ONEDNN_OPTS": "1"}),
        ({}, "AMD64", {}, {"TF_ENABLE_ONEDNN_OPTS": "1"}),  # Windows' name for it
        ({"TF_ENABLE_ONEDNN_OPTS": "0"}, "x86_64", {}, {"TF_ENABLE_ONEDNN_OPTS": "0"}),
        ({"TF_ENABLE_ONEDNN_OPTS": ""}, "x86_64", {}, {"TF_ENABLE_ONEDNN_OPTS": ""}),
        ({}, "aarch64", {}, {}),
        ({}, "arm64", {}, {}),
        ({}, "x86_64", {"tensorflow": object()}, {}),  # too late: TensorFlow read it already
    ],
)
def test_onednn_is_requested_only_where_unset_on_x86_before_tensorflow(
        environ, machine, modules, expected):
    was_unset = "TF_ENABLE_ONEDNN_OPTS" not in environ
    changed = _cpu_defaults.enable_onednn(environ, machine=machine, modules=modules)
    assert environ == expected
    assert changed is (was_unset and "TF_ENABLE_ONEDNN_OPTS" in environ)


def test_docstring_example_runs():
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner()
    for test in finder.find(_cpu_defaults):
        runner.run(test)
    assert runner.tries > 0 and runner.failures == 0


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="x86-64 only")
def test_importing_tfnlp_first_turns_onednn_on():
    # A new process: this one imported TensorFlow long ago. The assertion on
    # the variable fails if tfnlp imported TensorFlow before choosing it.
    code = (
        "import os, tfnlp\n"
        "from tensorflow.python.util import _pywrap_util_port as port\n"
        "print(os.environ.get('TF_ENABLE_ONEDNN_OPTS'), bool(port.IsMklEnabled()))\n"
    )
    environ = {k: v for k, v in os.environ.items() if k != "TF_ENABLE_ONEDNN_OPTS"}
    environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    output = subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True,
                            text=True, check=True, timeout=300).stdout
    assert output.split()[-2:] == ["1", "True"]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_import_tfnlp_before_tensorflow(path):
    imported = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            imported += [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.append(node.module.split(".")[0])
    frameworks = [i for i, name in enumerate(imported) if name in ("keras", "tensorflow")]
    if "tfnlp" in imported and frameworks:
        assert imported.index("tfnlp") < frameworks[0], path.name
