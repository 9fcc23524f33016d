import keras
import numpy as np
import pytest

from tests.training import families
from tfnlp import training


@pytest.mark.parametrize("family", families.FAMILIES)
def test_every_family_trains_in_float16_with_loss_scaling(family):
    model = families.model(family, dtype="mixed_float16")
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    history = training.fit(model, families.batches(family), steps=3, verbose=0)
    assert np.all(np.isfinite(history["loss"])) and history["steps"] == 3


def test_bfloat16_needs_no_loss_scaling():
    model = families.model("elmo", dtype="mixed_bfloat16")
    assert not isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    assert np.all(np.isfinite(training.fit(model, families.batches("elmo"), steps=2, verbose=0)["loss"]))


def test_the_wrapper_is_applied_once():
    model = families.model("transformer_classifier", dtype="mixed_float16")
    wrapped = model.optimizer
    assert training.with_loss_scaling(wrapped, model) is wrapped
    assert not isinstance(training.with_loss_scaling("sgd", families.model("seq2seq")),
                          keras.optimizers.LossScaleOptimizer)
