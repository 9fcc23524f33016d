import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.harness import assert_allclose, assert_finite
from tfnlp import data, models

SENTENCES = [
    ["<S>", "It", "is", "a", "truth", "universally", "acknowledged", "</S>"],
    ["<S>", "Emma", "Woodhouse", ",", "handsome", "</S>", "", ""],
    ["<S>", "Call", "me", "</S>", "", "", "", ""],
]
P = 8  # projection_dim of the tiny model


def _bilm(**overrides):
    config = {
        "word_vocabulary_size": 60, "num_layers": 2, "units": 16, "projection_dim": P,
        "filters": ((1, 4), (2, 6), (3, 6)), "num_highway_layers": 1, "max_characters": 12,
        "num_sampled": 10, "dropout": 0.0,
    }
    return models.ELMoBiLM(**{**config, **overrides})


def _ids(sentences=SENTENCES, max_characters=12):
    return data.character_ids(tf.constant(sentences), max_characters)


def _targets(batch, length, seed=0):
    rng = np.random.default_rng(seed)
    weights = np.ones((batch, length), "int32")
    return {
        "next_word_ids": rng.integers(0, 60, (batch, length)).astype("int32"),
        "next_word_weights": weights,
        "previous_word_ids": rng.integers(0, 60, (batch, length)).astype("int32"),
        "previous_word_weights": weights,
    }


def test_outputs_are_the_2l_plus_1_layers_with_the_token_vector_twice():
    bilm = _bilm()
    outputs = bilm(_ids())
    layers = outputs["layers"].numpy()
    assert layers.shape == (3, 3, 8, 2 * P)
    np.testing.assert_array_equal(outputs["padding_mask"], [[1] * 8, [1] * 6 + [0] * 2, [1] * 4 + [0] * 4])
    tokens = bilm.character_cnn(_ids()).numpy()
    np.testing.assert_array_equal(layers[:, 0, :, :P], tokens)
    np.testing.assert_array_equal(layers[:, 0, :, P:], tokens)
    assert np.all(layers[1, :, 6:] == 0) and np.all(layers[2, :, 4:] == 0)  # padding: zeros


@pytest.mark.parametrize("position", [1, 3, 5])
def test_each_direction_only_sees_its_own_side(position):
    bilm = _bilm()
    ids = _ids()
    changed = ids.numpy().copy()
    changed[0, position] = _ids([["Zebra"]]).numpy()[0, 0]
    before, after = bilm(ids)["layers"].numpy(), bilm(changed)["layers"].numpy()
    for j in range(1, 3):
        forward, backward = slice(0, P), slice(P, 2 * P)
        # The forward LM at t < position reads nothing at or after `position`...
        np.testing.assert_array_equal(after[0, j, :position, forward], before[0, j, :position, forward])
        # ...the backward LM at t > position nothing at or before it.
        np.testing.assert_array_equal(after[0, j, position + 1 :, backward], before[0, j, position + 1 :, backward])
        # And each does see it from the other side.
        assert not np.allclose(after[0, j, position:, forward], before[0, j, position:, forward])
        assert not np.allclose(after[0, j, : position + 1, backward], before[0, j, : position + 1, backward])
    np.testing.assert_array_equal(after[1:], before[1:])  # other rows untouched


def test_gradients_flow_only_from_the_allowed_side():
    bilm = _bilm()
    ids = _ids()
    tokens = bilm.character_cnn(ids)
    mask = bilm(ids)["padding_mask"]
    t = 3
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(tokens)
        layers = bilm.contextualize(tokens, mask)
        forward = tf.reduce_sum(layers[0, 1:, t, :P])
        backward = tf.reduce_sum(layers[0, 1:, t, P:])
    d_forward = tape.gradient(forward, tokens).numpy()[0]  # (T, P)
    d_backward = tape.gradient(backward, tokens).numpy()[0]
    assert np.all(d_forward[t + 1 :] == 0) and np.all(np.abs(d_forward[: t + 1]).sum(-1) > 0)
    assert np.all(d_backward[:t] == 0) and np.all(np.abs(d_backward[t:]).sum(-1) > 0)


def test_padding_never_changes_real_tokens():
    bilm = _bilm()
    short = _ids([s[:6] for s in SENTENCES])
    longer = _ids([s[:6] + [""] * 9 for s in SENTENCES])
    assert_allclose(bilm(longer)["layers"][:, :, :6], bilm(short)["layers"], atol=1e-6)
    assert np.all(bilm(longer)["layers"].numpy()[:, :, 6:] == 0)


def test_words_longer_than_the_character_limit_are_truncated():
    bilm = _bilm()
    long_word = "antidisestablishmentarianism"  # 28 bytes; 10 fit with the markers
    full = bilm(_ids([["<S>", long_word, "</S>"]]))["layers"]
    prefix = bilm(_ids([["<S>", long_word[:10], "</S>"]]))["layers"]
    assert_allclose(full, prefix, atol=0.0)


def test_empty_input_is_a_clear_error():
    bilm = _bilm()
    with pytest.raises(ValueError, match="no tokens"):
        bilm(tf.zeros((2, 0, 12), tf.int32))
    with pytest.raises(ValueError, match="incompatible|characters"):
        bilm(tf.zeros((2, 3, 5), tf.int32))  # fewer characters than the model's


def test_all_padding_rows_give_zeros_not_nan():
    bilm = _bilm()
    outputs = bilm(tf.zeros((2, 4, 12), tf.int32))
    assert np.all(outputs["layers"].numpy() == 0)
    embedder = models.ELMoEmbedder(bilm, layer_norm=True)
    assert np.all(embedder(tf.zeros((2, 4, 12), tf.int32))["elmo"].numpy() == 0)


def test_loss_is_the_mean_of_both_directions_full_softmax_when_evaluating():
    bilm = _bilm()
    ids = _ids()
    targets = _targets(3, 8)
    targets["next_word_weights"][2, 5:] = 0
    layers = bilm(ids)["layers"]
    top = layers[:, -1].numpy()
    kernel, bias = bilm.word_softmax.kernel.numpy(), bilm.word_softmax.bias.numpy()

    def nll(hidden, ids, weights):
        logits = hidden @ kernel.T + bias
        log_probs = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True)) - logits.max(-1, keepdims=True)
        picked = np.take_along_axis(log_probs, ids[..., None], -1)[..., 0]
        return -(picked * weights).sum() / weights.sum()

    expected = 0.5 * (
        nll(top[..., :P], targets["next_word_ids"], targets["next_word_weights"])
        + nll(top[..., P:], targets["previous_word_ids"], targets["previous_word_weights"])
    )
    loss = bilm.compute_loss(ids, targets, bilm(ids), training=False)
    np.testing.assert_allclose(float(loss), expected, rtol=1e-5)
    bilm.compile()
    metrics = bilm.evaluate(ids, targets, return_dict=True, verbose=0)
    np.testing.assert_allclose(metrics["loss"], expected, rtol=1e-5)
    np.testing.assert_allclose(
        metrics["forward_perplexity"],
        np.exp(nll(top[..., :P], targets["next_word_ids"], targets["next_word_weights"])),
        rtol=1e-5,
    )


def _corpus():
    text = ["the cat sat on the mat .", "the dog sat on the log .", "a cat saw a dog ."] * 12
    vocabulary = data.build_word_vocabulary(text, 40)
    dataset = data.elmo_dataset(
        tf.data.Dataset.from_tensor_slices(text), vocabulary, sequence_length=10,
        max_characters=12, batch_size=12,
    )
    return vocabulary, dataset.map(models.elmo_batch)


@pytest.mark.parametrize("dtype", ["float32", "mixed_bfloat16"])
def test_training_lowers_the_perplexity(dtype):
    vocabulary, dataset = _corpus()
    bilm = _bilm(word_vocabulary_size=len(vocabulary), num_sampled=8, dtype=dtype)
    bilm.compile(optimizer=keras.optimizers.Adam(0.03))
    before = bilm.evaluate(dataset, return_dict=True, verbose=0)
    history = bilm.fit(dataset, epochs=15, verbose=0).history
    after = bilm.evaluate(dataset, return_dict=True, verbose=0)
    assert np.all(np.isfinite(history["loss"]))
    assert set(history) == {"loss", "forward_perplexity", "backward_perplexity"}
    for direction in ("forward", "backward"):
        key = f"{direction}_perplexity"
        assert after[key] < 0.5 * before[key], (key, before[key], after[key])


def test_compile_refuses_a_loss_and_fit_needs_the_targets():
    bilm = _bilm()
    with pytest.raises(ValueError, match="loss"):
        bilm.compile(loss="mse")
    bilm.compile()
    with pytest.raises(ValueError, match="elmo_batch"):
        bilm.fit(_ids(), np.zeros((3, 8)), verbose=0)
    with pytest.raises(ValueError, match="elmo_dataset"):
        models.elmo_batch({"character_ids": _ids()})


def test_config_round_trip_and_safe_mode_reload(tmp_path):
    bilm = _bilm(dtype="mixed_bfloat16")
    config = bilm.get_config()
    assert models.ELMoBiLM.from_config(config).get_config() == config
    serialized = json.loads(json.dumps(keras.saving.serialize_keras_object(bilm)))
    assert serialized["registered_name"] == "tfnlp>ELMoBiLM"
    path = os.path.join(tmp_path, "bilm.keras")
    bilm.save(path)
    restored = keras.saving.load_model(path, safe_mode=True)
    assert restored.get_config() == config
    assert restored.character_cnn.dtype_policy.name == "mixed_bfloat16"
    assert_allclose(restored(_ids())["layers"], bilm(_ids())["layers"], atol=0.0)
    np.testing.assert_array_equal(restored.word_softmax.kernel.numpy(), bilm.word_softmax.kernel.numpy())


def test_original_configuration_has_93_6_million_parameters():
    bilm = models.ELMoBiLM.from_architecture("elmo_original", word_vocabulary_size=1000, num_sampled=None)
    # bilm-tf's elmo_2x4096_512_2048cnn_2xhighway: 93.6M without the softmax.
    assert bilm.count_params() - bilm.word_softmax.count_params() == 93_600_864
    assert bilm.word_softmax.count_params() == 1000 * 512 + 1000
    small = models.ELMoBiLM.from_architecture("elmo_small", word_vocabulary_size=20000)
    assert small.num_sampled == 1024 and small.projection_dim == 128
    with pytest.raises(ValueError, match="`architecture` must be one of"):
        models.ELMoBiLM.from_architecture("elmo_huge", word_vocabulary_size=10)


def test_embedder_mixes_the_layers_by_the_formula():
    bilm = _bilm()
    embedder = models.ELMoEmbedder(bilm)
    embedder.scalar_mix.set_weights([np.array([0.3, -1.0, 2.0], "float32"), np.array(1.7, "float32")])
    outputs = embedder(_ids())
    layers = outputs["layers"].numpy()
    s = np.exp([0.3, -1.0, 2.0]) / np.exp([0.3, -1.0, 2.0]).sum()
    expected = 1.7 * np.einsum("j,bjtd->btd", s, layers)
    expected *= outputs["padding_mask"].numpy()[:, :, None]
    assert_allclose(outputs["elmo"], expected, atol=1e-5)
    assert_allclose(outputs["layers"], bilm(_ids())["layers"], atol=0.0)


def test_embedder_freezes_the_bilm_or_fine_tunes_it():
    frozen = models.ELMoEmbedder(_bilm())
    assert [w.path for w in frozen.trainable_weights] == [
        "scalar_mix/layer_weights", "scalar_mix/scale",
    ]
    tuned = models.ELMoEmbedder(_bilm(), trainable_bilm=True)
    names = [w.path for w in tuned.trainable_weights]
    assert "scalar_mix/scale" in names and any("forward_lstm_0" in n for n in names)
    assert not any("word_softmax" in n for n in names)  # unused by the embedder

    # A downstream model trains the mix (and only the mix when frozen).
    for embedder in (frozen, tuned):
        inputs = keras.Input((None, 12), dtype="int32")
        pooled = keras.ops.mean(embedder(inputs)["elmo"], axis=1)
        model = keras.Model(inputs, keras.layers.Dense(2)(pooled))
        model.compile(keras.optimizers.SGD(0.5), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        bilm_before = [w.numpy().copy() for w in embedder.bilm.character_cnn.weights]
        mix_before = embedder.scalar_mix.get_weights()
        model.fit(_ids(), np.array([0, 1, 1]), epochs=2, verbose=0)
        bilm_moved = any(
            not np.array_equal(a, w.numpy()) for a, w in zip(bilm_before, embedder.bilm.character_cnn.weights, strict=True)
        )
        assert bilm_moved == embedder.trainable_bilm
        assert not np.array_equal(mix_before[0], embedder.scalar_mix.get_weights()[0])


def test_embedder_save_and_load(tmp_path):
    embedder = models.ELMoEmbedder(_bilm(), layer_norm=True, dropout=0.1)
    embedder.scalar_mix.set_weights([np.array([0.3, -1.0, 2.0], "float32"), np.array(1.7, "float32")])
    config = embedder.get_config()
    assert models.ELMoEmbedder.from_config(config).get_config() == config
    path = os.path.join(tmp_path, "embedder.keras")
    embedder.save(path)
    restored = keras.saving.load_model(path, safe_mode=True)
    assert_allclose(restored(_ids()), embedder(_ids()), atol=0.0)
    with pytest.raises(ValueError, match="bilm"):
        models.ELMoEmbedder(keras.Sequential())


def test_mixed_precision_embedder_is_finite():
    embedder = models.ELMoEmbedder(_bilm(dtype="mixed_bfloat16"), layer_norm=True)
    outputs = embedder(_ids())
    assert outputs["elmo"].dtype == tf.bfloat16
    assert_finite(outputs)


def test_a_trained_model_reloads_with_its_optimizer_state(tmp_path):
    vocabulary, dataset = _corpus()
    bilm = _bilm(word_vocabulary_size=len(vocabulary), num_sampled=8)
    bilm.compile(optimizer=keras.optimizers.Adam(0.01))
    bilm.fit(dataset, epochs=1, verbose=0)
    path = os.path.join(tmp_path, "bilm.keras")
    bilm.save(path)
    restored = keras.saving.load_model(path, safe_mode=True)
    assert int(restored.optimizer.iterations) == int(bilm.optimizer.iterations) > 0
    assert float(restored.optimizer.learning_rate) == pytest.approx(0.01)
    for a, b in zip(restored.optimizer.variables, bilm.optimizer.variables, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    restored.fit(dataset, epochs=1, verbose=0)  # and it goes on training


def test_an_empty_batch_gives_empty_outputs():
    embedder = models.ELMoEmbedder(_bilm())
    outputs = embedder(tf.zeros((0, 5, 12), tf.int32))
    assert outputs["elmo"].shape == (0, 5, 2 * P) and outputs["layers"].shape == (0, 3, 5, 2 * P)


def test_a_frozen_bilm_runs_without_dropout_while_the_task_trains():
    bilm = _bilm(dropout=0.5)
    frozen = models.ELMoEmbedder(bilm)
    assert_allclose(frozen(_ids(), training=True)["layers"], frozen(_ids(), training=False)["layers"], atol=0.0)
    tuned = models.ELMoEmbedder(_bilm(dropout=0.5), trainable_bilm=True)
    assert not np.allclose(tuned(_ids(), training=True)["layers"], tuned(_ids(), training=False)["layers"])


def test_an_empty_word_inside_a_sentence_keeps_both_directions_causal():
    bilm = _bilm()
    sentence = ["<S>", "a", "", "b", "</S>"]
    changed = ["<S>", "Zebra", "", "b", "</S>"]
    mask = bilm(_ids([sentence]))["padding_mask"].numpy()
    np.testing.assert_array_equal(mask, [[1, 1, 1, 1, 1]])  # interior "" is a token
    before, after = bilm(_ids([sentence]))["layers"].numpy(), bilm(_ids([changed]))["layers"].numpy()
    np.testing.assert_array_equal(after[0, 1:, 2:, P:], before[0, 1:, 2:, P:])  # backward after "a"
    np.testing.assert_array_equal(after[0, 1:, :1, :P], before[0, 1:, :1, :P])  # forward before it


def test_the_embedder_config_leaves_the_bilm_optimizer_out(tmp_path):
    vocabulary, dataset = _corpus()
    bilm = _bilm(word_vocabulary_size=len(vocabulary))
    bilm.compile()
    bilm.fit(dataset, epochs=1, verbose=0)
    path = os.path.join(tmp_path, "bilm.keras")
    bilm.save(path)
    embedder = models.ELMoEmbedder(keras.saving.load_model(path, compile=False))
    assert "compile_config" not in embedder.get_config()["bilm"]
    embedder.save(os.path.join(tmp_path, "embedder.keras"))
    restored = keras.saving.load_model(os.path.join(tmp_path, "embedder.keras"), safe_mode=True)
    assert_allclose(restored(_ids()), embedder(_ids()), atol=0.0)
