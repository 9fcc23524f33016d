"""Importing a Hugging Face `BertForTokenClassification` into a `BertTokenClassifier`."""

import json
import shutil

import numpy as np
import pytest

from tests.harness import assert_allclose
from tfnlp import models

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
CONFIG = {"vocab_size": 100, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
          "intermediate_size": 48, "max_position_embeddings": 32, "hidden_act": "gelu"}


def _save(model, directory):
    """`model` with random, non-zero biases and norms (transformers starts them at 0 / 1) and
    logits of order 1 (not 0.1), saved."""
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "bias" in name or "LayerNorm" in name:
                parameter.add_(torch.randn_like(parameter) * 0.05)
            if name == "classifier.weight":
                parameter.mul_(20.0)
    model.eval().save_pretrained(directory, safe_serialization=True)
    return model


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A random `BertForTokenClassification` with IOB2 labels, saved; and the model."""
    torch.manual_seed(0)
    config = transformers.BertConfig(**CONFIG, id2label=dict(enumerate(TAGS)))
    directory = tmp_path_factory.mktemp("token_classifier")
    return directory, _save(transformers.BertForTokenClassification(config), directory)


def _padded_batch():
    rng = np.random.default_rng(0)
    ids = rng.integers(5, CONFIG["vocab_size"], (3, 12)).astype("int32")
    mask = np.ones((3, 12), "int32")
    mask[1, 9:] = 0
    mask[2, 5:] = 0
    segments = np.zeros((3, 12), "int32")
    segments[:, 6:] = 1
    return {"token_ids": ids * mask, "segment_ids": segments * mask, "padding_mask": mask}


def _gappy_positions(mask):
    """Some pieces of each sentence as first pieces, in order, 0 (no word) after them."""
    rng = np.random.default_rng(1)
    positions = np.zeros(mask.shape, "int32")
    for row, length in enumerate(mask.sum(axis=1)):
        chosen = np.sort(rng.choice(np.arange(1, length), (length - 1) // 2 + 1, replace=False))
        positions[row, :len(chosen)] = chosen
    return positions


@pytest.mark.parametrize("case", ["every_piece_a_word", "words_with_gaps"])
def test_logits_at_each_words_first_piece_are_hugging_faces_there(checkpoint, case):
    directory, reference = checkpoint
    x = _padded_batch()
    if case == "every_piece_a_word":  # each real piece but [CLS] (position 0: no word)
        positions = (np.arange(12)[None, :] * x["padding_mask"]).astype("int32")
    else:
        positions = _gappy_positions(x["padding_mask"])
    with torch.no_grad():
        expected = reference(input_ids=torch.tensor(x["token_ids"], dtype=torch.long),
                             token_type_ids=torch.tensor(x["segment_ids"], dtype=torch.long),
                             attention_mask=torch.tensor(x["padding_mask"], dtype=torch.long)).logits.numpy()
    tagger = models.load_hugging_face_token_classifier(str(directory))
    assert tagger.tag_names == TAGS and tagger.num_tags == 5
    logits = tagger({**x, "word_positions": positions}).numpy()  # (B, W, K), training=False
    words = positions > 0
    assert words.sum() == (14 if case == "words_with_gaps" else x["padding_mask"].sum() - 3)
    expected_at_words = np.take_along_axis(expected, positions[:, :, None], axis=1)
    assert_allclose(logits[words], expected_at_words[words], atol=1e-5)


def test_a_pytorch_bin_loads_as_the_safetensors_do_and_a_crf_keeps_the_logits(checkpoint, tmp_path):
    directory, reference = checkpoint
    shutil.copy(directory / "config.json", tmp_path / "config.json")
    torch.save(reference.state_dict(), tmp_path / "pytorch_model.bin")
    x = {**_padded_batch(), "word_positions": _gappy_positions(_padded_batch()["padding_mask"])}
    expected = models.load_hugging_face_token_classifier(str(directory))(x)
    renamed = ["O", "B-P", "I-P", "B-L", "I-L"]
    tagger = models.load_hugging_face_token_classifier(str(tmp_path), tag_names=renamed, crf=True)
    assert tagger.tag_names == renamed and tagger.crf is not None
    assert_allclose(tagger(x), expected, atol=0.0)


def test_tag_names_of_another_count_are_refused_by_name(checkpoint):
    directory, _ = checkpoint
    with pytest.raises(ValueError, match=r"`tag_names` has 3 names but the checkpoint has `num_labels`=5"):
        models.load_hugging_face_token_classifier(str(directory), tag_names=["O", "B-PER", "I-PER"])


def test_placeholder_labels_give_no_tag_names_and_need_them_for_a_preprocessor(tmp_path):
    torch.manual_seed(0)
    _save(transformers.BertForTokenClassification(transformers.BertConfig(**CONFIG, num_labels=3)), tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["id2label"]["0"] == "LABEL_0"
    tagger = models.load_hugging_face_token_classifier(str(tmp_path))
    assert tagger.tag_names is None and tagger.num_tags == 3
    from tfnlp import data
    vocabulary = list(data.SPECIAL_TOKENS) + [f"w{i}" for i in range(20)]
    preprocessor = data.BertPreprocessor(data.WordPieceTokenizer(vocabulary), 16)
    with pytest.raises(ValueError, match=r"does not name its labels .*pass `tag_names`"):
        models.load_hugging_face_token_classifier(str(tmp_path), preprocessor=preprocessor)


@pytest.mark.parametrize("model, message", [
    ("BertModel", r"has no token-classification head \(`classifier.weight` and `classifier.bias`\) \(its "
                  r"config says architectures=\['BertModel'\]\): it is not a BertForTokenClassification"),
    ("BertForSequenceClassification", r"architectures=\['BertForSequenceClassification'\], not "
                                      r"BertForTokenClassification"),
])
def test_a_checkpoint_of_another_bert_model_is_refused(tmp_path, model, message):
    torch.manual_seed(0)
    config = transformers.BertConfig(**CONFIG, id2label=dict(enumerate(TAGS)))
    getattr(transformers, model)(config).save_pretrained(tmp_path, safe_serialization=True)
    with pytest.raises(ValueError, match=message):
        models.load_hugging_face_token_classifier(str(tmp_path))


def test_a_head_that_does_not_fit_the_config_is_refused_by_name(checkpoint, tmp_path):
    directory, _ = checkpoint
    shutil.copy(directory / "model.safetensors", tmp_path / "model.safetensors")
    config = json.loads((directory / "config.json").read_text())
    del config["id2label"], config["label2id"]  # transformers' default: 2 labels
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"classifier.weight \(5, 32\) and classifier.bias \(5,\) do not fit "
                                         r"the config's `num_labels`=2"):
        models.load_hugging_face_token_classifier(str(tmp_path))
