"""`model.quantize()`: heads tied to a quantized embedding read the dequantized table.

The heads of BertPretrainer and UniLM (`MaskedLMHead`) and of a tied
TransformerSeq2Seq (`TokenLogits`), each in a small model of its own:
`quantize` grows slow with every model a process has built (4.5 s for
the two whole models alone, 70 s late in a CI worker).
"""

import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfnlp import layers


def _quantized(model, mode):
    with warnings.catch_warnings():  # "Layer ... does not have a `quantize` method": nothing to quantize
        warnings.simplefilter("ignore", UserWarning)
        model.quantize(mode)


def _tied_model(head_kind):
    keras.utils.set_random_seed(0)
    ids = keras.Input((4,), dtype="int32")
    embedding = keras.layers.Embedding(50, 16)
    hidden = embedding(ids)
    if head_kind == "masked_lm":
        positions = keras.Input((2,), dtype="int32")
        logits = layers.MaskedLMHead(50, token_embedding=embedding)(hidden, masked_positions=positions)
        return keras.Model([ids, positions], logits), [tf.constant([[2, 5, 6, 9]]), tf.constant([[1, 2]])]
    logits = layers.TokenLogits(50, token_embedding=embedding)(hidden)
    return keras.Model(ids, logits), [tf.constant([[2, 5, 6, 9]])]


@pytest.mark.parametrize("head_kind", ["masked_lm", "token_logits"])
@pytest.mark.parametrize("mode", ["int8", "int4"])
def test_tied_heads_stay_close_to_float(head_kind, mode):
    model, inputs = _tied_model(head_kind)
    reference = model(inputs).numpy()
    _quantized(model, mode)
    embedding = next(layer for layer in model.layers if isinstance(layer, keras.layers.Embedding))
    assert embedding.quantization_mode == mode
    quantized = model(inputs).numpy()
    # The raw integer codes gave logits ~100x too large (0.16 -> 627 for BERT's head).
    scale = np.abs(reference).max()
    np.testing.assert_allclose(quantized, reference, atol=(0.05 if mode == "int8" else 0.3) * scale)
