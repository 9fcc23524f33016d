"""Packs one or two token sequences into fixed-length BERT inputs."""

import keras
import tensorflow as tf
import tensorflow_text as tf_text

from tfnlp import _checks
from tfnlp.data._preprocessing_layer import PreprocessingLayer


def _longest_first(a, b, budget):
    """`a` and `b` cut longest-first to at most `budget` tokens together, B losing ties.

    The closed form of BERT's `truncate_seq_pair` loop (remove a token from
    the longer segment, from B on a tie, until both fit): B keeps
    `min(len(B), max(budget // 2, budget - len(A)))` tokens and A the rest
    of the budget, at most its own length.
    """
    length_a, length_b = a.row_lengths(), b.row_lengths()
    keep_b = tf.minimum(length_b, tf.maximum(tf.constant(budget // 2, length_b.dtype), budget - length_a))
    keep_a = tf.minimum(length_a, budget - keep_b)
    return [_first(a, keep_a), _first(b, keep_b)]


def _first(ragged, counts):
    """The first `counts[i]` values of each row `i` of a 2-D ragged tensor."""
    positions = tf.ragged.range(counts, dtype=counts.dtype)
    return tf.gather(ragged, positions, batch_dims=1)


@keras.saving.register_keras_serializable(package="tfnlp")
class SegmentPacker(PreprocessingLayer):
    """`[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`, truncated and padded.

    Segments are truncated longest-first (the longer segment loses a token
    until both fit; on a tie B loses, as in BERT's `truncate_seq_pair`), so a
    long first text cannot crowd out a short second one. The result has the static shape `(B, sequence_length)`.

    Args:
        sequence_length: int, the packed length including special tokens:
            at least 3 (`[CLS] x [SEP]`), and at least 5 to pack pairs.
        start_id: int, id of `[CLS]`.
        end_id: int, id of `[SEP]`, closing every segment.
        pad_id: int, id of `[PAD]`.
        **kwargs: base layer arguments.

    Call arguments:
        inputs: a `tf.RaggedTensor` `(B, None)` of ids, or a tuple/list of
            one or two of them.

    Returns:
        Dict of int32 tensors `(B, sequence_length)`: `token_ids`,
        `segment_ids` (0 for `[CLS]`, A and its `[SEP]`; 1 for B and its
        `[SEP]`; 0 on padding) and `padding_mask` (1 for real tokens, 0 for
        padding; int, not bool, because `tf.distribute` cannot feed bool model
        inputs).

    Example:

    >>> packer = SegmentPacker(sequence_length=8, start_id=2, end_id=3)
    >>> a = tf.ragged.constant([[10, 11, 12, 13, 14]])
    >>> b = tf.ragged.constant([[20]])
    >>> packed = packer((a, b))
    >>> packed["token_ids"].numpy()
    array([[ 2, 10, 11, 12, 13,  3, 20,  3]], dtype=int32)
    >>> packed["segment_ids"].numpy()
    array([[0, 0, 0, 0, 0, 0, 1, 1]], dtype=int32)
    """

    def __init__(self, sequence_length, start_id, end_id, pad_id=0, **kwargs):
        super().__init__(**kwargs)
        self.sequence_length = _checks.positive_int("sequence_length", sequence_length)
        if self.sequence_length < 3:
            raise ValueError(
                f"`sequence_length` must be at least 3 ([CLS] x [SEP]), got {sequence_length}."
            )
        self.start_id = _checks.non_negative_int("start_id", start_id)
        self.end_id = _checks.non_negative_int("end_id", end_id)
        self.pad_id = _checks.non_negative_int("pad_id", pad_id)

    def combine(self, inputs):
        """Truncates and joins the segments, without padding.

        Args:
            inputs: as for `call`.

        Returns:
            `(token_ids, segment_ids)`, int32 `tf.RaggedTensor`s `(B, None)`
            with at most `sequence_length` tokens per row.
        """
        segments = list(inputs) if isinstance(inputs, (tuple, list)) else [inputs]
        if not 1 <= len(segments) <= 2:
            raise ValueError(f"`inputs` must hold one or two segments, got {len(segments)}.")
        if len(segments) == 2 and self.sequence_length < 5:
            raise ValueError(
                "`sequence_length` must be at least 5 for pairs ([CLS] A [SEP] B [SEP]), got "
                f"{self.sequence_length}: with fewer, a text of the pair would always be lost."
            )
        _checks.tensors(  # (B, None) ids, the same B for both segments
            *((f"inputs[{i}]", s, "B" + "LM"[i], "int") for i, s in enumerate(segments)),
        )
        segments = [
            s if isinstance(s, tf.RaggedTensor) else tf.RaggedTensor.from_tensor(s)
            for s in segments
        ]
        # One row-splits dtype for the cut and `combine_segments` (a ragged
        # tensor may come with int32 row splits).
        segments = [tf.cast(s, tf.int32).with_row_splits_dtype(tf.int64) for s in segments]
        if len(segments) == 2 and not tf.executing_eagerly():
            # Static batch sizes were compared above; unknown ones (a
            # SavedModel signature, a tf.data map) are compared when run:
            # the cut would broadcast a batch of one against the other.
            check = tf.debugging.assert_equal(
                segments[0].nrows(), segments[1].nrows(),
                message="`inputs[0]` and `inputs[1]` must hold the same number of rows",
            )
            with tf.control_dependencies([check]):
                segments = [tf.identity(s) for s in segments]
        budget = self.sequence_length - 1 - len(segments)
        if len(segments) == 1:
            trimmed = [segments[0][:, :budget]]
        else:
            # Gathers only the tokens kept: bounded work however long the texts are.
            trimmed = _longest_first(segments[0], segments[1], budget)
        token_ids, segment_ids = tf_text.combine_segments(
            trimmed, start_of_sequence_id=self.start_id, end_of_segment_id=self.end_id
        )
        return tf.cast(token_ids, tf.int32), tf.cast(segment_ids, tf.int32)

    def call(self, inputs):
        token_ids, segment_ids = self.combine(inputs)
        token_ids, padding_mask = tf_text.pad_model_inputs(
            token_ids, self.sequence_length, pad_value=self.pad_id
        )
        segment_ids, _ = tf_text.pad_model_inputs(segment_ids, self.sequence_length)
        return {
            "token_ids": tf.cast(token_ids, tf.int32),
            "segment_ids": tf.cast(segment_ids, tf.int32),
            "padding_mask": tf.cast(padding_mask, tf.int32),
        }

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "sequence_length": self.sequence_length,
                "start_id": self.start_id,
                "end_id": self.end_id,
                "pad_id": self.pad_id,
            }
        )
        return config
