"""Source and target texts to an encoder-decoder model's inputs, labels and weights."""

import keras
import numpy as np
import tensorflow as tf

from tfnlp.data.pipelines import encoder_decoder_batch, encoder_decoder_dataset, seq2seq_batch
from tfnlp.data.task_preprocessor import (
    DEFAULT_BATCH_SIZE,
    TaskPreprocessor,
    is_string_spec,
    is_texts,
    preprocessing_object,
    serialized,
    string_tensor,
    text_rank,
)
from tfnlp.data.wordpiece_tokenizer import WordPieceTokenizer


class SourceTargetTexts(TaskPreprocessor):
    """What the seq2seq task preprocessors share: source texts `x`, target texts `y`, no `predict`."""

    text_name = "source texts"
    label_name = "the target texts"
    element_name = "(source, target)"

    def _no_texts_to_predict(self, mode):
        if mode == "predict":
            raise ValueError(
                f"{self.task_name}.predict takes model inputs (token ids); for texts use "
                "`generate(texts)`."
            )

    def texts(self, x, name="x"):
        if isinstance(x, list) and not x:
            x = tf.constant([], tf.string)
        return super().texts(x, name)

    def dataset_element(self, spec, mode):
        """Source and target texts, both strings of one rank; a dataset with any part that
        is not a string is model inputs (Keras reads it)."""
        parts = spec if isinstance(spec, tuple) else (spec,)
        if not all(is_string_spec(part) for part in parts):
            return None
        element = super().dataset_element(spec, mode)
        if element is not None and element.labels is not None:
            text_rank(parts, spec)  # the target's rank is the source's
        return element

    def checked_labels(self, y, count):
        """`y` as a `tf.string` `(count,)` tensor of target texts."""
        if not is_texts(y):
            raise ValueError(f"`y` must be a batch of target texts when `x` is texts, got {y!r:.80}.")
        targets = string_tensor(y, "y")
        if int(targets.shape[0]) != count:
            raise ValueError(
                f"`x` has {count} source texts but `y` has {int(targets.shape[0])} target texts."
            )
        return targets


@keras.saving.register_keras_serializable(package="tfnlp")
class Seq2SeqPreprocessor(SourceTargetTexts):
    """Source texts `x` and target texts `y` as `TransformerSeq2Seq` trains on them.

    The source becomes `S [SEP]` (cut to `source_length`), the decoder
    input `[CLS] T` and the labels `T [SEP]` (cut to `target_length`), the
    weights the decoder's padding mask: `tfnlp.data.encoder_decoder_dataset`
    then `tfnlp.models.seq2seq_batch`, which is also the pipeline that
    `batches` builds (a new shuffle seed at every `fit`). `predict` takes
    no texts (the model's `generate` does). `TransformerSeq2Seq` builds one
    from its tokenizers and lengths.

    Args:
        source_tokenizer: a `WordPieceTokenizer` (or its config), or None
            for a model that takes token ids only (texts are then refused by
            `check`).
        target_tokenizer: a `WordPieceTokenizer`; default `source_tokenizer`.
        source_length: int, tokens per source, `[SEP]` included.
        target_length: int, tokens per target, the end token included.
        task_name: str, the model named in error messages.

    Call arguments:
        x: `tf.string` `(B,)` source texts.
        y: `tf.string` `(B,)` target texts.
        sample_weight: must be None: the weights are the targets' padding.

    Returns:
        `(inputs, y, sample_weight)`: the dict of the model's four int32
        inputs, int32 labels `(B, target_length)` and float32 weights
        `(B, target_length)`.

    Example:

    >>> tokenizer = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hola", "hello"])
    >>> preprocessor = Seq2SeqPreprocessor(tokenizer, source_length=4, target_length=3)
    >>> inputs, y, weights = preprocessor(tf.constant(["hello"]), tf.constant(["hola"]))
    >>> inputs["encoder_token_ids"].numpy().tolist(), inputs["decoder_token_ids"].numpy().tolist()
    ([[6, 3, 0, 0]], [[2, 5, 0]])
    >>> y.numpy().tolist(), weights.numpy().tolist()
    ([[5, 3, 0]], [[1.0, 1.0, 0.0]])
    """

    default_task_name = "TransformerSeq2Seq"

    def __init__(self, source_tokenizer, target_tokenizer=None, source_length=None,
                 target_length=None, task_name=None):
        super().__init__(task_name=task_name)
        self.source_tokenizer = preprocessing_object(
            "source_tokenizer", source_tokenizer, WordPieceTokenizer
        )
        self.target_tokenizer = preprocessing_object(
            "target_tokenizer", target_tokenizer, WordPieceTokenizer
        ) or self.source_tokenizer
        self.source_length = source_length
        self.target_length = target_length

    def call(self, x, y=None, sample_weight=None):
        self.check("fit")
        if y is None or sample_weight is not None:
            raise ValueError(
                f"{type(self).__name__} takes source texts `x` and target texts `y`, and no "
                "`sample_weight` (the weights are the targets' padding)."
            )
        return seq2seq_batch(encoder_decoder_batch(
            x, y, self.source_tokenizer, self.target_tokenizer, self.source_length,
            self.target_length,
        ))

    # --- The text path's hooks ---

    def check(self, mode, pairs=False):
        if self.source_tokenizer is None:
            raise self._without(
                "tokenizers", "`source_tokenizer=tfnlp.data.WordPieceTokenizer(...)` (and "
                "`target_tokenizer=` for another target vocabulary)", "token ids",
            )
        self._no_texts_to_predict(mode)

    def batches(self, examples, *, batch_size, shuffle, mode, count, batched):
        # The pipeline tokenizes in large groups, then batches (and pads) again.
        return encoder_decoder_dataset(
            examples.unbatch() if batched else examples, self.source_tokenizer,
            self.target_tokenizer, self.source_length, self.target_length,
            **fit_settings(batch_size, shuffle, mode, count),
        ).map(seq2seq_batch)

    def get_config(self):
        config = super().get_config()
        config.update({
            "source_tokenizer": serialized(self.source_tokenizer),
            "target_tokenizer": (None if self.target_tokenizer is self.source_tokenizer
                                 else serialized(self.target_tokenizer)),
            "source_length": self.source_length,
            "target_length": self.target_length,
        })
        return config


def fit_settings(batch_size, shuffle, mode, count):
    """`{"batch_size", "shuffle_buffer", "drop_remainder", "seed"}` of a text pipeline.

    A `fit` draws its seed from NumPy's global generator (so
    `keras.utils.set_random_seed` makes it repeatable and each call shuffles,
    and masks UniLM's targets, anew); evaluation uses seed 0.
    """
    return {
        "batch_size": batch_size or DEFAULT_BATCH_SIZE,
        "shuffle_buffer": count if shuffle and mode == "fit" and count else 0,
        "drop_remainder": False,
        "seed": int(np.random.randint(0, 2**31 - 1)) if mode == "fit" else 0,
    }
