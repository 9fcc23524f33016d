"""Models trained under a mixed-precision policy serve float32 results, in Python and in TF Serving's C++ loader."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops the SavedModels use)

from tests.export.fresh_process import ServingProcess
from tests.harness import assert_close_to_float32
from tfnlp import data, export, models

TEXTS = ["The cat sat on the mat.", "", "great food, would buy again"]


def _served_by_tf_serving_loader(path):
    with ServingProcess(path, backend="cpp") as process:
        return process("serving_default", text=TEXTS)


def _logits(probabilities, like):
    """The logits that gave `probabilities`, each row moved to the mean of that row of
    `like` (a softmax drops it). Two probabilities near 1/2 stay close whatever the
    logits' error; the logits are compared at their own scale."""
    log = np.log(np.asarray(probabilities, np.float64))
    return log - log.mean(axis=-1, keepdims=True) + np.mean(like, axis=-1, keepdims=True)


def _same_weights(make, policy):
    reference, mixed = make(None), make(policy)
    mixed.set_weights(reference.get_weights())
    return reference, mixed


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_classifier_and_backbone_exports_serve_float32(policy, corpus_vocabulary, tmp_path):
    preprocessor = data.BertPreprocessor(data.WordPieceTokenizer(corpus_vocabulary), 16)
    reference, mixed = _same_weights(
        lambda dtype: models.TransformerClassifier(len(corpus_vocabulary), 2, num_layers=1,
                                                   num_heads=2, hidden_dim=16, dtype=dtype),
        policy,
    )
    path = export.export_classifier(mixed, str(tmp_path / "classifier"), preprocessor=preprocessor, labels=["a", "b"])
    served = tf.saved_model.load(path).signatures["serving_default"](text=tf.constant(TEXTS))
    assert served["probabilities"].dtype == tf.float32
    expected = reference(preprocessor(tf.constant(TEXTS))).numpy()
    assert_close_to_float32(_logits(served["probabilities"], expected), expected)
    cpp = _served_by_tf_serving_loader(path)
    assert cpp["probabilities"].dtype == np.float32
    assert_close_to_float32(_logits(cpp["probabilities"], expected), expected)

    reference, mixed = _same_weights(
        lambda dtype: models.BertBackbone(len(corpus_vocabulary), 1, 2, 16, max_sequence_length=16,
                                          dtype=dtype),
        policy,
    )
    path = export.export_backbone(mixed, str(tmp_path / "backbone"), preprocessor=preprocessor)
    served = tf.saved_model.load(path).signatures["serving_default"](text=tf.constant(TEXTS))
    for name, value in served.items():
        if value.dtype.is_floating:
            assert value.dtype == tf.float32, name
            assert np.all(np.isfinite(value.numpy())), name
    expected = reference(preprocessor(tf.constant(TEXTS)))
    assert_close_to_float32({k: served[k] for k in expected}, expected)
    cpp = _served_by_tf_serving_loader(path)
    assert_close_to_float32({k: cpp[k] for k in expected}, expected)
    np.testing.assert_allclose(cpp["sequence_output"], served["sequence_output"], atol=1e-5)


def test_seq2seq_export_serves_float32_scores(corpus_vocabulary, tmp_path):
    tokenizer = data.WordPieceTokenizer(corpus_vocabulary)
    model = models.TransformerSeq2Seq(len(corpus_vocabulary), num_encoder_layers=1,
                                      num_decoder_layers=1, hidden_dim=16, num_heads=2,
                                      dtype="mixed_float16")
    path = export.export_seq2seq(model, str(tmp_path / "translate"), source_tokenizer=tokenizer,
                                 target_tokenizer=tokenizer, source_length=12, max_length=6, beam_size=2)
    served = tf.saved_model.load(path).signatures["serving_default"](text=tf.constant(TEXTS))
    assert served["scores"].dtype == tf.float32 and np.all(np.isfinite(served["scores"].numpy()))
    assert served["token_ids"].dtype == tf.int32
    cpp = _served_by_tf_serving_loader(path)
    np.testing.assert_array_equal(cpp["token_ids"], served["token_ids"])
    np.testing.assert_allclose(cpp["scores"], served["scores"], atol=1e-5)
