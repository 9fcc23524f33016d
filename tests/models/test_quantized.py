"""`model.quantize()`: heads tied to a quantized embedding read the dequantized table."""

import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfnlp import models


def _quantized(model, mode):
    with warnings.catch_warnings():  # "Layer ... does not have a `quantize` method": nothing to quantize
        warnings.simplefilter("ignore", UserWarning)
        model.quantize(mode)


@pytest.mark.parametrize("mode", ["int8", "int4"])
def test_tied_heads_stay_close_to_float(mode):
    keras.utils.set_random_seed(0)
    backbone = models.BertBackbone(50, 1, 2, 16, max_sequence_length=16, dropout=0.0)
    pretrainer = models.BertPretrainer(backbone)
    x = {"token_ids": tf.constant([[2, 5, 6, 0]]), "segment_ids": tf.zeros((1, 4), tf.int32),
         "padding_mask": tf.constant([[1, 1, 1, 0]]), "masked_positions": tf.constant([[1, 2]])}
    translator = models.TransformerSeq2Seq(50, 40, num_encoder_layers=1, num_decoder_layers=1,
                                           hidden_dim=16, num_heads=2, dropout=0.0,
                                           tie_output_embedding=True)
    pair = {"encoder_token_ids": tf.constant([[2, 5, 6, 0]]), "encoder_padding_mask": tf.constant([[1, 1, 1, 0]]),
            "decoder_token_ids": tf.constant([[1, 4, 7]]), "decoder_padding_mask": tf.constant([[1, 1, 1]])}
    for model, inputs, pick in ((pretrainer, x, lambda out: out["mlm"]), (translator, pair, lambda out: out)):
        reference = pick(model(inputs)).numpy()
        _quantized(model, mode)
        embedding = backbone.token_embedding if model is pretrainer else translator.target_embedding
        assert embedding.quantization_mode == mode
        quantized = pick(model(inputs)).numpy()
        # The raw integer codes gave logits ~100x too large (0.16 -> 627 for BERT's).
        scale = np.abs(reference).max()
        np.testing.assert_allclose(quantized, reference, atol=(0.05 if mode == "int8" else 0.3) * scale)
