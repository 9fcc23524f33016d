"""A new model family is one registry entry: a test-only family, `tests/toy_family.py`,
registered for these tests alone, passes the per-family checks of the harness, numerics,
bad-input and serving tests with no other file changed.

The checks are the suite's own test functions called with the toy's name:
the model harness and the registry's checks (tests/models/test_model_harness.py),
the numerics on padding and without targets (tests/test_numerics.py), the
bad ranks and ranges of its id input (tests/test_bad_inputs.py), and its
export, in Python and in TF Serving's C++ loader (tests/export/test_tf_serving.py).
The training tests (distribution, resumption, TPU readiness) read the same
`families.model` and `families.batches`; they are left to the real families.
"""

import ast
import pathlib

import keras
import pytest
import tensorflow as tf

from tests import families, test_bad_inputs, test_numerics, toy_family
from tests.export import test_tf_serving
from tests.export.serving.harness import CppServer
from tests.models import test_model_harness
from tfnlp import data
from tfnlp.export._common import WARMUP_BATCH_SIZES

ROOT = pathlib.Path(__file__).resolve().parents[1]
TOY = toy_family.FAMILY.name


@pytest.fixture
def toy(monkeypatch):
    """The toy family's name, registered for one test (the registry is restored after it)."""
    monkeypatch.setattr(families, "REGISTRY", dict(families.REGISTRY))
    families.register(toy_family.FAMILY)
    return TOY


def _imports(path):
    tree = ast.parse(path.read_text())
    return {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)} | {
        alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}


def test_the_toy_is_one_file_and_one_registration(toy):
    assert families.names() == (*families.FAMILIES, TOY)
    assert families.model_classes()[TOY] == ("ToyTagger", "BertBackbone")
    assert families.signatures()[TOY] == {"serving_default": ["text"]}
    assert families.exported_as()["ToyTagger"] == TOY
    with pytest.raises(ValueError, match="registered already"):
        families.register(toy_family.FAMILY)
    # No other file names it, and it needs nothing of the tests but the registry.
    sources = [path for folder in ("tfnlp", "tests") for path in (ROOT / folder).rglob("*.py")]
    naming = {str(p.relative_to(ROOT)) for p in sources if "ToyTagger" in p.read_text(encoding="utf-8")}
    assert naming == {"tests/toy_family.py", "tests/test_family_registry.py"}
    outside_tfnlp = {m for m in _imports(ROOT / "tests" / "toy_family.py") if m.split(".")[0] != "tfnlp"}
    assert outside_tfnlp == {"keras", "numpy", "tensorflow", "tests.families"}


def test_the_toy_passes_the_model_harness_and_the_registry_checks(toy):
    test_model_harness.test_model_harness(toy)
    with pytest.MonkeyPatch.context() as patch:
        test_model_harness.test_the_mixed_precision_check_fails_on_a_wrong_cast_in_every_output(toy, patch)
    test_model_harness.test_a_family_model_is_or_holds_its_model_classes(toy)
    test_model_harness.test_compile_fills_in_each_auto_argument_alone(toy)
    test_model_harness.test_trainable_and_non_trainable_weights_hold_every_weight_once(toy)
    test_bad_inputs.test_every_family_names_its_id_input_when_its_rank_or_range_is_wrong(toy)


@pytest.mark.parametrize("policy", test_numerics.POLICIES)
def test_the_toy_passes_the_numerics_checks(toy, policy):
    test_numerics.test_models_on_all_padding_sequences(toy, policy)
    for kind in families.get(toy).no_targets:
        test_numerics.test_zero_targets_give_zero_loss_and_zero_gradients(toy, kind, policy)


def test_the_toy_export_serves_in_python_and_in_the_cpp_loader(toy, tmp_path):
    (spec,) = families.get(toy).exports
    keras.utils.set_random_seed(7)
    kit = families.ExportKit(list(data.SPECIAL_TOKENS) + ["the", "cat", "sat", "on", "mat", "##s"])
    path = spec.build(kit, str(tmp_path / spec.name))
    loaded = tf.saved_model.load(path)
    with CppServer() as server:
        server.load(path)
        replayed = [name for name, _ in server.warmup(path)]
        assert replayed == [s for s in spec.signatures for _ in WARMUP_BATCH_SIZES]
        served = test_tf_serving.check_served_as_in_python(server, path, loaded, spec.signatures, spec.name)
        assert served == 1
        test_tf_serving.check_a_text_input_of_the_wrong_rank_is_refused(server, path, spec.signatures)
