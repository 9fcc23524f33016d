"""TPU readiness without a TPU: XLA-compiled training steps and static int32 pipelines."""

import numpy as np
import pytest
import tensorflow as tf

from tests import families
from tfnlp import data, datasets, models, training

WORDS = [f"w{i}" for i in range(30)]


@pytest.mark.parametrize("family", families.FAMILIES)
def test_every_training_step_compiles_with_xla(family):
    """The whole step (forward, loss, gradients, optimizer) as one XLA program.

    XLA refuses Python callbacks, string ops and dynamic shapes, so this is
    what a TPU needs of the step.
    """
    model = families.model(family, jit_compile=True)
    assert model.jit_compile
    history = training.fit(model, families.batches(family), steps=2, verbose=0)
    assert history["steps"] == 2 and np.all(np.isfinite(history["loss"]))


def _tokenizer():
    return data.WordPieceTokenizer(list(data.SPECIAL_TOKENS) + WORDS)


def _texts(count, seed):
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=rng.integers(3, 9))) for _ in range(count)]


def _documents():
    return tf.data.Dataset.from_tensor_slices([_texts(6, i) for i in range(16)])


def _pairs():
    return tf.data.Dataset.from_tensor_slices((_texts(64, 1), _texts(64, 2)))


# Builders, so that collection and each test build only what they use (every
# pipeline takes a second or more to build).
PIPELINES = {
    "bert_pretraining_dataset": lambda: data.bert_pretraining_dataset(
        _documents(), _tokenizer(), sequence_length=16, max_predictions_per_seq=4, batch_size=4,
        shuffle_buffer=8,
    ).map(models.pretraining_batch),
    "classification_dataset": lambda: data.classification_dataset(
        tf.data.Dataset.from_tensor_slices((_texts(64, 3), np.arange(64) % 2)),
        data.BertPreprocessor(_tokenizer(), 16), batch_size=4,
    ),
    "encoder_decoder_dataset": lambda: data.encoder_decoder_dataset(
        _pairs(), _tokenizer(), _tokenizer(), 12, 12, batch_size=4
    ).map(models.seq2seq_batch),
    "unilm_pretraining_dataset": lambda: data.unilm_pretraining_dataset(
        _documents(), _tokenizer(), sequence_length=16, max_predictions_per_seq=4, batch_size=6,
        shuffle_buffer=8,
    ).map(models.unilm_batch),
    "unilm_finetuning_dataset": lambda: data.unilm_finetuning_dataset(
        _pairs(), _tokenizer(), 24, batch_size=4
    ).map(models.unilm_batch),
    "elmo_dataset": lambda: data.elmo_dataset(
        tf.data.Dataset.from_tensor_slices(_texts(64, 5)),
        data.build_word_vocabulary(_texts(64, 4), 20), sequence_length=10, batch_size=4,
    ).map(models.elmo_batch),
}


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_training_pipelines_are_static_and_numeric(name):
    dataset = PIPELINES[name]()
    for spec in tf.nest.flatten(dataset.element_spec):
        assert spec.shape.is_fully_defined(), (name, spec)
        assert spec.dtype in (tf.int32, tf.float32), (name, spec)
    batch = next(iter(dataset))  # and they produce what they promise
    for value, spec in zip(tf.nest.flatten(batch), tf.nest.flatten(dataset.element_spec), strict=True):
        assert tuple(value.shape) == tuple(spec.shape)


def test_the_bundled_reviews_pipeline_is_static_too():
    tokenizer = _tokenizer()
    dataset = data.classification_dataset(
        datasets.load_fine_food_reviews("train").take(16), data.BertPreprocessor(tokenizer, 32),
        batch_size=4,
    )
    assert all(s.shape.is_fully_defined() for s in tf.nest.flatten(dataset.element_spec))
