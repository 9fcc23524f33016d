"""Raw text (or text pairs) to BERT model inputs, in-graph."""

import keras
import tensorflow as tf

from tfnlp import _checks
from tfnlp.data._preprocessing_layer import PreprocessingLayer
from tfnlp.data.segment_packer import SegmentPacker
from tfnlp.data.wordpiece_tokenizer import WordPieceTokenizer


@keras.saving.register_keras_serializable(package="tfnlp")
class BertPreprocessor(PreprocessingLayer):
    """Tokenizes one text or a text pair and packs it for a BERT model.

    `WordPieceTokenizer` followed by `SegmentPacker`: the output always has
    the static shape `(B, sequence_length)` whatever the input lengths (long
    texts are truncated longest-first, short ones padded), so it suits
    `tf.data`, TPUs and exported serving signatures alike.

    Args:
        tokenizer: a `WordPieceTokenizer`.
        sequence_length: int, the packed length.
        **kwargs: base layer arguments.

    Call arguments:
        inputs: `tf.string` `(B,)` or a Python list of texts (one batch), or
            a tuple `(texts_a, texts_b)` of two.

    Returns:
        Dict of int32 `(B, sequence_length)` tensors `token_ids`,
        `segment_ids`, `padding_mask` (see `SegmentPacker`).

    Example:

    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "food"]
    >>> preprocessor = BertPreprocessor(WordPieceTokenizer(vocab), sequence_length=6)
    >>> preprocessor((tf.constant(["good food"]), tf.constant(["food"])))["token_ids"].numpy()
    array([[2, 5, 6, 3, 6, 3]], dtype=int32)
    """

    def __init__(self, tokenizer, sequence_length, **kwargs):
        super().__init__(**kwargs)
        if isinstance(tokenizer, dict):
            tokenizer = keras.saving.deserialize_keras_object(tokenizer)
        if not isinstance(tokenizer, WordPieceTokenizer):
            raise ValueError(f"`tokenizer` must be a WordPieceTokenizer, got {type(tokenizer).__name__}.")
        self.tokenizer = tokenizer
        self.sequence_length = sequence_length
        self.packer = SegmentPacker(
            sequence_length,
            start_id=tokenizer.cls_id,
            end_id=tokenizer.sep_id,
            pad_id=tokenizer.pad_id,
        )

    @_checks.errors_without_input_dump()
    def call(self, inputs):
        if isinstance(inputs, list) and inputs and all(isinstance(t, (str, bytes)) for t in inputs):
            inputs = tf.constant(inputs)  # a Python list of texts is one batch, not segments
        texts = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
        if not 1 <= len(texts) <= 2:
            raise ValueError(
                f"`inputs` must be one text tensor or a pair, got {len(texts)} items: pass a "
                "batch of texts as one tensor or a list of strings, a pair as a tuple "
                "`(texts_a, texts_b)`."
            )
        texts = [tf.convert_to_tensor(t) for t in texts]
        # (B,) strings, the same B for both texts; the tokenizer checks the dtype.
        _checks.tensors(*((f"inputs[{i}]", t, "B", None) for i, t in enumerate(texts)))
        # A rank unknown when traced (a generator's or py_function's output)
        # is asserted (B,) when run: the tokenizer needs a known rank.
        texts = [t if t.shape.rank is not None else tf.ensure_shape(t, [None]) for t in texts]
        return self.packer([self.tokenizer(t) for t in texts])

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "tokenizer": keras.saving.serialize_keras_object(self.tokenizer),
                "sequence_length": self.sequence_length,
            }
        )
        return config
