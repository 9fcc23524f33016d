"""Task preprocessors: each one's batches equal what the pipelines the models used give."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.harness import _config_round_trip
from tfnlp import data, models
from tfnlp.models.task import Task

VOCABULARY = list(data.SPECIAL_TOKENS) + "the cat sat on a mat good bad food hola gato".split()
SOURCES = ["the cat sat", "a good mat", "bad food", "the cat"]
TARGETS = ["hola gato", "hola", "gato gato", "hola hola gato"]


def _tokenizer():
    return data.WordPieceTokenizer(VOCABULARY)


def _classifier(**overrides):
    arguments = {"preprocessor": data.BertPreprocessor(_tokenizer(), 6), "num_classes": 2,
                 "labels": ["bad", "good"], **overrides}
    return data.TextClassifierPreprocessor(**arguments)


def _equal(actual, expected):
    """Equal values in the same structure of dicts, tuples and lists of batches (None for None)."""
    if isinstance(actual, dict):
        assert sorted(actual) == sorted(expected)
        for key in actual:
            _equal(actual[key], expected[key])
    elif isinstance(actual, tuple):
        assert isinstance(expected, tuple) and len(actual) == len(expected)
        for a, b in zip(actual, expected, strict=True):
            _equal(a, b)
    elif actual is None or expected is None:
        assert actual is None and expected is None
    else:
        np.testing.assert_array_equal(np.asarray(actual), np.asarray(expected))


def _first(dataset):
    return tf.nest.map_structure(np.asarray, next(iter(dataset)))


def test_the_classifier_preprocessor_is_the_bert_preprocessor_and_the_class_ids():
    preprocessor = _classifier()
    texts, pairs = tf.constant(SOURCES), (tf.constant(SOURCES), tf.constant(TARGETS))
    names = tf.constant(["good", "bad", "bad", "good"])
    inputs, y, weights = preprocessor(texts, names, tf.ones([4]))
    _equal(inputs, preprocessor.preprocessor(texts))
    _equal(y, [1, 0, 0, 1])
    _equal(weights, np.ones(4))
    inputs, y, weights = preprocessor(pairs, tf.constant([1, 0, 1, 1], tf.int64))
    _equal(inputs, preprocessor.preprocessor(pairs))
    assert y.dtype == tf.int32 and weights is None
    _equal(preprocessor(texts)[1:], (None, None))
    # Host-side labels (texts in memory) give the same ids as the graph.
    _equal(preprocessor.checked_labels(["good", "bad", "bad", "good"], 4), [1, 0, 0, 1])
    _equal(preprocessor.checked_labels(np.array([1, 0]), 2), [1, 0])
    assert preprocessor.in_memory(4) and not preprocessor.in_memory(1 << 25)


def test_the_default_pipeline_maps_call_over_batches_of_examples():
    preprocessor = _classifier()
    examples = tf.data.Dataset.from_tensor_slices((tf.constant(SOURCES), tf.constant([1, 0, 0, 1])))
    batches = preprocessor.batches(examples, batch_size=3, shuffle=False, mode="evaluate", count=4,
                                   batched=False)
    inputs, y = _first(batches)
    _equal(inputs, preprocessor.preprocessor(tf.constant(SOURCES[:3])))
    _equal(y, [1, 0, 0])
    element = preprocessor.dataset_element(examples.element_spec, "fit")
    assert element.features is examples.element_spec[0] and not element.batched
    # In `predict` two strings are a text pair, and class ids are read (then ignored).
    pair = (tf.TensorSpec([None], tf.string),) * 2
    assert preprocessor.dataset_element(pair, "predict").features == pair
    assert preprocessor.dataset_element(pair, "predict").batched
    assert preprocessor.dataset_element({"token_ids": tf.TensorSpec([None], tf.int32)}, "fit") is None


def test_the_classifier_preprocessor_names_bad_inputs():
    preprocessor = _classifier()
    with pytest.raises(ValueError, match="not among the model's `labels`.*'neutral'"):
        preprocessor.checked_labels(["good", "neutral"], 2)
    with pytest.raises(ValueError, match=r"class ids outside \[0, num_classes=2\): \[2\]"):
        preprocessor.checked_labels([0, 2], 2)
    with pytest.raises(ValueError, match="one label per text"):
        preprocessor.checked_labels([0, 1], 3)
    with pytest.raises(TypeError, match="class ids \\(integers\\) or class names"):
        preprocessor(tf.constant(SOURCES[:1]), tf.constant([0.5]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="a label is not one of this classifier"):
        preprocessor(tf.constant(SOURCES[:1]), tf.constant(["meh"]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="class ids must be in"):
        preprocessor(tf.constant(SOURCES[:1]), tf.constant([2]))
    with pytest.raises(ValueError, match="are strings but this TextClassifier has no `labels`"):
        _classifier(labels=None)(tf.constant(SOURCES[:1]), tf.constant(["good"]))
    with pytest.raises(ValueError, match="This BertClassifier has no `preprocessor`, so it takes token ids"):
        _classifier(preprocessor=None, task_name="BertClassifier").check("predict")
    with pytest.raises(ValueError, match="one segment: it cannot read text pairs"):
        _classifier(pairs=False)((tf.constant(SOURCES), tf.constant(SOURCES)))
    with pytest.raises(ValueError, match="must hold `\\(text, label\\)` pairs"):
        preprocessor.dataset_element(tf.TensorSpec([], tf.string), "fit")
    with pytest.raises(ValueError, match="single text"):
        preprocessor.texts("the cat")
    with pytest.raises(ValueError, match="`preprocessor` must be a tfnlp.data.BertPreprocessor"):
        _classifier(preprocessor=_tokenizer())


def test_the_seq2seq_preprocessor_gives_the_encoder_decoder_pipelines_batches():
    tokenizer = _tokenizer()
    preprocessor = data.Seq2SeqPreprocessor(tokenizer, source_length=5, target_length=4)
    pairs = tf.data.Dataset.from_tensor_slices((SOURCES, TARGETS))
    expected = _first(data.encoder_decoder_dataset(pairs, tokenizer, tokenizer, 5, 4, batch_size=4)
                      .map(models.seq2seq_batch))
    _equal(preprocessor(tf.constant(SOURCES), tf.constant(TARGETS)), expected)
    batches = preprocessor.batches(pairs.batch(3), batch_size=4, shuffle=False, mode="evaluate",
                                   count=None, batched=True)
    _equal(_first(batches), expected)
    _equal(preprocessor.checked_labels(TARGETS, 4), tf.constant(TARGETS))
    assert preprocessor.target_tokenizer is preprocessor.source_tokenizer
    with pytest.raises(ValueError, match="4 source texts but `y` has 1"):
        preprocessor.checked_labels(["hola"], 4)
    with pytest.raises(ValueError, match="generate\\(texts\\)"):
        preprocessor.check("predict")
    with pytest.raises(ValueError, match="no tokenizers.*`source_tokenizer=tfnlp.data.WordPieceTokenizer"):
        data.Seq2SeqPreprocessor(None).check("fit")
    with pytest.raises(ValueError, match="`\\(source, target\\)` pairs"):
        preprocessor.dataset_element(tf.TensorSpec([], tf.string), "fit")
    # A part that is not a string: model inputs, for Keras to read (not the tokenizers).
    assert preprocessor.dataset_element((tf.TensorSpec([], tf.string), tf.TensorSpec([], tf.int32)),
                                        "fit") is None
    with pytest.raises(ValueError, match="single texts \\(scalars\\) or batches"):
        preprocessor.dataset_element((tf.TensorSpec([], tf.string), tf.TensorSpec([None], tf.string)),
                                     "fit")


def test_the_unilm_preprocessor_gives_the_finetuning_pipelines_batches():
    tokenizer = _tokenizer()
    preprocessor = data.UniLMSeq2SeqPreprocessor(tokenizer, sequence_length=10)
    pairs = tf.data.Dataset.from_tensor_slices((SOURCES, TARGETS))
    batches = preprocessor.batches(pairs, batch_size=4, shuffle=False, mode="evaluate", count=4,
                                   batched=False)
    finetuning = data.unilm_finetuning_dataset(pairs, tokenizer, 10, batch_size=4, seed=0,
                                               drop_remainder=False)
    expected = _first(finetuning)
    _equal(_first(batches), (
        {k: expected[k] for k in ("token_ids", "segment_ids", "padding_mask", "objective",
                                  "masked_positions")},
        expected["masked_ids"], expected["masked_weights"].astype(np.float32),
    ))
    with pytest.raises(ValueError, match="labels and weights are in the batch"):
        preprocessor(expected, tf.constant([1]))
    with pytest.raises(ValueError, match="This UniLM has no tokenizer.*`tokenizer=tfnlp.data"):
        data.UniLMSeq2SeqPreprocessor(None).check("fit")
    with pytest.raises(ValueError, match="UniLM.predict takes model inputs"):
        preprocessor.check("predict")


def test_the_pretraining_preprocessor_gives_bert_pretraining_batches_in_corpus_order():
    tokenizer = _tokenizer()
    preprocessor = data.BertPretrainingPreprocessor(tokenizer, 8, 2, next_sentence=False)
    documents = [["the cat sat", "on a mat"], "good food", ["bad", "the cat"]]
    texts = preprocessor.texts(documents)
    assert texts.shape[0] == 3
    batches = preprocessor.batches(tf.data.Dataset.from_tensor_slices((texts,)), batch_size=4,
                                   shuffle=False, mode="evaluate", count=3, batched=False)
    corpus = tf.data.Dataset.from_tensor_slices(texts).map(lambda d: tf.reshape(d, [-1]))
    expected = data.bert_pretraining_dataset(corpus, tokenizer, 8, 2, batch_size=1, seed=0,
                                             shuffle_buffer=0, next_sentence=False)
    expected = [_first(expected.rebatch(4).map(models.pretraining_batch))]
    _equal(_first(batches), expected[0])
    assert preprocessor.texts(["one sentence", "another"]).shape == [2]  # one-sentence documents
    assert preprocessor.texts([1, 2]) is None and preprocessor.texts({"token_ids": 1}) is None
    with pytest.raises(ValueError, match=r"`x\[1\]` must be a document"):
        preprocessor.texts([["the cat"], [3, 4]])
    with pytest.raises(ValueError, match="`y` must be None"):
        preprocessor.checked_labels([0, 1, 0], 3)
    with pytest.raises(ValueError, match="`y` must be None"):
        preprocessor.dataset_element((tf.TensorSpec([], tf.string), tf.TensorSpec([], tf.int32)), "fit")
    with pytest.raises(ValueError, match="1-D string tensors"):
        preprocessor.dataset_element(tf.TensorSpec([None, None], tf.string), "fit")
    with pytest.raises(ValueError, match="predict takes model inputs"):
        preprocessor.check("predict")


def test_the_elmo_preprocessor_reads_texts_as_sentence_character_ids():
    preprocessor = data.ELMoPreprocessor(max_tokens=5, max_characters=7, max_input_bytes=20)
    texts = tf.constant(["The cat sat on the mat!", "Hi", "x" * 50])
    ids, y, weights = preprocessor(texts)
    _equal(ids, data.elmo.sentence_character_ids(texts, 5, 7, 20, length=5)[1])
    assert ids.shape == (3, 5, 7) and y is None and weights is None
    element = preprocessor.dataset_element((tf.TensorSpec([None], tf.string),
                                            tf.TensorSpec([None], tf.int32)), "predict")
    assert element.labels is None and element.batched
    with pytest.raises(ValueError, match="`predict` only"):
        preprocessor.check("fit")
    with pytest.raises(ValueError, match="no `max_tokens`"):
        data.ELMoPreprocessor(None)(texts)


@pytest.mark.parametrize("build", [
    lambda: _classifier(pairs=False, task_name="BertClassifier"),
    lambda: _classifier(preprocessor=None, labels=None),
    lambda: data.Seq2SeqPreprocessor(_tokenizer(), data.WordPieceTokenizer(VOCABULARY[:12]), 5, 4),
    lambda: data.Seq2SeqPreprocessor(_tokenizer(), source_length=5, target_length=4),
    lambda: data.UniLMSeq2SeqPreprocessor(_tokenizer(), 10),
    lambda: data.BertPretrainingPreprocessor(_tokenizer(), 8, 2),
    lambda: data.ELMoPreprocessor(5, 7),
], ids=["classifier", "classifier-bare", "seq2seq", "seq2seq-shared", "unilm", "pretraining", "elmo"])
def test_configs_round_trip(build):
    preprocessor = build()
    _config_round_trip(preprocessor)
    restored = type(preprocessor).from_config(preprocessor.get_config())
    if isinstance(preprocessor, data.Seq2SeqPreprocessor):
        shared = preprocessor.target_tokenizer is preprocessor.source_tokenizer
        assert (restored.target_tokenizer is restored.source_tokenizer) == shared


def test_the_base_names_what_a_task_must_write():
    with pytest.raises(NotImplementedError, match="must implement `call`"):
        data.TaskPreprocessor()(tf.constant(["a"]))
    base = data.TaskPreprocessor(task_name="Tagger")
    assert base.texts(["a", "b"]).shape == [2] and base.texts([1, 2]) is None
    assert not base.in_memory(2) and base.checked_labels([0, 1], 2).tolist() == [0, 1]
    with pytest.raises(ValueError, match="1-D batch of texts"):  # no pairs: a 2-D batch
        base.texts((["a"], ["b"]))


class _ByteCounts(data.TaskPreprocessor):
    """A new task's preprocessor, in a file of its own: texts as their byte counts."""

    label_name = "the labels"

    def __init__(self, once=True):
        super().__init__(task_name="ByteCounter")
        self.once = once

    def call(self, x, y=None, sample_weight=None):
        return {"counts": tf.strings.length(x)[:, None]}, y, sample_weight

    def in_memory(self, count):
        return self.once


class _ByteCounter(Task):
    """A task that plugs `_ByteCounts` in with one method: `Task` itself is not edited."""

    def __init__(self, once=True):
        counts = keras.Input((1,), dtype="int32", name="counts")
        outputs = keras.layers.Dense(2)(keras.ops.cast(counts, "float32"))
        super().__init__(inputs={"counts": counts}, outputs=outputs, name="byte_counter")
        self.once = once

    def _checked_inputs(self, inputs):
        return inputs

    def _compile_defaults(self):
        return {"optimizer": "sgd", "loss": keras.losses.SparseCategoricalCrossentropy(from_logits=True)}

    def _task_preprocessor(self):
        return _ByteCounts(self.once)


@pytest.mark.parametrize("once", [True, False], ids=["arrays", "pipeline"])
def test_a_new_task_reads_texts_in_every_form_through_its_preprocessor(once):
    model = _ByteCounter(once)
    model.compile()
    texts = ["a", "abcd", "ab", "abcdef"]
    expected = model.predict({"counts": np.array([[1], [4], [2], [6]], np.int32)}, verbose=0)
    for x in (texts, tf.constant(texts), tf.data.Dataset.from_tensor_slices(texts).batch(3),
              tf.data.Dataset.from_tensor_slices((texts, [0, 1, 0, 1]))):
        np.testing.assert_allclose(model.predict(x, batch_size=2, verbose=0), expected, atol=1e-6)
    history = model.fit(texts, [0, 1, 0, 1], batch_size=2, validation_split=0.5, verbose=0)
    assert sorted(history.history) == ["loss", "val_loss"]
    with pytest.raises(ValueError, match="`y` \\(the labels\\) is required to evaluate on texts"):
        model.evaluate(texts, verbose=0)
    with pytest.raises(ValueError, match="A dataset of texts for ByteCounter must hold `\\(texts, labels\\)`"):
        model.fit(tf.data.Dataset.from_tensor_slices(texts), verbose=0)
