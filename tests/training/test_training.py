import glob
import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests import families
from tests.harness import assert_allclose
from tfnlp import data, models, training


def test_schedule_shape_and_serialization():
    schedule = training.LinearWarmupLinearDecay(1e-3, warmup_steps=100, total_steps=1100, end_learning_rate=1e-5)
    values = [float(schedule(s)) for s in (0, 50, 100, 600, 1100, 5000)]
    np.testing.assert_allclose(values, [0, 5e-4, 1e-3, (1e-3 + 1e-5) / 2, 1e-5, 1e-5], rtol=1e-5)
    restored = keras.saving.deserialize_keras_object(
        json.loads(json.dumps(keras.saving.serialize_keras_object(schedule))))
    assert float(restored(600)) == pytest.approx(values[3])
    with pytest.raises(ValueError, match="total_steps"):
        training.LinearWarmupLinearDecay(1e-3, warmup_steps=10, total_steps=10)
    for end, message in ((-1.0, r"in \[0, peak_learning_rate"), (2e-3, r"in \[0, peak_learning_rate"),
                         (float("nan"), "finite number"), (None, "finite number")):
        with pytest.raises(ValueError, match=f"`end_learning_rate` must be .*{message}"):
            training.LinearWarmupLinearDecay(1e-3, warmup_steps=10, total_steps=20, end_learning_rate=end)
    # NumPy integers are integers.
    schedule = training.LinearWarmupLinearDecay(1e-3, warmup_steps=np.int64(2), total_steps=np.int32(4))
    assert type(schedule.get_config()["warmup_steps"]) is int


def test_adamw_decays_kernels_and_embeddings_only():
    backbone = models.BertBackbone.from_architecture("bert_tiny", vocabulary_size=50)
    pretrainer = models.BertPretrainer(backbone)
    pretrainer.compile()
    optimizer = pretrainer.optimizer
    decayed = {v.path for v in pretrainer.trainable_variables if optimizer._use_weight_decay(v)}
    assert any("token_embedding" in p for p in decayed)
    assert any(p.endswith("intermediate_dense/kernel") for p in decayed)
    assert not any(p.endswith(("bias", "gamma", "beta")) for p in decayed)
    # Positional arguments are Keras' (`AdamW(learning_rate, weight_decay, ...)`).
    assert float(training.AdamW(0.25, 0.5).learning_rate) == 0.25
    # The exclusions survive serialization (Keras' AdamW forgets them).
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert type(restored) is training.AdamW
    assert {v.path for v in pretrainer.trainable_variables if restored._use_weight_decay(v)} == decayed


@pytest.fixture
def tiny(corpus_vocabulary):
    preprocessor = data.BertPreprocessor(data.WordPieceTokenizer(corpus_vocabulary), 16)
    backbone = models.BertBackbone.from_architecture(
        "bert_tiny", vocabulary_size=len(corpus_vocabulary), max_sequence_length=16
    )
    return backbone, preprocessor


def test_attention_weights_follow_the_backbone(tiny):
    backbone, preprocessor = tiny
    inputs = preprocessor((tf.constant(["It is a truth universally acknowledged."]), tf.constant(["Yes."])))
    weights = training.attention_weights(backbone, inputs)
    assert len(weights) == 2 and weights[0].shape == (1, 2, 16, 16)
    real = inputs["padding_mask"][0].numpy() == 1
    np.testing.assert_allclose(weights[1].numpy()[0][:, :, real].sum(-1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(weights[1].numpy()[0][:, :, ~real], 0.0)
    # The same weights as the block computes inside the backbone: replay the last layer.
    block = backbone.transformer_layers[1]
    hidden = keras.Model(backbone.inputs, backbone.transformer_layers[0].output)(inputs)
    _, expected = block._self_attention(hidden, hidden, attention_mask=inputs["padding_mask"][:, None, :],
                                        return_attention_scores=True)
    assert_allclose(weights[1], expected, atol=1e-5)


def test_tensorboard_logs_scalars_learning_rate_and_attention_images(tiny, tmp_path):
    backbone, preprocessor = tiny
    pretrainer = models.BertPretrainer(backbone)
    pretrainer.compile(optimizer=keras.optimizers.AdamW(training.LinearWarmupLinearDecay(1e-3, 2, 20)))
    x = {**preprocessor(tf.constant(["the cat sat", "on the mat", "a b c", "d e"])),
         "masked_positions": tf.constant([[1, 2]] * 4)}
    y = {"mlm": tf.constant([[7, 8]] * 4), "nsp": tf.constant([0, 1, 0, 1])}
    log_dir = str(tmp_path / "logs")
    callbacks = [keras.callbacks.TensorBoard(log_dir),
                 training.AttentionImages(backbone, preprocessor, "the cat sat on the mat", log_dir)]
    pretrainer.fit(x, y, epochs=2, batch_size=2, callbacks=callbacks, verbose=0)
    tags, images = set(), []
    for path in glob.glob(f"{log_dir}/**/events.out.tfevents.*", recursive=True):
        for record in tf.data.TFRecordDataset(path):
            event = tf.compat.v1.Event.FromString(record.numpy())
            for value in event.summary.value:
                tags.add(value.tag)
                if value.tag.startswith("attention/"):
                    images.append((value.tag, event.step, tf.make_ndarray(value.tensor)))
    assert {"epoch_loss", "epoch_mlm_accuracy", "epoch_nsp_accuracy", "epoch_learning_rate"} <= tags
    assert {"attention/layer_0", "attention/layer_1"} <= tags
    assert sorted({(t, s) for t, s, _ in images}) == [
        ("attention/layer_0", 0), ("attention/layer_0", 1), ("attention/layer_1", 0), ("attention/layer_1", 1)]
    width, height = (int(v) for v in images[0][2][:2])  # PNG-encoded image summaries
    length = int(tf.reduce_sum(preprocessor(tf.constant(["the cat sat on the mat"]))["padding_mask"]))
    assert (width, height) == (2 * (4 * length + 1), 4 * length)


@pytest.mark.parametrize("family", families.FAMILIES)
def test_a_keras_file_restores_compile_and_optimizer_state_and_training_continues(family, tmp_path):
    model = families.model(family)
    dataset = families.batches(family)
    model.fit(dataset, steps_per_epoch=2, verbose=0)
    path = str(tmp_path / f"{family}.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    assert loaded.compiled and type(loaded.optimizer) is type(model.optimizer)
    assert int(loaded.optimizer.iterations) == 2
    for a, b in zip(loaded.optimizer.variables, model.optimizer.variables, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)
    # The same next step: same optimizer state, losses and metrics.
    batch = next(iter(dataset.skip(2)))
    model.reset_metrics()  # metric states are not saved
    # Nor are random-seed states (Keras; `training.fit` checkpoints keep them):
    # give ELMo's candidate sampler the same stream to compare one step.
    for a, b in zip(loaded.variables, model.variables, strict=True):
        if "seed_generator_state" in a.path:
            a.assign(b)
    expected, restored = model.train_on_batch(*batch, return_dict=True), loaded.train_on_batch(
        *batch, return_dict=True)
    assert expected.keys() == restored.keys()
    for key in expected:
        np.testing.assert_allclose(restored[key], expected[key], rtol=1e-5, err_msg=key)
    for a, b in zip(loaded.weights, model.weights, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-6, err_msg=a.path)
