"""`.keras` files saved when BERT's task models called their backbone as one layer still load.

The files in `files/` were written by tfnlp 5c38bb5 (`files/make_saved_models.py`), before the
task models ran their backbone's last block at the read positions only. The weight paths in the
file and the order of the optimizer's variables must be unchanged for them to load exactly.
"""

import os

import keras
import numpy as np
import pytest

from tests.harness import assert_allclose
from tests.models.files import make_saved_models

FILES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "files")


@pytest.mark.parametrize("name", ["pretrainer", "classifier", "unilm"])
def test_a_file_saved_by_the_full_pass_version_loads_exactly(name):
    expected = np.load(os.path.join(FILES, "expected.npz"))
    model = keras.saving.load_model(os.path.join(FILES, f"{name}.keras"), safe_mode=True)
    _, inputs, targets = make_saved_models.task_models()[name]
    outputs = model.predict(inputs, verbose=0)
    for key, value in (outputs.items() if isinstance(outputs, dict) else [("", outputs)]):
        assert_allclose(value, expected[f"{name}/output{'/' if key else ''}{key}"], atol=1e-6)
    slots = [key for key in expected.files if key.startswith(f"{name}/optimizer/")]
    assert len(slots) == len(model.optimizer.variables) > 20
    for index, variable in enumerate(model.optimizer.variables):
        np.testing.assert_array_equal(variable.numpy(), expected[f"{name}/optimizer/{index}"])
    # The model trains on from there (its compile() came back with the file).
    assert np.isfinite(model.train_on_batch(inputs, targets)).all()
