"""Package-wide checks: docstring examples run, public layers are complete, the layers of the package."""

import ast
import doctest
import inspect
import pathlib
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfnlp
from tfnlp import data, datasets, export, generation, layers, metrics, models, training

PUBLIC_LAYERS = [
    getattr(package, name)
    for package in (layers, data)
    for name in package.__all__
    if inspect.isclass(getattr(package, name)) and issubclass(getattr(package, name), keras.layers.Layer)
]
MODULES = sorted(
    {
        inspect.getmodule(obj)
        for package in (layers, data, models, training, export, generation, metrics)
        for obj in map(package.__dict__.get, package.__all__)
        if inspect.isclass(obj) or inspect.isfunction(obj)
    }
    | {layers.masks, datasets},
    key=lambda m: m.__name__,
)

# Modules whose every example is `# doctest: +SKIP`: it needs a released checkpoint.
ONLY_SKIPPED_EXAMPLES = {"tfnlp.models.unilm_checkpoints"}


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_docstring_examples_run(module):
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    globs = {"keras": keras, "tf": tf, "np": np, "tfnlp": tfnlp}
    tests = [t for t in finder.find(module, globs=dict(vars(module), **globs)) if t.examples]
    tests = [t for t in tests if t.name.startswith(module.__name__)]  # not re-exported ones
    assert tests, f"{module.__name__} has no docstring example"
    attempted = sum(runner.run(test).attempted for test in tests)
    assert runner.failures == 0
    # Examples ran, not only `# doctest: +SKIP` ones; the list stays exact.
    if module.__name__ in ONLY_SKIPPED_EXAMPLES:
        assert attempted == 0, f"{module.__name__} runs examples now: drop it from ONLY_SKIPPED_EXAMPLES"
    else:
        assert attempted > 0, f"{module.__name__}: every docstring example is skipped"


@pytest.mark.parametrize("cls", PUBLIC_LAYERS, ids=lambda c: c.__name__)
def test_public_layers_are_registered_and_documented(cls):
    assert keras.saving.get_registered_name(cls) == f"tfnlp>{cls.__name__}"
    assert keras.saving.get_registered_object(f"tfnlp>{cls.__name__}") is cls
    doc = inspect.getdoc(cls)
    for section in ("Args:", "Call arguments:", "Returns:", "Example:"):
        assert section in doc, f"{cls.__name__} docstring lacks {section}"
    # Every constructor argument is documented under Args.
    args_section = doc.split("Args:")[1].split("Call arguments:")[0]
    for name in inspect.signature(cls.__init__).parameters:
        if name not in ("self", "kwargs"):
            assert re.search(rf"^\s+{name}:", args_section, re.M), f"{cls.__name__}: {name}"
    call_section = doc.split("Call arguments:")[1].split("Returns:")[0]
    for name in inspect.signature(cls.call).parameters:
        if name != "self":
            assert name in call_section, f"{cls.__name__}.call: {name} undocumented"


PUBLIC_MODELS = [
    obj
    for package in (models, training)
    for obj in map(package.__dict__.get, package.__all__)
    if inspect.isclass(obj)
    and issubclass(
        obj,
        (keras.Model, keras.losses.Loss, keras.optimizers.schedules.LearningRateSchedule),
    )
]


@pytest.mark.parametrize("cls", PUBLIC_MODELS, ids=lambda c: c.__name__)
def test_public_models_are_registered_and_documented(cls):
    assert keras.saving.get_registered_name(cls) == f"tfnlp>{cls.__name__}"
    doc = inspect.getdoc(cls)
    assert "Args:" in doc and "Example:" in doc
    args_section = doc.split("Args:")[1]
    for name in inspect.signature(cls.__init__).parameters:
        if name not in ("self", "kwargs"):
            assert re.search(rf"^\s+{name}:", args_section, re.M), f"{cls.__name__}: {name}"


def test_no_unsafe_constructs_in_the_package():
    source = pathlib.Path(tfnlp.__file__).parent
    pattern = re.compile(r"\b(eval|exec)\(|\bpickle\b|layers\.Lambda|keras\.layers\.Lambda")
    offenders = [
        f"{path}:{number}"
        for path in source.rglob("*.py")
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert not offenders, offenders


def test_import_tfnlp_registers_everything_for_loading(tmp_path):
    """A `.keras` file loads in a process that only did `import tfnlp`."""
    import subprocess
    import sys

    backbone = models.BertBackbone.from_architecture("bert_tiny", vocabulary_size=20)
    path = str(tmp_path / "backbone.keras")
    backbone.save(path)
    script = f"import keras, tfnlp; print(keras.saving.load_model({path!r}, safe_mode=True).count_params())"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert int(result.stdout.strip().splitlines()[-1]) == backbone.count_params()


def test_the_api_reference_builds_without_warnings(tmp_path):
    """`make docs`: pdoc renders every public module from its docstrings."""
    import warnings

    import pdoc  # the docs extra, which `make test` installs
    import pdoc.render

    pdoc.render.configure(docformat="google")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pdoc.pdoc("tfnlp", output_directory=tmp_path)
    assert not [str(w.message) for w in caught], [f"{w.category.__name__}: {w.message}" for w in caught]
    pages = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.html")}
    for package in ("layers", "data", "datasets", "models", "training", "export", "generation", "metrics"):
        assert f"tfnlp/{package}.html" in pages, sorted(pages)
    assert "BertBackbone" in (tmp_path / "tfnlp" / "models.html").read_text(encoding="utf-8")


# Each subpackage imports only from its own layer or the layers listed before it.
PACKAGE_LAYERS = [
    {"_checks", "_devices", "_cpu_defaults"},
    {"layers", "metrics", "generation"},
    {"data"},  # tokenizers and pipelines: how text becomes batches
    {"datasets"},  # the bundled corpora: what to train on (may use data's tensor helpers)
    {"training"},
    {"models"},
    {"export"},
    {"cli"},
]


def _tfnlp_imports(path):
    """The tfnlp subpackages a module imports (docstring examples are not code)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "tfnlp":
            if node.module == "tfnlp":
                yield from (alias.name for alias in node.names)
            else:
                yield node.module.split(".")[1]
        elif isinstance(node, ast.Import):
            yield from (a.name.split(".")[1] for a in node.names if a.name.startswith("tfnlp."))


def test_subpackages_import_only_from_the_layers_below_them():
    rank = {name: i for i, names in enumerate(PACKAGE_LAYERS) for name in names}
    root = pathlib.Path(tfnlp.__file__).parent
    wrong = []
    for path in root.rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        if parts == ("__init__",):
            continue  # the package itself imports everything
        own = parts[0]
        assert own in rank, f"{own}: add it to PACKAGE_LAYERS"
        for name in _tfnlp_imports(path):
            assert name in rank, f"{path.relative_to(root)} imports tfnlp.{name}: add it to PACKAGE_LAYERS"
            if rank[name] > rank[own]:
                wrong.append(f"{path.relative_to(root)} imports tfnlp.{name}")
    assert not wrong, wrong
