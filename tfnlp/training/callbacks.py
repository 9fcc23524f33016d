"""Training callbacks."""

import os
import re

import keras
import numpy as np
import tensorflow as tf
from tensorboard.plugins import projector

from tfnlp import _checks
from tfnlp.layers import masks
from tfnlp.training import loop


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

    Tag `attention/layer_{i}` gets one image: the heads of layer `i` side by
    side, rows = queries, columns = keys, for the real tokens of the probe
    (white = weight 1). Watching them across training shows heads
    specialise (diagonal, previous-token, `[SEP]` heads).

    When: with `every_n_steps=None`, at the end of every epoch of
    `model.fit` (step = epoch); under `tfnlp.training.fit`, which has no
    epochs, once at the end of training (step = the optimizer step). With
    `every_n_steps=N`, every `N` optimizer steps and at the end of training
    (step = the optimizer step, so a resumed run continues the same axis),
    under either loop. Only the chief of a multi-worker strategy writes.

    Args:
        backbone: the `BertBackbone` being trained (the model's or its task's).
        preprocessor: a `BertPreprocessor` for the probe.
        probe_text: the probe sentence (or a `(text_a, text_b)` pair).
        log_dir: where to write; use the TensorBoard callback's (or `fit`'s)
            `log_dir` to see both in one place (they go to its `attention/`
            subfolder, a run of its own).
        every_n_steps: None (per epoch) or int (every that many steps).

    Example:

    >>> callback = AttentionImages(backbone, preprocessor, "It is a truth universally acknowledged.",
    ...                            "runs/logs", every_n_steps=100)  # doctest: +SKIP
    >>> training.fit(model, dataset, 1000, log_dir="runs/logs", callbacks=[callback])  # doctest: +SKIP
    """

    def __init__(self, backbone, preprocessor, probe_text, log_dir, every_n_steps=None):
        super().__init__()
        self.backbone = backbone
        self.preprocessor = preprocessor
        texts = probe_text if isinstance(probe_text, (tuple, list)) else (probe_text,)
        self.inputs = preprocessor(tuple(tf.constant([t]) for t in texts))
        self.length = int(tf.reduce_sum(self.inputs["padding_mask"]))
        self.log_dir = os.path.join(log_dir, "attention")
        self.every_n_steps = _checks.positive_int("every_n_steps", every_n_steps, allow_none=True)
        self._writer = None
        self._last_step = None  # the step of the last image written in this training run
        self._seen_step = 0  # the optimizer step at the last batch seen (or at the start)

    def on_train_begin(self, logs=None):
        self._last_step = None
        self._seen_step = self._optimizer_step(0)

    def on_train_batch_end(self, batch, logs=None):
        if not self.every_n_steps:
            return
        # `batch` is the global step under tfnlp's fit, the batch of the
        # epoch under model.fit: the optimizer's counter means the same in
        # both (and steps_per_execution > 1 may step past a multiple of N).
        previous, self._seen_step = self._seen_step, self._optimizer_step(self._seen_step + 1)
        if self._seen_step // self.every_n_steps > previous // self.every_n_steps:
            self._write(self._seen_step)

    def on_epoch_end(self, epoch, logs=None):
        if self.every_n_steps is None:
            self._write(epoch)

    def on_train_end(self, logs=None):
        step = self._optimizer_step(self._seen_step)
        if self._last_step is None or (self.every_n_steps and self._last_step != step):
            self._write(step)
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def _optimizer_step(self, default):
        optimizer = getattr(self.model, "optimizer", None) if self.model is not None else None
        return int(optimizer.iterations.numpy()) if optimizer is not None else default

    def _write(self, step):
        self._last_step = step
        strategy = getattr(self.model, "_distribute_strategy", None) or tf.distribute.get_strategy()
        if not loop.is_chief(strategy):
            return
        if self._writer is None:
            self._writer = tf.summary.create_file_writer(self.log_dir)
        with self._writer.as_default():
            for i, weights in enumerate(attention_weights(self.backbone, self.inputs)):
                tf.summary.image(f"attention/layer_{i}", attention_grid(weights[0], self.length), step=step)
        self._writer.flush()


def write_embedding_projector(log_dir, embeddings, vocabulary, name="token_embedding"):
    """Sets up TensorBoard's embedding projector for an embedding matrix.

    Writes into `log_dir` what the projector plugin reads:

    - `{name}.ckpt.index` / `.data-*`: a checkpoint holding the matrix
      (float32) under the tensor name `{name}/.ATTRIBUTES/VARIABLE_VALUE`.
      It is written with `tf.train.Checkpoint.write`, which leaves any
      `checkpoint` index file alone, so `log_dir` may also be `fit`'s
      `checkpoint_dir`.
    - `metadata.tsv`: one token per line, in id order. A single column has
      no header line (TensorBoard's convention). So that every token stays
      one line, tab, newline and carriage return are written as `\\t`, `\\n`
      and `\\r`, and a token of whitespace only (which the projector would
      skip) as its Python `repr` (`' '`).
    - `projector_config.pbtxt`: the tensor name, the metadata file
      (relative to `log_dir`) and the checkpoint (an absolute path, as the
      plugin resolves it from TensorBoard's working directory: after moving
      the log directory, call this again).

    One projector per `log_dir`: a second call replaces the first. Run
    `tensorboard --logdir LOG_DIR` and open the Projector tab (the run is
    `.` when `LOG_DIR` is the directory TensorBoard was pointed at).

    Args:
        log_dir: the directory (created if missing), e.g. `fit`'s `log_dir`.
        embeddings: a `keras.layers.Embedding` (or any layer with an
            `embeddings` variable), a Keras or TensorFlow variable, or an
            array-like, of shape `(vocabulary_size, dim)`.
        vocabulary: the tokens in id order: a sequence of strings (or
            bytes), an object with `get_vocabulary()` (a `WordPieceTokenizer`,
            a `StringLookup`), or the path of a `vocab.txt`.
        name: the tensor's name in the checkpoint and the projector: letters,
            digits, `_` and `-`.

    Returns:
        The path of `projector_config.pbtxt`.

    Raises:
        ValueError: the matrix is not 2-D, the vocabulary's length differs
            from its number of rows, or `name` is not a plain name.

    Example:

    >>> import shutil, tempfile
    >>> log_dir = tempfile.mkdtemp()
    >>> embedding = keras.layers.Embedding(3, 2)
    >>> embedding.build()
    >>> path = write_embedding_projector(log_dir, embedding, ["[PAD]", "hello", "world"])
    >>> sorted(os.listdir(log_dir))  # doctest: +NORMALIZE_WHITESPACE
    ['metadata.tsv', 'projector_config.pbtxt', 'token_embedding.ckpt.data-00000-of-00001',
     'token_embedding.ckpt.index']
    >>> open(os.path.join(log_dir, "metadata.tsv")).read().split()
    ['[PAD]', 'hello', 'world']
    >>> shutil.rmtree(log_dir)

    With a model: `write_embedding_projector(log_dir,
    backbone.token_embedding, tokenizer)` (a `BertBackbone` and its
    `WordPieceTokenizer`).
    """
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_\-]+", name):
        raise ValueError(f"`name` must be a non-empty name of letters, digits, '_' and '-', got {name!r}.")
    matrix = _embedding_matrix(embeddings)
    tokens = _vocabulary_tokens(vocabulary)
    if len(tokens) != matrix.shape[0]:
        raise ValueError(
            f"`vocabulary` has {len(tokens)} tokens but `embeddings` has {matrix.shape[0]} rows; "
            "they must be equal (one token per row, in id order)."
        )
    log_dir = os.fspath(log_dir)
    tf.io.gfile.makedirs(log_dir)
    prefix = os.path.join(log_dir, f"{name}.ckpt")
    if "://" not in prefix:
        prefix = os.path.abspath(prefix)
    tf.train.Checkpoint(**{name: tf.Variable(matrix, trainable=False)}).write(prefix)
    with tf.io.gfile.GFile(os.path.join(log_dir, "metadata.tsv"), "w") as f:
        f.write("".join(f"{_metadata_cell(token)}\n" for token in tokens))
    config = projector.ProjectorConfig(model_checkpoint_path=prefix)
    config.embeddings.add(
        tensor_name=f"{name}/.ATTRIBUTES/VARIABLE_VALUE", metadata_path="metadata.tsv", tensor_shape=matrix.shape
    )
    projector.visualize_embeddings(log_dir, config)
    path = os.path.join(log_dir, "projector_config.pbtxt")
    return path


def _embedding_matrix(embeddings):
    """A float32 `(rows, dim)` NumPy matrix from a layer, a variable or an array."""
    if isinstance(embeddings, keras.layers.Layer):
        if not hasattr(embeddings, "embeddings"):
            raise ValueError(
                f"`embeddings` is a {type(embeddings).__name__} layer without an `embeddings` variable; "
                "pass a keras.layers.Embedding, a variable or an array."
            )
        if not embeddings.built:
            raise ValueError("`embeddings` is an Embedding layer that is not built yet (call it once first).")
        embeddings = embeddings.embeddings
    matrix = np.asarray(keras.ops.convert_to_numpy(embeddings), dtype="float32")
    if matrix.ndim != 2 or 0 in matrix.shape:
        raise ValueError(f"`embeddings` must be a non-empty (vocabulary_size, dim) matrix, got shape {matrix.shape}.")
    return matrix


def _vocabulary_tokens(vocabulary):
    if isinstance(vocabulary, (str, os.PathLike)):
        from tfnlp.data import vocabulary as vocabulary_file  # the path of a vocab.txt

        return vocabulary_file.load_vocabulary(os.fspath(vocabulary))
    if hasattr(vocabulary, "get_vocabulary"):
        vocabulary = vocabulary.get_vocabulary()
    if isinstance(vocabulary, np.ndarray) and vocabulary.ndim != 1:
        raise ValueError(f"`vocabulary` must be a sequence of tokens, got an array of shape {vocabulary.shape}.")
    try:
        tokens = list(vocabulary)
    except TypeError:
        raise ValueError(f"`vocabulary` must be a sequence of tokens, got {type(vocabulary).__name__}.") from None
    decoded = []
    for token in tokens:
        if isinstance(token, np.generic):
            token = token.item()
        if isinstance(token, bytes):
            token = token.decode("utf-8", errors="backslashreplace")
        if not isinstance(token, str):
            raise ValueError(f"`vocabulary` must hold strings (or bytes), got {token!r}.")
        decoded.append(token)
    return decoded


def _metadata_cell(token):
    """One token as one line of a one-column `metadata.tsv` that the projector reads back as is."""
    if not token.strip():
        return repr(token)  # the projector skips blank lines: show ' ' rather than lose the row
    return token.replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
