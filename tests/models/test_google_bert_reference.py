"""Google's TF1 BERT checkpoints against an independent reference.

Nothing here comes from tfnlp's name map (`bert_checkpoints._targets`) or
its writer (`save_google_checkpoint`): the checkpoint is written with
upstream's variable names and layouts, spelled out below from
google-research/bert (commit eedf571) `modeling.py` (`BertModel`:
`bert/embeddings`, `bert/encoder/layer_%d`, `bert/pooler`) and
`run_pretraining.py` (`get_masked_lm_output`: `cls/predictions`;
`get_next_sentence_output`: `cls/seq_relationship`), and the expected
outputs come from a NumPy port of those functions: `embedding_lookup` +
`embedding_postprocessor`, `layer_norm` (`tf.contrib.layers.layer_norm`:
epsilon 1e-12, biased variance), `attention_layer` with the additive
-10000 mask, `transformer_model`, the tanh pooler, the masked-LM head (its
output weights are the word embeddings) and the next-sentence head (a
`(2, H)` matrix used transposed). Both of `modeling.gelu`'s forms are
checked: the erf of October 2018 and the tanh approximation it has
computed since 2019-02-07 (commit bee6030).
"""

import json
import math

import numpy as np
import pytest
import tensorflow as tf

from tfnlp import models
from tfnlp.models import bert_checkpoints

VOCABULARY, HIDDEN, HEADS, INTERMEDIATE, LAYERS, POSITIONS, SEGMENTS = 97, 32, 4, 48, 2, 24, 2


def upstream_names(num_layers):
    """`{name: shape}` of a BertModel + pretraining heads, as google-research/bert names them."""
    names = {
        "bert/embeddings/word_embeddings": (VOCABULARY, HIDDEN),
        "bert/embeddings/token_type_embeddings": (SEGMENTS, HIDDEN),
        "bert/embeddings/position_embeddings": (POSITIONS, HIDDEN),
        "bert/embeddings/LayerNorm/gamma": (HIDDEN,),
        "bert/embeddings/LayerNorm/beta": (HIDDEN,),
    }
    for i in range(num_layers):
        layer = f"bert/encoder/layer_{i}"
        names.update({
            f"{layer}/attention/self/query/kernel": (HIDDEN, HIDDEN),
            f"{layer}/attention/self/query/bias": (HIDDEN,),
            f"{layer}/attention/self/key/kernel": (HIDDEN, HIDDEN),
            f"{layer}/attention/self/key/bias": (HIDDEN,),
            f"{layer}/attention/self/value/kernel": (HIDDEN, HIDDEN),
            f"{layer}/attention/self/value/bias": (HIDDEN,),
            f"{layer}/attention/output/dense/kernel": (HIDDEN, HIDDEN),
            f"{layer}/attention/output/dense/bias": (HIDDEN,),
            f"{layer}/attention/output/LayerNorm/gamma": (HIDDEN,),
            f"{layer}/attention/output/LayerNorm/beta": (HIDDEN,),
            f"{layer}/intermediate/dense/kernel": (HIDDEN, INTERMEDIATE),
            f"{layer}/intermediate/dense/bias": (INTERMEDIATE,),
            f"{layer}/output/dense/kernel": (INTERMEDIATE, HIDDEN),
            f"{layer}/output/dense/bias": (HIDDEN,),
            f"{layer}/output/LayerNorm/gamma": (HIDDEN,),
            f"{layer}/output/LayerNorm/beta": (HIDDEN,),
        })
    names.update({
        "bert/pooler/dense/kernel": (HIDDEN, HIDDEN),
        "bert/pooler/dense/bias": (HIDDEN,),
        "cls/predictions/transform/dense/kernel": (HIDDEN, HIDDEN),
        "cls/predictions/transform/dense/bias": (HIDDEN,),
        "cls/predictions/transform/LayerNorm/gamma": (HIDDEN,),
        "cls/predictions/transform/LayerNorm/beta": (HIDDEN,),
        "cls/predictions/output_bias": (VOCABULARY,),
        "cls/seq_relationship/output_weights": (2, HIDDEN),
        "cls/seq_relationship/output_bias": (2,),
    })
    return names


def random_weights(seed=0):
    rng = np.random.default_rng(seed)
    weights = {}
    for name, shape in upstream_names(LAYERS).items():
        # Scales that make every part matter, as trained weights do: outputs
        # of about unit scale from each kernel (1.5 / sqrt(fan-in)), so that
        # attention is not uniform and GELU sees inputs out to +-3 (its two
        # forms differ most near |x| = 2.7).
        if name.endswith("kernel"):
            scale = 1.5 / math.sqrt(shape[0])
        else:
            scale = 0.6 if name.endswith(("embeddings", "output_weights")) else 0.2
        value = rng.normal(0.0, scale, shape)
        if name.endswith("gamma"):
            value += 1.0
        weights[name] = value.astype("float32")
    return weights


def write_checkpoint(directory, weights, **config):
    """`bert_config.json` as Google ships it (no `layer_norm_eps`) and `bert_model.ckpt`."""
    config = {
        "attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
        "hidden_size": HIDDEN, "initializer_range": 0.02, "intermediate_size": INTERMEDIATE,
        "max_position_embeddings": POSITIONS, "num_attention_heads": HEADS,
        "num_hidden_layers": LAYERS, "type_vocab_size": SEGMENTS, "vocab_size": VOCABULARY,
        **config,
    }
    (directory / "bert_config.json").write_text(json.dumps(config))
    names = sorted(weights)
    tf.raw_ops.SaveV2(prefix=str(directory / "bert_model.ckpt"), tensor_names=names,
                      shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(weights[n]) for n in names])


# === NumPy port of google-research/bert (float64) ===

def gelu_erf(x):  # modeling.py before bee6030
    return x * 0.5 * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def gelu_tanh(x):  # modeling.py since bee6030
    return x * 0.5 * (1.0 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def layer_norm(x, w, name):
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + 1e-12) * w[f"{name}/gamma"] + w[f"{name}/beta"]


def dense(x, w, name):
    return x @ w[f"{name}/kernel"] + w[f"{name}/bias"]


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def attention_layer(x, mask, w, layer):
    batch, length, _ = x.shape
    size = HIDDEN // HEADS

    def heads(t):  # [B, T, N*H] -> [B, N, T, H]
        return t.reshape(batch, length, HEADS, size).transpose(0, 2, 1, 3)

    query = heads(dense(x, w, f"{layer}/attention/self/query"))
    key = heads(dense(x, w, f"{layer}/attention/self/key"))
    value = heads(dense(x, w, f"{layer}/attention/self/value"))
    scores = query @ key.transpose(0, 1, 3, 2) / math.sqrt(size)
    # create_attention_mask_from_input_mask: [B, F, T] from the "to" mask
    adder = (1.0 - mask[:, None, None, :].astype("float64")) * -10000.0
    context = softmax(scores + adder) @ value  # [B, N, F, H]
    return context.transpose(0, 2, 1, 3).reshape(batch, length, HIDDEN)


def google_bert(w, ids, segments, mask, positions, gelu):
    """BertModel's sequence and pooled outputs, MLM log-probs at `positions`, NSP log-probs."""
    w = {name: value.astype("float64") for name, value in w.items()}
    length = ids.shape[1]
    x = (w["bert/embeddings/word_embeddings"][ids]
         + w["bert/embeddings/token_type_embeddings"][segments]
         + w["bert/embeddings/position_embeddings"][:length][None])
    x = layer_norm(x, w, "bert/embeddings/LayerNorm")
    for i in range(LAYERS):
        layer = f"bert/encoder/layer_{i}"
        attention = dense(attention_layer(x, mask, w, layer), w, f"{layer}/attention/output/dense")
        attention = layer_norm(attention + x, w, f"{layer}/attention/output/LayerNorm")
        intermediate = gelu(dense(attention, w, f"{layer}/intermediate/dense"))
        x = layer_norm(dense(intermediate, w, f"{layer}/output/dense") + attention, w,
                       f"{layer}/output/LayerNorm")
    pooled = np.tanh(dense(x[:, 0], w, "bert/pooler/dense"))
    # run_pretraining.py: gather_indexes, transform, LayerNorm, tied output weights.
    gathered = np.take_along_axis(x, positions[:, :, None], axis=1)
    transformed = gelu(dense(gathered, w, "cls/predictions/transform/dense"))
    transformed = layer_norm(transformed, w, "cls/predictions/transform/LayerNorm")
    logits = transformed @ w["bert/embeddings/word_embeddings"].T + w["cls/predictions/output_bias"]
    nsp = pooled @ w["cls/seq_relationship/output_weights"].T + w["cls/seq_relationship/output_bias"]

    def log_softmax(z):
        return z - z.max(-1, keepdims=True) - np.log(np.exp(z - z.max(-1, keepdims=True)).sum(-1, keepdims=True))

    return x, pooled, log_softmax(logits), log_softmax(nsp)


def batch():
    rng = np.random.default_rng(1)
    ids = rng.integers(1, VOCABULARY, (3, 12)).astype("int32")
    segments = np.zeros((3, 12), "int32")
    segments[:, 6:] = 1
    mask = np.ones((3, 12), "int32")
    mask[1, 9:] = 0
    mask[2, 5:] = 0
    positions = np.array([[1, 4, 7], [2, 3, 8], [0, 1, 4]], "int32")  # real tokens only
    return ids * mask, segments * mask, mask, positions


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    directory = tmp_path_factory.mktemp("google_bert")
    weights = random_weights()
    write_checkpoint(directory, weights)
    return directory, weights


def _tfnlp_outputs(model, ids, segments, mask, positions):
    outputs = model({"token_ids": ids, "segment_ids": segments, "padding_mask": mask,
                     "masked_positions": positions}, training=False)
    backbone = model.backbone({"token_ids": ids, "segment_ids": segments, "padding_mask": mask},
                              training=False)
    mlm = tf.nn.log_softmax(outputs["mlm"]).numpy()
    nsp = tf.nn.log_softmax(outputs["nsp"]).numpy()
    return backbone["sequence_output"].numpy(), backbone["pooled_output"].numpy(), mlm, nsp


@pytest.mark.parametrize("gelu, function", [("erf", gelu_erf), ("tanh", gelu_tanh)])
def test_outputs_equal_google_bert_computed_independently(checkpoint, gelu, function):
    directory, weights = checkpoint
    model = models.load_google_checkpoint(str(directory), models.BertPretrainer, gelu=gelu)
    ids, segments, mask, positions = batch()
    expected = google_bert(weights, ids, segments, mask, positions, function)
    got = _tfnlp_outputs(model, ids, segments, mask, positions)
    real = mask.astype(bool)
    # Padding positions too: BERT's padding queries attend to the real keys in both.
    for name, want, have in zip(("sequence", "pooled", "mlm", "nsp"), expected, got, strict=True):
        np.testing.assert_allclose(have, want, atol=1e-5, rtol=0, err_msg=name)
    assert np.abs(expected[0][real]).max() > 1.0 and np.abs(expected[2]).max() > 1.0  # not all tiny
    other = gelu_tanh if function is gelu_erf else gelu_erf
    wrong = google_bert(weights, ids, segments, mask, positions, other)
    # The other GELU is seen: the check above could tell the two apart.
    assert np.abs(wrong[0] - got[0]).max() > 1e-4


def test_the_default_gelu_is_googles_code_of_today_and_a_saved_model_keeps_its_own(checkpoint, tmp_path):
    directory, weights = checkpoint
    backbone = models.load_google_checkpoint(str(directory))
    assert backbone.activation == "gelu_approximate"
    exact = models.load_google_checkpoint(str(directory), gelu="erf")
    assert exact.activation == "gelu"
    models.save_google_checkpoint(exact, str(tmp_path))
    assert models.load_google_checkpoint(str(tmp_path)).activation == "gelu"
    with pytest.raises(ValueError, match="`gelu` must be one of"):
        models.load_google_checkpoint(str(directory), gelu="exact")
    # A backbone of the other form is not the checkpoint's model: refused by name.
    with pytest.raises(ValueError, match="hidden_act='gelu' computes activation='gelu_approximate' "
                                         "but the model has activation='gelu'") as error:
        models.load_google_checkpoint(str(directory), backbone=exact)
    assert 'Pass gelu="erf" for the 2018 releases' in str(error.value)  # what to do about it
    assert models.load_google_checkpoint(str(directory), backbone=exact, gelu="erf") is exact
    config = json.loads((tmp_path / "bert_config.json").read_text())
    (tmp_path / "bert_config.json").write_text(json.dumps({**config, "tfnlp_gelu": "exact"}))
    with pytest.raises(ValueError, match=r"bert_config.json has tfnlp_gelu='exact': it must be one of"):
        models.load_google_checkpoint(str(tmp_path))


def test_a_change_to_any_one_name_of_the_importers_map_fails_the_load(checkpoint, monkeypatch):
    """Each of upstream's names is one the importer reads: none is missing, ignored or extra."""
    directory, _ = checkpoint
    backbone = models.BertBackbone(VOCABULARY, LAYERS, HEADS, HIDDEN, INTERMEDIATE,
                                   max_sequence_length=POSITIONS, activation="gelu_approximate")
    pretrainer = models.BertPretrainer(backbone)
    targets = bert_checkpoints._targets
    assert set(targets(backbone, pretrainer)) == set(upstream_names(LAYERS))
    loaded = []
    for name in upstream_names(LAYERS):
        perturbed = name.replace("/", "/x_", 1)

        def one_name_changed(*args, name=name, perturbed=perturbed):
            return {perturbed if key == name else key: value for key, value in targets(*args).items()}

        monkeypatch.setattr(bert_checkpoints, "_targets", one_name_changed)
        try:
            models.load_google_checkpoint(str(directory), lambda _: pretrainer, backbone=backbone)
            loaded.append(name)
        except ValueError as error:
            assert f"missing {perturbed}" in str(error), (name, str(error))
            assert name.startswith("cls/") or f"unexpected {name}" in str(error), (name, str(error))
    assert not loaded, f"loaded with a wrong name for {loaded}"
    assert len(upstream_names(LAYERS)) == 5 + 16 * LAYERS + 2 + 7


def test_a_swapped_pair_of_upstream_names_changes_the_outputs(checkpoint, tmp_path):
    """Names are used for what they mean: query and key swapped in the file are not the same model."""
    directory, weights = checkpoint
    swapped = dict(weights)
    query, key = "bert/encoder/layer_0/attention/self/query/kernel", "bert/encoder/layer_0/attention/self/key/kernel"
    swapped[query], swapped[key] = weights[key], weights[query]
    write_checkpoint(tmp_path, swapped)
    ids, segments, mask, positions = batch()
    expected = google_bert(weights, ids, segments, mask, positions, gelu_tanh)[0]
    got = models.load_google_checkpoint(str(tmp_path))(
        {"token_ids": ids, "segment_ids": segments, "padding_mask": mask})["sequence_output"]
    assert np.abs(got.numpy() - expected).max() > 1e-3


@pytest.mark.parametrize("key, value, setting", [
    ("vocab_size", VOCABULARY + 1, "vocab_size=98 in the config"),
    ("hidden_size", HIDDEN * 2, "hidden_size=64 in the config"),
    ("num_hidden_layers", LAYERS + 1, "num_hidden_layers=3 in the config"),
    ("intermediate_size", INTERMEDIATE + 8, "intermediate_size=56 in the config"),
    ("max_position_embeddings", POSITIONS + 8, "max_position_embeddings=32 in the config"),
    ("type_vocab_size", 3, "type_vocab_size=3 in the config"),
])
def test_a_config_the_tensors_contradict_names_the_setting(checkpoint, tmp_path, key, value, setting):
    _, weights = checkpoint
    write_checkpoint(tmp_path, weights, **{key: value})
    with pytest.raises(ValueError, match="does not match this model") as error:
        models.load_google_checkpoint(str(tmp_path))
    assert str(error.value).splitlines()[1].strip().startswith(setting), str(error.value)
