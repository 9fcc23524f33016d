"""Importing released BERT weights: Google TF1 checkpoints and Hugging Face."""

import json

import numpy as np
import pytest
import tensorflow as tf

from tests.harness import assert_allclose
from tfnlp import models

RNG = np.random.default_rng(0)


def _padded_pairs(vocabulary_size=300):
    ids = RNG.integers(5, vocabulary_size, (3, 16)).astype("int32")
    segments = np.zeros((3, 16), "int32")
    segments[:, 7:] = 1
    mask = np.ones((3, 16), "int32")
    mask[1, 12:] = 0
    mask[2, 9:] = 0
    return {"token_ids": ids * mask, "segment_ids": segments * mask, "padding_mask": mask}


def _random_pretrainer():
    backbone = models.BertBackbone(300, num_layers=2, num_heads=4, hidden_dim=64,
                                   intermediate_dim=96, max_sequence_length=32)
    pretrainer = models.BertPretrainer(backbone)
    for variable in pretrainer.weights:  # non-trivial biases and norms too
        variable.assign(RNG.normal(0, 0.05, variable.shape).astype("float32") + (
            1.0 if variable.path.endswith("gamma") else 0.0))
    return pretrainer


def test_google_checkpoint_round_trip_with_original_names(tmp_path):
    pretrainer = _random_pretrainer()
    models.save_google_checkpoint(pretrainer.backbone, str(tmp_path), pretrainer=pretrainer)
    shapes = dict(tf.train.list_variables(str(tmp_path / "bert_model.ckpt")))
    assert shapes["bert/encoder/layer_1/attention/self/query/kernel"] == [64, 64]
    assert shapes["bert/encoder/layer_0/attention/output/dense/kernel"] == [64, 64]
    assert shapes["bert/embeddings/word_embeddings"] == [300, 64]
    assert shapes["cls/seq_relationship/output_weights"] == [2, 64]
    assert json.loads((tmp_path / "bert_config.json").read_text())["intermediate_size"] == 96
    loaded = models.load_google_checkpoint(str(tmp_path), pretrainer_cls=models.BertPretrainer)
    x = {**_padded_pairs(), "masked_positions": np.array([[1, 2], [3, 4], [5, 6]], "int32")}
    assert_allclose(loaded(x), pretrainer(x), atol=0.0)
    backbone_only = models.load_google_checkpoint(str(tmp_path))
    pairs = _padded_pairs()
    assert_allclose(backbone_only(pairs), pretrainer.backbone(pairs), atol=0.0)


def test_mismatches_are_all_reported_before_anything_changes(tmp_path):
    pretrainer = _random_pretrainer()
    models.save_google_checkpoint(pretrainer.backbone, str(tmp_path))
    config = json.loads((tmp_path / "bert_config.json").read_text())
    config["intermediate_size"] = 128  # the checkpoint has 96
    (tmp_path / "bert_config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"\(7 problems\)") as error:  # the setting, 3 tensors x 2 layers
        models.load_google_checkpoint(str(tmp_path))
    assert "intermediate_size=128 in the config, but the checkpoint's bert/encoder/layer_0/" in str(error.value)
    assert "layer_0/intermediate/dense/kernel: shape (64, 96)" in str(error.value)
    assert "layer_1/output/dense/kernel" in str(error.value)


def _saved_checkpoint(directory):
    """A random pretrainer's backbone saved in Google's format, and the saved tensors."""
    pretrainer = _random_pretrainer()
    models.save_google_checkpoint(pretrainer.backbone, str(directory))
    reader = tf.train.load_checkpoint(str(directory / "bert_model.ckpt"))
    return pretrainer, {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}


def _save_tensors(directory, weights):
    names = sorted(weights)
    tf.raw_ops.SaveV2(prefix=str(directory / "bert_model.ckpt"), tensor_names=names,
                      shape_and_slices=[""] * len(names), tensors=[tf.constant(weights[n]) for n in names])


def test_a_tensor_of_the_right_size_in_a_wrong_shape_is_listed_with_the_others(tmp_path):
    _, weights = _saved_checkpoint(tmp_path)
    query = "bert/encoder/layer_0/attention/self/query/kernel"
    output = "bert/encoder/layer_1/attention/output/dense/kernel"
    weights[query] = weights[query].reshape(-1)  # 64 x 64 values, flat
    weights[output] = weights[output].reshape(16, 4, 64)  # as many values, axes swapped
    _save_tensors(tmp_path, weights)
    with pytest.raises(ValueError, match=r"\(2 problems\)") as error:
        models.load_google_checkpoint(str(tmp_path))
    assert f"{query}: shape (4096,) does not fit" in str(error.value)
    assert f"{output}: shape (16, 4, 64) does not fit" in str(error.value)


def test_adam_slots_of_a_training_checkpoint_are_not_weights(tmp_path):
    pretrainer, weights = _saved_checkpoint(tmp_path)
    # What Google's run_pretraining.py saves besides the weights.
    weights.update({f"{n}/{slot}": np.zeros_like(v) for n, v in list(weights.items()) for slot in ("adam_m", "adam_v")})
    weights["global_step"] = np.int64(1000)
    _save_tensors(tmp_path, weights)
    pairs = _padded_pairs()
    assert_allclose(models.load_google_checkpoint(str(tmp_path))(pairs), pretrainer.backbone(pairs), atol=0.0)


def test_corrupt_checkpoint_is_a_clear_error(tmp_path):
    models.save_google_checkpoint(_random_pretrainer().backbone, str(tmp_path))
    data_file = next(tmp_path.glob("bert_model.ckpt.data-*"))
    data_file.write_bytes(data_file.read_bytes()[:100])  # truncated
    with pytest.raises(ValueError, match="corrupt or truncated"):
        models.load_google_checkpoint(str(tmp_path))
    (tmp_path / "bert_model.ckpt.index").write_bytes(b"garbage")
    with pytest.raises(ValueError, match="Cannot read the TF checkpoint"):
        models.load_google_checkpoint(str(tmp_path))


def test_a_bad_config_file_is_a_clear_error_naming_every_problem(tmp_path):
    config = tmp_path / "bert_config.json"
    config.write_text('{"vocab_size": 30, "hidden_size": 64')  # cut short
    with pytest.raises(ValueError, match="Cannot read the BERT config .*bert_config.json"):
        models.load_google_checkpoint(str(tmp_path))
    config.write_text('{"vocab_size": "30", "hidden_size": 64, "num_hidden_layers": 0}')
    with pytest.raises(ValueError) as error:
        models.load_google_checkpoint(str(tmp_path))
    for problem in ("vocab_size='30' is not a positive int", "num_hidden_layers=0",
                    "num_attention_heads missing", "intermediate_size missing",
                    "max_position_embeddings missing"):
        assert problem in str(error.value)


def test_matches_a_hugging_face_bert_after_import(tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=300, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=96, max_position_embeddings=32, hidden_act="gelu",
    )
    reference = transformers.BertForPreTraining(config).eval()
    with torch.no_grad():  # random, non-zero biases and norms (HF initialises them to 0 / 1)
        for name, parameter in reference.named_parameters():
            if "bias" in name or "LayerNorm" in name:
                parameter.add_(torch.randn_like(parameter) * 0.05)
    reference.save_pretrained(tmp_path, safe_serialization=True)
    pretrainer = models.load_hugging_face_checkpoint(str(tmp_path), pretrainer_cls=models.BertPretrainer)

    x = _padded_pairs()
    positions = np.array([[1, 2, 3], [4, 5, 6], [0, 7, 8]], "int32")
    with torch.no_grad():
        expected = reference(
            input_ids=torch.tensor(x["token_ids"], dtype=torch.long),
            token_type_ids=torch.tensor(x["segment_ids"], dtype=torch.long),
            attention_mask=torch.tensor(x["padding_mask"], dtype=torch.long),
            output_hidden_states=True,
        )
        pooled = reference.bert.pooler(expected.hidden_states[-1]).numpy()
    ours = pretrainer.backbone(x)
    # Every position, padding included: both mask padded keys only.
    assert_allclose(ours["sequence_output"], expected.hidden_states[-1].numpy(), atol=1e-4)
    assert_allclose(ours["pooled_output"], pooled, atol=1e-4)
    heads = pretrainer({**x, "masked_positions": positions})
    mlm = np.take_along_axis(expected.prediction_logits.numpy(), positions[:, :, None], axis=1)
    assert_allclose(heads["mlm"], mlm, atol=1e-4)
    assert_allclose(heads["nsp"], expected.seq_relationship_logits.numpy(), atol=1e-4)

    # An untied decoder cannot be reproduced by the tied head: refused.
    untied = transformers.BertForPreTraining(
        transformers.BertConfig(**{**config.to_dict(), "tie_word_embeddings": False})).eval()
    untied.save_pretrained(tmp_path / "untied", safe_serialization=True)
    with pytest.raises(ValueError, match="decoder not tied to the word embeddings"):
        models.load_hugging_face_checkpoint(str(tmp_path / "untied"), pretrainer_cls=models.BertPretrainer)
    assert models.load_hugging_face_checkpoint(str(tmp_path / "untied")).count_params() > 0  # its backbone

    # BertModel weights (no "bert." prefix, no heads) load into a backbone.
    reference.bert.save_pretrained(tmp_path / "model_only", safe_serialization=True)
    backbone = models.load_hugging_face_checkpoint(str(tmp_path / "model_only"))
    assert_allclose(backbone(x)["pooled_output"], pooled, atol=1e-4)


def _hugging_face_bert(directory, **overrides):
    """A random `BertModel` (6 heads, 3 segment types, non-trivial biases) saved by `save_pretrained`."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.BertConfig(**{
        "vocab_size": 300, "hidden_size": 96, "num_hidden_layers": 2, "num_attention_heads": 6,
        "intermediate_size": 128, "max_position_embeddings": 32, "type_vocab_size": 3,
        "hidden_act": "gelu", **overrides,
    })
    reference = transformers.BertModel(config).eval()
    with torch.no_grad():
        for name, parameter in reference.named_parameters():
            if "bias" in name or "LayerNorm" in name:
                parameter.add_(torch.randn_like(parameter) * 0.05)
    reference.save_pretrained(directory, safe_serialization=True)
    return reference


def _hugging_face_outputs(torch, reference, x):
    """`reference` (a transformers BERT) on the inputs `x`, without gradients."""
    with torch.no_grad():
        return reference(
            input_ids=torch.tensor(x["token_ids"], dtype=torch.long),
            token_type_ids=torch.tensor(x["segment_ids"], dtype=torch.long),
            attention_mask=torch.tensor(x["padding_mask"], dtype=torch.long),
        )


def _three_segments():
    x = _padded_pairs()
    x["segment_ids"][0, 12:] = 2
    return x


def test_loading_into_a_backbone_lists_every_way_it_differs_from_the_config(tmp_path):
    _hugging_face_bert(tmp_path)
    # Same weight shapes as the checkpoint's 6 heads: only the config tells 4 from 6.
    wrong = models.BertBackbone(300, num_layers=2, num_heads=4, hidden_dim=96, intermediate_dim=128,
                                max_sequence_length=64, num_segments=2, layer_norm_epsilon=1e-5)
    before = [v.numpy() for v in wrong.weights]
    with pytest.raises(ValueError, match=r"does not describe this backbone \(4 problems\)") as error:
        models.load_hugging_face_checkpoint(str(tmp_path), backbone=wrong)
    for problem in ("num_attention_heads=6 but the model has num_heads=4",
                    "max_position_embeddings=32 but the model has max_sequence_length=64",
                    "type_vocab_size=3 but the model has num_segments=2",
                    "layer_norm_eps=1e-12 but the model has layer_norm_epsilon=1e-05"):
        assert problem in str(error.value)
    assert all(np.array_equal(a, v.numpy()) for a, v in zip(before, wrong.weights, strict=True))  # untouched

    right = models.BertBackbone(300, num_layers=2, num_heads=6, hidden_dim=96, intermediate_dim=128,
                                max_sequence_length=32, num_segments=3)
    assert models.load_hugging_face_checkpoint(str(tmp_path), backbone=right) is right
    x = _three_segments()
    assert_allclose(right(x), models.load_hugging_face_checkpoint(str(tmp_path))(x), atol=0.0)


def test_loading_into_a_google_backbone_checks_the_config_too(tmp_path):
    pretrainer = _random_pretrainer()
    models.save_google_checkpoint(pretrainer.backbone, str(tmp_path))
    wrong = models.BertBackbone(300, num_layers=2, num_heads=2, hidden_dim=64, intermediate_dim=96,
                                max_sequence_length=32)
    with pytest.raises(ValueError, match="num_attention_heads=4 but the model has num_heads=2"):
        models.load_google_checkpoint(str(tmp_path), backbone=wrong)


def test_a_google_checkpoint_keeps_a_layer_norm_epsilon_other_than_berts(tmp_path):
    backbone = models.BertBackbone(50, num_layers=1, num_heads=2, hidden_dim=8, max_sequence_length=16,
                                   layer_norm_epsilon=1e-5)
    models.save_google_checkpoint(backbone, str(tmp_path))
    assert json.loads((tmp_path / "bert_config.json").read_text())["layer_norm_eps"] == 1e-5
    loaded = models.load_google_checkpoint(str(tmp_path))
    assert loaded.layer_norm_epsilon == 1e-5
    x = {"token_ids": np.array([[2, 7, 9, 3]], "int32"), "segment_ids": np.zeros((1, 4), "int32"),
         "padding_mask": np.ones((1, 4), "int32")}
    assert_allclose(loaded(x), backbone(x), atol=0.0)


def test_config_values_tfnlp_cannot_compute_are_all_refused(tmp_path):
    _hugging_face_bert(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config.update(hidden_act="quick_gelu", layer_norm_eps=0, position_embedding_type="relative_key",
                  is_decoder=True)
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError) as error:
        models.load_hugging_face_checkpoint(str(tmp_path))
    for problem in ("hidden_act='quick_gelu'", "layer_norm_eps=0 (must be a positive number)",
                    "position_embedding_type='relative_key'", "is_decoder=True"):
        assert problem in str(error.value)


def test_pytorch_model_bin_is_read_with_torch_and_without_it_the_error_says_what_to_do(
    tmp_path, monkeypatch
):
    torch = pytest.importorskip("torch")
    reference = _hugging_face_bert(tmp_path / "safe")
    bin_folder = tmp_path / "bin"
    bin_folder.mkdir()
    (bin_folder / "config.json").write_text((tmp_path / "safe" / "config.json").read_text())
    torch.save(reference.state_dict(), bin_folder / "pytorch_model.bin")
    x = _three_segments()
    expected = models.load_hugging_face_checkpoint(str(tmp_path / "safe"))(x)
    assert_allclose(models.load_hugging_face_checkpoint(str(bin_folder))(x), expected, atol=0.0)

    monkeypatch.setitem(__import__("sys").modules, "torch", None)  # as if not installed
    with pytest.raises(ValueError, match=r"pytorch_model.bin is a PyTorch `torch.save` file: .*install torch.*"
                                         r"convert it to `model.safetensors`"):
        models.load_hugging_face_checkpoint(str(bin_folder))
    (bin_folder / "pytorch_model.bin").unlink()
    with pytest.raises(ValueError, match="has no weights: expected model.safetensors or pytorch_model.bin"):
        models.load_hugging_face_checkpoint(str(bin_folder))


@pytest.mark.parametrize("layer_norm_eps", [1e-12, 1e-5])
def test_parity_with_hugging_face_on_six_heads_and_three_segment_types(tmp_path, layer_norm_eps):
    torch = pytest.importorskip("torch")
    reference = _hugging_face_bert(tmp_path, layer_norm_eps=layer_norm_eps)
    x = _three_segments()
    expected = _hugging_face_outputs(torch, reference, x)
    backbone = models.load_hugging_face_checkpoint(str(tmp_path))
    assert backbone.layer_norm_epsilon == layer_norm_eps
    ours = backbone(x)
    assert_allclose(ours["sequence_output"], expected.last_hidden_state.numpy(), atol=2e-5)
    assert_allclose(ours["pooled_output"], expected.pooler_output.numpy(), atol=2e-5)


@pytest.mark.parametrize("hidden_act, activation", [
    ("gelu", "gelu"), ("gelu_python", "gelu"), ("gelu_new", "gelu_approximate"), ("gelu_pytorch_tanh", "gelu_approximate"),
    ("gelu_fast", "gelu_approximate"),
])
def test_parity_with_hugging_face_for_each_gelu_it_names(tmp_path, hidden_act, activation):
    """Each `hidden_act` is computed as transformers computes it, at a scale where the two GELUs differ."""
    torch = pytest.importorskip("torch")
    reference = _hugging_face_bert(tmp_path / "small", hidden_act=hidden_act)
    with torch.no_grad():  # feed-forward inputs out to +-3 (erf and tanh differ most near 2.7)
        for layer in reference.encoder.layer:
            layer.intermediate.dense.weight.mul_(10.0)
    reference.save_pretrained(tmp_path, safe_serialization=True)
    x = _three_segments()
    expected = _hugging_face_outputs(torch, reference, x).last_hidden_state.numpy()
    backbone = models.load_hugging_face_checkpoint(str(tmp_path))
    assert backbone.activation == activation
    assert_allclose(backbone(x)["sequence_output"], expected, atol=1e-5)
    other = "gelu" if activation == "gelu_approximate" else "gelu_approximate"
    swapped = models.BertBackbone.from_config({**backbone.get_config(), "activation": other})
    swapped.set_weights(backbone.get_weights())
    assert np.abs(swapped(x)["sequence_output"].numpy() - expected).max() > 1e-4  # 2e-5 tells them apart


@pytest.mark.parametrize("setting, argument, message", [
    ("vocabulary_size", 301, "vocab_size=300 but the model has vocabulary_size=301"),
    ("num_layers", 3, "num_hidden_layers=2 but the model has num_layers=3"),
    ("num_heads", 4, "num_attention_heads=6 but the model has num_heads=4"),
    ("hidden_dim", 48, "hidden_size=96 but the model has hidden_dim=48"),
    ("intermediate_dim", 64, "intermediate_size=128 but the model has intermediate_dim=64"),
    ("max_sequence_length", 64, "max_position_embeddings=32 but the model has max_sequence_length=64"),
    ("num_segments", 2, "type_vocab_size=3 but the model has num_segments=2"),
    ("layer_norm_epsilon", 1e-5, "layer_norm_eps=1e-12 but the model has layer_norm_epsilon=1e-05"),
    ("activation", "gelu_approximate",
     "hidden_act='gelu' computes activation='gelu' but the model has activation='gelu_approximate'"),
])
def test_a_backbone_that_differs_in_any_one_setting_is_refused_by_name(tmp_path, setting, argument, message):
    _hugging_face_bert(tmp_path)
    right = {"vocabulary_size": 300, "num_layers": 2, "num_heads": 6, "hidden_dim": 96,
             "intermediate_dim": 128, "max_sequence_length": 32, "num_segments": 3}
    wrong = models.BertBackbone(**{**right, setting: argument})
    with pytest.raises(ValueError, match=r"does not describe this backbone \(1 problems\)") as error:
        models.load_hugging_face_checkpoint(str(tmp_path), backbone=wrong)
    assert message in str(error.value)


def test_hugging_face_tensors_that_contradict_the_config_name_the_setting(tmp_path):
    _hugging_face_bert(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "intermediate_size": 64, "vocab_size": 200}))
    with pytest.raises(ValueError) as error:
        models.load_hugging_face_checkpoint(str(tmp_path))
    lines = str(error.value).splitlines()
    assert lines[1].strip().startswith("vocab_size=200 in the config, but the checkpoint's "
                                       "bert/embeddings/word_embeddings says 300")
    assert lines[2].strip().startswith("intermediate_size=64 in the config")
