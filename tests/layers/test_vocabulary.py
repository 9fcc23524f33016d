"""`tied_logits`: the tied vocabulary product and its hand-ordered gradient."""

import numpy as np
import pytest
import tensorflow as tf

from tfnlp.layers import _vocabulary


@pytest.mark.parametrize("dtype, rtol", [("float32", 1e-5), ("bfloat16", 2e-2)])
def test_value_and_gradients_equal_float64_products(dtype, rtol):
    rng = np.random.default_rng(0)
    hidden, embeddings = rng.normal(size=(6, 5)), rng.normal(size=(13, 5))
    upstream = rng.normal(size=(6, 13))
    h, e = tf.constant(hidden, dtype), tf.Variable(tf.constant(embeddings, dtype))
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(h)
        logits = _vocabulary.tied_logits(h, e)
    d_hidden, d_embeddings = tape.gradient(logits, [h, e], output_gradients=tf.constant(upstream, dtype))
    assert logits.dtype == d_hidden.dtype == d_embeddings.dtype == tf.as_dtype(dtype)
    np.testing.assert_allclose(logits.numpy().astype("float64"), hidden @ embeddings.T, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(d_hidden.numpy().astype("float64"), upstream @ embeddings, rtol=rtol,
                               atol=rtol)
    np.testing.assert_allclose(d_embeddings.numpy().astype("float64"), upstream.T @ hidden, rtol=rtol,
                               atol=rtol)


def test_gradients_equal_tensorflows_matmul_gradients_at_bert_tiny_size():
    rng = np.random.default_rng(1)
    h = tf.constant(rng.normal(size=(64, 128)), tf.float32)
    e = tf.Variable(rng.normal(size=(3000, 128)) * 0.02, dtype=tf.float32)
    upstream = tf.constant(rng.normal(size=(64, 3000)), tf.float32)
    grads = []
    for product in (_vocabulary.tied_logits, lambda x, y: tf.matmul(x, y, transpose_b=True)):
        with tf.GradientTape() as tape:
            tape.watch(h)
            logits = product(h, e)
        grads.append(tape.gradient(logits, [h, e], output_gradients=upstream))
    for ours, stock in zip(*grads, strict=True):
        np.testing.assert_allclose(ours, stock, rtol=1e-5, atol=1e-5)
