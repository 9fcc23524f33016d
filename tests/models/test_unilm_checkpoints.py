"""Importing microsoft/unilm v1 checkpoints, against a PyTorch port of v1's forward pass."""

import json
import math

import keras
import numpy as np
import pytest

from tests.harness import assert_allclose
from tfnlp import models
from tfnlp.models import unilm_checkpoints

torch = pytest.importorskip("torch")

VOCAB, HIDDEN, HEADS, LAYERS, FFN, POSITIONS = 60, 32, 4, 2, 48, 16
CONFIG = {  # a BERT config, as v1 reads it (type_vocab_size is set to 6 by run_seq2seq.py)
    "vocab_size": VOCAB, "hidden_size": HIDDEN, "num_hidden_layers": LAYERS,
    "num_attention_heads": HEADS, "intermediate_size": FFN, "max_position_embeddings": POSITIONS,
    "hidden_act": "gelu", "type_vocab_size": 2,
}


def _v1_state_dict(seed=0):
    """Random weights under unilm-v1's BertForPreTrainingLossMask names (tied decoder included)."""
    g = torch.Generator().manual_seed(seed)

    def rand(*shape, mean=0.0, std=0.1):
        return torch.randn(*shape, generator=g) * std + mean

    state = {
        "bert.embeddings.word_embeddings.weight": rand(VOCAB, HIDDEN, std=0.5),
        "bert.embeddings.position_embeddings.weight": rand(POSITIONS, HIDDEN, std=0.5),
        "bert.embeddings.token_type_embeddings.weight": rand(6, HIDDEN, std=0.5),
        "bert.pooler.dense.weight": rand(HIDDEN, HIDDEN),
        "bert.pooler.dense.bias": rand(HIDDEN),
        "cls.predictions.transform.dense.weight": rand(HIDDEN, HIDDEN),
        "cls.predictions.transform.dense.bias": rand(HIDDEN),
        "cls.predictions.bias": rand(VOCAB),
        "cls.seq_relationship.weight": rand(2, HIDDEN),  # v1 keeps BERT's NSP layer; tfnlp does not
        "cls.seq_relationship.bias": rand(2),
    }
    norms = ["bert.embeddings.LayerNorm", "cls.predictions.transform.LayerNorm"]
    for i in range(LAYERS):
        p = f"bert.encoder.layer.{i}."
        for name, (rows, cols) in {
            "attention.self.query": (HIDDEN, HIDDEN), "attention.self.key": (HIDDEN, HIDDEN),
            "attention.self.value": (HIDDEN, HIDDEN), "attention.output.dense": (HIDDEN, HIDDEN),
            "intermediate.dense": (FFN, HIDDEN), "output.dense": (HIDDEN, FFN),
        }.items():
            state[p + name + ".weight"] = rand(rows, cols, std=0.2)  # torch Linear: (out, in)
            state[p + name + ".bias"] = rand(rows)
        norms += [p + "attention.output.LayerNorm", p + "output.LayerNorm"]
    for norm in norms:
        state[norm + ".weight"] = rand(HIDDEN, mean=1.0)
        state[norm + ".bias"] = rand(HIDDEN)
    state["cls.predictions.decoder.weight"] = state["bert.embeddings.word_embeddings.weight"]
    return state


def _v1_forward(state, input_ids, task_idx, num_tokens_a, num_tokens_b):
    """unilm-v1's BertForPreTrainingLossMask: segments and mask from task_idx, then BERT, eps 1e-5.

    Ported from unilm-v1/src/pytorch_pretrained_bert/modeling.py
    (`BertForPreTrainingLossMask.forward` with `token_type_ids` and
    `attention_mask` None; `BertModel`, `BertLayerNorm(eps=1e-5)`, the
    additive -10000 mask, erf GELU, `BertLMPredictionHead`).
    Returns (sequence output, pooled output, masked-LM logits of every position).
    """
    w = state
    length = input_ids.shape[-1]
    task_0, task_3 = task_idx == 0, task_idx == 3
    index = torch.arange(length).view(1, length)
    num_tokens = num_tokens_a + num_tokens_b
    base_mask = (index < num_tokens.view(-1, 1)).long()
    segment_a_mask = (index < num_tokens_a.view(-1, 1)).long()
    token_type_ids = (task_idx + 1 + task_3.long()).view(-1, 1) * base_mask
    token_type_ids = token_type_ids - segment_a_mask * (task_0 | task_3).long().view(-1, 1)
    key, query = index.view(1, 1, length), index.view(1, length, 1)
    tril = key <= query
    mask_0 = (key < num_tokens.view(-1, 1, 1)) & (query < num_tokens.view(-1, 1, 1))
    masks = (mask_0, tril & mask_0, tril.transpose(-2, -1) & mask_0,
             ((key < num_tokens_a.view(-1, 1, 1)) | tril) & mask_0)
    attention_mask = sum(m & (task_idx == i).view(-1, 1, 1) for i, m in enumerate(masks))
    additive = (1.0 - attention_mask.float().unsqueeze(1)) * -10000.0  # (B, 1, T, T)

    def layer_norm(x, name):
        u = x.mean(-1, keepdim=True)
        s = (x - u).pow(2).mean(-1, keepdim=True)
        return w[name + ".weight"] * (x - u) / torch.sqrt(s + 1e-5) + w[name + ".bias"]

    def linear(x, name):
        return x @ w[name + ".weight"].T + w[name + ".bias"]

    def gelu(x):
        return x * 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))

    def heads(x):  # (B, T, H) -> (B, heads, T, head_dim)
        return x.view(x.shape[0], length, HEADS, HIDDEN // HEADS).permute(0, 2, 1, 3)

    x = (w["bert.embeddings.word_embeddings.weight"][input_ids]
         + w["bert.embeddings.position_embeddings.weight"][torch.arange(length)][None]
         + w["bert.embeddings.token_type_embeddings.weight"][token_type_ids])
    x = layer_norm(x, "bert.embeddings.LayerNorm")
    for i in range(LAYERS):
        p = f"bert.encoder.layer.{i}."
        q, k, v = (heads(linear(x, p + "attention.self." + n)) for n in ("query", "key", "value"))
        scores = (q / math.sqrt(HIDDEN // HEADS)) @ k.transpose(-1, -2) + additive
        context = (scores.softmax(-1) @ v).permute(0, 2, 1, 3).reshape(x.shape)
        x = layer_norm(linear(context, p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
        h = gelu(linear(x, p + "intermediate.dense"))
        x = layer_norm(linear(h, p + "output.dense") + x, p + "output.LayerNorm")
    pooled = torch.tanh(linear(x[:, 0], "bert.pooler.dense"))
    t = layer_norm(gelu(linear(x, "cls.predictions.transform.dense")), "cls.predictions.transform.LayerNorm")
    logits = t @ w["cls.predictions.decoder.weight"].T + w["cls.predictions.bias"]
    return x.numpy(), pooled.numpy(), logits.numpy()


# One example per objective (v1's task_idx): lengths of [CLS] A [SEP] and B [SEP], padded to 12.
TASKS = np.array([0, 1, 2, 3])
NUM_A = np.array([5, 4, 6, 4])
NUM_B = np.array([4, 8, 3, 5])
LENGTH = 12


def _batch():
    rng = np.random.default_rng(1)
    real = np.arange(LENGTH)[None] < (NUM_A + NUM_B)[:, None]
    return rng.integers(1, VOCAB, (4, LENGTH)) * real, real


def _saved(tmp_path, state, name="unilm1-tiny.bin"):
    path = tmp_path / name
    torch.save(state, path)
    return str(path)


@pytest.mark.parametrize("layer_norm_names", ["weight_bias", "gamma_beta"])
def test_matches_unilm_v1_for_every_objective(tmp_path, layer_norm_names):
    state = _v1_state_dict()
    ids, real = _batch()
    with torch.no_grad():
        expected = _v1_forward(state, torch.tensor(ids), torch.tensor(TASKS),
                               torch.tensor(NUM_A), torch.tensor(NUM_B))
    if layer_norm_names == "gamma_beta":  # pytorch_pretrained_bert's older names
        state = {n.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): v
                 for n, v in state.items()}
    model = unilm_checkpoints.load_unilm_checkpoint(_saved(tmp_path, state), models.UniLM, config=CONFIG)

    x = {
        "token_ids": ids.astype("int32"),
        "segment_ids": ((np.arange(LENGTH)[None] >= NUM_A[:, None]) & real).astype("int32"),
        "padding_mask": real.astype("int32"),
        "objective": TASKS.astype("int32"),
    }
    outputs = model.backbone(x)
    sequence, pooled, logits = expected
    # Real tokens only: v1 lets padding queries attend to every key (all -10000).
    assert_allclose(outputs["sequence_output"].numpy()[real], sequence[real], atol=1e-5)
    assert_allclose(outputs["pooled_output"], pooled, atol=1e-5)
    # Every real position of each example (the shorter ones repeat their last).
    positions = np.minimum(np.arange(9)[None], (NUM_A + NUM_B)[:, None] - 1).astype("int32")
    ours = model({**x, "masked_positions": positions})
    theirs = np.take_along_axis(logits, positions[..., None], 1)
    assert_allclose(ours, theirs, atol=1e-5)


def test_v1_segment_rows_are_tfnlps(tmp_path):
    # v1's rows for (task, segment), computed from BertForPreTrainingLossMask's formula above.
    from tfnlp.models.unilm_backbone import SEGMENT_ROWS
    assert tuple(SEGMENT_ROWS) == unilm_checkpoints._V1_SEGMENT_ROWS
    state = _v1_state_dict()
    backbone = unilm_checkpoints.load_unilm_checkpoint(_saved(tmp_path, state), config=CONFIG)
    assert_allclose(backbone.segment_embedding.embeddings,
                    state["bert.embeddings.token_type_embeddings.weight"].numpy(), atol=0.0)


def test_a_folder_with_its_config_and_every_problem_listed(tmp_path):
    state = _v1_state_dict()
    (tmp_path / "config.json").write_text(json.dumps({**CONFIG, "relax_projection": 4}))
    state["cls.predictions.transform.dense.weight"] = torch.zeros(4 * HIDDEN, HIDDEN)  # relax_projection
    state["bert.embeddings.token_type_embeddings.weight"] = torch.zeros(7, HIDDEN)  # s2s_add_segment
    state["bert.encoder.layer.0.attention.self.seg_emb.weight"] = torch.zeros(6, HIDDEN)  # seg_emb
    state["crit_mask_lm_smoothed.one_hot"] = torch.zeros(1, VOCAB)  # a loss buffer: ignored
    _saved(tmp_path, state, "pytorch_model.bin")
    with pytest.raises(ValueError, match=r"\(5 problems\)") as error:
        unilm_checkpoints.load_unilm_checkpoint(str(tmp_path), models.UniLM)
    for problem in ("relax_projection=4", "has 7 rows", "token_type_embeddings: shape (7, 32)",
                    "transform/dense/kernel: shape (32, 128)",
                    "unexpected bert/encoder/layer_0/attention/self/seg_emb"):
        assert problem in str(error.value)


def test_without_a_config_the_error_says_where_it_comes_from(tmp_path):
    path = _saved(tmp_path, _v1_state_dict())
    with pytest.raises(ValueError, match="Pass `config=` the `bert_config.json` of the BERT"):
        unilm_checkpoints.load_unilm_checkpoint(path)
    without_heads = {k: v for k, v in CONFIG.items() if k != "num_attention_heads"}
    with pytest.raises(ValueError, match="`config` lacks num_attention_heads"):
        unilm_checkpoints.load_unilm_checkpoint(path, config=without_heads)


def _unilm_inputs():
    ids, real = _batch()
    positions = np.minimum(np.arange(9)[None], (NUM_A + NUM_B)[:, None] - 1).astype("int32")
    return {
        "token_ids": ids.astype("int32"),
        "segment_ids": ((np.arange(LENGTH)[None] >= NUM_A[:, None]) & real).astype("int32"),
        "padding_mask": real.astype("int32"),
        "objective": TASKS.astype("int32"),
        "masked_positions": positions,
    }


def test_v1s_epsilon_survives_a_keras_file_and_to_bert(tmp_path):
    model = unilm_checkpoints.load_unilm_checkpoint(_saved(tmp_path, _v1_state_dict()), models.UniLM,
                                                    config=CONFIG)
    assert model.backbone.layer_norm_epsilon == model.masked_lm_head.layer_norm_epsilon == 1e-5
    path = str(tmp_path / "unilm.keras")
    model.save(path)
    restored = keras.saving.load_model(path, safe_mode=True)
    x = _unilm_inputs()
    assert_allclose(restored(x), model(x), atol=1e-6)
    backbone_inputs = {k: v for k, v in x.items() if k != "masked_positions"}
    assert_allclose(restored.backbone(backbone_inputs), model.backbone(backbone_inputs), atol=1e-6)
    # The bidirectional encoder as a BertBackbone: v1's epsilon, v1's numbers.
    bidirectional = {**backbone_inputs, "objective": np.zeros(4, "int32")}
    bert = model.backbone.to_bert()
    assert bert.layer_norm_epsilon == 1e-5
    assert_allclose(bert({k: v for k, v in bidirectional.items() if k != "objective"}),
                    model.backbone(bidirectional), atol=1e-6)


def test_loading_into_a_backbone_lists_every_way_it_differs_from_the_config(tmp_path):
    path = _saved(tmp_path, _v1_state_dict())
    wrong = models.UniLMBackbone(VOCAB, LAYERS, num_heads=2, hidden_dim=HIDDEN, intermediate_dim=FFN,
                                 max_sequence_length=2 * POSITIONS)  # and BERT's epsilon
    before = [v.numpy() for v in wrong.weights]
    with pytest.raises(ValueError, match=r"does not describe this backbone \(3 problems\)") as error:
        unilm_checkpoints.load_unilm_checkpoint(path, models.UniLM, config=CONFIG, backbone=wrong)
    for problem in (f"num_attention_heads={HEADS} but the model has num_heads=2",
                    f"max_position_embeddings={POSITIONS} but the model has max_sequence_length={2 * POSITIONS}",
                    "layer_norm_eps=1e-05 but the model has layer_norm_epsilon=1e-12"):
        assert problem in str(error.value)
    assert all(np.array_equal(a, v.numpy()) for a, v in zip(before, wrong.weights, strict=True))
    with pytest.raises(ValueError, match="`backbone` must be a UniLMBackbone, got BertBackbone"):
        unilm_checkpoints.load_unilm_checkpoint(
            path, config=CONFIG, backbone=models.BertBackbone(VOCAB, LAYERS, HEADS, HIDDEN, FFN))

    right = models.UniLMBackbone(VOCAB, LAYERS, HEADS, HIDDEN, FFN, max_sequence_length=POSITIONS,
                                 layer_norm_epsilon=1e-5)
    assert unilm_checkpoints.load_unilm_checkpoint(path, config=CONFIG, backbone=right) is right
    x = {k: v for k, v in _unilm_inputs().items() if k != "masked_positions"}
    assert_allclose(right(x), unilm_checkpoints.load_unilm_checkpoint(path, config=CONFIG)(x), atol=0.0)


@pytest.mark.parametrize("setting, argument, message", [
    ("vocabulary_size", VOCAB + 1, f"vocab_size={VOCAB} but the model has vocabulary_size={VOCAB + 1}"),
    ("num_layers", LAYERS + 1, f"num_hidden_layers={LAYERS} but the model has num_layers={LAYERS + 1}"),
    ("num_heads", 2, f"num_attention_heads={HEADS} but the model has num_heads=2"),
    ("hidden_dim", 2 * HIDDEN, f"hidden_size={HIDDEN} but the model has hidden_dim={2 * HIDDEN}"),
    ("intermediate_dim", FFN + 8, f"intermediate_size={FFN} but the model has intermediate_dim={FFN + 8}"),
    ("max_sequence_length", 2 * POSITIONS,
     f"max_position_embeddings={POSITIONS} but the model has max_sequence_length={2 * POSITIONS}"),
    ("layer_norm_epsilon", 1e-12, "layer_norm_eps=1e-05 but the model has layer_norm_epsilon=1e-12"),
    ("activation", "gelu_approximate",
     "hidden_act='gelu' computes activation='gelu' but the model has activation='gelu_approximate'"),
])
def test_a_backbone_that_differs_in_any_one_setting_is_refused_by_name(tmp_path, setting, argument, message):
    path = _saved(tmp_path, _v1_state_dict())
    right = {"vocabulary_size": VOCAB, "num_layers": LAYERS, "num_heads": HEADS, "hidden_dim": HIDDEN,
             "intermediate_dim": FFN, "max_sequence_length": POSITIONS, "layer_norm_epsilon": 1e-5}
    with pytest.raises(ValueError, match=r"does not describe this backbone \(1 problems\)") as error:
        unilm_checkpoints.load_unilm_checkpoint(
            path, config=CONFIG, backbone=models.UniLMBackbone(**{**right, setting: argument}))
    assert message in str(error.value)


@pytest.mark.parametrize("key, value", [("vocab_size", VOCAB + 5), ("hidden_size", 2 * HIDDEN),
                                        ("num_hidden_layers", LAYERS + 1), ("intermediate_size", FFN + 8),
                                        ("max_position_embeddings", 2 * POSITIONS)])
def test_a_config_the_tensors_contradict_names_the_setting(tmp_path, key, value):
    path = _saved(tmp_path, _v1_state_dict())
    with pytest.raises(ValueError, match="does not match this model") as error:
        unilm_checkpoints.load_unilm_checkpoint(path, config={**CONFIG, key: value})
    assert str(error.value).splitlines()[1].strip().startswith(f"{key}={value} in the config"), str(error.value)


def test_a_v1_config_with_a_tanh_gelu_is_refused(tmp_path):
    """unilm-v1's ACT2FN has one GELU, the exact one: a `gelu_new` config is not v1's model."""
    with pytest.raises(ValueError, match="hidden_act='gelu_new'"):
        unilm_checkpoints.load_unilm_checkpoint(
            _saved(tmp_path, _v1_state_dict()), config={**CONFIG, "hidden_act": "gelu_new"})
