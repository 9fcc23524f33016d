"""BertPretrainer with its tokenizer: documents in == the pretraining pipeline's batches in."""

import random

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfnlp import data, models, training

WORDS = "the a big small red blue cat dog sat ran on in mat park".split()
SEQUENCE_LENGTH, PREDICTIONS = 16, 3


def corpus(count=10, seed=0):
    """Documents of 2 to 4 seven-word sentences of a tiny grammar (one chunk each at L=16)."""
    rng = random.Random(seed)

    def sentence():
        return " ".join([rng.choice(["the", "a"]), rng.choice(["big", "small", "red", "blue"]),
                         rng.choice(["cat", "dog"]), rng.choice(["sat", "ran"]),
                         rng.choice(["on", "in"]), "the", rng.choice(["mat", "park"])])

    return [[sentence() for _ in range(rng.randint(2, 4))] for _ in range(count)]


def tokenizer():
    return data.WordPieceTokenizer(list(data.SPECIAL_TOKENS) + WORDS)


def make(next_sentence=True, with_tokenizer=True):
    keras.utils.set_random_seed(7)
    words = tokenizer()
    backbone = models.BertBackbone(words.vocabulary_size(), 1, 2, 16, intermediate_dim=32,
                                   dropout=0.0, max_sequence_length=32)
    text = {"tokenizer": words, "sequence_length": SEQUENCE_LENGTH} if with_tokenizer else {}
    return models.BertPretrainer(backbone, next_sentence=next_sentence, **text)


def documents_dataset(documents):
    return tf.data.Dataset.from_tensor_slices(tf.ragged.constant(documents)).map(tf.identity)


def hand_built(model, documents, batch_size):
    return data.bert_pretraining_dataset(
        documents_dataset(documents), model.tokenizer, SEQUENCE_LENGTH, PREDICTIONS,
        batch_size=batch_size, seed=0, shuffle_buffer=0, next_sentence=model.next_sentence,
    ).map(models.pretraining_batch)


@pytest.mark.parametrize("next_sentence", [True, False])
def test_fit_on_documents_lowers_the_loss(next_sentence):
    model = make(next_sentence)
    assert (model.sequence_length, model.max_predictions_per_seq) == (SEQUENCE_LENGTH, PREDICTIONS)
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    history = model.fit(corpus(20), epochs=6, batch_size=8, verbose=0)
    expected = {"loss", "mlm_accuracy"} | ({"nsp_accuracy", "mlm_loss", "nsp_loss"}
                                           if next_sentence else set())
    assert expected <= set(history.history)
    losses = history.history["loss"]
    assert np.all(np.isfinite(losses))
    assert losses[-1] < 0.8 * losses[0], losses


@pytest.mark.parametrize("next_sentence", [True, False])
def test_evaluate_on_documents_equals_the_hand_built_batches(next_sentence):
    model = make(next_sentence)
    model.compile()
    documents = corpus()
    # Every example, in batches of 5 (the last one smaller): no example is dropped.
    merged = hand_built(model, documents, 1).rebatch(5)
    expected = model.evaluate(merged, verbose=0, return_dict=True)
    # The forms of documents become one dataset before the objective is chosen:
    # each is checked once, the list with both objectives.
    forms = (documents,) if next_sentence else (
        documents, documents_dataset(documents), tf.ragged.constant(documents))
    for x in forms:
        assert model.evaluate(x, batch_size=5, verbose=0, return_dict=True) == expected
    if next_sentence:
        return  # the rest does not depend on the objective
    # A str is a one-sentence document, as is a scalar of a dataset.
    sentences = [" ".join(document) for document in documents]
    expected = model.evaluate([[s] for s in sentences], batch_size=4, verbose=0, return_dict=True)
    for x in (sentences, tf.data.Dataset.from_tensor_slices(sentences)):
        assert model.evaluate(x, batch_size=4, verbose=0, return_dict=True) == expected
    # The token-id path is unchanged, and validation data may be documents.
    model.fit(hand_built(model, documents, 4), verbose=0,
              validation_data=documents_dataset(documents))
    model.fit(documents, batch_size=4, shuffle=False, verbose=0, validation_data=(documents, None))
    with pytest.raises(ValueError, match="pass held-out texts as `validation_data`"):
        model.fit(documents, validation_split=0.2, verbose=0)


def test_keras_file_keeps_the_tokenizer(tmp_path):
    model = make(next_sentence=False)
    model.compile()
    model.fit(corpus(), batch_size=4, verbose=0)
    path = str(tmp_path / "pretrainer.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    assert isinstance(loaded.tokenizer, data.WordPieceTokenizer)
    assert loaded.tokenizer.get_vocabulary() == model.tokenizer.get_vocabulary()
    for name in ("tokenizer", "sequence_length", "max_predictions_per_seq", "next_sentence"):
        assert loaded.get_config()[name] == model.get_config()[name]
    documents = corpus(seed=1)
    assert (loaded.evaluate(documents, batch_size=4, verbose=0, return_dict=True)
            == model.evaluate(documents, batch_size=4, verbose=0, return_dict=True))
    bare = keras.saving.load_model(
        _saved(make(with_tokenizer=False), tmp_path / "bare.keras"), safe_mode=True
    )
    assert bare.tokenizer is None and bare.sequence_length is None


def _saved(model, path):
    model.save(str(path))
    return str(path)


def test_compile_defaults_are_unchanged():
    model = make()
    model.compile()
    assert sorted(model.loss) == ["mlm", "nsp"]
    assert type(model.optimizer) is type(training.bert_adamw(1e-4))
    model.compile(optimizer="sgd", loss="auto", weighted_metrics=None)
    assert isinstance(model.optimizer, keras.optimizers.SGD) and sorted(model.loss) == ["mlm", "nsp"]


def test_bad_inputs_are_refused():
    documents = corpus()
    bare, model = make(with_tokenizer=False), make()
    bare.compile()
    model.compile()
    with pytest.raises(ValueError, match="no tokenizer.*`tokenizer=tfnlp.data.WordPieceTokenizer"):
        bare.fit(documents, verbose=0)
    with pytest.raises(ValueError, match="`tokenizer="):
        bare.evaluate(["one sentence", "another"], verbose=0)
    with pytest.raises(ValueError, match="single text"):
        model.fit("the cat sat on the mat", verbose=0)
    with pytest.raises(ValueError, match="`y` must be None"):
        model.fit(documents, np.zeros(len(documents)), verbose=0)
    with pytest.raises(ValueError, match="`y` must be None"):
        model.evaluate(tf.data.Dataset.from_tensor_slices((["a cat"], [1])), verbose=0)
    with pytest.raises(ValueError, match=r"`x\[1\]` must be a document"):
        model.fit([["the cat"], [3, 4]], verbose=0)
    with pytest.raises(ValueError, match="predict takes model inputs"):
        model.predict(documents, verbose=0)


def test_tokenizer_and_sizes_must_fit_the_backbone():
    words = tokenizer()
    small = models.BertBackbone(words.vocabulary_size() - 1, 1, 2, 16, max_sequence_length=32)
    with pytest.raises(ValueError, match="`tokenizer` has 19 tokens .* only 18"):
        models.BertPretrainer(small, tokenizer=words)
    backbone = models.BertBackbone(40, 1, 2, 16, max_sequence_length=32)
    assert models.BertPretrainer(backbone, tokenizer=words).sequence_length == 32  # the table
    assert models.BertPretrainer(backbone, tokenizer=words).max_predictions_per_seq == 5
    with pytest.raises(ValueError, match="`tokenizer` must be a tfnlp.data.WordPieceTokenizer"):
        models.BertPretrainer(backbone, tokenizer="vocab.txt")
    with pytest.raises(ValueError, match=r"`sequence_length` \(33\) exceeds .*max_sequence_length"):
        models.BertPretrainer(backbone, tokenizer=words, sequence_length=33)
    with pytest.raises(ValueError, match="`sequence_length` must be at least 5"):
        models.BertPretrainer(backbone, tokenizer=words, sequence_length=4)
    with pytest.raises(ValueError, match="`max_predictions_per_seq` must be a positive integer"):
        models.BertPretrainer(backbone, tokenizer=words, max_predictions_per_seq=0)
