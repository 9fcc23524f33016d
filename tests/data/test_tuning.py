"""Every tfnlp pipeline is statically tuned; turning the autotuner back on changes no element."""

import inspect

import numpy as np
import pytest
import tensorflow as tf

from tfnlp import data, datasets

AUTOTUNED = tf.data.Options()
AUTOTUNED.autotune.enabled = True


@pytest.fixture(scope="module")
def tokenizer(corpus_vocabulary):
    return data.WordPieceTokenizer(corpus_vocabulary)


@pytest.fixture(scope="module")
def builders(tokenizer, tmp_path_factory):
    """Every public function of `tfnlp.data` that returns a pipeline, on small inputs."""
    documents = datasets.load_documents("en_novels", "validation").take(4)
    pairs = datasets.load_text_pairs("bible_en_es", "validation").take(40)
    reviews = datasets.load_fine_food_reviews("validation").take(80)
    preprocessor = data.BertPreprocessor(tokenizer, 32)
    words = data.build_word_vocabulary(
        [s for d in datasets.read_documents("en_novels", "validation")[:4] for s in d], max_size=500
    )
    prefix = str(tmp_path_factory.mktemp("tuning") / "numbers")
    data.write_tfrecords(tf.data.Dataset.range(6).map(lambda i: {"x": tf.cast(i, tf.int32)}), prefix, 2)
    return {
        "next_sentence_pairs": lambda: data.next_sentence_pairs(
            documents, tokenizer, 14, seed=1, shuffle_buffer=50),
        "bert_pretraining_dataset": lambda: data.bert_pretraining_dataset(
            documents, tokenizer, 32, max_predictions_per_seq=4, batch_size=4, seed=1,
            shuffle_buffer=50),
        "classification_dataset": lambda: data.classification_dataset(
            reviews, preprocessor, batch_size=8, shuffle_buffer=20, seed=2),
        "classification_dataset, bucketed": lambda: data.classification_dataset(
            reviews, preprocessor, batch_size=8, bucket_boundaries=[16]),
        "unilm_seq2seq_dataset": lambda: data.unilm_seq2seq_dataset(pairs, tokenizer, 32, batch_size=4),
        "encoder_decoder_dataset": lambda: data.encoder_decoder_dataset(
            pairs, tokenizer, tokenizer, 24, 20, batch_size=4),
        "unilm_pretraining_dataset": lambda: data.unilm_pretraining_dataset(
            documents, tokenizer, 32, max_predictions_per_seq=4, batch_size=6, seed=3,
            shuffle_buffer=50),
        "unilm_finetuning_dataset": lambda: data.unilm_finetuning_dataset(
            pairs, tokenizer, 32, batch_size=4, seed=4),
        "unilm_pseudo_masked_dataset": lambda: data.unilm_pseudo_masked_dataset(
            pairs, tokenizer, 32, batch_size=4, shuffle_buffer=8, seed=7),
        "left_to_right_lm_dataset": lambda: data.left_to_right_lm_dataset(
            documents, tokenizer, 32, batch_size=4, seed=6, shuffle_buffer=50),
        "elmo_dataset": lambda: data.elmo_dataset(
            documents, words, sequence_length=12, max_characters=10, batch_size=4, shuffle_buffer=30,
            seed=5),
        "read_tfrecords": lambda: data.read_tfrecords(prefix),
    }


NAMES = ["next_sentence_pairs", "bert_pretraining_dataset", "classification_dataset",
         "classification_dataset, bucketed", "unilm_seq2seq_dataset", "encoder_decoder_dataset",
         "unilm_pretraining_dataset", "unilm_finetuning_dataset", "unilm_pseudo_masked_dataset",
         "left_to_right_lm_dataset",
         "elmo_dataset", "read_tfrecords"]
# Public functions of tfnlp.data that return no pipeline (or, static_tuning, take one).
NOT_PIPELINES = {"build_word_vocabulary", "character_ids", "count_words", "learn_wordpiece_vocabulary",
                 "unknown_rate",
                 "load_vocabulary", "objective_counts", "save_vocabulary", "sentence_tokens",
                 "split_words", "static_tuning", "write_tfrecords", "read_labelled", "read_texts",
                 "suggest_sequence_length", "cooccurrence_counts", "learn_token_embeddings",
                 "read_conll", "read_conllu", "entity_chunks", "entity_type_names", "is_entity_tag_set",
                 "build_tagger_vocabulary"}


@pytest.mark.parametrize("name", NAMES)
def test_pipelines_turn_autotuning_off(name, builders):
    # Fails for any builder whose returned dataset skips static_tuning.
    assert builders[name]().options().autotune.enabled is False


@pytest.mark.parametrize("name", ["bert_pretraining_dataset", "classification_dataset, bucketed",
                                  "unilm_finetuning_dataset", "left_to_right_lm_dataset",
                                  "elmo_dataset"])
def test_turning_autotuning_back_on_changes_no_element(name, builders):
    autotuned = builders[name]().with_options(AUTOTUNED)  # what the docs tell users to do
    assert autotuned.options().autotune.enabled is True
    expected = list(builders[name]().take(3).as_numpy_iterator())
    actual = list(autotuned.take(3).as_numpy_iterator())
    assert len(expected) == len(actual) == 3
    tf.nest.map_structure(np.testing.assert_array_equal, expected, actual)


def test_every_public_pipeline_function_is_checked(builders):
    functions = {name for name in data.__all__ if inspect.isfunction(getattr(data, name))}
    assert functions - NOT_PIPELINES == {name.split(",")[0] for name in builders}
    assert set(NAMES) == set(builders)


def test_static_tuning_keeps_elements_and_refuses_other_types():
    dataset = tf.data.Dataset.range(5).map(lambda x: x + 1, num_parallel_calls=tf.data.AUTOTUNE)
    tuned = data.static_tuning(dataset)
    assert tuned.options().autotune.enabled is False
    assert list(tuned.as_numpy_iterator()) == [1, 2, 3, 4, 5]
    assert dataset.options().autotune.enabled is None  # the input is not changed
    with pytest.raises(TypeError, match="`dataset` must be a tf.data.Dataset, got list"):
        data.static_tuning([1, 2])
