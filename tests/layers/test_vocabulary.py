"""`tied_logits`: the tied vocabulary product and its hand-ordered gradient."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfnlp.layers import MaskedLMHead, _vocabulary


def _value_and_gradients(hidden, variable, upstream, dtype):
    h = tf.cast(hidden, dtype)
    with tf.GradientTape() as tape:
        tape.watch(h)
        logits = _vocabulary.tied_logits(h, tf.cast(variable, dtype))  # as the layers call it
    d_hidden, d_variable = tape.gradient(
        logits, [h, variable], output_gradients=tf.cast(upstream, dtype)
    )
    return logits, d_hidden, d_variable


@pytest.mark.parametrize("graph", [False, True])
@pytest.mark.parametrize("dtype, tolerance", [("float32", 1e-5), ("bfloat16", 2e-2)])
def test_value_and_gradients_equal_float64_products(dtype, tolerance, graph):
    rng = np.random.default_rng(0)
    hidden, embeddings = rng.normal(size=(6, 5)), rng.normal(size=(13, 5))
    upstream = rng.normal(size=(6, 13))
    variable = tf.Variable(embeddings, dtype=tf.float32)  # float32 master weights
    run = tf.function(_value_and_gradients) if graph else _value_and_gradients
    logits, d_hidden, d_variable = run(hidden, variable, upstream, dtype)
    assert logits.dtype == d_hidden.dtype == tf.as_dtype(dtype) and d_variable.dtype == tf.float32
    expected = (hidden @ embeddings.T, upstream @ embeddings, upstream.T @ hidden)
    for got, want in zip((logits, d_hidden, d_variable), expected, strict=True):
        np.testing.assert_allclose(tf.cast(got, tf.float64), want, rtol=tolerance, atol=tolerance)


def test_tied_head_gradients_equal_tensorflows_matmul_gradients_at_bert_tiny_width():
    rng = np.random.default_rng(1)
    embedding = keras.layers.Embedding(3000, 128)
    embedding.build((None,))
    head = MaskedLMHead(3000, token_embedding=embedding)
    sequence = tf.constant(rng.normal(size=(4, 16, 128)), tf.float32)
    positions = tf.constant(rng.integers(0, 16, (4, 5)), tf.int32)
    upstream = tf.constant(rng.normal(size=(4, 5, 3000)), tf.float32)
    grads = []
    for product in (_vocabulary.tied_logits, lambda h, e: tf.matmul(h, e, transpose_b=True)):
        original, _vocabulary.tied_logits = _vocabulary.tied_logits, product
        try:
            with tf.GradientTape() as tape:
                tape.watch(sequence)
                logits = head(sequence, masked_positions=positions)
            grads.append(tape.gradient(logits, [sequence, embedding.embeddings, head.output_bias],
                                       output_gradients=upstream))
        finally:
            _vocabulary.tied_logits = original
    for ours, stock in zip(*grads, strict=True):
        np.testing.assert_allclose(ours, stock, rtol=1e-5, atol=1e-5)
