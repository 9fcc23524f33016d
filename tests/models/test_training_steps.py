"""Training and evaluation on a dataset of unknown length count only the batches it has.

Keras 3.15 finds the end of such a dataset by running one more step; without
`Task`'s steps that wait for their batch, that step advanced the optimizer and
the loss and metric counts (see `tfnlp/models/task.py`).
"""

import inspect

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfnlp import models
from tfnlp.models.task import Task

RNG = np.random.default_rng(0)
BATCHES, BATCH = 5, 2


def _pretraining_batches():
    n, length = BATCHES * BATCH, 10
    x = {
        "token_ids": RNG.integers(5, 300, (n, length)).astype("int32"),
        "segment_ids": np.repeat([[0] * 5 + [1] * 5], n, axis=0).astype("int32"),
        "padding_mask": np.ones((n, length), "int32"),
        "masked_positions": RNG.integers(1, length, (n, 2)).astype("int32"),
    }
    y = {"mlm": RNG.integers(5, 300, (n, 2)).astype("int32"), "nsp": RNG.integers(0, 2, n).astype("int32")}
    weights = {"mlm": RNG.integers(0, 2, (n, 2)).astype("float32"), "nsp": np.ones(n, "float32")}
    # Static batch shapes (drop_remainder), as every tfnlp pipeline has.
    return tf.data.Dataset.from_tensor_slices((x, y, weights)).batch(BATCH, drop_remainder=True)


def _unknown_length(dataset):
    unknown = dataset.filter(lambda *_: True)
    assert int(unknown.cardinality()) == tf.data.UNKNOWN_CARDINALITY
    return unknown


def _pretrainer(**compile_kwargs):
    backbone = models.BertBackbone.from_architecture("bert_tiny", vocabulary_size=300, max_sequence_length=16)
    model = models.BertPretrainer(backbone)
    model.compile(**compile_kwargs)
    return model


@pytest.fixture
def pretrainer():
    return _pretrainer()


# Under XLA the step is one op that waits for its batch (the mixin steps aside).
@pytest.mark.parametrize("jit_compile", [False, True])
def test_fit_on_data_of_unknown_length_takes_one_optimizer_step_per_batch(jit_compile):
    pretrainer = _pretrainer(jit_compile=jit_compile)
    pretrainer.fit(_unknown_length(_pretraining_batches()), epochs=2, verbose=0, shuffle=False)
    assert int(pretrainer.optimizer.iterations.numpy()) == 2 * BATCHES


def test_evaluate_on_data_of_unknown_length_averages_over_the_real_batches(pretrainer):
    known = _pretraining_batches()
    per_batch = [pretrainer.test_on_batch(x, y, w, return_dict=True) for x, y, w in known]
    expected = {name: np.mean([logs[name] for logs in per_batch]) for name in per_batch[0]}
    assert {"loss", "mlm_loss", "nsp_loss", "nsp_accuracy"} <= set(expected)
    for dataset in (known, _unknown_length(known)):
        logs = pretrainer.evaluate(dataset, verbose=0, return_dict=True)
        for name in ("loss", "mlm_loss", "nsp_loss", "nsp_accuracy"):
            # Equal batches: the mean over examples is the mean of the batch means.
            np.testing.assert_allclose(logs[name], expected[name], rtol=1e-5, err_msg=name)


def test_training_history_on_data_of_unknown_length_matches_known_length():
    known, histories = _pretraining_batches(), []
    for dataset in (known, _unknown_length(known)):
        keras.utils.set_random_seed(1)
        backbone = models.BertBackbone.from_architecture(
            "bert_tiny", vocabulary_size=300, max_sequence_length=16, dropout=0.0
        )
        model = models.BertPretrainer(backbone)
        model.compile(optimizer=keras.optimizers.SGD(0.0))  # frozen: every epoch sees the same losses
        histories.append(model.fit(dataset, epochs=2, verbose=0, shuffle=False).history)
    for name in ("loss", "mlm_loss", "nsp_loss", "nsp_accuracy"):
        np.testing.assert_allclose(histories[1][name], histories[0][name], rtol=1e-5, err_msg=name)


def test_every_trainable_model_waits_for_its_batch():
    trainable = [
        cls for cls in vars(models).values()
        if inspect.isclass(cls) and issubclass(cls, keras.Model) and not issubclass(cls, models.Backbone)
    ]
    assert len(trainable) >= 6
    for cls in trainable:
        assert issubclass(cls, Task), cls.__name__
        for method in ("train_step", "test_step", "make_train_function", "compile_from_config"):
            # Task's, not overridden by something between it and Keras.
            assert getattr(cls, method) is getattr(Task, method), (cls.__name__, method)


def test_the_class_chain_behind_a_task_is_at_most_four_tfnlp_classes():
    """keras-hub's BertTextClassifier.fit runs through 4 classes; BertClassifier's did through 8."""
    for cls in (models.BertClassifier, models.BertPretrainer, models.UniLM, models.TransformerClassifier,
                models.TransformerSeq2Seq, models.ELMoEmbedder, models.BertTokenClassifier,
                models.TransformerTokenClassifier, models.BiLSTMTokenClassifier):
        # tfnlp's classes (Keras injects its Functional into a built model's bases).
        chain = [c for c in cls.__mro__ if c.__module__.startswith("tfnlp.")]
        assert len(chain) <= 4, [c.__name__ for c in chain]


def test_the_optimizer_is_built_before_the_training_step_is_traced():
    # Built inside the first trace (Keras' way without a strategy), Adam's
    # slots each got an initializer `tf.cond` and the step was traced twice.
    pretrainer = _pretrainer()
    traced_with = []
    build = pretrainer.optimizer.build
    pretrainer.optimizer.build = lambda variables: (traced_with.append(tf.executing_eagerly()), build(variables))
    pretrainer.fit(_pretraining_batches().take(1), epochs=1, verbose=0)
    assert traced_with == [True]  # built once, outside any function
    assert len(pretrainer.optimizer.variables) > 2 * len(pretrainer.trainable_variables)
