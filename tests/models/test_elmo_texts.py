"""`ELMoEmbedder.predict` on raw texts: the character ids of training and serving, built in tf.data."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.harness import assert_allclose
from tfnlp import data, models
from tfnlp.models.elmo import sentence_character_ids

MAX_TOKENS = 7
TEXTS = [
    "Hello, world!",
    "It is a truth universally acknowledged, that a single man",  # cut to 5 words
    "",
    b"broken \xff utf-8",
    "emoji \U0001F600 中文",
]


def _embedder(**kwargs):
    keras.utils.set_random_seed(7)
    bilm = models.ELMoBiLM(word_vocabulary_size=30, num_layers=1, units=8, projection_dim=4,
                           filters=((1, 4), (2, 4)), num_highway_layers=1, max_characters=10,
                           num_sampled=None)
    embedder = models.ELMoEmbedder(bilm, layer_norm=True, **kwargs)
    embedder.scalar_mix.set_weights([np.array([0.5, -1.0], "float32"), np.array(1.7, "float32")])
    return embedder


@pytest.fixture(scope="module")
def embedder():
    return _embedder(max_tokens=MAX_TOKENS)


def _ids(texts, max_tokens=MAX_TOKENS, max_input_bytes=100_000):
    """Character ids built by hand: `sentence_tokens`, padded to `max_tokens`, `character_ids`."""
    tokens = data.sentence_tokens(tf.constant(texts, tf.string), max_tokens, max_input_bytes)
    return data.character_ids(tokens.to_tensor("", shape=[None, max_tokens]), 10)


@pytest.mark.parametrize("form", ["list", "numpy", "tensor", "scalars", "batches"])
def test_texts_give_exactly_the_outputs_of_their_character_ids(embedder, form):
    batches = {
        # All bytes: `task.string_tensor` cannot read a list that mixes str and invalid UTF-8.
        "list": [t if isinstance(t, bytes) else t.encode("utf-8") for t in TEXTS],
        "numpy": np.array(TEXTS, dtype=object),
        "tensor": tf.constant(TEXTS),
        "scalars": tf.data.Dataset.from_tensor_slices(TEXTS),
        "batches": tf.data.Dataset.from_tensor_slices(TEXTS).batch(3),
    }
    outputs = embedder.predict(batches[form], batch_size=2, verbose=0)
    # Batched as the texts are (the numerics of a batch depend on its size).
    expected = embedder.predict(_ids(TEXTS), batch_size=3 if form == "batches" else 2, verbose=0)
    assert sorted(outputs) == ["elmo", "layers", "padding_mask"]
    assert outputs["elmo"].shape == (len(TEXTS), MAX_TOKENS, 8)
    for key in outputs:
        np.testing.assert_array_equal(outputs[key], expected[key])
    np.testing.assert_array_equal(outputs["padding_mask"].sum(1), [6, 7, 2, 7, 5])
    assert_allclose(outputs, embedder(_ids(TEXTS)), atol=1e-6)  # and the eager call
    assert np.abs(outputs["elmo"]).max() > 0


def test_the_shared_helper_pads_to_the_longest_text_or_to_a_length():
    texts = tf.constant(["a b", ""])
    words, ids = sentence_character_ids(texts, 5, 10)
    assert words.numpy().tolist() == [[b"<S>", b"a", b"b", b"</S>"], [b"<S>", b"</S>", b"", b""]]
    np.testing.assert_array_equal(ids, data.character_ids(words, 10))
    words, ids = sentence_character_ids(texts, 5, 10, length=5)
    assert words.shape == (2, 5) and ids.shape == (2, 5, 10)
    words, ids = sentence_character_ids(tf.constant([], tf.string), 5, 10)
    assert words.shape == (0, 2) and ids.shape == (0, 2, 10)


def test_texts_are_cut_to_max_input_bytes():
    embedder = _embedder(max_tokens=MAX_TOKENS, max_input_bytes=8)
    texts = ["one two three four"]  # 8 bytes: "one two "
    outputs = embedder.predict(texts, verbose=0)
    np.testing.assert_array_equal(outputs["elmo"], embedder.predict(_ids(["one two"]), verbose=0)["elmo"])


def test_the_character_id_path_is_unchanged_without_max_tokens():
    with_tokens, without = _embedder(max_tokens=MAX_TOKENS), _embedder()
    ids = _ids(TEXTS)
    assert_allclose(with_tokens(ids), without(ids), atol=0.0)
    assert_allclose(with_tokens.predict(ids, verbose=0), without.predict(ids, verbose=0), atol=0.0)


def test_keras_file_keeps_the_text_settings(tmp_path, embedder):
    custom = _embedder(max_tokens=5, max_input_bytes=1_000)
    config = custom.get_config()
    assert (config["max_tokens"], config["max_input_bytes"]) == (5, 1_000)
    assert models.ELMoEmbedder.from_config(config).get_config() == config
    for model in (custom, embedder):
        path = os.path.join(tmp_path, f"{model.max_tokens}.keras")
        model.save(path)
        restored = keras.saving.load_model(path, safe_mode=True)
        assert type(restored) is models.ELMoEmbedder
        assert (restored.max_tokens, restored.max_input_bytes) == (model.max_tokens, model.max_input_bytes)
        texts = tf.constant(TEXTS)
        assert_allclose(restored.predict(texts, verbose=0), model.predict(texts, verbose=0), atol=1e-6)
        assert_allclose(restored(_ids(TEXTS)), model(_ids(TEXTS)), atol=0.0)


def test_bad_text_inputs_are_clear_errors(embedder):
    with pytest.raises(ValueError, match="single text"):
        embedder.predict("Hello, world!", verbose=0)
    with pytest.raises(ValueError, match="1-D"):
        embedder.predict(np.array([["a"], ["b"]]), verbose=0)
    with pytest.raises(ValueError, match=r"single texts \(scalars\) or batches"):
        embedder.predict(tf.data.Dataset.from_tensors(tf.constant([["a"]])), verbose=0)
    without = _embedder()
    for texts in (["a", "b"], tf.data.Dataset.from_tensor_slices(TEXTS)):
        with pytest.raises(ValueError, match="no `max_tokens`"):
            without.predict(texts, verbose=0)
    without.compile(loss="mse")
    with pytest.raises(ValueError, match="`predict` only"):
        without.fit(["a", "b"], np.zeros(2), verbose=0)
    for max_tokens in (0, 2, 8.0, "8", True):
        with pytest.raises(ValueError, match="`max_tokens`"):
            _embedder(max_tokens=max_tokens)
    with pytest.raises(ValueError, match="`max_input_bytes`"):
        _embedder(max_tokens=5, max_input_bytes=0)
