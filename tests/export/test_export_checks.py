"""Exports refuse settings that would fail later, on requests, and check requests they cannot pre-check."""

import numpy as np
import pytest
import tensorflow as tf

from tfnlp import data, export, models

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
        "classify_pairs": export.export_classifier(classifier, _preprocessor(), str(tmp_path / "c"),
                                                   labels=["bad", "good"]),
        "encode_pairs": export.export_backbone(_backbone(), _preprocessor(), str(tmp_path / "b")),
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
    path = export.export_backbone(backbone, _preprocessor(), str(tmp_path / "b"))
    assert set(tf.saved_model.load(path).signatures) == {"serving_default"}
    classifier = models.TransformerClassifier(len(VOCABULARY), num_classes=2, num_layers=1,
                                              num_heads=2, hidden_dim=8, intermediate_dim=16,
                                              num_segments=1)
    path = export.export_classifier(classifier, _preprocessor(), str(tmp_path / "c"), ["n", "p"])
    served = tf.saved_model.load(path).signatures
    assert set(served) == {"serving_default"}
    assert served["serving_default"](text=tf.constant(["good food"]))["label"].shape == (1,)


@pytest.mark.parametrize("model_tokens, tokenizer_tokens", [(len(VOCABULARY) - 2, VOCABULARY),
                                                            (200, VOCABULARY)])
def test_the_tokenizer_must_have_the_models_vocabulary_size(tmp_path, model_tokens, tokenizer_tokens):
    # A larger tokenizer served some texts and failed on others (ids out of
    # range); fill-mask with a smaller one failed on every [MASK].
    backbone = _backbone(vocabulary_size=model_tokens)
    preprocessor = _preprocessor(tokenizer_tokens)
    message = f"has {len(tokenizer_tokens)} tokens but the model's vocabulary has {model_tokens}"
    with pytest.raises(ValueError, match=message):
        export.export_backbone(backbone, preprocessor, str(tmp_path / "b"))
    with pytest.raises(ValueError, match=message):
        export.export_classifier(models.BertClassifier(backbone, 2), preprocessor,
                                 str(tmp_path / "c"), ["n", "p"])
    with pytest.raises(ValueError, match=message):
        export.export_fill_mask(models.BertPretrainer(backbone), preprocessor, str(tmp_path / "f"))


def test_fill_mask_top_k_is_at_most_the_vocabulary(tmp_path):
    pretrainer = models.BertPretrainer(_backbone())
    with pytest.raises(ValueError, match=rf"`top_k` must be at most the vocabulary size "
                                         rf"\({len(VOCABULARY)}\), got 20"):
        export.export_fill_mask(pretrainer, _preprocessor(), str(tmp_path), top_k=20)
    path = export.export_fill_mask(pretrainer, _preprocessor(), str(tmp_path),
                                   top_k=len(VOCABULARY))
    served = tf.saved_model.load(path).signatures["serving_default"]
    assert served(text=tf.constant(["good [MASK]"]))["tokens"].shape == (1, 8, len(VOCABULARY))
