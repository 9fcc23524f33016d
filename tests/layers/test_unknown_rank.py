"""Tensors whose rank is known only when the graph runs (`tf.TensorSpec(None)`)."""

import numpy as np
import pytest
import tensorflow as tf

from tests.harness import assert_allclose
from tfnlp.layers import (
    Highway,
    MultiHeadAttention,
    PositionEmbedding,
    SinusoidalPositionEncoding,
    TransformerBlock,
)

X = np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32")


@pytest.mark.parametrize(
    "make",
    [SinusoidalPositionEncoding, lambda: PositionEmbedding(sequence_length=10), Highway],
    ids=["sinusoidal", "position_embedding", "highway"],
)
def test_layers_without_rank_needs_accept_unknown_ranks(make):
    layer = make()
    expected = layer(X)
    traced = tf.function(layer, input_signature=[tf.TensorSpec(None)])
    assert_allclose(traced(X), expected, atol=1e-6)


def test_layers_that_need_the_rank_name_the_argument():
    attention = MultiHeadAttention(num_heads=2, key_dim=4)
    attention(X, X)
    traced = tf.function(lambda q: attention(q, X), input_signature=[tf.TensorSpec(None)])
    with pytest.raises(ValueError, match="`query` must have shape .* unknown rank"):
        traced.get_concrete_function()
    block = TransformerBlock(num_heads=2, intermediate_dim=16)
    block(X)
    traced = tf.function(block, input_signature=[tf.TensorSpec(None)])
    with pytest.raises(ValueError, match="`inputs` must have shape .* unknown rank"):
        traced.get_concrete_function()
