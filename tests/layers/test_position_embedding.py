import numpy as np
import pytest
import tensorflow as tf

from tests.harness import run_layer_test
from tfnlp.layers import PositionEmbedding


def test_harness():
    run_layer_test(
        PositionEmbedding,
        {"sequence_length": 10},
        {"inputs": np.random.default_rng(0).normal(size=(2, 6, 4)).astype("float32")},
        expected_output_shape=(2, 6, 4),
        expected_num_trainable_weights=1,
    )


def test_outputs_are_the_table_rows_and_start_index_selects_them():
    layer = PositionEmbedding(sequence_length=8)
    out = layer(tf.zeros((3, 5, 4))).numpy()
    table = layer.position_embeddings.numpy()
    np.testing.assert_array_equal(out, np.broadcast_to(table[:5], (3, 5, 4)))
    step = layer(tf.zeros((3, 1, 4)), start_index=6).numpy()
    np.testing.assert_array_equal(step, np.broadcast_to(table[6:7], (3, 1, 4)))
    graph_step = tf.function(lambda x, i: layer(x, start_index=i))
    np.testing.assert_array_equal(graph_step(tf.zeros((3, 2, 4)), tf.constant(6)), table[None, 6:8].repeat(3, 0))


def test_too_long_input_is_a_clear_error():
    layer = PositionEmbedding(sequence_length=4)
    with pytest.raises(ValueError, match="sequence_length"):
        layer(tf.zeros((1, 5, 3)))
    with pytest.raises(ValueError, match="start_index=3"):
        layer(tf.zeros((1, 2, 3)), start_index=3)
    dynamic = tf.function(layer, input_signature=[tf.TensorSpec((1, None, 3))])
    with pytest.raises(tf.errors.InvalidArgumentError, match="exceeds sequence_length=4"):
        dynamic(tf.zeros((1, 5, 3)))


@pytest.mark.parametrize("value", [0, -3, 2.5, None, True])
def test_bad_sequence_length(value):
    with pytest.raises(ValueError, match="sequence_length"):
        PositionEmbedding(sequence_length=value)


def test_rank_one_input_is_rejected():
    with pytest.raises(ValueError, match="inputs"):
        PositionEmbedding(sequence_length=4)(tf.zeros((4,)))
