"""Packs one or two token sequences into fixed-length BERT inputs."""

import keras
import tensorflow as tf

from tfnlp import _checks
from tfnlp.data._preprocessing_layer import PreprocessingLayer


def _longest_first(length_a, length_b, budget):
    """How many tokens of A and of B are kept: `(keep_a, keep_b)`, at most `budget` together.

    The closed form of BERT's `truncate_seq_pair` loop (remove a token from
    the longer segment, from B on a tie, until both fit): B keeps
    `min(len(B), max(budget // 2, budget - len(A)))` tokens and A the rest
    of the budget, at most its own length.
    """
    keep_b = tf.minimum(length_b, tf.maximum(budget // 2, budget - length_a))
    keep_a = tf.minimum(length_a, budget - keep_b)
    return keep_a, keep_b


def _lengths(ragged):
    """Row lengths of a 2-D ragged tensor as an int32 column `(B, 1)`."""
    return tf.cast(ragged.row_lengths(), tf.int32)[:, None]


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
        packed, lengths = self._pack(self._segments(inputs))
        return tuple(tf.RaggedTensor.from_tensor(packed[name], lengths=lengths[:, 0])
                     for name in ("token_ids", "segment_ids"))

    def _segments(self, inputs):
        """`inputs` checked, as a list of one or two int32 ragged tensors."""
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
        segments = [tf.cast(s, tf.int32) for s in segments]  # row splits int32 or int64
        if len(segments) == 2 and not tf.executing_eagerly():
            # Static batch sizes were compared above; unknown ones (a
            # SavedModel signature, a tf.data map) are compared when run:
            # the cut would broadcast a batch of one against the other.
            check = tf.debugging.assert_equal(
                tf.cast(segments[0].nrows(), tf.int64), tf.cast(segments[1].nrows(), tf.int64),
                message="`inputs[0]` and `inputs[1]` must hold the same number of rows",
            )
            with tf.control_dependencies([check]):
                segments = [tf.identity(s) for s in segments]
        return segments

    def _pack(self, segments):
        """`(packed, lengths)`: `call`'s dict of padded rows `(B, sequence_length)`,
        and how many positions of each row are real `(B, 1)`.

        Written with dense ops on `(B, sequence_length)` positions: each
        segment is cut by padding it to its budget (`to_tensor`), and the
        special tokens are placed where the kept lengths say. About a tenth
        of the ops of tensorflow-text's `combine_segments` + `pad_model_inputs`
        (ragged concatenation), which every pipeline and export traces.
        """
        length = self.sequence_length
        positions = tf.range(length)[None, :]
        budget = length - 1 - len(segments)

        def padded(segment):
            return segment.to_tensor(default_value=self.pad_id, shape=[None, budget])

        first = padded(segments[0])
        start = tf.fill([tf.shape(first)[0], 1], self.start_id)
        if len(segments) == 1:
            keep_a = tf.minimum(_lengths(segments[0]), budget)
            used = keep_a + 2
            values = tf.concat([start, first, tf.fill(tf.shape(start), self.pad_id)], 1)
            ends = positions == keep_a + 1
            segment_ids = tf.zeros_like(values)
        else:
            keep_a, keep_b = _longest_first(_lengths(segments[0]), _lengths(segments[1]), budget)
            used = keep_a + keep_b + 3
            # [CLS] A B side by side; B's tokens are read `keep_a + 2` positions on.
            source = tf.concat([start, first, padded(segments[1])], 1)
            index = tf.where(positions <= keep_a, positions, positions - keep_a - 1 + budget)
            values = tf.gather(source, tf.minimum(index, 2 * budget), batch_dims=1)
            ends = (positions == keep_a + 1) | (positions == used - 1)
            segment_ids = tf.cast((positions > keep_a + 1) & (positions < used), tf.int32)
        real = positions < used
        packed = {
            "token_ids": tf.where(ends, self.end_id, tf.where(real, values, self.pad_id)),
            "segment_ids": segment_ids,
            "padding_mask": tf.cast(real, tf.int32),
        }
        return packed, used

    @_checks.errors_without_input_dump()
    def call(self, inputs):
        return self._pack(self._segments(inputs))[0]

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
