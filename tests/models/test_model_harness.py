"""Every model family through the one model harness, and the registry kept whole."""

import inspect

import keras
import pytest

from tests import families
from tests.export import test_tf_serving
from tests.harness import run_model_test
from tfnlp import models


@pytest.mark.parametrize("family", families.FAMILIES)
def test_model_harness(family):
    run_model_test(family)


def test_every_public_model_class_is_trained_and_served_by_a_registered_family():
    public = {name for name, cls in inspect.getmembers(models, inspect.isclass)
              if issubclass(cls, keras.Model)}
    assert set(families.MODEL_CLASSES) == set(families.FAMILIES)
    for family in families.FAMILIES:
        model = families.model(family)
        own = {type(model).__name__, type(getattr(model, "backbone", model)).__name__}
        assert own == set(families.MODEL_CLASSES[family]), family
    covered = {name for names in families.MODEL_CLASSES.values() for name in names}
    missing = public - covered - set(families.NOT_TRAINED)
    assert not missing, f"add a family for {sorted(missing)} to tests/families.py"
    assert set(families.EXPORTED_AS) == public, "say which export serves each model class"
    assert set(families.EXPORTED_AS.values()) == set(test_tf_serving.SIGNATURES)
