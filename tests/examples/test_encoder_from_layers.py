import os

import keras
import numpy as np

from examples import encoder_from_layers


def test_encoder_from_layers_runs_end_to_end_on_a_small_budget(tmp_path):
    accuracy, majority = encoder_from_layers.main([
        "--epochs", "1", "--max-train-examples", "256", "--sequence-length", "32",
        "--hidden-dim", "16", "--num-heads", "2", "--output", str(tmp_path),
    ])
    assert 0.0 <= accuracy <= 1.0 and 0.5 <= majority <= 1.0
    model = keras.saving.load_model(os.path.join(tmp_path, "classifier.keras"), safe_mode=True)
    probabilities = model.predict(np.array([[2, 3, 4, 0, 0]], np.int32), verbose=0)
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, rtol=1e-5)
    assert (tmp_path / "vocab.txt").read_text().split("\n")[:2] == ["", "[UNK]"]
