"""The exported ELMo model, served without tfnlp: `tf.saved_model.load` and TF Serving's C++ loader."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.export.fresh_process import BACKENDS, ServingProcess, check_any_batch_is_served, serve
from tests.harness import assert_close_to_float32
from tfnlp import data, export, models

MAX_TOKENS = 8
TEXTS = [
    "Hello, world!",
    "It is a truth universally acknowledged, that a single man in possession",
    "",
    "   ",
    b"broken \xff\xfe utf-8",
    "emoji \U0001F600 中文",
    "word " * 200_000,  # 1 MB of words
    "x" * 1_000_000,  # one 1 MB word
]
WORDS = [  # what each text becomes, markers included, before padding
    ["<S>", "Hello", ",", "world", "!", "</S>"],
    ["<S>", "It", "is", "a", "truth", "universally", "acknowledged", "</S>"],
    ["<S>", "</S>"],
    ["<S>", "</S>"],
    ["<S>", "broken", "\ufffd", "\ufffd", "utf", "-", "8", "</S>"],
    ["<S>", "emoji", "\U0001F600", "中文", "</S>"],
    ["<S>", *["word"] * (MAX_TOKENS - 2), "</S>"],
    ["<S>", "x" * 100_000, "</S>"],  # cut to `max_input_bytes` before splitting
]


def _tiny_bilm(**kwargs):
    return models.ELMoBiLM(word_vocabulary_size=50, units=16, projection_dim=8,
                           filters=((1, 4), (2, 4)), num_sampled=10, **kwargs)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    keras.utils.set_random_seed(1234)
    embedder = models.ELMoEmbedder(_tiny_bilm(), layer_norm=True)
    # A mix that is not the plain mean, so that serving it is checked.
    embedder.scalar_mix.layer_weights.assign([0.5, -1.0, 2.0])
    embedder.scalar_mix.scale.assign(1.7)
    directory = tmp_path_factory.mktemp("saved_models") / "elmo"
    return export.export_elmo(embedder, str(directory), max_tokens=MAX_TOKENS), embedder


@pytest.fixture(scope="module", params=BACKENDS)
def exported(saved, request):
    path, embedder = saved
    batches = [TEXTS, TEXTS[:1], []]
    served = serve(path, [{"signature": "serving_default", "inputs": {"text": b}} for b in batches],
                   backend=request.param)
    return path, embedder, dict(zip(["all", "one", "none"], served, strict=True))


def _as_bytes(texts):
    return [t if isinstance(t, bytes) else t.encode("utf-8") for t in texts]


def _training_outputs(embedder, texts):
    """The embedder on the character ids that `elmo_dataset` builds for training."""
    sentences = tf.data.Dataset.from_tensor_slices(tf.constant(_as_bytes(texts), tf.string))
    vocabulary = ["<S>", "</S>", "<UNK>", "word"]
    batch = next(iter(data.elmo_dataset(sentences, vocabulary, sequence_length=MAX_TOKENS,
                                        batch_size=len(texts), drop_remainder=False)))
    outputs = embedder(batch["character_ids"], training=False)
    return {k: v.numpy() for k, v in outputs.items()}, batch["padding_mask"].numpy()


@pytest.mark.parametrize("batch", ["all", "one"])
def test_fresh_process_matches_the_embedder_on_training_inputs(exported, batch):
    _, embedder, served = exported
    texts = TEXTS if batch == "all" else TEXTS[:1]
    result = {k: np.array(v) for k, v in served[batch].items() if k != "words"}
    expected, training_mask = _training_outputs(embedder, texts)
    length = max(len(w) for w in WORDS[: len(texts)])  # T: the longest text, not max_tokens
    assert result["elmo"].shape == (len(texts), length, 16)
    assert result["layers"].shape == (len(texts), 3, length, 16)
    np.testing.assert_array_equal(result["padding_mask"], training_mask[:, :length])
    np.testing.assert_allclose(result["elmo"], expected["elmo"][:, :length], atol=1e-5)
    np.testing.assert_allclose(result["layers"], expected["layers"][:, :, :length], atol=1e-5)
    assert not expected["elmo"][:, length:].any()  # only padding was left out
    assert np.abs(result["elmo"]).max() > 0


def test_words_are_split_wrapped_truncated_and_padded(exported):
    _, _, served = exported
    words = served["all"]["words"]
    assert len(words) == len(TEXTS) and {len(row) for row in words} == {MAX_TOKENS}
    for row, expected in zip(words, WORDS, strict=True):
        assert row == expected + [""] * (MAX_TOKENS - len(expected))
    mask = np.array(served["all"]["padding_mask"])
    np.testing.assert_array_equal(mask.sum(1), [len(w) for w in WORDS])
    assert served["one"]["words"] == [WORDS[0]]


def test_edge_inputs_give_finite_outputs_of_the_documented_shapes(exported):
    path, _, served = exported
    for key in ("elmo", "layers"):
        values = np.array(served["all"][key])
        assert values.dtype == np.float64 and np.isfinite(values).all()  # JSON floats
    padding = np.array(served["all"]["padding_mask"]) == 0
    assert not np.array(served["all"]["elmo"])[padding].any()
    assert served["none"] == {"elmo": [], "layers": [], "padding_mask": [], "words": []}
    outputs = tf.saved_model.load(path).signatures["serving_default"](text=tf.constant([], tf.string))
    assert outputs["elmo"].shape == (0, 2, 16) and outputs["layers"].shape == (0, 3, 2, 16)
    assert outputs["padding_mask"].shape == (0, 2) and outputs["words"].shape == (0, 2)
    assert outputs["elmo"].dtype == tf.float32 and outputs["padding_mask"].dtype == tf.int32


def test_a_mixed_bfloat16_bilm_serves_float32_and_the_mean_of_its_layers(tmp_path):
    bilm = _tiny_bilm(dtype="mixed_bfloat16")
    path = export.export_elmo(bilm, str(tmp_path), max_tokens=MAX_TOKENS)
    outputs = tf.saved_model.load(path).signatures["serving_default"](text=tf.constant(TEXTS[:3]))
    assert {k: v.dtype for k, v in outputs.items()} == {
        "elmo": tf.float32, "layers": tf.float32, "padding_mask": tf.int32, "words": tf.string}
    layers = outputs["layers"].numpy()
    np.testing.assert_allclose(outputs["elmo"], layers.mean(axis=1), atol=1e-6)
    reference = _tiny_bilm()
    reference.set_weights(bilm.get_weights())
    assert_close_to_float32(layers, reference(data.character_ids(outputs["words"]), training=False)["layers"])
    assert np.abs(layers).max() > 0 and np.isfinite(layers).all()


def _embedded(outputs, batch):
    length = outputs["words"].shape[1]
    assert 2 <= length <= MAX_TOKENS
    assert outputs["elmo"].shape == (batch, length, 16) and outputs["layers"].shape == (batch, 3, length, 16)
    mask = outputs["padding_mask"]
    assert mask.shape == (batch, length) and (mask.sum(1) >= 2).all()  # <S> and </S> at least
    assert not outputs["elmo"][mask == 0].any()
    assert all(row[0] == "<S>" and row[n - 1] == "</S>" for row, n in zip(outputs["words"], mask.sum(1), strict=True))


@pytest.mark.parametrize("backend", BACKENDS)
def test_any_batch_of_any_text_is_embedded(saved, backend):
    with ServingProcess(saved[0], backend=backend) as process:
        check_any_batch_is_served(process, "serving_default", ["text"], _embedded)


def test_bad_arguments_are_refused(saved, tmp_path):
    _, embedder = saved
    with pytest.raises(ValueError, match="`model`"):
        export.export_elmo(keras.Sequential(), str(tmp_path))
    for max_tokens in (0, 2, 8.0, "8", True):
        with pytest.raises(ValueError, match="`max_tokens`"):
            export.export_elmo(embedder, str(tmp_path), max_tokens=max_tokens)
    with pytest.raises(ValueError, match="`version`"):
        export.export_elmo(embedder, str(tmp_path), version=0)


def test_the_export_reads_texts_as_the_embedder_predict_does(tmp_path):
    """`export_elmo(embedder, path)` takes the embedder's `max_tokens` and `max_input_bytes`."""
    keras.utils.set_random_seed(1234)
    embedder = models.ELMoEmbedder(_tiny_bilm(), layer_norm=True, max_tokens=6, max_input_bytes=40)
    embedder.scalar_mix.layer_weights.assign([0.5, -1.0, 2.0])
    path = export.export_elmo(embedder, str(tmp_path))
    texts = tf.constant(TEXTS)
    served = tf.saved_model.load(path).signatures["serving_default"](text=texts)
    predicted = embedder.predict(texts, batch_size=len(TEXTS), verbose=0)
    length = served["words"].shape[1]
    assert length == 6 and predicted["elmo"].shape == (len(TEXTS), 6, 16)  # the embedder's T
    assert served["words"][1].numpy().tolist() == [b"<S>", b"It", b"is", b"a", b"truth", b"</S>"]
    assert served["words"][6].numpy().tolist() == [b"<S>", *[b"word"] * 4, b"</S>"]
    assert served["words"][7, 1].numpy() == b"x" * 40  # cut to `max_input_bytes`
    np.testing.assert_array_equal(served["padding_mask"], predicted["padding_mask"][:, :length])
    np.testing.assert_allclose(served["elmo"], predicted["elmo"][:, :length], atol=1e-5)
    np.testing.assert_allclose(served["layers"], predicted["layers"][:, :, :length], atol=1e-5)
    assert np.abs(predicted["elmo"]).max() > 0
    with ServingProcess(path, backend="cpp") as cpp:  # TF Serving's SavedModel loader
        np.testing.assert_allclose(cpp("serving_default", text=TEXTS)["elmo"], served["elmo"],
                                   atol=1e-6)


def test_the_saved_model_holds_only_what_the_vectors_need(tmp_path):
    """Not the word softmax (gigabytes at ELMo's size), not a trained biLM's optimizer."""
    bilm = _tiny_bilm()
    bilm.compile()
    bilm.optimizer.build(bilm.trainable_variables)
    path = export.export_elmo(bilm, str(tmp_path))
    shapes = tf.train.load_checkpoint(f"{path}/variables/variables").get_variable_to_shape_map()
    values = {k: s for k, s in shapes.items() if k.endswith("VARIABLE_VALUE")}
    needed = bilm.count_params() - bilm.word_softmax.count_params()
    mean_mix = bilm.num_layers + 2  # the served mean: L + 1 zero weights and a scale
    assert sum(int(np.prod(s)) for s in values.values()) == needed + mean_mix
    assert not [k for k in values if "optimizer" in k or "word_softmax" in k]
