"""TransformerTokenClassifier: the tagger from scratch, the control of the pretrained taggers."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.models.test_bert_token_classifier import TAGS, _preprocessor, _sentences
from tfnlp import training
from tfnlp.data import TaggerPreprocessor
from tfnlp.models import TransformerClassifier, TransformerTokenClassifier
from tfnlp.models._transformer_encoder import encode


def _tagger(seed=0, **kwargs):
    keras.utils.set_random_seed(seed)
    return TransformerTokenClassifier(tag_names=TAGS, preprocessor=_preprocessor(), num_layers=2,
                                      num_heads=2, hidden_dim=16, dropout=0.0, **kwargs)


def _inputs(seed, count=12):
    words, tags = _sentences(seed, count=count)
    return TaggerPreprocessor(_preprocessor(), TAGS)(tf.ragged.constant(words), tf.ragged.constant(tags))


def test_word_logits_are_the_full_encoders_output_at_each_words_first_piece():
    """The last block runs at the word positions only; that equals every position, then a gather,
    and the encoder is the text classifier's (same weights, same sequence output)."""
    tagger = _tagger()
    inputs, _, _ = _inputs(1)
    logits = tagger(inputs).numpy()
    encoder_inputs = {name: inputs[name] for name in ("token_ids", "segment_ids", "padding_mask")}
    sequence = encode(tagger, encoder_inputs).numpy()  # every position of the last block
    first_pieces = np.take_along_axis(sequence, inputs["word_positions"].numpy()[:, :, None], axis=1)
    kernel, bias = tagger.output_dense.get_weights()
    np.testing.assert_allclose(logits, first_pieces @ kernel + bias, atol=1e-5)
    # The classifier's encoder with the tagger's weights gives the same sequence.
    classifier = TransformerClassifier(tagger.vocabulary_size, 3, num_layers=2, num_heads=2, hidden_dim=16,
                                       dropout=0.0)
    for name in ("token_embedding", "segment_embedding"):
        getattr(classifier, name).set_weights(getattr(tagger, name).get_weights())
    for ours, theirs in zip(tagger.transformer_layers, classifier.transformer_layers, strict=True):
        theirs.set_weights(ours.get_weights())
    np.testing.assert_allclose(encode(classifier, encoder_inputs).numpy(), sequence, atol=1e-6)


def test_padding_and_extra_length_change_no_word_logit():
    tagger = _tagger()
    inputs, _, _ = _inputs(2)
    longer = {name: tf.pad(value, [[0, 0], [0, 5]]) for name, value in inputs.items()
              if name != "word_positions"}
    longer["word_positions"] = inputs["word_positions"]
    np.testing.assert_allclose(tagger(longer).numpy(), tagger(inputs).numpy(), atol=1e-5)


def toy_tagging_task(count=96):
    """Sentences whose tags need context: `Ada` is `B-PER`, the word after it `I-PER`, else `O`."""
    rng = np.random.default_rng(0)
    vocabulary = ["Ada", "wrote", "in", "Paris", "the", "cat"]
    words = [list(rng.choice(vocabulary, rng.integers(2, 8))) for _ in range(count)]
    tags = [["B-PER" if w == "Ada" else "I-PER" if i and s[i - 1] == "Ada" else "O" for i, w in enumerate(s)]
            for s in words]
    return words, tags


def word_accuracy(tagger, words, tags):
    predicted = tagger.predict_tags(words)
    return np.mean([p == t for ps, ts in zip(predicted, tags, strict=True) for p, t in zip(ps, ts, strict=True)])


@pytest.mark.parametrize("crf", [False, True])
def test_learns_a_tagging_task_from_words_and_tags_them_back(crf):
    """Each word's tag is a function of the word and its left neighbour: attention must carry it."""
    words, tags = toy_tagging_task()
    tagger = _tagger(crf=crf)
    tagger.compile(optimizer=training.bert_adamw(3e-3))
    tagger.fit(words, tags, epochs=25, batch_size=16, verbose=0)
    accuracy = word_accuracy(tagger, words[:32], tags[:32])
    assert accuracy > 0.95, accuracy
    assert tagger.evaluate(words[:32], tags[:32], return_dict=True, verbose=0)["accuracy"] > 0.95


def test_keras_file_round_trip_in_safe_mode_with_a_crf(tmp_path):
    tagger = _tagger(crf=True)
    tagger.compile()
    words = _sentences(5, count=3)[0]
    path = str(tmp_path / "tagger.keras")
    tagger.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    assert isinstance(loaded, TransformerTokenClassifier) and loaded.crf is not None
    np.testing.assert_array_equal(loaded.predict(words, verbose=0), tagger.predict(words, verbose=0))
    assert loaded.predict_tags(words) == tagger.predict_tags(words)
    config = tagger.get_config()
    assert TransformerTokenClassifier.from_config(config).get_config() == config
    assert loaded.get_compile_config()["loss"] is None  # the CRF's likelihood


def test_constructor_and_input_checks():
    with pytest.raises(ValueError, match="`vocabulary_size` is required"):
        TransformerTokenClassifier(num_tags=3)
    with pytest.raises(ValueError, match=r"`hidden_dim` \(10\) must be divisible by `num_heads` \(4\)"):
        TransformerTokenClassifier(20, 3, hidden_dim=10)
    with pytest.raises(ValueError, match="`num_tags` must be at least 2"):
        TransformerTokenClassifier(20, 1)
    with pytest.raises(ValueError, match="needs `tag_names`"):
        TransformerTokenClassifier(num_tags=5, preprocessor=_preprocessor())
    with pytest.raises(ValueError, match="tokenizer has 21 tokens but the model's vocabulary has only 10"):
        TransformerTokenClassifier(10, tag_names=TAGS, preprocessor=_preprocessor())
    with pytest.raises(ValueError, match="has a CRF, whose negative log-likelihood is its loss"):
        _tagger(crf=True).compile(loss="sparse_categorical_crossentropy")
    tagger = _tagger()
    inputs, _, _ = _inputs(3, count=2)
    bad = dict(inputs, word_positions=inputs["word_positions"] + 20)
    with pytest.raises(ValueError, match=r"`word_positions` must be in \[0, 12\)"):
        tagger(bad)
    with pytest.raises(TypeError, match="`word_positions` must be an integer tensor"):
        tagger(dict(inputs, word_positions=tf.cast(inputs["word_positions"], tf.float32)))
