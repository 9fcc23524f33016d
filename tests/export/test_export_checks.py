"""Exports refuse settings that would fail later, on requests, and check requests they cannot pre-check."""

import os

import numpy as np
import pytest
import tensorflow as tf

from tfnlp import data, export, models
from tfnlp.export import _common as export_common

VOCABULARY = list(data.SPECIAL_TOKENS) + ["good", "bad", "food", "taste"]
SIZE = len(VOCABULARY)


def _preprocessor(vocabulary=VOCABULARY, length=12):
    return data.BertPreprocessor(data.WordPieceTokenizer(vocabulary), length)


def _backbone(vocabulary_size=SIZE, num_segments=2):
    return models.BertBackbone(vocabulary_size, num_layers=1, num_heads=2, hidden_dim=8,
                               intermediate_dim=16, max_sequence_length=16,
                               num_segments=num_segments)


def test_pair_signatures_check_that_both_sides_hold_as_many_texts(tmp_path):
    # Before, a batch-size mismatch failed deep in tensorflow-text's trimmer
    # ("Shapes of all inputs must match") in both pair signatures.
    classifier = models.BertClassifier(_backbone(), num_classes=2)
    paths = {
        "classify_pairs": export.export_classifier(classifier, str(tmp_path / "c"), preprocessor=_preprocessor(),
                                                   labels=["bad", "good"]),
        "encode_pairs": export.export_backbone(_backbone(), str(tmp_path / "b"), preprocessor=_preprocessor()),
    }
    for signature, path in paths.items():
        served = tf.saved_model.load(path).signatures[signature]
        served(text_a=tf.constant(["good", "bad"]), text_b=tf.constant(["food", ""]))  # fine
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match="`text_a` and `text_b` must hold the same number of texts"):
            served(text_a=tf.constant(["good", "bad"]), text_b=tf.constant(["food", "", "taste"]))


def test_the_packer_checks_the_rows_of_two_segments_of_unknown_batch_size():
    packer = data.SegmentPacker(8, start_id=2, end_id=3)
    spec = tf.RaggedTensorSpec([None, None], tf.int32)
    packed = tf.function(lambda a, b: packer((a, b))["token_ids"], input_signature=[spec, spec])
    a = tf.ragged.constant([[5, 6], [7]])
    np.testing.assert_array_equal(packed(a, a), packer((a, a))["token_ids"])
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"`inputs\[0\]` and `inputs\[1\]`"):
        packed(a, tf.ragged.constant([[5]]))


def test_a_single_segment_model_is_exported_without_the_pair_signatures(tmp_path):
    # Its pair signature could never succeed: segment 1 is outside a table of one row.
    backbone = _backbone(num_segments=1)
    path = export.export_backbone(backbone, str(tmp_path / "b"), preprocessor=_preprocessor())
    assert set(tf.saved_model.load(path).signatures) == {"serving_default"}
    classifier = models.TransformerClassifier(len(VOCABULARY), num_classes=2, num_layers=1,
                                              num_heads=2, hidden_dim=8, intermediate_dim=16,
                                              num_segments=1)
    path = export.export_classifier(classifier, str(tmp_path / "c"), preprocessor=_preprocessor(), labels=["n", "p"])
    served = tf.saved_model.load(path).signatures
    assert set(served) == {"serving_default"}
    assert served["serving_default"](text=tf.constant(["good food"]))["label"].shape == (1,)


def test_the_tokenizer_may_not_have_more_tokens_than_the_model(tmp_path):
    # It served some texts and failed on others (ids out of range).
    backbone = _backbone(vocabulary_size=SIZE - 2)
    message = f"has {SIZE} tokens but the model's vocabulary has only {SIZE - 2}"
    with pytest.raises(ValueError, match=message):
        export.export_backbone(backbone, str(tmp_path / "b"), preprocessor=_preprocessor())
    with pytest.raises(ValueError, match=message):
        export.export_classifier(models.BertClassifier(backbone, 2), str(tmp_path / "c"),
                                 preprocessor=_preprocessor(), labels=["n", "p"])
    with pytest.raises(ValueError, match=message):
        export.export_fill_mask(models.BertPretrainer(backbone), str(tmp_path / "f"), preprocessor=_preprocessor())


def test_fill_mask_answers_with_tokens_of_a_vocabulary_smaller_than_the_table(tmp_path):
    # Released checkpoints may pad the embedding table beyond vocab.txt; a
    # padding row was a candidate, and a request failed looking it up.
    pretrainer = models.BertPretrainer(_backbone(vocabulary_size=200))
    path = export.export_fill_mask(pretrainer, str(tmp_path), preprocessor=_preprocessor(), top_k=SIZE)
    served = tf.saved_model.load(path).signatures["serving_default"]
    outputs = served(text=tf.constant(["good [MASK] food", "[MASK]"]))
    ids = outputs["token_ids"][:, 0].numpy()
    assert ids.max() < SIZE and sorted(ids[0]) == list(range(SIZE))  # every token, once
    np.testing.assert_allclose(outputs["probabilities"][:, 0].numpy().sum(-1), 1.0, rtol=1e-5)


def test_fill_mask_top_k_is_at_most_the_vocabulary(tmp_path):
    pretrainer = models.BertPretrainer(_backbone())
    with pytest.raises(ValueError, match=rf"`top_k` must be at most the vocabulary size "
                                         rf"\({len(VOCABULARY)}\), got 20"):
        export.export_fill_mask(pretrainer, str(tmp_path), preprocessor=_preprocessor(), top_k=20)
    path = export.export_fill_mask(pretrainer, str(tmp_path), preprocessor=_preprocessor(),
                                   top_k=len(VOCABULARY))
    served = tf.saved_model.load(path).signatures["serving_default"]
    assert served(text=tf.constant(["good [MASK]"]))["tokens"].shape == (1, 8, len(VOCABULARY))


def test_a_version_appears_whole_or_not_at_all(tmp_path, monkeypatch):
    """TF Serving polls the model directory: it must never see a version without its warm-up file."""
    classifier = models.BertClassifier(_backbone(), num_classes=2)
    directory = tmp_path / "reviews"
    path = export.export_classifier(classifier, str(directory), preprocessor=_preprocessor(), labels=["n", "p"])
    assert os.listdir(directory) == ["1"]  # nothing staged is left behind
    assert os.path.exists(os.path.join(path, "assets.extra", "tf_serving_warmup_requests"))

    # An export that fails after the SavedModel is written leaves the served version as it was.
    before = tf.saved_model.load(path).signatures["serving_default"](text=tf.constant(["good"]))

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(export_common, "write_warmup_requests", fail)
    other = models.BertClassifier(_backbone(), num_classes=2)
    with pytest.raises(OSError, match="disk full"):
        export.export_classifier(other, str(directory), preprocessor=_preprocessor(), labels=["n", "p"])
    assert os.listdir(directory) == ["1"]
    after = tf.saved_model.load(path).signatures["serving_default"](text=tf.constant(["good"]))
    np.testing.assert_array_equal(after["probabilities"], before["probabilities"])

    # Re-exporting a version replaces it whole.
    monkeypatch.undo()
    export.export_classifier(other, str(directory), preprocessor=_preprocessor(), labels=["n", "p"])
    assert os.listdir(directory) == ["1"]
    replaced = tf.saved_model.load(path).signatures["serving_default"](text=tf.constant(["good"]))
    expected = tf.nn.softmax(other(_preprocessor()(tf.constant(["good"]))))
    np.testing.assert_allclose(replaced["probabilities"], expected, atol=1e-6)


@pytest.mark.parametrize("setting", [{"jit_compile": "yes"}, {"sampling": 1}])
def test_seq2seq_export_refuses_a_switch_that_is_not_a_bool(tmp_path, setting):
    model = models.TransformerSeq2Seq(SIZE, num_encoder_layers=1, num_decoder_layers=1,
                                      hidden_dim=8, num_heads=2, intermediate_dim=16)
    tokenizer = data.WordPieceTokenizer(VOCABULARY)
    name = next(iter(setting))
    with pytest.raises(ValueError, match=f"`{name}` must be True or False"):
        export.export_seq2seq(model, str(tmp_path / "m"), source_tokenizer=tokenizer,
                              target_tokenizer=tokenizer, source_length=8, max_length=8, **setting)
    assert not (tmp_path / "m").exists()
