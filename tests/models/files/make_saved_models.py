"""Writes the `.keras` files of `test_saved_before_sparse_last_block.py` (run once, kept).

They were written by tfnlp 5c38bb5, whose BERT task models called their
backbone as one layer (every position of the last block computed); later
versions run the last block at the read positions only and must load them
unchanged. `python tests/models/files/make_saved_models.py` at that commit
rewrites them; `expected.npz` holds each model's outputs on its inputs
and its optimizer's variables, in order.
"""

import os

import keras
import numpy as np

from tfnlp import models

HERE = os.path.dirname(os.path.abspath(__file__))
SIZE = {"vocabulary_size": 30, "num_layers": 2, "num_heads": 2, "hidden_dim": 8,
        "intermediate_dim": 16, "max_sequence_length": 8, "dropout": 0.0}
INPUTS = {
    "token_ids": np.array([[2, 7, 8, 9, 3, 11, 3, 0], [2, 12, 13, 3, 14, 15, 16, 3]], "int32"),
    "segment_ids": np.array([[0, 0, 0, 0, 0, 1, 1, 0], [0, 0, 0, 0, 1, 1, 1, 1]], "int32"),
    "padding_mask": np.array([[1, 1, 1, 1, 1, 1, 1, 0], [1] * 8], "int32"),
}
MASKED_POSITIONS = np.array([[1, 5], [2, 6]], "int32")


def task_models():
    """`{name: (model, inputs, targets)}`, each compiled with its defaults."""
    bert = models.BertBackbone(**SIZE)
    unilm = models.UniLMBackbone(**SIZE)
    masked = {**INPUTS, "masked_positions": MASKED_POSITIONS}
    return {
        "pretrainer": (models.BertPretrainer(bert), masked,
                       {"mlm": np.array([[7, 11], [13, 15]]), "nsp": np.array([0, 1])}),
        "classifier": (models.BertClassifier(bert, num_classes=3), INPUTS, np.array([2, 0])),
        "unilm": (models.UniLM(unilm), {**masked, "objective": np.array([0, 3], "int32")},
                  np.array([[7, 11], [13, 15]])),
    }


def main():
    keras.utils.set_random_seed(7)
    expected = {}
    for name, (model, x, y) in task_models().items():
        model.compile()
        model.fit(x, y, epochs=2, verbose=0)
        model.save(os.path.join(HERE, f"{name}.keras"))
        outputs = model.predict(x, verbose=0)
        for key, value in (outputs.items() if isinstance(outputs, dict) else [("", outputs)]):
            expected[f"{name}/output{'/' if key else ''}{key}"] = value
        for index, variable in enumerate(model.optimizer.variables):
            expected[f"{name}/optimizer/{index}"] = variable.numpy()
    np.savez_compressed(os.path.join(HERE, "expected.npz"), **expected)


if __name__ == "__main__":
    main()
