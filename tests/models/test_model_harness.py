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


@pytest.mark.parametrize("family", families.FAMILIES)
def test_compile_fills_in_each_auto_argument_alone(family):
    """`compile()`'s "auto" is decided argument by argument (tfnlp.models.Task), in every family."""
    model = families.model(family)
    model.compile()
    own = model.get_compile_config()
    # Tasks whose targets carry padding weights report weighted metrics.
    assert (own["weighted_metrics"] is not None) == (family in ("bert_pretrainer", "seq2seq", "unilm"))
    if family == "elmo":
        assert own["loss"] is None and own["metrics"] is None  # its own loss and perplexities
        with pytest.raises(ValueError, match="do not pass `weighted_metrics`"):
            model.compile(weighted_metrics=["accuracy"])
        return
    assert own["loss"] is not None
    # Another optimizer alone: the loss and metrics stay the task's own.
    model.compile(optimizer=keras.optimizers.SGD(0.1))
    given = model.get_compile_config()
    assert isinstance(model.optimizer, keras.optimizers.SGD) and own["optimizer"] != given["optimizer"]
    assert {k: given[k] for k in ("loss", "metrics", "weighted_metrics")} == {
        k: own[k] for k in ("loss", "metrics", "weighted_metrics")
    }
    # Metrics switched off one argument at a time; the rest stays "auto".
    model.compile(weighted_metrics=None)
    assert model.get_compile_config()["weighted_metrics"] is None
    assert model.get_compile_config()["metrics"] == own["metrics"]


@pytest.mark.parametrize("family", families.FAMILIES)
def test_trainable_and_non_trainable_weights_hold_every_weight_once(family):
    # Weights no output reads (BERT's pooler in UniLM, say) are kept from the
    # optimizer but still counted, so that summary() adds up to count_params().
    model = families.model(family)
    listed = [id(w) for w in model.trainable_weights + model.non_trainable_weights]
    assert sorted(listed) == sorted(id(w) for w in model.weights)
