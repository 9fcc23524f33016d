"""Every tfnlp pipeline is statically tuned, and that changes no element."""

import numpy as np
import pytest
import tensorflow as tf

from tfnlp import data, datasets

AUTOTUNED = tf.data.Options()
AUTOTUNED.autotune.enabled = True


@pytest.fixture(scope="module")
def tokenizer(corpus_vocabulary):
    return data.WordPieceTokenizer(corpus_vocabulary)


def _builders(tokenizer, tmp_path):
    documents = datasets.load_documents("en_novels", "validation").take(4)
    pairs = datasets.load_text_pairs("bible_en_es", "validation").take(40)
    reviews = datasets.load_fine_food_reviews("validation").take(80)
    preprocessor = data.BertPreprocessor(tokenizer, 32)
    words = data.build_word_vocabulary(
        [s for d in datasets.read_documents("en_novels", "validation")[:4] for s in d], max_size=500
    )
    prefix = str(tmp_path / "numbers")
    data.write_tfrecords(tf.data.Dataset.range(6).map(lambda i: {"x": tf.cast(i, tf.int32)}), prefix, 2)
    return {
        "bert_pretraining": lambda: data.bert_pretraining_dataset(
            documents, tokenizer, 32, max_predictions_per_seq=4, batch_size=4, seed=1,
            shuffle_buffer=50),
        "classification": lambda: data.classification_dataset(
            reviews, preprocessor, batch_size=8, shuffle_buffer=20, seed=2),
        "classification_bucketed": lambda: data.classification_dataset(
            reviews, preprocessor, batch_size=8, bucket_boundaries=[16]),
        "unilm_seq2seq": lambda: data.unilm_seq2seq_dataset(pairs, tokenizer, 32, batch_size=4),
        "encoder_decoder": lambda: data.encoder_decoder_dataset(
            pairs, tokenizer, tokenizer, 24, 20, batch_size=4),
        "unilm_pretraining": lambda: data.unilm_pretraining_dataset(
            documents, tokenizer, 32, max_predictions_per_seq=4, batch_size=6, seed=3,
            shuffle_buffer=50),
        "unilm_finetuning": lambda: data.unilm_finetuning_dataset(
            pairs, tokenizer, 32, batch_size=4, seed=4),
        "elmo": lambda: data.elmo_dataset(
            documents, words, sequence_length=12, max_characters=10, batch_size=4, shuffle_buffer=30,
            seed=5),
        "read_tfrecords": lambda: data.read_tfrecords(prefix),
    }


NAMES = ["bert_pretraining", "classification", "classification_bucketed", "unilm_seq2seq",
         "encoder_decoder", "unilm_pretraining", "unilm_finetuning", "elmo", "read_tfrecords"]


@pytest.mark.parametrize("name", NAMES)
def test_pipelines_turn_autotuning_off_and_give_the_same_elements_with_it_on(name, tokenizer, tmp_path):
    build = _builders(tokenizer, tmp_path)[name]
    static = build()
    assert static.options().autotune.enabled is False
    autotuned = build().with_options(AUTOTUNED)  # what a user re-enabling it gets
    assert autotuned.options().autotune.enabled is True
    expected, actual = list(static.take(3).as_numpy_iterator()), list(autotuned.take(3).as_numpy_iterator())
    assert len(expected) == len(actual) > 0
    tf.nest.map_structure(np.testing.assert_array_equal, expected, actual)


def test_every_public_pipeline_builder_is_checked():
    builders = {name.removesuffix("_dataset") for name in data.__all__ if name.endswith("_dataset")}
    assert builders | {"read_tfrecords", "classification_bucketed"} == set(NAMES)


def test_static_tuning_keeps_elements_and_refuses_other_types():
    dataset = tf.data.Dataset.range(5).map(lambda x: x + 1, num_parallel_calls=tf.data.AUTOTUNE)
    tuned = data.static_tuning(dataset)
    assert tuned.options().autotune.enabled is False
    assert list(tuned.as_numpy_iterator()) == [1, 2, 3, 4, 5]
    assert dataset.options().autotune.enabled is None  # the input is not changed
    with pytest.raises(TypeError, match="`dataset` must be a tf.data.Dataset, got list"):
        data.static_tuning([1, 2])
