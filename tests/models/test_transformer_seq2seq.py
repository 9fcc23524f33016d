"""TransformerSeq2Seq: teacher forcing == step-by-step decoding, cache == recomputation."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfnlp import models
from tfnlp.models import TransformerSeq2Seq

START, END = 2, 3
SOURCE = tf.constant([[5, 6, 7, 8, 9, END, 0, 0], [10, 11, END, 0, 0, 0, 0, 0]])
SOURCE_MASK = tf.cast(SOURCE > 0, tf.int32)
TARGET = tf.constant([[START, 12, 13, 14, 15, 16], [START, 17, 18, 19, 0, 0]])


def tiny(**overrides):
    config = {
        "source_vocabulary_size": 40, "target_vocabulary_size": 30, "num_encoder_layers": 2,
        "num_decoder_layers": 2, "hidden_dim": 16, "num_heads": 2, "intermediate_dim": 32,
        "dropout": 0.0,
    }
    config.update(overrides)
    return TransformerSeq2Seq(**config)


def inputs(source=SOURCE, target=TARGET):
    return {
        "encoder_token_ids": source,
        "encoder_padding_mask": tf.cast(source > 0, tf.int32),
        "decoder_token_ids": target,
        "decoder_padding_mask": tf.cast(target > 0, tf.int32),
    }


VARIANTS = {
    "post_ln_separate_vocabularies": {},
    "pre_ln": {"norm_first": True},
    "shared_vocabulary_tied": {"target_vocabulary_size": None},
    "untied": {"tie_output_embedding": False},
}


@pytest.mark.parametrize("overrides", VARIANTS.values(), ids=VARIANTS.keys())
def test_teacher_forced_logits_equal_step_by_step_decoding(overrides):
    model = tiny(**overrides)
    full = model(inputs(), training=False).numpy()
    for use_cache in (True, False):
        state, context = model.initial_decoding_state(SOURCE, SOURCE_MASK, 6, use_cache)
        for t in range(6):
            logits, state = model.decoding_step(TARGET[:, t], tf.constant(t), state, context)
            # Row 1 has padding from t = 4 on; its earlier logits must still agree.
            rows = [0, 1] if t < 4 else [0]
            np.testing.assert_allclose(logits.numpy()[rows], full[rows, t], atol=2e-5)


@pytest.mark.parametrize(
    "settings",
    [
        {"beam_size": 1},
        {"beam_size": 1, "no_repeat_ngram_size": 3},
        {"beam_size": 3, "length_penalty": 0.6},
        {"beam_size": 4, "no_repeat_ngram_size": 3},
    ],
    ids=["greedy", "greedy_trigram", "beam3_alpha", "beam4_trigram"],
)
def test_cached_generation_equals_recomputation(settings):
    keras.utils.set_random_seed(7)
    model = tiny(num_decoder_layers=3, norm_first=True)
    common = {"start_id": START, "end_id": END, "max_length": 12, **settings}
    cached = model.generate(SOURCE, SOURCE_MASK, **common)
    recomputed = model.generate(SOURCE, SOURCE_MASK, use_cache=False, **common)
    np.testing.assert_array_equal(cached["token_ids"], recomputed["token_ids"])
    np.testing.assert_array_equal(cached["lengths"], recomputed["lengths"])
    np.testing.assert_allclose(cached["scores"], recomputed["scores"], atol=1e-5)


def test_source_padding_changes_nothing():
    model = tiny()
    padded = tf.pad(SOURCE, [[0, 0], [0, 5]])
    np.testing.assert_allclose(model(inputs(padded)), model(inputs()), atol=1e-5)
    short = model.generate(SOURCE, SOURCE_MASK, start_id=START, end_id=END, max_length=8)
    long = model.generate(padded, tf.cast(padded > 0, tf.int32), start_id=START, end_id=END,
                          max_length=8)
    np.testing.assert_array_equal(short["token_ids"], long["token_ids"])


def test_generate_traces_once_per_setting():
    model = tiny()
    for batch in (SOURCE, SOURCE[:1], tf.tile(SOURCE, [3, 2])):
        model.generate(batch, start_id=START, end_id=END, max_length=6, beam_size=2)
    (function,) = model._generate_functions.by_setting.values()
    assert function.experimental_get_tracing_count() == 1


def test_learns_to_reverse_sequences():
    """Teacher-forced training, then greedy and beam decoding reproduce the targets."""
    rng = np.random.default_rng(0)
    sources = rng.integers(5, 15, size=(512, 5))
    targets = sources[:, ::-1] + 10  # reversed, in the target vocabulary's own ids
    column = np.full((512, 1), 0)
    features = {
        "encoder_token_ids": np.concatenate([sources, column + END], 1),
        "encoder_padding_mask": np.ones((512, 6), np.int32),
        "decoder_token_ids": np.concatenate([column + START, targets], 1),
        "decoder_padding_mask": np.ones((512, 6), np.int32),
    }
    labels = np.concatenate([targets, column + END], 1)
    model = tiny(num_encoder_layers=1, num_decoder_layers=1, hidden_dim=32, num_heads=4,
                 intermediate_dim=64)
    model.compile(optimizer=keras.optimizers.Adam(3e-3))
    model.fit(features, labels, batch_size=32, epochs=25, verbose=0)
    test_sources = rng.integers(5, 15, size=(16, 5))
    encoder_ids = np.concatenate([test_sources, np.full((16, 1), END)], 1)
    expected = np.concatenate([test_sources[:, ::-1] + 10, np.full((16, 1), END)], 1)
    for beam_size in (1, 3):
        output = model.generate(encoder_ids, start_id=START, end_id=END, max_length=8,
                                beam_size=beam_size)
        accuracy = np.mean(output["token_ids"].numpy()[:, :6] == expected)
        assert accuracy > 0.9, (beam_size, accuracy)


def test_label_smoothing_and_padding_weights_in_training():
    model = tiny()
    model.compile()
    x, y, weights = models.seq2seq_batch({**inputs(), "decoder_target_ids": TARGET})
    loss = model.evaluate(x, y, sample_weight=weights, verbose=0, return_dict=True)["loss"]
    assert np.isfinite(loss)
    # Padded target positions weigh nothing: changing their labels changes nothing.
    other = tf.where(weights > 0, y, 7)
    other_loss = model.evaluate(x, other, sample_weight=weights, verbose=0, return_dict=True)
    np.testing.assert_allclose(other_loss["loss"], loss, rtol=1e-6)
    # ... and the token accuracy counts the real positions only.
    predicted = tf.argmax(model(x), axis=-1, output_type=tf.int32)
    perfect = tf.where(weights > 0, predicted, (predicted + 1) % 30)
    scores = model.evaluate(x, perfect, sample_weight=weights, verbose=0, return_dict=True)
    assert scores["accuracy"] == pytest.approx(1.0)


def test_base_preset_parameter_count():
    """The paper's base model with its shared 37,000-token vocabulary.

    Embedding 37,000 x 512 (shared by source, target and output) +
    6 x 3,152,384 (encoder layer) + 6 x 4,204,032 (decoder layer) + 37,000
    output biases = 63,119,496. The paper reports 65M (table 3); its figure
    counts more than the formula of section 3 gives.
    """
    model = TransformerSeq2Seq.from_architecture("transformer_base", 37_000)
    encoder_layer = 4 * (512 * 512 + 512) + (512 * 2048 + 2048) + (2048 * 512 + 512) + 2 * 1024
    decoder_layer = encoder_layer + 4 * (512 * 512 + 512) + 1024
    expected = 37_000 * 512 + 6 * encoder_layer + 6 * decoder_layer + 37_000
    assert model.count_params() == expected == 63_119_496
    assert abs(expected - 65e6) / 65e6 < 0.03


def test_save_and_load_keeps_outputs_and_generation(tmp_path):
    model = tiny(target_vocabulary_size=None, norm_first=True)
    path = str(tmp_path / "seq2seq.keras")
    model.save(path)
    restored = keras.saving.load_model(path, safe_mode=True)
    assert isinstance(restored, TransformerSeq2Seq)
    assert restored.get_config() == model.get_config()
    np.testing.assert_allclose(restored(inputs()), model(inputs()), atol=0)
    # The shared embedding stays one matrix after loading.
    assert restored.source_embedding is restored.target_embedding
    settings = {"start_id": START, "end_id": END, "max_length": 7, "beam_size": 2}
    np.testing.assert_array_equal(
        restored.generate(SOURCE, **settings)["token_ids"],
        model.generate(SOURCE, **settings)["token_ids"],
    )


def test_mixed_bfloat16_trains_and_generates():
    model = tiny(dtype="mixed_bfloat16")
    # A Functional model ignores `dtype`; the policy must survive the config.
    assert TransformerSeq2Seq.from_config(model.get_config()).get_config() == model.get_config()
    assert model.get_config()["dtype"]["config"]["name"] == "mixed_bfloat16"
    logits = model(inputs())
    assert logits.dtype == tf.float32 and np.all(np.isfinite(logits))
    output = model.generate(SOURCE, start_id=START, end_id=END, max_length=6, beam_size=2)
    assert np.all(np.isfinite(output["scores"]))
    model.compile()
    x, y, w = models.seq2seq_batch({**inputs(), "decoder_target_ids": TARGET})
    history = model.fit(x, y, sample_weight=w, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"hidden_dim": 18, "num_heads": 4}, "divisible"),
        ({"source_vocabulary_size": 0}, "source_vocabulary_size"),
        ({"target_vocabulary_size": -3}, "target_vocabulary_size"),
        ({"dropout": 1.0}, "dropout"),
        ({"num_decoder_layers": 0}, "num_decoder_layers"),
    ],
)
def test_bad_config(overrides, message):
    with pytest.raises(ValueError, match=message):
        tiny(**overrides)


@pytest.mark.parametrize(
    "source, settings, message",
    [
        (tf.constant([[1.0, 2.0]]), {}, "encoder_token_ids"),
        (tf.constant([1, 2]), {}, "encoder_token_ids"),
        (SOURCE, {"beam_size": 0}, "beam_size"),
        (SOURCE, {"max_length": 0}, "max_length"),
        (SOURCE, {"start_id": -1}, "start_id"),
        (SOURCE, {"length_penalty": None}, "length_penalty"),
        # NaN or infinite exponents made every score NaN or 0 (empty, unranked outputs).
        (SOURCE, {"length_penalty": float("nan"), "beam_size": 2}, "finite"),
        (SOURCE, {"length_penalty": float("inf"), "beam_size": 2}, "finite"),
        # A (B, 1) or (1, S) mask broadcast over the keys.
        (SOURCE, {"encoder_padding_mask": tf.ones((2, 1), tf.int32)},
         r"`encoder_padding_mask` must have the shape of `encoder_token_ids` \(2, 8\)"),
        (SOURCE, {"encoder_padding_mask": tf.ones((1, 8), tf.int32)}, "encoder_padding_mask"),
    ],
)
def test_bad_generate_arguments(source, settings, message):
    arguments = {"start_id": START, "end_id": END, **settings}
    with pytest.raises(ValueError, match=message):
        tiny().generate(source, **arguments)


def test_a_mask_of_another_shape_fails_when_run_inside_a_function():
    model = tiny()
    traced = tf.function(
        lambda source, mask: model.generate(source, mask, start_id=START, end_id=END, max_length=3),
        input_signature=[tf.TensorSpec([None, None], tf.int32)] * 2,
    )
    np.testing.assert_array_equal(traced(SOURCE, SOURCE_MASK)["token_ids"],
                                  model.generate(SOURCE, SOURCE_MASK, start_id=START, end_id=END,
                                                 max_length=3)["token_ids"])
    with pytest.raises(tf.errors.InvalidArgumentError, match="encoder_padding_mask"):
        traced(SOURCE, SOURCE_MASK[:, :1])


def test_unknown_preset():
    with pytest.raises(ValueError, match="`architecture` must be one of"):
        TransformerSeq2Seq.from_architecture("transformer_huge", 100)


@pytest.mark.parametrize("beam_size", [1, 3])
def test_xla_compiled_generation_matches(beam_size):
    model = tiny()
    settings = {"start_id": START, "end_id": END, "max_length": 8, "beam_size": beam_size,
                "no_repeat_ngram_size": 3}
    plain = model.generate(SOURCE, SOURCE_MASK, **settings)
    compiled = model.generate(SOURCE, SOURCE_MASK, jit_compile=True, **settings)
    np.testing.assert_array_equal(compiled["token_ids"], plain["token_ids"])
    np.testing.assert_allclose(compiled["scores"], plain["scores"], atol=1e-4)


def test_generate_compiles_with_xla_by_default_only_where_a_gpu_is_visible(monkeypatch):
    model = tiny()
    settings = {"start_id": START, "end_id": END, "max_length": 5}
    plain = model.generate(SOURCE, SOURCE_MASK, **settings)  # this CPU: "auto" is no XLA
    assert [dict(key)["jit_compile"] for key in model._generate_functions.by_setting] == [False]
    devices = tf.config.list_physical_devices() + [type("Device", (), {"device_type": "GPU"})()]
    monkeypatch.setattr(tf.config, "list_physical_devices", lambda *args: devices)
    compiled = model.generate(SOURCE, SOURCE_MASK, **settings)
    assert sorted(dict(key)["jit_compile"] for key in model._generate_functions.by_setting) == [False, True]
    np.testing.assert_array_equal(compiled["token_ids"], plain["token_ids"])
    with pytest.raises(ValueError, match="jit_compile"):
        model.generate(SOURCE, SOURCE_MASK, jit_compile="yes", **settings)
