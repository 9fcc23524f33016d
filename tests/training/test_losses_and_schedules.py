import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfnlp.training import InverseSquareRootDecay
from tfnlp.training import SmoothedSparseCategoricalCrossentropy

LOGITS = tf.random.stateless_normal((3, 4, 9), seed=(1, 2)) * 3.0
LABELS = tf.constant([[0, 4, 8, 2], [1, 1, 3, 5], [7, 6, 0, 0]])


def test_without_smoothing_equals_keras_sparse_cross_entropy():
    ours = SmoothedSparseCategoricalCrossentropy(reduction="sum_over_batch_size")
    keras_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    np.testing.assert_allclose(ours(LABELS, LOGITS), keras_loss(LABELS, LOGITS), rtol=1e-6)


@pytest.mark.parametrize("epsilon", [0.1, 0.3])
def test_smoothing_equals_keras_dense_label_smoothing(epsilon):
    ours = SmoothedSparseCategoricalCrossentropy(epsilon, reduction="sum_over_batch_size")
    dense = keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=epsilon)
    np.testing.assert_allclose(ours(LABELS, LOGITS), dense(tf.one_hot(LABELS, 9), LOGITS),
                               rtol=1e-5)


def test_mean_over_the_weighted_positions_only():
    weights = tf.constant([[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1]], tf.float32)
    loss = SmoothedSparseCategoricalCrossentropy(0.1)
    per_position = SmoothedSparseCategoricalCrossentropy(0.1, reduction="none")(LABELS, LOGITS)
    expected = np.sum(per_position * weights) / np.sum(weights)
    np.testing.assert_allclose(loss(LABELS, LOGITS, sample_weight=weights), expected, rtol=1e-6)


def test_bfloat16_logits_give_a_float32_loss():
    loss = SmoothedSparseCategoricalCrossentropy(0.1)(LABELS, tf.cast(LOGITS, tf.bfloat16) * 100)
    assert loss.dtype == tf.float32 and np.isfinite(loss)


def test_serialization():
    loss = SmoothedSparseCategoricalCrossentropy(0.2, name="smooth")
    restored = keras.saving.deserialize_keras_object(
        json.loads(json.dumps(keras.saving.serialize_keras_object(loss)))
    )
    assert restored.get_config() == loss.get_config()


def test_bad_smoothing():
    with pytest.raises(ValueError, match="label_smoothing"):
        SmoothedSparseCategoricalCrossentropy(1.0)


def test_inverse_square_root_matches_the_paper_formula():
    d_model, warmup = 512, 4000
    schedule = InverseSquareRootDecay((d_model * warmup) ** -0.5, warmup)
    for step in (1, 100, 3999, 4000, 4001, 10_000, 100_000):
        paper = d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)
        np.testing.assert_allclose(float(schedule(step)), paper, rtol=1e-5)
    restored = InverseSquareRootDecay.from_config(schedule.get_config())
    assert restored.get_config() == schedule.get_config()
    with pytest.raises(ValueError, match="warmup_steps"):
        InverseSquareRootDecay(1e-3, 0)
