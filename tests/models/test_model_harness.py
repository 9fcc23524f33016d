"""Every model family through the one model harness, and the registry kept whole."""

import inspect

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests import families
from tests.export import test_tf_serving
from tests.harness import assert_close_to_float32, compared_outputs, run_model_test
from tfnlp import models


@pytest.mark.parametrize("family", families.FAMILIES)
def test_model_harness(family):
    run_model_test(family)


def _looked_up_in_float8(lookup):
    """`keras.layers.Embedding.call` with its bfloat16 vectors cast to float8_e5m2 (2 significant
    bits, as a table kept in 8 bits to save memory would give) where bfloat16 (8 bits) was meant."""

    def call(self, inputs):
        vectors = lookup(self, inputs)
        if vectors.dtype != tf.bfloat16:
            return vectors
        return tf.cast(tf.cast(vectors, tf.dtypes.experimental.float8_e5m2), tf.bfloat16)

    return call


@pytest.mark.parametrize("family", families.FAMILIES)
def test_the_mixed_precision_check_fails_on_a_wrong_cast_in_every_output(family, monkeypatch):
    """The harness' `mixed_bfloat16` check passes bfloat16 and fails float8 embeddings, output by output.

    Every family looks its ids up in a `keras.layers.Embedding` (ELMo its
    characters). The check it replaces, `atol=0.1, rtol=0.05`, passed them in
    every family but seq2seq, and could not fail on a BERT classifier, whose
    logits are about 0.005 (asserted below).
    """
    keras.utils.set_random_seed(0)
    model = families.model(family)
    mixed = families.model(family, dtype="mixed_bfloat16")
    mixed.set_weights(model.get_weights())
    x, _, _ = families.first_batch(family)
    expected = compared_outputs(model, x)
    assert_close_to_float32(compared_outputs(mixed, x), expected)

    monkeypatch.setattr(keras.layers.Embedding, "call", _looked_up_in_float8(keras.layers.Embedding.call))
    wrong = compared_outputs(mixed, x)
    caught, missed = [], []
    for (path, value), reference in zip(keras.tree.flatten_with_path(wrong), keras.tree.flatten(expected),
                                        strict=True):
        if value.dtype.is_floating:
            try:
                assert_close_to_float32(value, reference)
            except AssertionError:
                caught.append(path)
            else:
                missed.append(path)
    assert caught and not missed, f"{family}: float8 embeddings pass in {missed}"
    if family == "bert_classifier":
        np.testing.assert_allclose(tf.cast(wrong["output"], tf.float32), expected["output"], atol=0.1, rtol=0.05)


@pytest.mark.parametrize("family", families.FAMILIES)
def test_a_family_model_is_or_holds_its_model_classes(family):
    model = families.model(family)
    own = {type(model).__name__, type(getattr(model, "backbone", model)).__name__}
    assert own == set(families.get(family).model_classes), family


def test_every_public_model_class_is_trained_and_served_by_a_registered_family():
    public = {name for name, cls in inspect.getmembers(models, inspect.isclass)
              if issubclass(cls, keras.Model) and cls is not models.Backbone}  # the abstract base
    covered = {name for names in families.model_classes().values() for name in names}
    missing = public - covered - set(families.NOT_TRAINED)
    assert not missing, f"add a family for {sorted(missing)} to tests/families.py"
    exported_as = families.exported_as()
    assert set(exported_as) == public, "say which export serves each model class"
    assert set(exported_as.values()) == set(test_tf_serving.SIGNATURES)


def test_every_family_cli_command_is_registered():
    from tfnlp.cli import pretrain, tasks

    commands = {"pretrain": set(pretrain.SPECS), "finetune": set(tasks.names("finetune"))}
    for family in families.FAMILIES:
        cli = families.get(family).cli
        assert cli is None or cli[1] in commands[cli[0]], (family, cli)


@pytest.mark.parametrize("family", families.FAMILIES)
def test_compile_fills_in_each_auto_argument_alone(family):
    """`compile()`'s "auto" is decided argument by argument (tfnlp.models.Task), in every family."""
    spec = families.get(family)
    model = families.model(family)
    model.compile()
    own = model.get_compile_config()
    # Tasks whose targets carry padding weights report weighted metrics.
    assert (own["weighted_metrics"] is not None) == spec.weighted_metrics
    if spec.own_loss:
        assert own["loss"] is None and own["metrics"] is None  # its own loss and perplexities (ELMo)
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
