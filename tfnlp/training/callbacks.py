"""Training callbacks."""

import os

import keras
import tensorflow as tf

from tfnlp.layers import masks


def attention_weights(backbone, inputs):
    """Self-attention weights of every layer of a `BertBackbone`.

    Args:
        backbone: a `BertBackbone`.
        inputs: its input dict, batch `B`.

    Returns:
        A list with one float32 `(B, heads, T, T)` tensor per layer.
    """
    tokens = backbone.token_embedding(inputs["token_ids"])
    x = backbone.embeddings_add(
        [tokens, backbone.segment_embedding(inputs["segment_ids"]), backbone.position_embedding(tokens)]
    )
    x = backbone.embeddings_norm(x)
    mask = masks.bidirectional_mask(inputs["padding_mask"])
    weights = []
    for block in backbone.transformer_layers:
        attended = block._self_attention_norm(x) if block.norm_first else x
        _, scores = block._self_attention(attended, attended, attention_mask=mask,
                                          return_attention_scores=True)
        weights.append(tf.cast(scores, tf.float32))
        x = block(x, padding_mask=inputs["padding_mask"])
    return weights


def attention_grid(weights, length, cell=4):
    """`(heads, T, T)` weights -> one grayscale `(1, H, W, 1)` image, heads side by side.

    Each weight becomes a `cell x cell` square (white = 1); heads are
    separated by a one-pixel gray line; only the first `length` tokens show.
    """
    weights = weights[:, :length, :length]
    heads = tf.shape(weights)[0]
    big = tf.repeat(tf.repeat(weights, cell, axis=1), cell, axis=2)  # (heads, cT, cT)
    separator = tf.fill([heads, length * cell, 1], 0.5)
    row = tf.concat([big, separator], axis=2)  # (heads, cT, cT + 1)
    image = tf.transpose(row, [1, 0, 2])  # (cT, heads, cT + 1)
    image = tf.reshape(image, [length * cell, -1])
    return image[None, :, :, None]


class AttentionImages(keras.callbacks.Callback):
    """Writes each layer's attention over a fixed probe sentence to TensorBoard.

    At the end of every epoch, tag `attention/layer_{i}` gets one image: the
    heads of layer `i` side by side, rows = queries, columns = keys, for the
    real tokens of the probe (white = weight 1). Watching them across epochs
    shows heads specialise (diagonal, previous-token, `[SEP]` heads).

    Args:
        backbone: the `BertBackbone` being trained (the model's or its task's).
        preprocessor: a `BertPreprocessor` for the probe.
        probe_text: the probe sentence (or a `(text_a, text_b)` pair).
        log_dir: where to write; use the TensorBoard callback's `log_dir`
            to see both in one run (they go to its `attention/` subfolder).

    Example:

    >>> callback = AttentionImages(backbone, preprocessor, "It is a truth universally acknowledged.",
    ...                            "runs/logs")  # doctest: +SKIP
    """

    def __init__(self, backbone, preprocessor, probe_text, log_dir):
        super().__init__()
        self.backbone = backbone
        self.preprocessor = preprocessor
        texts = probe_text if isinstance(probe_text, (tuple, list)) else (probe_text,)
        self.inputs = preprocessor(tuple(tf.constant([t]) for t in texts))
        self.length = int(tf.reduce_sum(self.inputs["padding_mask"]))
        self.log_dir = os.path.join(log_dir, "attention")
        self._writer = None

    def on_epoch_end(self, epoch, logs=None):
        if self._writer is None:
            self._writer = tf.summary.create_file_writer(self.log_dir)
        with self._writer.as_default():
            for i, weights in enumerate(attention_weights(self.backbone, self.inputs)):
                tf.summary.image(f"attention/layer_{i}", attention_grid(weights[0], self.length), step=epoch)
        self._writer.flush()

    def on_train_end(self, logs=None):
        if self._writer is not None:
            self._writer.close()
