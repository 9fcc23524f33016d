"""Small tensor helpers shared by the tf.data pipelines."""

import tensorflow as tf


@tf.autograph.experimental.do_not_convert
def dense_row(x):
    """A row sliced out of a ragged tensor arrives ragged-typed: make it dense."""
    return x.to_tensor() if isinstance(x, tf.RaggedTensor) else tf.identity(x)


# Byte -> length of the UTF-8 character it starts: 0 for a continuation byte
# (10xxxxxx), 2 to 4 for a lead byte, 1 for ASCII and bytes no character starts with.
_CHARACTER_LENGTHS = [1] * 0x80 + [0] * 0x40 + [1] * 2 + [2] * 30 + [3] * 16 + [4] * 5 + [1] * 11


def cut_at_character(texts, max_bytes):
    """`texts` cut to at most `max_bytes` bytes, never inside a character.

    Only texts longer than `max_bytes` are changed: cut there, and when the
    cut leaves an incomplete multi-byte sequence at the end (a character
    split by the cut), that partial character is dropped, so the result is
    the longest prefix of whole characters. Shorter texts come back
    unchanged, invalid UTF-8 included (it is replaced later). The work does
    not grow with the texts' length: one cut, then a look at the last 3
    bytes kept (a UTF-8 character has at most 4), skipped when no text of
    the batch is too long.

    Args:
        texts: `tf.string` tensor of any shape.
        max_bytes: int, positive.

    Returns:
        `tf.string` tensor of the same shape.
    """
    too_long = tf.strings.length(texts) > max_bytes

    def cut():
        kept = tf.strings.substr(texts, 0, max_bytes, unit="BYTE")
        tail_size = min(3, max_bytes)  # a split character keeps at most 3 of its bytes
        # The last `tail_size` bytes of every cut text (of the others: unused).
        start = tf.minimum(max_bytes - tail_size, tf.strings.length(kept))
        tail = tf.strings.substr(kept, start, tf.fill(tf.shape(start), tail_size), unit="BYTE")
        tail = tf.io.decode_raw(tail, tf.uint8, fixed_length=tail_size)
        lengths = tf.gather(tf.constant(_CHARACTER_LENGTHS, tf.int32), tf.cast(tail, tf.int32))
        column = tf.range(tail_size)
        # The last byte that starts a character (continuation bytes follow it) ...
        last = tf.reduce_max(tf.where(lengths > 0, column, -1), axis=-1, keepdims=True)
        # ... and whether that character needs more bytes than the cut left.
        split = (column == last) & (column + lengths > tail_size)
        split_at = tf.reduce_max(tf.where(split, column, -1), axis=-1)
        length = tf.where(too_long & (split_at >= 0), max_bytes - tail_size + split_at, max_bytes)
        return tf.strings.substr(kept, tf.zeros_like(length), length, unit="BYTE")

    return tf.cond(tf.reduce_any(too_long), cut, lambda: texts)


def unbatched(batches, examples):
    """`batches.unbatch()`, keeping the example count of `examples` where it is known.

    `unbatch` forgets the count, so Keras learned a finite pipeline's number
    of steps only by running out of data at the end of the first epoch, and
    said so ("Your input ran out of data; interrupting training") in every
    `fit`. The batches hold each example of `examples` once (tokenized in
    groups), so the count carries over; a wrong count would fail loudly in
    `assert_cardinality`.
    """
    dataset = batches.unbatch()
    count = examples.cardinality()
    if tf.executing_eagerly() and int(count) >= 0:
        dataset = dataset.apply(tf.data.experimental.assert_cardinality(count))
    return dataset
