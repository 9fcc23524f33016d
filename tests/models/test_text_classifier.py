"""Classifiers that carry their preprocessor: texts in, label names out, the same model as token ids."""

import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.harness import assert_allclose
from tfnlp import data, export, models
from tfnlp.models import text_classifier

VOCABULARY = list(data.SPECIAL_TOKENS) + "good great fresh bad stale awful food coffee tea the was".split()
TEXTS = ["good food", "bad coffee", "great fresh tea", "stale awful food", "the tea was good",
         "the coffee was bad", "fresh coffee", "awful tea"] * 4
LABELS = ["pos", "neg", "pos", "neg", "pos", "neg", "pos", "neg"] * 4
NAMES = ["neg", "pos"]


def _preprocessor(length=8):
    return data.BertPreprocessor(data.WordPieceTokenizer(VOCABULARY), length)


def _transformer(**overrides):
    config = dict(preprocessor=_preprocessor(), labels=NAMES, num_layers=1, num_heads=2,
                  hidden_dim=8, intermediate_dim=16, dropout=0.0)
    return models.TransformerClassifier(**{**config, **overrides})


def _bert(**overrides):
    backbone = models.BertBackbone(len(VOCABULARY), num_layers=1, num_heads=2, hidden_dim=8,
                                   intermediate_dim=16, max_sequence_length=16, dropout=0.0)
    return models.BertClassifier(backbone, **{"preprocessor": _preprocessor(), "labels": NAMES,
                                              "dropout": 0.0, **overrides})


BUILDERS = {"transformer": _transformer, "bert": _bert}


def _ids(labels):
    return np.array([NAMES.index(label) for label in labels], np.int32)


@pytest.mark.parametrize("family", sorted(BUILDERS))
def test_fit_on_texts_trains_exactly_as_fit_on_the_preprocessed_token_ids(family, monkeypatch):
    keras.utils.set_random_seed(1)
    on_texts = BUILDERS[family]()
    on_ids = on_texts.__class__.from_config(on_texts.get_config())
    on_ids.set_weights(on_texts.get_weights())
    for model in (on_texts, on_ids):
        model.compile(optimizer=keras.optimizers.SGD(0.5))
    inputs = _preprocessor()(tf.constant(TEXTS))
    # Texts in memory become the same arrays (here 5 texts at a time), which
    # Keras shuffles as it shuffles token ids: the same seed, the same batches.
    monkeypatch.setattr(text_classifier, "_CHUNK", 5)
    keras.utils.set_random_seed(2)
    history_texts = on_texts.fit(TEXTS, LABELS, batch_size=8, epochs=2, verbose=0)
    keras.utils.set_random_seed(2)
    history_ids = on_ids.fit(inputs, _ids(LABELS), batch_size=8, epochs=2, verbose=0)
    assert_allclose(history_texts.history["loss"], history_ids.history["loss"], atol=1e-6)
    for a, b in zip(on_texts.get_weights(), on_ids.get_weights(), strict=True):
        assert_allclose(a, b, atol=1e-6)
    assert_allclose(on_texts.predict(TEXTS, verbose=0), on_ids.predict(inputs, verbose=0), atol=1e-6)


@pytest.mark.parametrize("family", sorted(BUILDERS))
def test_every_form_of_texts_gives_the_same_predictions(family, monkeypatch):
    model = BUILDERS[family]()
    expected = model.predict(_preprocessor()(tf.constant(TEXTS)), verbose=0)
    forms = {
        "list": TEXTS,
        "array": np.array(TEXTS),
        "objects": np.array(TEXTS, dtype=object),  # a pandas column's .to_numpy()
        "tuple": tuple(TEXTS),  # a tuple of texts (not two batches) is one batch
        "bytes": [t.encode() for t in TEXTS],
        "tensor": tf.constant(TEXTS),
        "examples": tf.data.Dataset.from_tensor_slices(TEXTS),
        "batches": tf.data.Dataset.from_tensor_slices(TEXTS).batch(5),
        "labelled": tf.data.Dataset.from_tensor_slices((TEXTS, _ids(LABELS))),
    }
    for name, x in forms.items():
        np.testing.assert_allclose(model.predict(x, batch_size=3, verbose=0), expected, atol=1e-6,
                                   err_msg=name)
    names = model.predict_labels(TEXTS)
    assert names == [NAMES[i] for i in np.argmax(expected, -1)]
    # Too many texts for their ids to be held at once: a pipeline tokenizes them.
    monkeypatch.setattr(text_classifier, "_IN_MEMORY_IDS", len(TEXTS) * 8 - 1)
    np.testing.assert_allclose(model.predict(TEXTS, batch_size=3, verbose=0), expected, atol=1e-6)
    monkeypatch.undo()
    # Text pairs: a tuple of two batches, as [CLS] A [SEP] B [SEP] (3 pairs at a time).
    monkeypatch.setattr(text_classifier, "_CHUNK", 3)
    pairs = (TEXTS[:4], TEXTS[4:8])
    assert_allclose(model.predict(pairs, verbose=0),
                    model.predict(_preprocessor()((tf.constant(pairs[0]), tf.constant(pairs[1]))),
                                  verbose=0), atol=1e-6)


def test_labels_may_be_names_or_ids_in_lists_and_datasets():
    model = _transformer()
    model.compile()
    ids = _ids(LABELS)
    reference = model.evaluate(TEXTS, ids, verbose=0, return_dict=True)
    for y in (LABELS, ids, ids.tolist()):
        assert model.evaluate(TEXTS, y, verbose=0, return_dict=True) == reference
    for dataset in (tf.data.Dataset.from_tensor_slices((TEXTS, LABELS)),
                    tf.data.Dataset.from_tensor_slices((TEXTS, ids)).batch(4)):
        assert_allclose(model.evaluate(dataset, verbose=0, return_dict=True)["accuracy"],
                        reference["accuracy"])


def test_validation_data_and_split_take_texts_in_every_form():
    model = _transformer()
    model.compile()
    strings = tf.data.Dataset.from_tensor_slices((TEXTS[:8], LABELS[:8]))
    for validation in (strings, strings.batch(3), (TEXTS[:8], LABELS[:8]), [TEXTS[:8], LABELS[:8]]):
        history = model.fit(TEXTS, LABELS, validation_data=validation, verbose=0)
        assert "val_accuracy" in history.history
    for x in (tf.constant(TEXTS), np.array(TEXTS, dtype=object)):
        history = model.fit(x, tf.constant(_ids(LABELS)), validation_split=0.25, verbose=0)
        assert "val_accuracy" in history.history
    with pytest.raises(ValueError, match="`y` \\(the labels\\) is required"):
        model.fit(TEXTS, validation_split=0.25, verbose=0)


def test_sample_weights_and_validation_split_cut_texts_as_they_cut_token_ids():
    keras.utils.set_random_seed(1)
    on_texts = _transformer()
    on_ids = models.TransformerClassifier.from_config(on_texts.get_config())
    on_ids.set_weights(on_texts.get_weights())
    inputs, ids = _preprocessor()(tf.constant(TEXTS)), _ids(LABELS)
    weights = np.linspace(0.5, 2.0, len(TEXTS)).astype("float32")
    histories = []
    first_ids = {k: v[:8] for k, v in inputs.items()}
    for model, x, y, x_held in ((on_texts, TEXTS, LABELS, TEXTS[:8]), (on_ids, inputs, ids, first_ids)):
        model.compile(optimizer=keras.optimizers.SGD(0.5))
        held_out = (x_held, y[:8], weights[:8])
        first = model.fit(x, y, sample_weight=weights, validation_split=0.25, shuffle=False, verbose=0)
        second = model.fit(x, y, validation_data=held_out, shuffle=False, verbose=0)
        histories.append({**first.history, **{f"2_{k}": v for k, v in second.history.items()}})
    assert histories[0].keys() == histories[1].keys()
    for key in histories[0]:
        np.testing.assert_allclose(histories[0][key], histories[1][key], atol=1e-6, err_msg=key)
    with pytest.raises(ValueError, match="`sample_weight` must hold one weight per example"):
        on_texts.fit(TEXTS, LABELS, sample_weight=weights[:5], validation_split=0.25, verbose=0)


def test_keras_file_keeps_the_preprocessor_and_labels(tmp_path):
    model = _bert()
    path = str(tmp_path / "classifier.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    assert loaded.labels == NAMES
    assert loaded.preprocessor.tokenizer.get_vocabulary() == VOCABULARY
    assert loaded.preprocessor.sequence_length == 8
    assert_allclose(loaded.predict(TEXTS, verbose=0), model.predict(TEXTS, verbose=0), atol=1e-6)
    config = model.get_config()
    assert models.BertClassifier.from_config(config).get_config() == config


def test_export_needs_nothing_else_and_serves_the_models_answers(tmp_path):
    model = _transformer()
    path = export.export_classifier(model, str(tmp_path / "served"), warmup_batch_sizes=())
    served = tf.saved_model.load(path).signatures["serving_default"](text=tf.constant(TEXTS[:4]))
    assert [label.decode() for label in served["label"].numpy()] == model.predict_labels(TEXTS[:4])
    assert_allclose(served["probabilities"], tf.nn.softmax(model.predict(TEXTS[:4], verbose=0)),
                    atol=1e-6)
    without = models.TransformerClassifier(len(VOCABULARY), 2, num_layers=1, hidden_dim=8)
    with pytest.raises(ValueError, match="`preprocessor` is required"):
        export.export_classifier(without, str(tmp_path / "x"))
    with pytest.raises(TypeError, match="`export_dir` must be a directory path"):
        export.export_classifier(without, _preprocessor(), str(tmp_path / "x"))


def test_fit_and_evaluate_raise_no_keras_warnings_on_tfnlp_pipelines():
    model = _transformer()
    model.compile()
    bucketed = data.classification_dataset(
        tf.data.Dataset.from_tensor_slices((TEXTS, _ids(LABELS))), _preprocessor(16), batch_size=4,
        bucket_boundaries=[4],  # a dataset of unknown length
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(bucketed, epochs=2, verbose=0)
        model.fit(TEXTS, LABELS, epochs=1, validation_split=0.25, verbose=0)
        model.evaluate(bucketed, verbose=0)
    shown = [str(w.message) for w in caught if not issubclass(w.category, DeprecationWarning)]
    assert not shown, shown


def test_bad_texts_and_labels_get_errors_that_name_them():
    model = _transformer()
    model.compile()
    with pytest.raises(ValueError, match="not among the model's `labels`.*'neutral'"):
        model.fit(TEXTS[:2], ["pos", "neutral"], verbose=0)
    with pytest.raises(ValueError, match=r"class ids outside \[0, num_classes=2\): \[2\]"):
        model.fit(TEXTS[:2], [0, 2], verbose=0)
    with pytest.raises(ValueError, match="one label per text"):
        model.fit(TEXTS[:3], [0, 1], verbose=0)
    with pytest.raises(ValueError, match="`y` \\(the labels\\) is required"):
        model.fit(TEXTS, verbose=0)
    with pytest.raises(ValueError, match="single text"):
        model.predict("good food")
    with pytest.raises(ValueError, match="same number of texts"):
        model.predict((TEXTS[:2], TEXTS[:3]))
    with pytest.raises(ValueError, match="no `preprocessor`, so it takes token ids"):
        models.TransformerClassifier(len(VOCABULARY), 2, hidden_dim=8).predict(TEXTS)
    with pytest.raises(ValueError, match="one segment: it cannot read text pairs"):
        _transformer(num_segments=1).predict((TEXTS[:2], TEXTS[:2]))
    with pytest.raises(ValueError, match="`labels` has 3 names for `num_classes`=2"):
        _transformer(num_classes=2, labels=["a", "b", "c"])
    with pytest.raises(ValueError, match="more than once"):
        _transformer(labels=["a", "a"])
    with pytest.raises(ValueError, match="tokenizer has 16 tokens but the model's vocabulary has only 10"):
        _transformer(vocabulary_size=10)
    with pytest.raises(ValueError, match="exceeds the model's position table"):
        _bert(preprocessor=_preprocessor(32))
    # In a dataset the labels are checked in the graph, when the batch is read.
    with pytest.raises(tf.errors.InvalidArgumentError, match="a label is not one of this classifier"):
        model.evaluate(tf.data.Dataset.from_tensor_slices((TEXTS[:2], ["pos", "meh"])), verbose=0)
