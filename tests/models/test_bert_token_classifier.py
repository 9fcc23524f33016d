"""BertTokenClassifier and its TaggerPreprocessor: words to first pieces, tags back to words."""

import logging
import random

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfnlp import data
from tfnlp.data.tagger_preprocessor import IGNORED, TaggerPreprocessor
from tfnlp.metrics.tagging import TagAccuracy
from tfnlp.models import BertBackbone
from tfnlp.models.bert_token_classifier import BertTokenClassifier

VOCAB = [*data.SPECIAL_TOKENS, "ada", "love", "##lace", "wrote", "in", "paris", "n", "'", "t", "1", ",",
         "000", "the", "cat", "##s", "猫"]
TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
WORDS = ["Ada", "Lovelace", "wrote", "in", "Paris", "n't", "1,000", "\u200b", "cats", "猫猫", "zebra", "The"]
LENGTH = 12


def _preprocessor(length=LENGTH):
    return data.BertPreprocessor(data.WordPieceTokenizer(VOCAB), length)


def _sentences(seed, count=12, longest=9):
    rng = random.Random(seed)
    words = [[rng.choice(WORDS) for _ in range(rng.randint(1, longest))] for _ in range(count)]
    return words, [[rng.choice(TAGS) for _ in sentence] for sentence in words]


def _expected(words, tags, length):
    """BERT's recipe written out in Python, one word at a time: `(token_ids, word_positions, y)`."""
    tokenizer = data.WordPieceTokenizer(VOCAB)
    token_ids, positions, labels = [], [], []
    for sentence, sentence_tags in zip(words, tags, strict=True):
        pieces, starts = [], []
        for word in sentence:
            word_pieces = tokenizer(tf.constant([word])).to_list()[0] or [tokenizer.unk_id]
            starts.append(len(pieces) + 1)
            pieces += word_pieces
        pieces = pieces[:length - 2]
        kept = [s for s in starts if s <= length - 2]
        ids = [tokenizer.cls_id, *pieces, tokenizer.sep_id]
        token_ids.append(ids + [0] * (length - len(ids)))
        positions.append(kept + [0] * (length - 2 - len(kept)))
        row = [TAGS.index(t) for t in sentence_tags[:len(kept)]]
        labels.append(row + [IGNORED] * (length - 2 - len(row)))
    return np.array(token_ids), np.array(positions), np.array(labels)


@pytest.mark.parametrize("length", [5, LENGTH, 40])
def test_preprocessor_labels_each_words_first_piece_as_written_out_in_python(length):
    words, tags = _sentences(0)
    preprocessor = TaggerPreprocessor(_preprocessor(length), TAGS)
    inputs, y, _ = preprocessor(tf.ragged.constant(words), tf.ragged.constant(tags))
    token_ids, positions, labels = _expected(words, tags, length)
    np.testing.assert_array_equal(inputs["token_ids"], token_ids)
    np.testing.assert_array_equal(inputs["word_positions"], positions)
    np.testing.assert_array_equal(y, labels)
    np.testing.assert_array_equal(inputs["padding_mask"], token_ids != 0)
    # Tag ids give the same as tag names.
    ids = tf.ragged.constant([[TAGS.index(t) for t in s] for s in tags])
    np.testing.assert_array_equal(preprocessor(tf.ragged.constant(words), ids)[1], labels)


def test_preprocessor_raw_texts_are_berts_words():
    preprocessor = TaggerPreprocessor(_preprocessor(), TAGS)
    texts = ["Ada Lovelace wrote n't", "猫猫 in Paris!", ""]
    from_texts, _, _ = preprocessor(tf.constant(texts))
    words = [["Ada", "Lovelace", "wrote", "n", "'", "t"], ["猫", "猫", "in", "Paris", "!"]]
    counts = preprocessor.words_of(tf.constant(texts))["token_ids"].row_lengths().numpy().tolist()
    assert counts == [6, 5, 0]
    from_words, _, _ = preprocessor(tf.ragged.constant(words))
    for name in ("token_ids", "word_positions"):
        np.testing.assert_array_equal(from_texts[name][:2], from_words[name])
    assert from_texts["word_positions"][2].numpy().tolist() == [0] * (LENGTH - 2)  # no word


def test_preprocessor_refuses_bad_tags():
    preprocessor = TaggerPreprocessor(_preprocessor(), TAGS)
    words = tf.ragged.constant([["Ada", "wrote"]])
    with pytest.raises(tf.errors.InvalidArgumentError, match="one tag per word"):
        preprocessor(words, tf.ragged.constant([["O"]]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="not one of the tagger's `tag_names`"):
        preprocessor(words, tf.ragged.constant([["O", "B-ORG"]]))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"tag ids must be in \[0, 5\)"):
        preprocessor(words, tf.ragged.constant([[0, 5]]))
    with pytest.raises(TypeError, match="tag ids \\(integers\\) or tag names"):
        preprocessor(words, tf.ragged.constant([[0.0, 1.0]]))
    with pytest.raises(ValueError, match="at least 2 distinct tags"):
        TaggerPreprocessor(_preprocessor(), ["O", "O"])
    with pytest.raises(ValueError, match="`sequence_length` must be at least 3"):
        TaggerPreprocessor(_preprocessor(2), TAGS)
    with pytest.raises(ValueError, match=r"`y\[0\]` holds the tag 'B-ORG'"):
        preprocessor.checked_labels([["O", "B-ORG"]], 1)
    with pytest.raises(ValueError, match=r"`y\[0\]` holds the tag id 9"):
        preprocessor.checked_labels([[0, 9]], 1)
    with pytest.raises(ValueError, match=r"`x\[1\]` is an empty sentence"):
        preprocessor.texts([["Ada"], []])


def _tagger(seed=0, **kwargs):
    keras.utils.set_random_seed(seed)
    backbone = BertBackbone(len(VOCAB), num_layers=1, num_heads=2, hidden_dim=16, max_sequence_length=64)
    return BertTokenClassifier(backbone, tag_names=TAGS, preprocessor=_preprocessor(), dropout=0.0,
                               **kwargs)


def test_word_logits_are_the_dense_head_on_each_words_first_piece():
    tagger = _tagger()
    words, tags = _sentences(1)
    inputs, _, _ = TaggerPreprocessor(_preprocessor(), TAGS)(tf.ragged.constant(words), tf.ragged.constant(tags))
    logits = tagger(inputs).numpy()
    backbone_inputs = {name: inputs[name] for name in ("token_ids", "segment_ids", "padding_mask")}
    sequence = tagger.backbone(backbone_inputs)["sequence_output"].numpy()
    first_pieces = np.take_along_axis(sequence, inputs["word_positions"].numpy()[:, :, None], axis=1)
    kernel, bias = tagger.output_dense.get_weights()
    np.testing.assert_allclose(logits, first_pieces @ kernel + bias, atol=1e-5)


def test_loss_and_accuracy_count_every_word_once_and_skip_the_rest():
    tagger = _tagger()
    tagger.compile()
    words, tags = _sentences(2, count=8)
    inputs, y, _ = TaggerPreprocessor(_preprocessor(), TAGS)(tf.ragged.constant(words), tf.ragged.constant(tags))
    logits = tagger(inputs).numpy().astype("float64")
    y = y.numpy()
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    real = y >= 0
    expected = -np.take_along_axis(log_p, np.maximum(y, 0)[:, :, None], -1)[:, :, 0][real].mean()
    loss, accuracy = tagger.evaluate(words, tags, batch_size=8, verbose=0)
    np.testing.assert_allclose(loss, expected, rtol=1e-5)
    np.testing.assert_allclose(accuracy, (logits.argmax(-1) == y)[real].mean(), rtol=1e-6)
    metric = TagAccuracy()
    metric.update_state(y[:3], logits[:3])
    metric.update_state(y[3:], logits[3:].argmax(-1))  # ids or scores, the same count
    np.testing.assert_allclose(metric.result(), (logits.argmax(-1) == y)[real].mean(), rtol=1e-6)


def test_words_ragged_texts_and_datasets_give_the_same_predictions():
    tagger = _tagger()
    tagger.compile()
    words, tags = _sentences(3, count=5)
    expected = tagger.predict(words, verbose=0)
    np.testing.assert_allclose(tagger.predict(tf.ragged.constant(words), verbose=0), expected, atol=1e-6)
    dataset = tf.data.Dataset.from_tensor_slices(tf.ragged.constant(words))
    np.testing.assert_allclose(tagger.predict(dataset, batch_size=2, verbose=0), expected, atol=1e-6)
    labelled = tf.data.Dataset.from_tensor_slices((tf.ragged.constant(words), tf.ragged.constant(tags)))
    in_memory = tagger.evaluate(words, tags, verbose=0)
    np.testing.assert_allclose(tagger.evaluate(labelled.ragged_batch(5), verbose=0), in_memory, rtol=1e-5)
    np.testing.assert_allclose(tagger.evaluate(labelled, batch_size=2, verbose=0),
                               tagger.evaluate(words, tags, batch_size=2, verbose=0), rtol=1e-5)
    # Raw texts are BERT's words: the same as those words given as lists.
    texts = ["Ada wrote n't", "猫猫 in Paris!", "1,000 cats"]
    bert_words = [["Ada", "wrote", "n", "'", "t"], ["猫", "猫", "in", "Paris", "!"], ["1", ",", "000", "cats"]]
    np.testing.assert_allclose(tagger.predict(texts, verbose=0), tagger.predict(bert_words, verbose=0), atol=1e-6)
    texts_dataset = tf.data.Dataset.from_tensor_slices(texts)  # single texts (scalars)
    np.testing.assert_allclose(tagger.predict(texts_dataset, verbose=0), tagger.predict(texts, verbose=0), atol=1e-6)
    # Batched texts with their tags: read as texts by the tags' rank.
    text_tags = tf.ragged.constant([["O"] * len(s) for s in bert_words])
    batched_texts = tf.data.Dataset.from_tensor_slices((texts, text_tags)).batch(3)
    np.testing.assert_allclose(tagger.evaluate(batched_texts, verbose=0),
                               tagger.evaluate(bert_words, [["O"] * len(s) for s in bert_words], verbose=0),
                               rtol=1e-5)
    # Alone, a batch of texts and one sentence's words look the same: refused, not guessed.
    with pytest.raises(ValueError, match="is ambiguous for BertTokenClassifier"):
        tagger.predict(tf.data.Dataset.from_tensor_slices(texts).batch(3), verbose=0)
    assert tagger.predict_tags([]) == []


def test_fit_learns_and_predict_tags_gives_one_tag_per_word(caplog):
    tagger = _tagger()
    tagger.compile(optimizer=keras.optimizers.Adam(0.01))
    words, _ = _sentences(4, count=32)
    tags = [["B-PER" if w in ("Ada", "Lovelace") else "B-LOC" if w == "Paris" else "O" for w in s] for s in words]
    tagger.fit(words, tags, epochs=15, batch_size=8, verbose=0)
    predicted = tagger.predict_tags(words)
    assert [len(p) for p in predicted] == [len(s) for s in words]
    right = sum(p == t for ps, ts in zip(predicted, tags, strict=True) for p, t in zip(ps, ts, strict=True)
                if p is not None)
    assert right / sum(p is not None for ps in predicted for p in ps) > 0.95
    long_sentence = [["Ada"] * (LENGTH + 3)]
    with caplog.at_level(logging.WARNING):
        tagged = tagger.predict_tags(long_sentence)[0]
    assert tagged[:LENGTH - 2] == ["B-PER"] * (LENGTH - 2) and tagged[LENGTH - 2:] == [None] * 5
    assert "5 of 15 words are past the preprocessor's sequence_length" in caplog.text
    assert tagger.predict_tags(long_sentence, untagged="O")[0][LENGTH - 2:] == ["O"] * 5


def test_keras_file_round_trip_in_safe_mode(tmp_path):
    tagger = _tagger()
    tagger.compile()
    words = _sentences(5, count=3)[0]
    path = str(tmp_path / "tagger.keras")
    tagger.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    assert isinstance(loaded, BertTokenClassifier) and loaded.tag_names == TAGS
    np.testing.assert_array_equal(loaded.predict(words, verbose=0), tagger.predict(words, verbose=0))
    assert BertTokenClassifier.from_config(tagger.get_config()).get_config() == tagger.get_config()


def test_constructor_checks():
    backbone = BertBackbone(len(VOCAB), num_layers=1, num_heads=2, hidden_dim=16)
    with pytest.raises(ValueError, match="`num_tags` is required"):
        BertTokenClassifier(backbone)
    with pytest.raises(ValueError, match="`tag_names` has 2 names for `num_tags`=3"):
        BertTokenClassifier(backbone, num_tags=3, tag_names=["O", "X"])
    with pytest.raises(ValueError, match="`num_tags` must be at least 2"):
        BertTokenClassifier(backbone, num_tags=1)
    with pytest.raises(ValueError, match="needs `tag_names`"):
        BertTokenClassifier(backbone, num_tags=3, preprocessor=_preprocessor())
    with pytest.raises(ValueError, match="`backbone` must be a BertBackbone"):
        BertTokenClassifier("bert", num_tags=3)
    tagger = BertTokenClassifier(backbone, num_tags=3)
    with pytest.raises(ValueError, match="has no `preprocessor`"):
        tagger.predict_tags([["Ada"]])


def test_crf_tagger_loss_is_the_crfs_likelihood_and_tags_its_best_path(tmp_path):
    tagger = _tagger(crf=True)
    tagger.compile()
    assert tagger.crf.allowed_transitions is not None  # IOB2 tag names: IOB2's constraints
    rng = np.random.default_rng(0)
    for weight in tagger.crf.weights:  # transitions that matter
        weight.assign(rng.normal(size=weight.shape).astype("float32"))
    words, tags = _sentences(6, count=8)
    inputs, y, _ = TaggerPreprocessor(_preprocessor(), TAGS)(tf.ragged.constant(words), tf.ragged.constant(tags))
    logits = tagger(inputs)
    mask = y >= 0
    gold = tagger._iob2_repaired(tf.maximum(y, 0))  # random tags: read as IOB2 (tested below)
    nll = -tagger.crf.log_likelihood(logits, gold, padding_mask=mask).numpy()
    assert np.isfinite(nll).all()
    best = tagger.crf(logits, padding_mask=mask).numpy()
    loss, accuracy = tagger.evaluate(words, tags, batch_size=8, verbose=0)
    np.testing.assert_allclose(loss, nll.mean(), rtol=1e-5)
    np.testing.assert_allclose(accuracy, (best == y.numpy())[mask.numpy()].mean(), rtol=1e-6)
    predicted = tagger.predict_tags(words)
    tagged = mask.numpy().sum(1)  # words past the length have no tag
    assert predicted == [[TAGS[t] for t in row[:n]] + [None] * (len(s) - n)
                         for row, s, n in zip(best, words, tagged, strict=True)]
    for sentence, n in zip(predicted, tagged, strict=True):  # IOB2 holds: I-X follows B-X or I-X
        for before, tag in zip(["O", *sentence[:n]], sentence[:n], strict=False):
            assert not tag.startswith("I-") or before[2:] == tag[2:] and before != "O"
    path = str(tmp_path / "crf.keras")
    tagger.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    for saved, restored in zip(tagger.crf.weights, loaded.crf.weights, strict=True):
        np.testing.assert_array_equal(saved.numpy(), restored.numpy())
    assert loaded.predict_tags(words) == predicted
    with pytest.raises(ValueError, match="has a CRF, whose negative log-likelihood is its loss"):
        tagger.compile(loss="mse")


def test_crf_tagger_learns_and_pos_tags_get_no_constraints():
    tagger = _tagger(crf=True)
    tagger.compile(optimizer=keras.optimizers.Adam(0.01))
    words, _ = _sentences(7, count=32)
    tags = [["B-PER" if w == "Ada" else "I-PER" if w == "Lovelace" else "O" for w in s] for s in words]
    tags = [["B-PER" if t == "I-PER" and (i == 0 or s[i - 1] == "O") else t for i, t in enumerate(s)]
            for s in tags]  # IOB2 (a Lovelace after anything but Ada starts an entity)
    before = tagger.evaluate(words, tags, verbose=0)[0]
    tagger.fit(words, tags, epochs=10, batch_size=8, verbose=0)
    loss, accuracy = tagger.evaluate(words, tags, verbose=0)
    assert loss < before / 4 and accuracy > 0.95
    backbone = BertBackbone(len(VOCAB), num_layers=1, num_heads=2, hidden_dim=16)
    assert BertTokenClassifier(backbone, tag_names=["NOUN", "VERB"], crf=True).crf.allowed_transitions is None
    # IOB1 (CoNLL-2003's tags: entities start with I-X, B-X only between two of a type): no
    # constraints, which would make an I-X without its B-X unreachable.
    iob1 = BertTokenClassifier(backbone, tag_names=["O", "I-PER", "B-LOC", "I-LOC"], crf=True)
    assert iob1.crf.allowed_transitions is None


def test_crf_tagger_trains_on_two_replicas_as_in_one_process(mirrored_strategy):
    from tests import families
    from tfnlp import training

    def train(strategy):
        keras.utils.set_random_seed(7)
        with strategy.scope():
            backbone = BertBackbone(families.VOCABULARY, num_layers=1, num_heads=2, hidden_dim=16,
                                    dropout=0.0, max_sequence_length=families.LENGTH)
            model = BertTokenClassifier(backbone, num_tags=3, dropout=0.0, crf=True)
            model.compile()
        losses = training.fit(model, families.batches("bert_tagger"), steps=3, verbose=0)["loss"]
        return np.array(losses), [w.numpy() for w in model.weights]

    losses, weights = train(tf.distribute.get_strategy())
    mirrored_losses, mirrored_weights = train(mirrored_strategy)
    np.testing.assert_allclose(mirrored_losses, losses, rtol=1e-5, atol=1e-5)
    for a, b in zip(mirrored_weights, weights, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)
    assert np.isfinite(losses).all() and losses[-1] != losses[0]
    # A replica given no sentence (a last batch smaller than the replicas) adds 0, not NaN.
    empty = tf.zeros((0, 4, len(TAGS)))
    assert float(_tagger(crf=True)._crf_loss(tf.zeros((0, 4), tf.int32), empty, None)) == 0.0


def test_crf_tagger_reads_tags_that_break_iob2_as_seqeval_does():
    tagger = _tagger(crf=True)
    tagger.compile()
    ids = {name: i for i, name in enumerate(TAGS)}
    broken = [["I-PER", "I-PER", "O", "I-LOC"], ["B-LOC", "I-PER", "O"]]
    repaired = [["B-PER", "I-PER", "O", "B-LOC"], ["B-LOC", "B-PER", "O"]]
    tags = tf.constant([[ids[t] for t in s] + [0] * (4 - len(s)) for s in broken])
    expected = tf.constant([[ids[t] for t in s] + [0] * (4 - len(s)) for s in repaired])
    np.testing.assert_array_equal(tagger._iob2_repaired(tags)[:, :3], expected[:, :3])
    words = [["Ada", "Lovelace", "in", "Paris"], ["Paris", "Ada", "wrote"]]
    loss = tagger.evaluate(words, broken, verbose=0)[0]
    assert np.isfinite(loss)
    np.testing.assert_allclose(loss, tagger.evaluate(words, repaired, verbose=0)[0], rtol=1e-6)
