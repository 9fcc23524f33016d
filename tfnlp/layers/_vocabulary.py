"""The product of hidden states with a tied `(vocabulary, hidden)` embedding matrix."""

import tensorflow as tf


def tied_logits(hidden, embeddings):
    """`hidden @ embeddingsᵀ`: `(N, H)` x `(V, H)` -> `(N, V)` logits.

    The forward product and the gradient of `hidden` (`upstream @
    embeddings`) are the ones TensorFlow's `matmul(..., transpose_b=True)`
    computes. The embedding's gradient `upstreamᵀ hidden` is computed as
    `transpose(hiddenᵀ upstream)`: an `(H, V)` product whose long side is
    the output's columns, then one transpose: faster with oneDNN at
    BERT-tiny's width, the same at `H = 512` (benchmarks/README.md, "BERT
    pretraining", item 9). The
    values are the same products summed in another order.

    Args:
        hidden: float tensor `(N, H)`.
        embeddings: tensor or variable `(V, H)` of the same dtype; a
            variable is read once, here.

    Returns:
        `(N, V)` logits in the inputs' dtype.
    """
    return _tied_logits(tf.convert_to_tensor(hidden), tf.convert_to_tensor(embeddings))


@tf.custom_gradient
def _tied_logits(hidden, embeddings):
    logits = tf.matmul(hidden, embeddings, transpose_b=True)

    def grad(upstream):
        with tf.name_scope("tied_logits_gradient"):  # named for profiles
            d_hidden = tf.matmul(upstream, embeddings)
            d_embeddings = tf.transpose(tf.matmul(hidden, upstream, transpose_a=True))
        return d_hidden, d_embeddings

    return logits, grad


def embedding_table(embedding, dtype):
    """The `(V, H)` table of a Keras `Embedding` in `dtype`, dequantized if quantized.

    After `model.quantize("int8")` (or `"int4"`) the layer's `embeddings`
    hold the raw integer codes; Keras applies the per-row scales (and
    unpacks int4) only when the layer looks ids up, so a quantized table is
    read through the layer itself, every id at once.
    """
    if getattr(embedding, "quantization_mode", None) is None:
        return tf.cast(embedding.embeddings, dtype)
    return tf.cast(embedding(tf.range(embedding.input_dim)), dtype)
