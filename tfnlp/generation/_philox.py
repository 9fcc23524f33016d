"""Philox-4x32-10 written in TensorFlow integer ops: the same numbers with and without XLA.

TensorFlow's own stateless random ops (`tf.random.stateless_uniform`,
`stateless_categorical`, even with `alg="philox"`) give *different* numbers
when the same function is compiled with XLA on a CPU: a sampled text would
change with `jit_compile`. This generator is the published Philox-4x32-10
(Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011),
built from 64-bit multiplies, shifts and xors that every backend computes
alike; its words equal Random123's known answers and TensorFlow's CPU Philox
(`tests/generation/test_sampling.py`).
"""

import tensorflow as tf

_MULTIPLIERS = (0xD2511F53, 0xCD9E8D57)
_KEY_STEPS = (0x9E3779B9, 0xBB67AE85)
_ROUNDS = 10


def _multiply(word, multiplier):
    """`(high, low)` 32-bit halves of the 64-bit product `word * multiplier`."""
    product = tf.cast(word, tf.uint64) * tf.constant(multiplier, tf.uint64)
    high = tf.bitwise.right_shift(product, tf.constant(32, tf.uint64))
    return tf.cast(high, tf.uint32), tf.cast(product, tf.uint32)  # the cast keeps the low half


def philox_words(counter, key):
    """Philox-4x32-10 of a 4-word `counter` and 2-word `key` (uint32 tensors that broadcast).

    Returns the four uint32 output words. For counter 0 and key 0 they are
    `0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8` (Random123).
    """
    c0, c1, c2, c3 = counter
    k0, k1 = key
    xor = tf.bitwise.bitwise_xor
    for _ in range(_ROUNDS):
        high0, low0 = _multiply(c0, _MULTIPLIERS[0])
        high1, low1 = _multiply(c2, _MULTIPLIERS[1])
        c0, c1, c2, c3 = xor(xor(high1, c1), k0), low1, xor(xor(high0, c3), k1), low0
        k0 = k0 + tf.constant(_KEY_STEPS[0], tf.uint32)
        k1 = k1 + tf.constant(_KEY_STEPS[1], tf.uint32)
    return c0, c1, c2, c3


def uniform(seeds, step, size):
    """float32 `(B, size)` uniform in (0, 1), one stream per row's seed and step.

    Row `b` depends on `seeds[b]` and `step` only (never on the batch's other
    rows): the key is the seed's two 32-bit halves, the counter `(block,
    step, 0, 0)` for blocks of four numbers, each made a number by
    `to_unit_interval` (never 0 or 1).

    Args:
        seeds: int64 `(B,)`.
        step: scalar int32, the decoding step.
        size: Python int, numbers per row.
    """
    seeds = tf.bitcast(tf.cast(seeds, tf.int64), tf.uint64)[:, None]  # (B, 1)
    key = (tf.cast(seeds, tf.uint32),
           tf.cast(tf.bitwise.right_shift(seeds, tf.constant(32, tf.uint64)), tf.uint32))
    blocks = (size + 3) // 4
    block = tf.cast(tf.range(blocks), tf.uint32)[None, :]  # (1, blocks)
    zero = tf.zeros_like(block)
    counter = (block, tf.cast(step, tf.uint32) + zero, zero, zero)
    words = tf.stack(philox_words(counter, key), axis=-1)  # (B, blocks, 4)
    words = tf.reshape(words, [tf.shape(seeds)[0], blocks * 4])[:, :size]
    return to_unit_interval(words)


def uniform_at(seeds, step, token_ids):
    """`uniform(seeds, step, V)[b, token_ids[b, j]]` for int32 `token_ids` `(B, J)`, without the rest.

    Computes the blocks of the given tokens only: sampling among `J`
    candidates (top-k) costs `J`, not the vocabulary, and draws exactly the
    numbers `uniform` gives those tokens.
    """
    seeds = tf.bitcast(tf.cast(seeds, tf.int64), tf.uint64)[:, None]  # (B, 1)
    key = (tf.cast(seeds, tf.uint32),
           tf.cast(tf.bitwise.right_shift(seeds, tf.constant(32, tf.uint64)), tf.uint32))
    token_ids = tf.cast(token_ids, tf.int32)
    block = tf.cast(token_ids // 4, tf.uint32)
    zero = tf.zeros_like(block)
    words = tf.stack(philox_words((block, tf.cast(step, tf.uint32) + zero, zero, zero), key),
                     axis=-1)  # (B, J, 4)
    return to_unit_interval(tf.gather(words, token_ids % 4, batch_dims=2))


def to_unit_interval(words):
    """uint32 words -> float32 in (0, 1): the top 23 bits, centred, `((w >> 9) + 0.5) / 2**23`.

    23 bits, not 24: `2**24 - 1 + 0.5` is not a float32 and rounds to
    `2**24`, which would give exactly 1 (and an infinite Gumbel noise).
    """
    top = tf.bitwise.right_shift(words, tf.constant(9, tf.uint32))
    return (tf.cast(top, tf.float32) + 0.5) * (2.0 ** -23)
