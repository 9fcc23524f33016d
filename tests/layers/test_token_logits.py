import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.harness import run_layer_test
from tfnlp.layers import TokenLogits


@pytest.mark.parametrize("use_bias, weights", [(True, 2), (False, 1)])
def test_harness(use_bias, weights):
    run_layer_test(
        TokenLogits,
        {"vocabulary_size": 11, "use_bias": use_bias},
        {"inputs": np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32")},
        expected_output_shape=(2, 5, 11),
        expected_num_trainable_weights=weights,
        run_mixed_precision=False,  # float32 logits by design: see the test below
    )


def test_tied_logits_are_the_embedding_product():
    embedding = keras.layers.Embedding(9, 4)
    embedding.build((None,))
    layer = TokenLogits(9, token_embedding=embedding)
    hidden = tf.random.normal((2, 3, 4))
    layer.build(hidden.shape)
    layer.bias.assign(tf.range(9, dtype=tf.float32))
    expected = np.einsum("bth,vh->btv", hidden, embedding.embeddings) + np.arange(9)
    np.testing.assert_allclose(layer(hidden), expected, atol=1e-5)
    # The matrix is the embedding's own variable (shared, not copied).
    assert {id(w) for w in layer.trainable_weights} == {id(layer.bias), id(embedding.embeddings)}


def test_float32_logits_under_mixed_precision():
    layer = TokenLogits(7, dtype="mixed_bfloat16")
    assert layer(tf.ones((1, 2, 4), tf.bfloat16)).dtype == tf.float32


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"vocabulary_size": 0}, "vocabulary_size"),
        ({"vocabulary_size": 5, "token_embedding": "embedding"}, "token_embedding"),
        ({"vocabulary_size": 5, "token_embedding": keras.layers.Embedding(6, 4)}, "6 rows"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TokenLogits(**kwargs)


def test_tied_width_mismatch():
    embedding = keras.layers.Embedding(5, 4)
    embedding.build((None,))
    with pytest.raises(ValueError, match="width 4"):
        TokenLogits(5, token_embedding=embedding)(tf.ones((1, 2, 3)))
