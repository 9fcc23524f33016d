"""Reading bilm-tf's / AllenNLP's ELMo release format (weights.hdf5 + options.json).

The expected outputs come from two independent sources: the outputs
bilm-tf's own TF1 code recorded for its test fixture (files/bilm_tf/,
see its README), and `_bilm_tf_reference`, bilm-tf's
`BidirectionalLanguageModelGraph` (bilm/model.py) and TF1's `LSTMCell`
written out in NumPy from the hdf5 arrays, without tfnlp's layers.
"""

import json
import pathlib
import re

import h5py
import numpy as np
import pytest
import tensorflow as tf

from tests.harness import assert_allclose
from tfnlp import data, models
from tfnlp.models.bilm_tf_weights import (
    _ARCHITECTURE,
    _file_shapes,
    bilm_tf_options,
    load_bilm_tf_weights,
    options_from_bilm_tf,
    save_bilm_tf_weights,
)

FIXTURE = pathlib.Path(__file__).parent / "files" / "bilm_tf"
# As published with elmo_2x4096_512_2048cnn_2xhighway_weights.hdf5.
PUBLISHED_OPTIONS = {
    "lstm": {"use_skip_connections": True, "projection_dim": 512, "cell_clip": 3, "proj_clip": 3,
             "dim": 4096, "n_layers": 2},
    "char_cnn": {"activation": "relu",
                 "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
                 "n_highway": 2, "embedding": {"dim": 16}, "n_characters": 262,
                 "max_characters_per_token": 50},
}
# Small clips, so that clipping changes the outputs.
PROJECTED = {
    "lstm": {"use_skip_connections": True, "projection_dim": 8, "cell_clip": 1.0, "proj_clip": 0.5,
             "dim": 16, "n_layers": 2},
    "char_cnn": {"activation": "relu", "filters": [[1, 4], [2, 6], [3, 8]], "n_highway": 2,
                 "embedding": {"dim": 4}, "n_characters": 262, "max_characters_per_token": 10},
}
# No CNN_proj (filters add up to projection_dim), no W_P_0 (projection_dim == dim,
# so proj_clip is ignored), no highway, no skip connections, no cell clip.
UNPROJECTED = {
    "lstm": {"use_skip_connections": False, "projection_dim": 8, "proj_clip": 0.1, "dim": 8,
             "n_layers": 3},
    "char_cnn": {"activation": "relu", "filters": [[1, 4], [2, 4]], "embedding": {"dim": 4},
                 "n_characters": 262, "max_characters_per_token": 10},
}
SENTENCES = [
    ["Hello", "world", "!"],
    ["A", "café", "antidisestablishment"],  # UTF-8, and a word cut to 8 bytes
    ["x"],
]


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _write_bilm_tf_files(folder, options, seed=0):
    """A random weights.hdf5 in bilm-tf's layout (bin/dump_weights.py), and its options.json."""
    rng = np.random.default_rng(seed)
    lstm, cnn = options["lstm"], options["char_cnn"]
    dim, features = cnn["embedding"]["dim"], sum(n for _, n in cnn["filters"])
    projection_dim, units = lstm["projection_dim"], lstm["dim"]
    arrays = {"char_embed": rng.uniform(-1, 1, (261, dim))}  # no padding row
    for i, (width, count) in enumerate(cnn["filters"]):
        arrays[f"CNN/W_cnn_{i}"] = rng.normal(0, 0.3, (1, width, dim, count))
        arrays[f"CNN/b_cnn_{i}"] = rng.normal(0, 0.3, (count,))
    for k in range(cnn.get("n_highway", 0)):
        for part in ("carry", "transform"):
            arrays[f"CNN_high_{k}/W_{part}"] = rng.normal(0, 0.3, (features, features))
            arrays[f"CNN_high_{k}/b_{part}"] = rng.normal(0, 0.5, (features,))
    if features != projection_dim:
        arrays["CNN_proj/W_proj"] = rng.normal(0, 0.4, (features, projection_dim))
        arrays["CNN_proj/b_proj"] = rng.normal(0, 0.2, (projection_dim,))
    for direction in range(2):
        for layer in range(lstm["n_layers"]):
            cell = f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell/"
            arrays[cell + "W_0"] = rng.normal(0, 0.5, (2 * projection_dim, 4 * units))
            arrays[cell + "B"] = rng.normal(0, 0.5, (4 * units,))
            if projection_dim < units:
                arrays[cell + "W_P_0"] = rng.normal(0, 0.5, (units, projection_dim))
    arrays = {name: a.astype("float32") for name, a in arrays.items()}
    with h5py.File(folder / "weights.hdf5", "w") as f:
        for name, array in arrays.items():
            f.create_dataset(name, data=array)
    (folder / "options.json").write_text(json.dumps(options))
    return str(folder / "weights.hdf5"), str(folder / "options.json"), arrays


def _batcher_ids(sentences, max_characters):
    """bilm-tf's `Batcher.batch_sentences` (bilm/data.py): ids + 1, 0 for padding."""
    bos, eos, bow, eow, pad = 256, 257, 258, 259, 260

    def word(chars, marker=None):
        code = np.full(max_characters, pad)
        if marker is None:
            chars = list(chars.encode("utf-8")[: max_characters - 2])
        else:
            chars = [marker]
        code[0], code[1 : len(chars) + 1], code[len(chars) + 1] = bow, chars, eow
        return code

    length = max(map(len, sentences)) + 2
    ids = np.zeros((len(sentences), length, max_characters), "int32")
    for k, sentence in enumerate(sentences):
        codes = [word("", bos)] + [word(w) for w in sentence] + [word("", eos)]
        ids[k, : len(codes)] = np.stack(codes) + 1
    return ids


def _bilm_tf_reference(arrays, options, ids):
    """bilm-tf's token vectors `(B, T, P)` and LSTM outputs `{direction: [(B, T, P)]}`."""
    lstm, cnn = options["lstm"], options["char_cnn"]
    table = np.concatenate([np.zeros_like(arrays["char_embed"][:1]), arrays["char_embed"]])
    x = table[ids].astype("float64")  # (B, T, C, E)
    pooled = []
    for i, (width, _) in enumerate(cnn["filters"]):
        w, b = arrays[f"CNN/W_cnn_{i}"][0], arrays[f"CNN/b_cnn_{i}"]  # (width, E, count)
        conv = np.stack([np.einsum("btke,ken->btn", x[:, :, s : s + width], w)
                         for s in range(x.shape[2] - width + 1)], axis=2) + b
        pooled.append(np.maximum(conv.max(axis=2), 0.0))  # max-pool, then relu
    h = np.concatenate(pooled, axis=-1)
    for k in range(cnn.get("n_highway", 0)):  # bilm-tf's high()
        high = f"CNN_high_{k}/"
        carry_gate = _sigmoid(h @ arrays[high + "W_carry"] + arrays[high + "b_carry"])
        transform_gate = np.maximum(
            h @ arrays[high + "W_transform"] + arrays[high + "b_transform"], 0.0)
        h = carry_gate * transform_gate + (1.0 - carry_gate) * h
    if "CNN_proj/W_proj" in arrays:
        h = h @ arrays["CNN_proj/W_proj"] + arrays["CNN_proj/b_proj"]
    tokens = h
    lengths = (ids > 0).any(axis=-1).sum(axis=1)
    outputs = {}
    for direction in (0, 1):
        inputs, outputs[direction] = tokens, []
        for layer in range(lstm["n_layers"]):
            cell = f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell/"
            out = np.zeros(inputs.shape[:2] + (lstm["projection_dim"],))
            for b, n in enumerate(lengths):
                c, m = np.zeros(lstm["dim"]), np.zeros(lstm["projection_dim"])
                for t in range(n) if direction == 0 else range(n - 1, -1, -1):
                    z = np.concatenate([inputs[b, t], m]) @ arrays[cell + "W_0"]
                    z = z + arrays[cell + "B"]
                    i, j, f, o = np.split(z, 4)  # TF1 LSTMCell, forget_bias=1.0
                    c = _sigmoid(f + 1.0) * c + _sigmoid(i) * np.tanh(j)
                    if "cell_clip" in lstm:
                        c = np.clip(c, -lstm["cell_clip"], lstm["cell_clip"])
                    m = _sigmoid(o) * np.tanh(c)
                    if cell + "W_P_0" in arrays:
                        m = m @ arrays[cell + "W_P_0"]
                        if "proj_clip" in lstm:
                            m = np.clip(m, -lstm["proj_clip"], lstm["proj_clip"])
                    # ResidualWrapper from the second layer: adds the input to the output only.
                    skip = lstm["use_skip_connections"] and layer > 0
                    out[b, t] = m + inputs[b, t] if skip else m
            outputs[direction].append(out)
            inputs = out
    return tokens, outputs


def _bilm(options, **overrides):
    return models.ELMoBiLM(word_vocabulary_size=20, num_sampled=None,
                           **{**options_from_bilm_tf(options), **overrides})


def _ids(max_characters=10):
    words = [["<S>", *s, "</S>"] + [""] * (3 - len(s)) for s in SENTENCES]
    return data.character_ids(tf.constant(words), max_characters)


@pytest.mark.parametrize("options", [PROJECTED, UNPROJECTED], ids=["projected", "unprojected"])
def test_the_loaded_model_computes_bilm_tf(tmp_path, options):
    weights, options_path, arrays = _write_bilm_tf_files(tmp_path, options)
    bilm = load_bilm_tf_weights(_bilm(options), weights, options_path)
    ids = _ids()
    np.testing.assert_array_equal(ids, _batcher_ids(SENTENCES, 10))  # bilm-tf's ids
    tokens, lstm_outputs = _bilm_tf_reference(arrays, options, ids.numpy())
    layers = bilm(ids)["layers"].numpy()  # (B, L + 1, T, 2P)
    real = (ids.numpy() > 0).any(axis=-1)
    P = options["lstm"]["projection_dim"]
    for half in (layers[:, 0, :, :P], layers[:, 0, :, P:]):
        assert_allclose(half[real], tokens[real], atol=1e-5)  # bilm-tf's padding vectors differ
    for j in range(options["lstm"]["n_layers"]):
        assert_allclose(layers[:, j + 1, :, :P], lstm_outputs[0][j], atol=1e-5)
        assert_allclose(layers[:, j + 1, :, P:], lstm_outputs[1][j], atol=1e-5)
    if "cell_clip" in options["lstm"]:  # the clips were reached, so they were tested
        assert np.isclose(np.abs(lstm_outputs[0][0]), options["lstm"]["proj_clip"]).any()


def _upstream_recording():
    """bilm-tf's fixture sentences `[list k][batch i]` (words) and its recorded top layers."""
    rows = json.loads((FIXTURE / "lm_embeddings_sentences.json").read_text(encoding="utf-8"))
    sentences, recorded = [[s.split() for s in row] for row in rows], []
    for k, row in enumerate(sentences):
        with h5py.File(FIXTURE / f"lm_embeddings_{k}.hdf5", "r") as f:  # "i": (2, n, P)
            recorded.append([np.concatenate(f[str(i)][...], axis=-1) for i in range(len(row))])
    return sentences, recorded


def test_bilm_tf_own_recorded_outputs_are_reproduced():
    """bilm-tf's fixture weights give the outputs bilm-tf's TF1 code recorded, every batch.

    Upstream's `test_bilm` ran 10 batches through one stateful model, batch
    `i` holding sentence `i` of each of 3 lists; it recorded the top LSTM
    layer without `<S>` / `</S>`. Row `k` starts batch `i` from the states
    it ended batch `i - 1` with (TF1's `dynamic_rnn` keeps each row's state
    at its last real token; the backward LSTM's after `<S>`). tfnlp starts
    from zeros, so each list is fed as two sequences: `s_0 .. s_9` (each
    `<S> s </S>`), whose forward LSTM reaches batch `i` in the states
    upstream carried, and `s_9 .. s_0`, whose backward LSTM reads `s_0`
    first and likewise. Fed alone as upstream fed them (bilm-tf's `Batcher`
    ids, rows padded), the first batch matches and the later ones do not:
    the carried states matter, and the concatenation reproduces them.

    Tolerance: 6e-7 was measured (outputs up to 1.7; float32's spacing there
    is 1.2e-7, and the recurrences run up to 315 steps); 1e-5 leaves room for other
    kernels' summation order, far below the 0.78 that carried states change.
    """
    sentences, recorded = _upstream_recording()
    options = FIXTURE / "options.json"
    bilm = load_bilm_tf_weights(_bilm(options), FIXTURE / "lm_weights.hdf5", options)
    P = bilm.projection_dim

    # One trace for every shape: eager LSTM steps cost more than tracing here.
    @tf.function(input_signature=[tf.TensorSpec((None, None, 50), tf.int32)])
    def top_layer(ids):  # (B, T, 2P)
        return bilm(ids)["layers"][:, -1]

    def padded(rows):
        length = max(map(len, rows))
        return data.character_ids(tf.constant([r + [""] * (length - len(r)) for r in rows]), 50)

    def bracketed(row):  # one sequence: <S> s </S> <S> s' </S> ...
        return [word for s in row for word in ("<S>", *s, "</S>")]

    forward = top_layer(padded([bracketed(row) for row in sentences])).numpy()
    backward = top_layer(padded([bracketed(row[::-1]) for row in sentences])).numpy()
    got, expected = [], []
    for k, row in enumerate(sentences):
        for i, sentence in enumerate(row):
            f = sum(len(s) + 2 for s in row[:i]) + 1  # where sentence i's first word is
            b = sum(len(s) + 2 for s in row[i + 1 :]) + 1
            n = len(sentence)
            got.append(np.concatenate([forward[k, f : f + n, :P], backward[k, b : b + n, P:]], -1))
            expected.append(recorded[k][i])
    assert_allclose(np.concatenate(got), np.concatenate(expected), atol=1e-5)

    batches = [(i, k) for i in range(len(sentences[0])) for k in range(len(sentences))]
    ids = _batcher_ids([sentences[k][i] for i, k in batches], 50)
    words = [["<S>", *sentences[k][i], "</S>"] for i, k in batches]
    np.testing.assert_array_equal(padded(words), ids)  # bilm-tf's Batcher ids
    alone = top_layer(ids).numpy()
    errors = {}
    for r, (i, k) in enumerate(batches):
        error = np.abs(alone[r, 1 : len(sentences[k][i]) + 1] - recorded[k][i]).max()
        errors[i] = max(errors.get(i, 0.0), error)
    assert errors.pop(0) < 1e-5  # the first batch starts from zeros upstream too
    assert min(errors.values()) > 0.1, errors


# One value per ELMoBiLM architecture argument, unlike PROJECTED's.
DIFFERENT = {
    "num_layers": 1, "units": 32, "projection_dim": 4, "cell_clip": None, "projection_clip": 0.25,
    "residual": False, "filters": ((1, 4), (2, 6), (3, 9)), "num_highway_layers": 1,
    "character_dim": 5, "max_characters": 12, "character_vocabulary_size": 300,
}
REFUSALS = [pytest.param(PROJECTED, name, value, id=name) for name, value in DIFFERENT.items()]
# TF1 ignores proj_clip without a projection; ProjectedLSTM would clip.
REFUSALS.append(pytest.param(UNPROJECTED, "projection_clip", 0.1, id="projection_clip_ignored"))


def test_every_architecture_argument_is_compared():
    assert set(DIFFERENT) == set(_ARCHITECTURE)


@pytest.mark.parametrize(("options", "name", "value"), REFUSALS)
def test_a_model_differing_in_one_setting_is_refused_naming_it(tmp_path, options, name, value):
    """The clips and `residual` change no shape: without this the file would load silently."""
    weights, options_path, _ = _write_bilm_tf_files(tmp_path, options)
    bilm = _bilm(options, **{name: value})
    before = [w.numpy() for w in bilm.weights]
    given = options_from_bilm_tf(options)[name]
    line = f"\n  {name}: the model has {getattr(bilm, name)!r}, {_ARCHITECTURE[name]} gives {given!r}"
    if options is UNPROJECTED:
        line += " (the options' 0.1 is ignored: TF1's LSTMCell has no projection"
    with pytest.raises(ValueError, match=re.escape(line)) as error:  # both names, both values
        load_bilm_tf_weights(bilm, weights, options_path)
    assert "(1 difference;" in str(error.value)
    for w, b in zip(bilm.weights, before, strict=True):
        np.testing.assert_array_equal(w.numpy(), b)


def test_an_embedder_is_loaded_through_its_bilm(tmp_path):
    weights, options, _ = _write_bilm_tf_files(tmp_path, PROJECTED)
    embedder = models.ELMoEmbedder(_bilm(PROJECTED))
    assert load_bilm_tf_weights(embedder, weights, options) is embedder
    reference = load_bilm_tf_weights(_bilm(PROJECTED), weights, options)
    assert_allclose(embedder(_ids())["layers"], reference(_ids())["layers"], atol=0.0)


@pytest.mark.parametrize("options", [PROJECTED, UNPROJECTED], ids=["projected", "unprojected"])
def test_saving_writes_back_the_same_files(tmp_path, options):
    weights, options_path, arrays = _write_bilm_tf_files(tmp_path, options)
    bilm = load_bilm_tf_weights(_bilm(options), weights, options_path)
    save_bilm_tf_weights(bilm, tmp_path / "saved.hdf5", tmp_path / "saved.json")
    saved_options = json.loads((tmp_path / "saved.json").read_text())
    if options is UNPROJECTED:  # equivalent: proj_clip is ignored without a projection
        saved_options["lstm"]["proj_clip"] = options["lstm"]["proj_clip"]
        assert saved_options["char_cnn"].pop("n_highway") == 0  # absent in the options
    assert saved_options == options
    with h5py.File(tmp_path / "saved.hdf5", "r") as f:
        saved = {}
        f.visititems(lambda name, obj: saved.__setitem__(name, obj[...])  # None: go on
                     if isinstance(obj, h5py.Dataset) else None)
    assert sorted(saved) == sorted(arrays)
    for name, array in arrays.items():  # the forget bias went through + 1 - 1
        np.testing.assert_allclose(saved[name], array, atol=1e-6, err_msg=name)


def test_saving_refuses_a_projection_bilm_tf_does_not_have(tmp_path):
    bilm = _bilm(UNPROJECTED)  # filters add up to projection_dim: a random projection
    with pytest.raises(ValueError, match="no CNN projection .* not the identity"):
        save_bilm_tf_weights(bilm, tmp_path / "w.hdf5", tmp_path / "o.json")


def test_elmo_original_options_round_trip():
    preset = models.ELMO_ARCHITECTURES["elmo_original"]
    assert bilm_tf_options(preset) == PUBLISHED_OPTIONS
    config = options_from_bilm_tf(PUBLISHED_OPTIONS)
    bilm = models.ELMoBiLM.from_architecture("elmo_original", word_vocabulary_size=100, num_sampled=None)
    assert bilm_tf_options(bilm) == PUBLISHED_OPTIONS
    assert {name: getattr(bilm, name) for name in config} == config
    shapes = _file_shapes(bilm)
    assert shapes["char_embed"] == (261, 16) and shapes["CNN/W_cnn_6"] == (1, 7, 16, 1024)
    assert shapes["CNN_high_1/W_carry"] == (2048, 2048) and shapes["CNN_proj/W_proj"] == (2048, 512)
    assert shapes["RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_0"] == (1024, 16384)
    assert shapes["RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_P_0"] == (4096, 512)
    # The file holds every parameter but the softmax and the padding row.
    file_size = sum(int(np.prod(shape)) for shape in shapes.values())
    assert file_size == bilm.count_params() - bilm.word_softmax.count_params() - 16


def test_training_options_give_the_training_settings_too():
    options = {**PUBLISHED_OPTIONS, "n_tokens_vocab": 793471, "dropout": 0.1,
               "n_negative_samples_batch": 8192,
               "char_cnn": {**PUBLISHED_OPTIONS["char_cnn"], "n_characters": 261}}
    config = options_from_bilm_tf(options)
    assert config["word_vocabulary_size"] == 793471 and config["num_sampled"] == 8192
    assert config["dropout"] == 0.1 and config["character_vocabulary_size"] == 262


def test_a_different_model_is_refused_with_every_difference_before_any_assignment(tmp_path):
    weights, options, _ = _write_bilm_tf_files(tmp_path, PROJECTED)
    bilm = _bilm(PROJECTED, units=32, residual=False, projection_clip=None)
    before = [w.numpy() for w in bilm.weights]
    with pytest.raises(ValueError, match="3 differences") as error:
        load_bilm_tf_weights(bilm, weights, options)
    for expected in ("units: the model has 32, lstm.dim gives 16",
                     "residual: the model has False, lstm.use_skip_connections gives True",
                     "projection_clip: the model has None, lstm.proj_clip gives 0.5", options):
        assert expected in str(error.value)
    for w, b in zip(bilm.weights, before, strict=True):
        np.testing.assert_array_equal(w.numpy(), b)


def test_a_bad_weights_file_is_refused_with_every_problem(tmp_path):
    weights, options, _ = _write_bilm_tf_files(tmp_path, PROJECTED)
    with h5py.File(weights, "a") as f:
        del f["CNN/b_cnn_1"]
        del f["RNN_1/RNN/MultiRNNCell/Cell0/LSTMCell/W_P_0"]
        f["RNN_1/RNN/MultiRNNCell/Cell0/LSTMCell/W_P_0"] = np.zeros((16, 9), "float32")
        f["softmax/W"] = np.zeros((20, 8), "float32")
    bilm = _bilm(PROJECTED)
    before = [w.numpy() for w in bilm.weights]
    with pytest.raises(ValueError, match="3 problems") as error:
        load_bilm_tf_weights(bilm, weights, options)
    wrong = "RNN_1/RNN/MultiRNNCell/Cell0/LSTMCell/W_P_0: shape (16, 9), expected (16, 8)"
    for expected in (weights, "missing CNN/b_cnn_1 (6,)", "unexpected softmax/W (20, 8)", wrong):
        assert expected in str(error.value)
    for w, b in zip(bilm.weights, before, strict=True):
        np.testing.assert_array_equal(w.numpy(), b)


@pytest.mark.parametrize("broken", ["weights_absent", "weights_not_hdf5", "options_absent",
                                    "options_not_json"])
def test_unreadable_files_are_named(tmp_path, broken):
    weights, options, _ = _write_bilm_tf_files(tmp_path, PROJECTED)
    bilm = _bilm(PROJECTED)
    if broken == "weights_absent":
        weights = str(tmp_path / "nowhere.hdf5")
    elif broken == "weights_not_hdf5":
        (tmp_path / "weights.hdf5").write_text("not HDF5")
    elif broken == "options_absent":
        options = str(tmp_path / "nowhere.json")
    else:
        (tmp_path / "options.json").write_text("{not json")
    named = weights if broken.startswith("weights") else options
    with pytest.raises(ValueError, match="Cannot read the bilm-tf") as error:
        load_bilm_tf_weights(bilm, weights, options)
    assert named in str(error.value)


def test_options_tfnlp_cannot_compute_exactly_are_refused_all_at_once():
    options = {"lstm": {**PROJECTED["lstm"], "projection_dim": 32},
               "char_cnn": {**PROJECTED["char_cnn"], "activation": "tanh", "n_characters": 300}}
    del options["lstm"]["use_skip_connections"]
    with pytest.raises(ValueError) as error:
        options_from_bilm_tf(options)
    for expected in ("lstm.use_skip_connections is missing", "char_cnn.activation='tanh'",
                     "highways are always ReLU", "char_cnn.n_characters=300"):
        assert expected in str(error.value)
    options["lstm"]["use_skip_connections"] = True
    options["char_cnn"].update(activation="relu", n_characters=262)
    with pytest.raises(ValueError) as error:  # checked once the entries are valid
        options_from_bilm_tf(options)
    assert "projection_dim (32) exceeds lstm.dim (16)" in str(error.value)
    assert "(18 features) are fewer than lstm.projection_dim (32)" in str(error.value)
    with pytest.raises(ValueError, match="262 character ids"):
        bilm_tf_options({"character_vocabulary_size": 300})
