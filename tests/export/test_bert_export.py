"""Backbone features and fill-mask served without tfnlp: `tf.saved_model.load` and TF Serving's C++ loader."""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tests.export.fresh_process import BACKENDS, check_any_batch_is_served, requests
from tfnlp import data, export, models


@pytest.fixture(scope="module")
def bert(corpus_vocabulary):
    preprocessor = data.BertPreprocessor(data.WordPieceTokenizer(corpus_vocabulary), 24)
    backbone = models.BertBackbone.from_architecture(
        "bert_tiny", vocabulary_size=len(corpus_vocabulary), max_sequence_length=24
    )
    return backbone, models.BertPretrainer(backbone), preprocessor


@pytest.fixture(scope="module")
def exported(bert, tmp_path_factory):
    """The backbone's export and the fill-mask export (top 3, 2 masks), written once for the module."""
    backbone, pretrainer, preprocessor = bert
    root = tmp_path_factory.mktemp("bert_exports")
    return {
        "backbone": export.export_backbone(backbone, str(root / "bert"), preprocessor=preprocessor),
        "fill_mask": export.export_fill_mask(pretrainer, str(root / "fill"), preprocessor=preprocessor,
                                             top_k=3, max_masks=2),
    }


@pytest.mark.parametrize("backend", BACKENDS)
def test_backbone_features_match_in_memory(bert, exported, processes, backend):
    backbone, _, preprocessor = bert
    texts = ["The cat sat on the mat.", "", b"\xff not utf-8", "long " * 50_000]
    served = requests(processes(exported["backbone"], backend), [
        {"signature": "serving_default", "inputs": {"text": texts}},
        {"signature": "serving_default", "inputs": {"text": texts[:1]}},
        {"signature": "encode_pairs", "inputs": {"text_a": texts[:2], "text_b": ["b side", ""]}},
    ])
    batches = [
        preprocessor(tf.constant([t if isinstance(t, bytes) else t.encode() for t in texts])),
        preprocessor(tf.constant([texts[0]])),
        preprocessor((tf.constant(texts[:2]), tf.constant(["b side", ""]))),
    ]
    for result, inputs in zip(served, batches, strict=True):
        expected = backbone(inputs)
        np.testing.assert_allclose(result["pooled_output"], expected["pooled_output"], atol=1e-5)
        np.testing.assert_allclose(result["sequence_output"], expected["sequence_output"], atol=1e-5)
        np.testing.assert_array_equal(result["padding_mask"], inputs["padding_mask"])


@pytest.mark.parametrize("backend", BACKENDS)
def test_fill_mask_returns_top_k_for_every_mask(bert, exported, processes, backend):
    _, pretrainer, preprocessor = bert
    process = processes(exported["fill_mask"], backend)
    texts = ["The [MASK] sat on the [MASK].", "no mask here", "[MASK]", "a [MASK] b [MASK] c [MASK]"]
    result = requests(process, [{"signature": "serving_default", "inputs": {"text": texts}}])[0]
    assert result["mask_count"] == [2, 0, 1, 2]  # at most max_masks answered
    tokenizer = preprocessor.tokenizer
    # The first text: where are its masks, and what does the in-memory model say?
    pieces = [tokenizer(tf.constant(p)).numpy().tolist() for p in ["The ", " sat on the ", "."]]
    ids = [tokenizer.cls_id, *pieces[0], tokenizer.mask_id, *pieces[1], tokenizer.mask_id, *pieces[2], tokenizer.sep_id]
    positions = [i for i, t in enumerate(ids) if t == tokenizer.mask_id]
    assert result["mask_positions"][0] == positions
    inputs = preprocessor.packer(tf.ragged.constant([ids[1:-1]], tf.int32))
    logits = pretrainer({**inputs, "masked_positions": tf.constant([positions])})["mlm"]
    probabilities, top = tf.math.top_k(tf.nn.softmax(logits), 3)
    np.testing.assert_array_equal(result["token_ids"][0], top[0])
    np.testing.assert_allclose(result["probabilities"][0], probabilities[0], atol=1e-5)
    vocabulary = tokenizer.get_vocabulary()
    assert result["tokens"][0] == [[vocabulary[i] for i in row] for row in top[0].numpy()]
    np.testing.assert_array_equal(result["probabilities"][1], 0.0)  # no mask: padded rows

    # A batch of one, and bad input: valid, finite answers.
    again, bad = requests(process, [
        {"signature": "serving_default", "inputs": {"text": texts[:1]}},
        {"signature": "serving_default", "inputs": {"text": ["", b"\xff\xfe [MASK]", "[MASK] " * 40_000]}},
    ])
    np.testing.assert_allclose(again["probabilities"][0], result["probabilities"][0], atol=1e-5)
    assert bad["mask_count"] == [0, 1, 2]  # the long one: cut to the packed length, max_masks
    assert np.isfinite(np.array(bad["probabilities"])).all()


def test_fill_mask_drops_a_mask_split_by_the_input_cut(bert, corpus_vocabulary):
    _, pretrainer, _ = bert
    text = "word [MASK] and [MASK]"  # the second [MASK] spans bytes 16-21

    def fill(max_input_bytes, texts):
        tokenizer = data.WordPieceTokenizer(corpus_vocabulary, max_input_bytes=max_input_bytes)
        module = export.bert.FillMaskServingModule(pretrainer, data.BertPreprocessor(tokenizer, 24),
                                                   top_k=3, max_masks=2)
        return {k: v.numpy() for k, v in module.fill_mask(tf.constant(texts)).items()}

    unsplit = fill(100, ["word [MASK] and ", text, "[MA", "[MASK"])
    assert unsplit["mask_count"].tolist() == [1, 2, 0, 0]  # texts that were not cut: as they are
    for cut_at in range(17, 22):  # the cut leaves "[", "[M", ..., "[MASK"
        filled = fill(cut_at, [text])
        for name in ("mask_count", "mask_positions", "token_ids"):
            np.testing.assert_array_equal(filled[name][0], unsplit[name][0], err_msg=f"{cut_at}")
        np.testing.assert_allclose(filled["probabilities"][0], unsplit["probabilities"][0], atol=1e-6)


@pytest.mark.parametrize("kind", ["backbone", "fill_mask"])
def test_saved_model_cli_lists_the_signatures(exported, kind):
    path = exported[kind]
    if kind == "backbone":
        names = ("serving_default", "encode_pairs", "pooled_output", "sequence_output", "padding_mask")
    else:
        names = ("serving_default", "tokens", "probabilities", "mask_positions", "mask_count")
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    shown = subprocess.run([cli, "show", "--dir", path, "--all"], capture_output=True, text=True,
                           timeout=300, check=True).stdout
    for name in names:
        assert name in shown


def _encoded(outputs, batch):
    assert outputs["sequence_output"].shape == (batch, 24, 128)
    assert outputs["pooled_output"].shape == (batch, 128)
    mask = outputs["padding_mask"]
    assert mask.shape == (batch, 24) and set(np.unique(mask)) <= {0, 1}
    assert (mask[:, 0] == 1).all() and (np.diff(mask, axis=1) <= 0).all()  # [CLS] first, padding last


def _filled(outputs, batch):
    probabilities, count = outputs["probabilities"], outputs["mask_count"]
    assert probabilities.shape == outputs["tokens"].shape == (batch, 2, 3)
    assert ((count >= 0) & (count <= 2)).all()
    assert ((probabilities >= 0) & (probabilities <= 1)).all() and (np.diff(probabilities, axis=-1) <= 0).all()
    answered = np.arange(2)[None, :] < count[:, None]
    assert (probabilities[answered].sum(-1) <= 1 + 1e-5).all() and not probabilities[~answered].any()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("signature, names", [
    ("serving_default", ["text"]), ("encode_pairs", ["text_a", "text_b"]), ("fill_mask", ["text"]),
])
def test_any_batch_of_any_text_is_served(exported, processes, signature, names, backend):
    if signature == "fill_mask":
        process, signature, check = processes(exported["fill_mask"], backend), "serving_default", _filled
    else:
        process, check = processes(exported["backbone"], backend), _encoded
    check_any_batch_is_served(process, signature, names, check)
