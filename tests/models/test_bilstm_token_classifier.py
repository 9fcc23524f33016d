"""BiLSTMTokenClassifier (TagLM / ELMo's tagger, and its control) and its WordTaggerPreprocessor."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.models.test_transformer_token_classifier import toy_tagging_task, word_accuracy
from tfnlp import data, models
from tfnlp.data import WordTaggerPreprocessor, build_tagger_vocabulary
from tfnlp.data.tagger_preprocessor import IGNORED

TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
SENTENCES = [["Ada", "Lovelace", "wrote", "in", "Paris", "."], ["The", "cat", "sat"], ["Émile", "猫", ""]]


def _bilm(seed=0):
    keras.utils.set_random_seed(seed)
    return models.ELMoBiLM(word_vocabulary_size=20, num_layers=1, units=8, projection_dim=4,
                           filters=((1, 4), (2, 4)), num_highway_layers=1, max_characters=12,
                           num_sampled=None)


def _preprocessor(max_words=8):
    return WordTaggerPreprocessor(build_tagger_vocabulary(SENTENCES[:2]), TAGS, max_words=max_words,
                                  max_characters=12)


def _tagger(elmo=None, seed=0, **kwargs):
    keras.utils.set_random_seed(seed)
    return models.BiLSTMTokenClassifier(elmo=elmo, preprocessor=_preprocessor(), word_dim=8, character_dim=8,
                                        filters=((1, 4), (2, 4)), units=8, num_layers=2, dropout=0.0,
                                        **kwargs)


def test_vocabulary_and_preprocessor_as_written_out_in_python():
    vocabulary = build_tagger_vocabulary(SENTENCES[:2])
    assert vocabulary[:4] == ["<PAD>", "<UNK>", "<S>", "</S>"] and "ada" in vocabulary and "Ada" not in vocabulary
    assert build_tagger_vocabulary(SENTENCES, max_size=6)[4:] == ["ada", "lovelace"]
    assert build_tagger_vocabulary([["a", "a", "b"]], min_count=2) == ["<PAD>", "<UNK>", "<S>", "</S>", "a"]
    preprocessor = _preprocessor(max_words=4)
    tags = [["B-PER", "I-PER", "O", "O", "B-LOC", "O"], ["O", "O", "O"], ["B-PER", "O", "O"]]
    inputs, y, _ = preprocessor(tf.ragged.constant(SENTENCES), tf.ragged.constant(tags))
    index = {w: i for i, w in enumerate(vocabulary)}
    expected_ids, expected_y, expected_tokens = [], [], []
    for sentence, sentence_tags in zip(SENTENCES, tags, strict=True):
        kept = [w if w else "\ufffd" for w in sentence[:4]]  # an empty word is a word
        tokens = ["<S>", *kept, "</S>"] + [""] * (4 - len(kept))
        expected_tokens.append(tokens)
        expected_ids.append([0 if t == "" else 2 if t == "<S>" else 3 if t == "</S>" else index.get(t.lower(), 1)
                             for t in tokens])
        row = [TAGS.index(t) for t in sentence_tags[:4]]
        expected_y.append(row + [IGNORED] * (4 - len(row)))
    np.testing.assert_array_equal(inputs["word_ids"], expected_ids)
    np.testing.assert_array_equal(y, expected_y)
    np.testing.assert_array_equal(inputs["character_ids"], data.character_ids(tf.constant(expected_tokens), 12))
    # Batches are as long as their longest sentence.
    short, _, _ = preprocessor(tf.ragged.constant([["Ada"]]))
    assert short["word_ids"].shape == (1, 3)


def test_raw_texts_are_berts_words_as_written_with_their_offsets():
    preprocessor = _preprocessor()
    texts = ["Ada Lovelace wrote, in Paris!", "Émile\u200b 猫猫 ok", "", b"bad \xff byte"]
    found = preprocessor.words_of(tf.constant(texts))
    bert = data.WordPieceTokenizer([*data.SPECIAL_TOKENS, "ada"]).tokenize_words(tf.constant(texts))
    for key in ("byte_starts", "byte_ends", "char_starts", "char_ends"):
        assert found[key].to_list() == bert[key].to_list(), key
    for text, words, starts, ends in zip(texts[:3], found["word_pieces"].to_list()[:3],
                                         found["char_starts"].to_list()[:3], found["char_ends"].to_list()[:3],
                                         strict=True):
        assert [w.decode() for w in words] == [text[s:e] for s, e in zip(starts, ends, strict=True)]
    assert found["word_pieces"].to_list()[1][:2] == ["Émile".encode(), "猫".encode()]  # case and accents kept
    from_texts, _, _ = preprocessor(tf.constant(texts[:1]))
    from_words, _, _ = preprocessor(tf.ragged.constant([["Ada", "Lovelace", "wrote", ",", "in", "Paris", "!"]]))
    np.testing.assert_array_equal(from_texts["word_ids"], from_words["word_ids"][:, :from_texts["word_ids"].shape[1]])


@pytest.mark.parametrize("with_elmo", [False, True])
def test_a_sentences_logits_do_not_depend_on_its_batch(with_elmo):
    """The LSTMs skip padding: a sentence alone and in a batch with a longer one agree."""
    tagger = _tagger(elmo=_bilm() if with_elmo else None)
    preprocessor = tagger._task_preprocessor()
    alone, _, _ = preprocessor(tf.ragged.constant(SENTENCES[1:2]))
    batch, _, _ = preprocessor(tf.ragged.constant(SENTENCES[:2]))
    words = len(SENTENCES[1])
    np.testing.assert_allclose(tagger(batch).numpy()[1, :words], tagger(alone).numpy()[0, :words], atol=1e-5)
    assert tagger(batch).shape == (2, 6, len(TAGS))  # the longest sentence's words


def test_elmo_is_frozen_and_its_mix_learns():
    bilm = _bilm()
    before = [w.numpy() for w in bilm.weights]
    tagger = _tagger(elmo=bilm)
    mix = [w.numpy() for w in tagger.elmo.scalar_mix.weights]
    tagger.compile(optimizer=keras.optimizers.Adam(1e-2))
    tags = [["B-PER", "I-PER", "O", "O", "B-LOC", "O"], ["O", "O", "O"]]
    tagger.fit(SENTENCES[:2], tags, epochs=3, verbose=0)
    for old, new in zip(before, bilm.weights, strict=True):
        np.testing.assert_array_equal(old, new.numpy())
    assert any(not np.array_equal(old, new.numpy()) for old, new in zip(mix, tagger.elmo.scalar_mix.weights,
                                                                          strict=True))
    # ELMo adds to the control's trainable weights only the mix (its weights and scale).
    control = _tagger()
    assert len(tagger.trainable_weights) == len(control.trainable_weights) + len(tagger.elmo.scalar_mix.weights)


def test_learns_a_tagging_task_from_words_with_a_crf():
    words, tags = toy_tagging_task()
    tagger = _tagger(crf=True)
    tagger.compile(optimizer=keras.optimizers.Adam(1e-2))
    tagger.fit(words, tags, epochs=10, batch_size=16, verbose=0)
    accuracy = word_accuracy(tagger, words[:32], tags[:32])
    assert accuracy > 0.95, accuracy


def test_keras_file_round_trip_in_safe_mode_with_elmo_and_a_crf(tmp_path):
    tagger = _tagger(elmo=_bilm(), crf=True)
    tagger.compile()
    path = str(tmp_path / "tagger.keras")
    tagger.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    assert isinstance(loaded, models.BiLSTMTokenClassifier) and loaded.elmo is not None and loaded.crf is not None
    np.testing.assert_array_equal(loaded.predict(SENTENCES, verbose=0), tagger.predict(SENTENCES, verbose=0))
    assert loaded.predict_tags(SENTENCES) == tagger.predict_tags(SENTENCES)
    config = tagger.get_config()
    assert models.BiLSTMTokenClassifier.from_config(config).get_config() == config


def test_words_past_max_words_get_no_tag_and_a_warning(caplog):
    tagger = _tagger()
    long_sentence = ["the"] * 11
    with caplog.at_level("WARNING"):
        tags = tagger.predict_tags([long_sentence, ["cat"]], untagged="O")
    assert [len(t) for t in tags] == [11, 1] and tags[0][8:] == ["O"] * 3
    assert "3 of 12 words are past the preprocessor's max_words (8)" in caplog.text


def test_constructor_checks():
    with pytest.raises(ValueError, match="`vocabulary_size` is required"):
        models.BiLSTMTokenClassifier(num_tags=3)
    with pytest.raises(ValueError, match="must be an ELMoBiLM"):
        models.BiLSTMTokenClassifier(10, 3, elmo=keras.Sequential())
    with pytest.raises(ValueError, match=r"max_characters \(12\) must be the ELMo biLM's \(50\)"):
        models.BiLSTMTokenClassifier(elmo=models.ELMoBiLM(20, units=8, projection_dim=4, filters=((1, 4),), num_sampled=None),
                                     preprocessor=_preprocessor())
    with pytest.raises(ValueError, match="differ from the preprocessor's"):
        models.BiLSTMTokenClassifier(preprocessor=_preprocessor(), tag_names=["O", "X"])
    with pytest.raises(ValueError, match="vocabulary has 13 words but the model's has only 5"):
        models.BiLSTMTokenClassifier(5, preprocessor=_preprocessor())
    with pytest.raises(ValueError, match=r"must start with \['<PAD>', '<UNK>', '<S>', '</S>'\]"):
        WordTaggerPreprocessor(["a", "b"], TAGS)
    with pytest.raises(ValueError, match="holds 'a' twice"):
        WordTaggerPreprocessor(["<PAD>", "<UNK>", "<S>", "</S>", "a", "a"], TAGS)
    tagger = _tagger()
    inputs, _, _ = tagger._task_preprocessor()(tf.ragged.constant(SENTENCES[:1]))
    with pytest.raises(ValueError, match=r"`word_ids` must be in \[0, 13\)"):
        tagger(dict(inputs, word_ids=inputs["word_ids"] + 20))
    with pytest.raises(ValueError, match="character_ids"):
        tagger(dict(inputs, character_ids=inputs["character_ids"][:, :, :5]))


def test_export_refuses_a_word_preprocessor_the_tagger_cannot_read(tmp_path):
    from tfnlp import export

    tagger = _tagger()
    bigger = WordTaggerPreprocessor(build_tagger_vocabulary(SENTENCES), TAGS, max_characters=12)
    with pytest.raises(ValueError, match="vocabulary has 16 words but the tagger's has only 13"):
        export.export_tagger(tagger, str(tmp_path), preprocessor=bigger)
    wider = WordTaggerPreprocessor(build_tagger_vocabulary(SENTENCES[:2]), TAGS, max_characters=50)
    with pytest.raises(ValueError, match=r"max_characters \(50\) must be the tagger's \(12\)"):
        export.export_tagger(tagger, str(tmp_path), preprocessor=wider)
    with pytest.raises(ValueError, match="for a word-level tagger"):
        export.export_tagger(models.TransformerTokenClassifier(20, tag_names=TAGS), str(tmp_path),
                             preprocessor=_preprocessor())
