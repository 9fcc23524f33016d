"""Text-to-text models that carry their tokenizers: texts in == token ids in, texts out."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfnlp import data, models

WORDS = ["hello", "world", "hola", "mundo", "good", "morning", "buenos", "dias", "the", "cat"]
SOURCES = ["hello world", "good morning the cat", "", "hola mundo buenos dias " * 4]
TARGETS = ["hola mundo", "buenos dias", "", "hello"]
SOURCE_LENGTH, TARGET_LENGTH = 8, 6


def tokenizers():
    source = data.WordPieceTokenizer(list(data.SPECIAL_TOKENS) + WORDS)
    target = data.WordPieceTokenizer(list(data.SPECIAL_TOKENS) + WORDS[2:], lower_case=False)
    return source, target


def make(family, with_tokenizers=True):
    keras.utils.set_random_seed(7)
    source, target = tokenizers()
    if family == "transformer":
        text = {"source_tokenizer": source, "target_tokenizer": target,
                "source_length": SOURCE_LENGTH, "target_length": TARGET_LENGTH}
        return models.TransformerSeq2Seq(
            source.vocabulary_size(), target.vocabulary_size(), num_encoder_layers=1,
            num_decoder_layers=1, hidden_dim=16, num_heads=2, dropout=0.0,
            **(text if with_tokenizers else {}),
        )
    backbone = models.UniLMBackbone(source.vocabulary_size(), 1, 2, 16, intermediate_dim=32,
                                    dropout=0.0, max_sequence_length=SOURCE_LENGTH + TARGET_LENGTH)
    text = {"tokenizer": source, "source_length": SOURCE_LENGTH, "max_length": TARGET_LENGTH}
    return models.UniLM(backbone, **(text if with_tokenizers else {}))


def generated_from_ids(model, sources, **settings):
    """The token-id path, tokenized by the training pipelines (not by `generate`)."""
    if isinstance(model, models.UniLM):
        tokenizer = model.tokenizer
        packed = data.BertPreprocessor(tokenizer, SOURCE_LENGTH)(tf.constant(sources))
        output = model.generate(packed["token_ids"], packed["padding_mask"],
                                end_id=tokenizer.sep_id, mask_id=tokenizer.mask_id,
                                max_length=TARGET_LENGTH, **settings)
    else:
        tokenizer = model.target_tokenizer
        batch = next(iter(data.encoder_decoder_dataset(
            tf.data.Dataset.from_tensor_slices((sources, sources)), model.source_tokenizer,
            tokenizer, SOURCE_LENGTH, 2, batch_size=len(sources), drop_remainder=False)))
        output = model.generate(batch["encoder_token_ids"], batch["encoder_padding_mask"],
                                start_id=tokenizer.cls_id, end_id=tokenizer.sep_id,
                                max_length=TARGET_LENGTH, **settings)
    return [t.decode() for t in tokenizer.detokenize(output["token_ids"]).numpy()]


FAMILIES = ["transformer", "unilm"]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("settings", [{}, {"beam_size": 2, "length_penalty": 0.6}])
def test_generate_on_texts_equals_generate_on_token_ids(family, settings):
    model = make(family)
    texts = model.generate(SOURCES, **settings)
    assert isinstance(texts, list) and all(isinstance(t, str) for t in texts)
    assert texts == generated_from_ids(model, SOURCES, **settings)
    assert model.generate(np.array(SOURCES), **settings) == texts
    assert model.generate(tf.constant(SOURCES), **settings) == texts
    assert model.generate([], **settings) == []


def ids_dataset(model, sources, targets):
    pairs = tf.data.Dataset.from_tensor_slices((sources, targets))
    if isinstance(model, models.UniLM):
        return data.unilm_finetuning_dataset(
            pairs, model.tokenizer, SOURCE_LENGTH + TARGET_LENGTH, batch_size=2,
            drop_remainder=False).map(models.unilm_batch)
    return data.encoder_decoder_dataset(
        pairs, model.source_tokenizer, model.target_tokenizer, SOURCE_LENGTH, TARGET_LENGTH,
        batch_size=2, drop_remainder=False).map(models.seq2seq_batch)


@pytest.mark.parametrize("family", FAMILIES)
def test_fit_and_evaluate_on_texts_equal_the_token_id_pipeline(family):
    model = make(family)
    model.compile()
    expected = model.evaluate(ids_dataset(model, SOURCES, TARGETS), verbose=0, return_dict=True)
    on_lists = model.evaluate(SOURCES, TARGETS, batch_size=2, verbose=0, return_dict=True)
    pairs = tf.data.Dataset.from_tensor_slices((SOURCES, TARGETS))
    on_batches = model.evaluate(pairs.batch(3), batch_size=2, verbose=0, return_dict=True)
    for result in (on_lists, on_batches):
        for name, value in expected.items():
            np.testing.assert_allclose(result[name], value, rtol=1e-5)
    history = model.fit(SOURCES, TARGETS, batch_size=2, epochs=2, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))
    model.fit(pairs, batch_size=2, verbose=0, validation_data=(SOURCES, TARGETS))


@pytest.mark.parametrize("family", FAMILIES)
def test_keras_file_keeps_the_tokenizers_and_the_generated_texts(family, tmp_path):
    model = make(family)
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    config, loaded_config = model.get_config(), loaded.get_config()
    for name in ("source_tokenizer", "target_tokenizer", "tokenizer", "source_length",
                 "target_length", "max_length"):
        assert loaded_config.get(name) == config.get(name)
    if family == "transformer":
        assert not loaded.target_tokenizer.lower_case
        assert loaded.target_tokenizer.get_vocabulary() == model.target_tokenizer.get_vocabulary()
    assert loaded.generate(SOURCES, beam_size=2) == model.generate(SOURCES, beam_size=2)


def test_a_shared_tokenizer_is_saved_once_and_stays_shared(tmp_path):
    source, _ = tokenizers()
    model = models.TransformerSeq2Seq(source.vocabulary_size(), num_encoder_layers=1,
                                      num_decoder_layers=1, hidden_dim=8, num_heads=2,
                                      source_tokenizer=source)
    assert model.target_tokenizer is source
    assert model.get_config()["target_tokenizer"] is None
    assert (model.source_length, model.target_length) == (128, 128)
    model.save(tmp_path / "shared.keras")
    loaded = keras.saving.load_model(tmp_path / "shared.keras")
    assert loaded.target_tokenizer is loaded.source_tokenizer


@pytest.mark.parametrize("family", FAMILIES)
def test_texts_without_tokenizers_or_in_the_wrong_form_are_refused(family):
    bare, model = make(family, with_tokenizers=False), make(family)
    name = "source_tokenizer" if family == "transformer" else "tokenizer"
    with pytest.raises(ValueError, match=f"no tokenizer.*`{name}=tfnlp.data.WordPieceTokenizer"):
        bare.generate(["hello"])
    bare.compile()
    with pytest.raises(ValueError, match=f"`{name}="):
        bare.fit(SOURCES, TARGETS, verbose=0)
    with pytest.raises(TypeError, match="needs `"):
        bare.generate(tf.constant([[5, 6, 3]]))
    with pytest.raises(ValueError, match="single text"):
        model.generate("hello world")
    model.compile()
    with pytest.raises(ValueError, match="`y` \\(the target texts\\) is required"):
        model.fit(SOURCES, verbose=0)
    with pytest.raises(ValueError, match="4 source texts but `y` has 1"):
        model.evaluate(SOURCES, ["x"], verbose=0)
    with pytest.raises(ValueError, match="generate\\(texts\\)"):
        model.predict(SOURCES, verbose=0)
    with pytest.raises(ValueError, match="padding_mask` is for token ids"):
        model.generate(SOURCES, tf.ones((4, 3), tf.int32))
    with pytest.raises(ValueError, match="`\\(source, target\\)` pairs"):
        model.fit(tf.data.Dataset.from_tensor_slices(SOURCES), verbose=0)


def test_tokenizers_and_lengths_must_fit_the_model():
    source, target = tokenizers()
    tiny = {"num_encoder_layers": 1, "num_decoder_layers": 1, "hidden_dim": 8, "num_heads": 2}
    with pytest.raises(ValueError, match="`source_tokenizer` has 15 tokens .* has 16"):
        models.TransformerSeq2Seq(16, source_tokenizer=source, **tiny)
    with pytest.raises(ValueError, match="`target_tokenizer` has 13 tokens"):
        models.TransformerSeq2Seq(15, 14, source_tokenizer=source, target_tokenizer=target, **tiny)
    with pytest.raises(ValueError, match="`source_tokenizer` must be a tfnlp.data.WordPiece"):
        models.TransformerSeq2Seq(15, source_tokenizer="vocab.txt", **tiny)
    with pytest.raises(ValueError, match="`source_length` must leave room"):
        models.TransformerSeq2Seq(15, source_tokenizer=source, source_length=1, **tiny)
    with pytest.raises(ValueError, match="`target_length` must be a positive integer"):
        models.TransformerSeq2Seq(15, source_tokenizer=source, target_length=0, **tiny)
    backbone = models.UniLMBackbone(15, 1, 2, 8, max_sequence_length=12)
    assert (models.UniLM(backbone, tokenizer=source).source_length,
            models.UniLM(backbone, tokenizer=source).max_length) == (6, 6)
    with pytest.raises(ValueError, match="`tokenizer` has 13 tokens"):
        models.UniLM(backbone, tokenizer=target)
    with pytest.raises(ValueError, match=r"exceeds the UniLM position table \(`max_sequence"):
        models.UniLM(backbone, tokenizer=source, source_length=8, max_length=5)
