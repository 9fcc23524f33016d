"""export_tagger: the SavedModel's words, offsets, tags and entities == the in-memory tagger, on hostile text.

`tests/export/test_tf_serving.py` ties TensorFlow's C++ loader (TF Serving's) to
`tf.saved_model.load` on both signatures; this file ties that to the model.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops the SavedModel uses)

from tfnlp import data, export, models
from tfnlp.metrics import entity_spans

VOCAB = [*data.SPECIAL_TOKENS, "ada", "love", "##lace", "wrote", "in", "paris", "london", "the", "猫", "x", "."]
TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
TEXTS = [
    "Ada Lovelace wrote in London.",
    "",
    "   \t\n",
    "Café e\u0301 ＧＤＰ 猫猫 👍🏽 in Paris!",
    b"\xff\xfe Ada \xe4\xb8 wrote \xf0",
    "zero\u200bwidth\u0000control Ada",
    "Ada " * 30,  # more words than the sequence length holds
    "x" * 1_000_000,
    "Ada " * 20_000 + "x" * 1_000_000,  # many words in a long text: each word costs its own length
]


@pytest.fixture(scope="module")
def tagger():
    keras.utils.set_random_seed(3)
    backbone = models.BertBackbone(len(VOCAB), num_layers=1, num_heads=2, hidden_dim=16, max_sequence_length=16)
    model = models.BertTokenClassifier(backbone, tag_names=TAGS, crf=True,
                                       preprocessor=data.BertPreprocessor(data.WordPieceTokenizer(VOCAB), 16))
    rng = np.random.default_rng(0)
    for weight in model.crf.weights:
        weight.assign(rng.normal(size=weight.shape).astype("float32"))
    return model


@pytest.fixture(scope="module")
def served(tagger, tmp_path_factory):
    return tf.saved_model.load(export.export_tagger(tagger, str(tmp_path_factory.mktemp("tagger")),
                                                    warmup_batch_sizes=()))


def _text(raw):
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw


def _rows(outputs, name, row):
    return outputs[name][row].numpy().tolist()


def test_raw_text_gives_the_models_tags_with_words_and_entities_at_their_offsets(tagger, served):
    outputs = served.signatures["serving_default"](
        text=tf.constant([t if isinstance(t, bytes) else t.encode() for t in TEXTS]))
    expected_tags = tagger.predict_tags(TEXTS)
    found = tagger.preprocessor.tokenizer.tokenize_words(tf.constant(
        [t if isinstance(t, bytes) else t.encode() for t in TEXTS]))
    for row, raw in enumerate(TEXTS):
        text, count = _text(raw), int(outputs["num_words"][row])
        starts, ends = found["char_starts"][row].numpy().tolist(), found["char_ends"][row].numpy().tolist()
        assert count == len(starts) == len(expected_tags[row])
        assert _rows(outputs, "word_starts", row)[:count] == starts
        assert _rows(outputs, "word_ends", row)[:count] == ends
        words = [w.decode() for w in _rows(outputs, "words", row)[:count]]
        assert words == [text[s:e] for s, e in zip(starts, ends, strict=True)], row
        tags = [t.decode() or None for t in _rows(outputs, "tags", row)[:count]]
        assert tags == expected_tags[row], row
        for name, padding in (("words", b""), ("word_starts", -1), ("word_ends", -1), ("tags", b""),
                              ("tag_ids", -1), ("scores", 0.0)):
            assert _rows(outputs, name, row)[count:] == [padding] * (outputs[name].shape[1] - count), name
        tagged = [t for t in tags if t is not None]
        spans = entity_spans(tagged)
        assert int(outputs["num_entities"][row]) == len(spans)
        for k, (label, first, end) in enumerate(spans):
            assert _rows(outputs, "entity_labels", row)[k].decode() == label
            assert (_rows(outputs, "entity_word_starts", row)[k], _rows(outputs, "entity_word_ends", row)[k]) == (
                first, end)
            start, stop = starts[first], ends[end - 1]
            assert (_rows(outputs, "entity_starts", row)[k], _rows(outputs, "entity_ends", row)[k]) == (start, stop)
            assert _rows(outputs, "entity_texts", row)[k].decode() == text[start:stop]
    assert expected_tags[6][-1] is None  # words past the length: untagged, in no entity
    # Tag ids name the tags; scores are the softmax probability of each word's tag.
    ids, tags = outputs["tag_ids"].numpy(), outputs["tags"].numpy()
    assert (tags == np.where(ids >= 0, np.array([t.encode() for t in TAGS], object)[ids], b"")).all()
    logits = tagger.predict([t if isinstance(t, str) else t.decode("utf-8", "replace") for t in TEXTS[:4]],
                            verbose=0)
    probabilities = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    for row in range(4):
        count = int((ids[row] >= 0).sum())
        np.testing.assert_allclose(outputs["scores"].numpy()[row, :count],
                                   probabilities[row, np.arange(count), ids[row, :count]], rtol=1e-5)


def test_pre_split_words_give_the_models_tags(tagger, served):
    sentences = [["Ada", "Lovelace", "wrote"], ["Paris"], ["n't", "\u200b", "猫猫", "Ada"] * 5]
    width = max(map(len, sentences))
    words = tf.constant([[w.encode() for w in s] + [b""] * (width - len(s)) for s in sentences])
    outputs = served.signatures["tag_words"](words=words)
    expected = tagger.predict_tags(sentences)
    for row, sentence in enumerate(sentences):
        count = int(outputs["num_words"][row])
        assert count == len(sentence)
        assert [t.decode() or None for t in _rows(outputs, "tags", row)[:count]] == expected[row]
        spans = entity_spans([t for t in expected[row] if t is not None])
        assert [(label.decode(), text.decode()) for label, text in zip(
            _rows(outputs, "entity_labels", row)[:len(spans)], _rows(outputs, "entity_texts", row)[:len(spans)],
            strict=True)] == [(label, " ".join(sentence[a:b])) for label, a, b in spans]
    assert set(outputs) == {"tags", "tag_ids", "scores", "num_words", "entity_labels", "entity_texts",
                            "entity_word_starts", "entity_word_ends", "num_entities"}


def test_part_of_speech_tags_have_no_entities_and_the_tag_names_are_checked(tmp_path):
    backbone = models.BertBackbone(len(VOCAB), num_layers=1, num_heads=2, hidden_dim=16, max_sequence_length=16)
    preprocessor = data.BertPreprocessor(data.WordPieceTokenizer(VOCAB), 16)
    tagger = models.BertTokenClassifier(backbone, tag_names=["NOUN", "VERB", "PUNCT"], preprocessor=preprocessor)
    served = tf.saved_model.load(export.export_tagger(tagger, str(tmp_path / "pos"), warmup_batch_sizes=()))
    outputs = served.signatures["serving_default"](text=tf.constant(["Ada wrote."]))
    assert set(outputs) == {"words", "word_starts", "word_ends", "tags", "tag_ids", "scores", "num_words"}
    assert outputs["tags"].numpy().tolist()[0] == [t.encode() for t in tagger.predict_tags(["Ada wrote."])[0]]
    with pytest.raises(ValueError, match="`tag_names` has 2 names for the tagger's 3 tags"):
        export.export_tagger(tagger, str(tmp_path / "bad"), tag_names=["NOUN", "VERB"])
    untagged = models.BertTokenClassifier(backbone, num_tags=3)
    with pytest.raises(ValueError, match="`tag_names` is required"):
        export.export_tagger(untagged, str(tmp_path / "none"), preprocessor=preprocessor)
