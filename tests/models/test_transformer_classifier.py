import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.harness import assert_allclose, assert_finite
from tfnlp import data, datasets, models, training

RNG = np.random.default_rng(0)


def _inputs(batch=3, length=12, vocabulary_size=300, padding=(0, 4, 9)):
    token_ids = RNG.integers(5, vocabulary_size, (batch, length)).astype("int32")
    mask = np.ones((batch, length), "int32")
    for row, pad in enumerate(padding[:batch]):
        if pad:
            mask[row, -pad:] = 0
            token_ids[row, -pad:] = 0
    segments = np.zeros((batch, length), "int32")
    segments[:, length // 2:] = 1
    return {"token_ids": token_ids, "segment_ids": segments * mask, "padding_mask": mask}


def _classifier(**overrides):
    config = {"vocabulary_size": 300, "num_classes": 3, "num_heads": 2, "hidden_dim": 16}
    return models.TransformerClassifier(**{**config, **overrides})


@pytest.mark.parametrize("pooling, activation", [("mean", None), ("first", "softmax")])
def test_config_round_trip_and_safe_mode_reload(tmp_path, pooling, activation):
    model = _classifier(pooling=pooling, activation=activation)
    x = _inputs()
    config = model.get_config()
    assert models.TransformerClassifier.from_config(config).get_config() == config
    serialized = json.loads(json.dumps(keras.saving.serialize_keras_object(model)))
    assert serialized["registered_name"] == "tfnlp>TransformerClassifier"
    assert keras.saving.deserialize_keras_object(serialized).count_params() == model.count_params()
    path = os.path.join(tmp_path, "model.keras")
    model.save(path)
    restored = keras.saving.load_model(path, safe_mode=True)
    assert restored.get_config() == config
    assert_allclose(restored(x), model(x), atol=0.0)


@pytest.mark.parametrize("pooling", ["mean", "first"])
def test_extra_padding_does_not_change_the_output(pooling):
    model = _classifier(pooling=pooling)
    x = _inputs()
    longer = {k: np.pad(v, [[0, 0], [0, 7]]) for k, v in x.items()}
    assert_allclose(model(longer), model(x), atol=1e-5)


def test_mean_pooling_is_the_masked_mean_of_the_last_block():
    model = _classifier(pooling="mean")
    x = _inputs(batch=4, padding=(0, 4, 9, 12))  # the last row is all padding
    blocks = keras.Model(model.inputs, model.transformer_layers[-1].output)
    sequence = np.asarray(blocks(x), np.float64)  # (B, T, D)
    mask = x["padding_mask"][:, :, None]
    pooled = (sequence * mask).sum(1) / np.maximum(mask.sum(1), 1)  # (B, D)
    kernel, bias = (w.numpy() for w in model.output_dense.weights)
    logits = model(x)
    assert_allclose(logits, pooled @ kernel + bias, atol=1e-5)
    assert_allclose(logits[3], bias, atol=0.0)  # nothing to average: zeros, not NaN


def test_text_pairs_from_the_bert_preprocessor(corpus_vocabulary):
    preprocessor = data.BertPreprocessor(data.WordPieceTokenizer(corpus_vocabulary), 32)
    model = _classifier(vocabulary_size=len(corpus_vocabulary), num_classes=2, dropout=0.0)
    # (English, Spanish) verses labelled 1, swapped (Spanish, English) ones 0.
    pairs = [p if i % 2 else p[::-1]
             for i, p in enumerate(datasets.read_text_pairs("bible_en_es", "validation")[:16])]
    texts_a, texts_b = zip(*pairs, strict=True)
    examples = tf.data.Dataset.from_tensor_slices(((list(texts_a), list(texts_b)), [1, 0] * 8))
    inputs, labels = next(iter(data.classification_dataset(examples, preprocessor, 16)))
    assert int(tf.reduce_max(inputs["segment_ids"])) == 1
    outputs = model(inputs)
    assert outputs.shape == (16, 2)
    assert_finite(outputs)
    single = {**inputs, "segment_ids": tf.zeros_like(inputs["segment_ids"])}
    assert not np.allclose(model(single), outputs)  # the segment embedding is used
    model.compile()
    history = model.fit(inputs, labels, epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()


@pytest.mark.parametrize("num_classes", [2, 5])
def test_softmax_activation_gives_the_probabilities_of_the_logits(num_classes):
    logits_model = _classifier(num_classes=num_classes)
    probabilities_model = _classifier(num_classes=num_classes, activation="softmax")
    probabilities_model.set_weights(logits_model.get_weights())
    x = _inputs()
    probabilities = probabilities_model(x)
    assert probabilities.shape == (3, num_classes) and probabilities.dtype == tf.float32
    np.testing.assert_allclose(np.sum(probabilities, -1), 1.0, atol=1e-6)
    assert_allclose(probabilities, tf.nn.softmax(logits_model(x)), atol=1e-6)
    for model in (logits_model, probabilities_model):
        model.compile()
        assert model.loss.get_config()["from_logits"] == (model.activation is None)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"vocabulary_size": 0}, "vocabulary_size"),
        ({"num_classes": 0}, "num_classes"),
        ({"num_layers": 0}, "num_layers"),
        ({"num_heads": 3}, "divisible by `num_heads`"),
        ({"hidden_dim": -16}, "hidden_dim"),
        ({"intermediate_dim": 0}, "intermediate_dim"),
        ({"dropout": 1.0}, "dropout"),
        ({"pooling": "max"}, "pooling"),
        ({"num_segments": 0}, "num_segments"),
        ({"activation": "relu"}, "activation"),
    ],
)
def test_bad_arguments_name_the_argument(kwargs, message):
    with pytest.raises(ValueError, match=message):
        _classifier(**kwargs)


def test_mixed_bfloat16_gives_finite_float32_outputs():
    model = _classifier()
    mixed = _classifier(dtype="mixed_bfloat16")
    mixed.set_weights(model.get_weights())
    x = _inputs()
    outputs = mixed(x)
    assert mixed.transformer_layers[0].compute_dtype == "bfloat16"
    assert outputs.dtype == tf.float32
    assert_finite(outputs)
    assert_allclose(outputs, model(x), atol=0.1, rtol=0.05)
    rebuilt = models.TransformerClassifier.from_config(mixed.get_config())
    assert rebuilt.transformer_layers[0].dtype_policy.name == "mixed_bfloat16"


def test_learns_fine_food_reviews_well_above_the_majority_class(corpus_vocabulary):
    # Held-out test reviews, 65.8% "great". A 1-layer, 32-wide model reaches
    # 74-77% after 3 epochs (336 steps, ~10 s on 2 cores) over five seeds.
    preprocessor = data.BertPreprocessor(data.WordPieceTokenizer(corpus_vocabulary), 64)
    train = data.classification_dataset(
        datasets.load_fine_food_reviews("train"), preprocessor, 32, shuffle_buffer=4096, seed=0
    )
    test = data.classification_dataset(
        datasets.load_fine_food_reviews("test"), preprocessor, 100, drop_remainder=False
    )
    model = _classifier(vocabulary_size=len(corpus_vocabulary), num_classes=2, num_layers=1,
                        hidden_dim=32)
    model.compile(optimizer=training.bert_adamw(2e-3))
    model.fit(train, epochs=3, verbose=0)
    labels = np.array([y for _, y in datasets.read_fine_food_reviews("test")])
    majority = max(labels.mean(), 1 - labels.mean())
    accuracy = model.evaluate(test, return_dict=True, verbose=0)["accuracy"]
    assert accuracy >= majority + 0.05, (accuracy, majority)
