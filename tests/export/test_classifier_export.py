"""The exported classifier, served without tfnlp: `tf.saved_model.load` and TF Serving's C++ loader."""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.export.fresh_process import BACKENDS, ServingProcess, check_any_batch_is_served, serve
from tfnlp import data, export, models

TEXTS = ["Great coffee, will buy again!", "stale and bland", "", "   ", "x" * 300_000,
         "emoji \U0001F600 and 中文"]


def _bert_classifier(vocabulary_size):
    backbone = models.BertBackbone.from_architecture(
        "bert_tiny", vocabulary_size=vocabulary_size, max_sequence_length=32
    )
    return models.BertClassifier(backbone, num_classes=2)  # logits


def _transformer_classifier(vocabulary_size):
    return models.TransformerClassifier(vocabulary_size, 2, hidden_dim=32, activation="softmax")


def _probabilities(classifier, inputs):
    """What the export must serve: the model's own softmax output, or softmax(logits)."""
    outputs = classifier(inputs, training=False)
    if isinstance(classifier, models.TransformerClassifier):
        return outputs.numpy()
    return tf.nn.softmax(outputs).numpy()


@pytest.fixture(scope="module", params=[_bert_classifier, _transformer_classifier],
                ids=["bert", "transformer"])
def exported(request, tmp_path_factory, corpus_vocabulary):
    preprocessor = data.BertPreprocessor(data.WordPieceTokenizer(corpus_vocabulary), 32)
    classifier = request.param(len(corpus_vocabulary))
    directory = tmp_path_factory.mktemp("saved_models") / "reviews"
    path = export.export_classifier(classifier, str(directory), preprocessor=preprocessor, labels=["other", "great"])
    return path, classifier, preprocessor


def test_layout_and_signatures(exported):
    path, _, _ = exported
    assert os.path.basename(path) == "1" and os.path.exists(os.path.join(path, "saved_model.pb"))
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    shown = subprocess.run([cli, "show", "--dir", path, "--all"], capture_output=True, text=True,
                           timeout=300, check=True).stdout
    for name in ("serving_default", "classify_pairs", "probabilities", "label_id", "text_a"):
        assert name in shown


@pytest.mark.parametrize("backend", BACKENDS)
def test_fresh_process_matches_in_memory_at_two_batch_sizes(exported, backend):
    path, classifier, preprocessor = exported
    singles = [TEXTS[:1], TEXTS]
    pairs = {"text_a": ["good", "", "bad taste"], "text_b": ["", "only b", "x" * 1000]}
    served = serve(path, [{"signature": "serving_default", "inputs": {"text": b}} for b in singles]
                   + [{"signature": "classify_pairs", "inputs": pairs}], backend=backend)
    for batch, result in zip(singles, served[:2], strict=True):
        expected = _probabilities(classifier, preprocessor(tf.constant(batch)))
        np.testing.assert_allclose(result["probabilities"], expected, atol=1e-5)
        np.testing.assert_array_equal(result["label_id"], expected.argmax(-1))
        assert result["label"] == [["other", "great"][i] for i in expected.argmax(-1)]
    expected = _probabilities(
        classifier, preprocessor((tf.constant(pairs["text_a"]), tf.constant(pairs["text_b"])))
    )
    np.testing.assert_allclose(served[2]["probabilities"], expected, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_input_gives_valid_results(exported, backend):
    path, _, _ = exported
    served = serve(path, [
        {"signature": "serving_default", "inputs": {"text": [b"\xff\xfe\xc3", "", "\x00\x07"]}},
        {"signature": "serving_default", "inputs": {"text": []}},
    ], backend=backend)
    probabilities = np.array(served[0]["probabilities"])
    assert probabilities.shape == (3, 2) and np.isfinite(probabilities).all()
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, atol=1e-6)
    assert np.array(served[1]["probabilities"]).reshape(-1, 2).shape == (0, 2)  # empty batch


@pytest.fixture(scope="module", params=BACKENDS)
def server(exported, request):
    with ServingProcess(exported[0], backend=request.param) as process:
        yield process


def _valid_classes(outputs, batch):
    probabilities = outputs["probabilities"]
    assert probabilities.shape == (batch, 2) and (probabilities >= 0).all()
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, atol=1e-5)
    assert outputs["label_id"].shape == outputs["label"].shape == (batch,)
    assert all(["other", "great"][i] == label for i, label in zip(outputs["label_id"], outputs["label"], strict=True))


@pytest.mark.parametrize("signature, names", [("serving_default", ["text"]),
                                              ("classify_pairs", ["text_a", "text_b"])])
def test_any_batch_of_any_text_is_classified(server, signature, names):
    check_any_batch_is_served(server, signature, names, _valid_classes)


def test_a_probability_classifier_is_not_softmaxed_twice(corpus_vocabulary):
    preprocessor = data.BertPreprocessor(data.WordPieceTokenizer(corpus_vocabulary), 32)
    logits_model = models.TransformerClassifier(len(corpus_vocabulary), 3, hidden_dim=32)
    probabilities_model = models.TransformerClassifier(
        len(corpus_vocabulary), 3, hidden_dim=32, activation="softmax"
    )
    probabilities_model.set_weights(logits_model.get_weights())
    texts = tf.constant(TEXTS[:2])
    modules = [export.ClassifierServingModule(m, preprocessor, ["a", "b", "c"])
               for m in (logits_model, probabilities_model)]
    expected = tf.nn.softmax(logits_model(preprocessor(texts))).numpy()
    for module in modules:
        np.testing.assert_allclose(module.classify(texts)["probabilities"], expected, atol=1e-6)


def test_labels_must_match_the_classes(corpus_vocabulary, tmp_path):
    preprocessor = data.BertPreprocessor(data.WordPieceTokenizer(corpus_vocabulary), 16)
    backbone = models.BertBackbone.from_architecture("bert_tiny", vocabulary_size=len(corpus_vocabulary))
    with pytest.raises(ValueError, match="2 names for 3 classes"):
        export.export_classifier(models.BertClassifier(backbone, 3), str(tmp_path), preprocessor=preprocessor,
                                 labels=["a", "b"])
    # A string was split into one name per character.
    with pytest.raises(ValueError, match="`labels` must be a list of class names, got the string"):
        export.export_classifier(models.BertClassifier(backbone, 2), str(tmp_path), preprocessor=preprocessor,
                                 labels="ab")
    # A one-output classifier always served probability 1.0.
    with pytest.raises(ValueError, match="2 or more classes"):
        export.export_classifier(models.BertClassifier(backbone, 1), str(tmp_path), preprocessor=preprocessor,
                                 labels=["yes"])


def test_a_subclassed_keras_classifier_exports(corpus_vocabulary, tmp_path):
    class BagOfWords(keras.Model):
        """Logits from the mean of the real tokens' embeddings: no `outputs` attribute."""

        def __init__(self):
            super().__init__()
            self.embedding = keras.layers.Embedding(len(corpus_vocabulary), 4)
            self.dense = keras.layers.Dense(3)

        def call(self, inputs):
            mask = keras.ops.cast(inputs["padding_mask"], "float32")[:, :, None]
            pooled = keras.ops.sum(self.embedding(inputs["token_ids"]) * mask, axis=1)
            return self.dense(pooled / keras.ops.sum(mask, axis=1))

    preprocessor = data.BertPreprocessor(data.WordPieceTokenizer(corpus_vocabulary), 16)
    model = BagOfWords()
    path = export.export_classifier(model, str(tmp_path), preprocessor=preprocessor, labels=["a", "b", "c"])
    texts = tf.constant(TEXTS[:3])
    served = tf.saved_model.load(path).signatures["serving_default"](text=texts)
    expected = tf.nn.softmax(model(preprocessor(texts))).numpy()
    np.testing.assert_allclose(served["probabilities"], expected, atol=1e-6)
    with pytest.raises(ValueError, match="2 names for 3 classes"):
        export.export_classifier(model, str(tmp_path / "x"), preprocessor=preprocessor, labels=["a", "b"])
