"""Pure functions that build boolean attention masks.

Every builder returns a `tf.bool` tensor where `True` means "the query may
attend to this key". Attention masks have shape `(B, T, S)` (batch, query
length, key length); padding masks have shape `(B, S)`. The functions hold no
state and create no variables, so they can be called inside `tf.data`,
`tf.function`, XLA-compiled code and Keras layers alike.

In the drawings below `1` marks `True` (may attend), `.` marks `False`, rows
are queries and columns are keys, for one sequence of 4 real tokens followed
by 1 padding token.
"""

import tensorflow as tf

# UniLM's language-model objectives, in the order `objective_mask` reads them.
OBJECTIVES = ("bidirectional", "left_to_right", "right_to_left", "seq2seq")
BIDIRECTIONAL, LEFT_TO_RIGHT, RIGHT_TO_LEFT, SEQ2SEQ = range(4)


def _as_bool(mask, name, rank):
    mask = tf.convert_to_tensor(mask)
    if mask.shape.rank is not None and mask.shape.rank != rank:
        raise ValueError(
            f"`{name}` must have rank {rank}, got shape {mask.shape}."
        )
    if mask.dtype != tf.bool:
        mask = tf.not_equal(mask, tf.zeros((), mask.dtype))
    return mask


def padding_mask(token_ids=None, *, lengths=None, max_length=None, pad_id=0):
    """Builds a `(B, S)` padding mask from token ids or from lengths.

    Give exactly one of `token_ids` or `lengths`.

    Args:
        token_ids: int tensor `(B, S)`. Positions equal to `pad_id` are
            padding.
        lengths: int tensor `(B,)` of real lengths; requires `max_length`.
        max_length: int, the `S` of the mask built from `lengths`. Lengths
            above `max_length` are clipped to it.
        pad_id: int, the id that marks padding in `token_ids`.

    Returns:
        `tf.bool` tensor `(B, S)`, `True` for real tokens.

    Example:

    >>> padding_mask(tf.constant([[5, 7, 9, 0, 0]])).numpy()
    array([[ True,  True,  True, False, False]])
    >>> padding_mask(lengths=tf.constant([3]), max_length=5).numpy()
    array([[ True,  True,  True, False, False]])
    """
    if (token_ids is None) == (lengths is None):
        raise ValueError(
            "Give exactly one of `token_ids` or `lengths` to padding_mask(); "
            f"got token_ids={'set' if token_ids is not None else None}, "
            f"lengths={'set' if lengths is not None else None}."
        )
    if token_ids is not None:
        token_ids = tf.convert_to_tensor(token_ids)
        if token_ids.shape.rank is not None and token_ids.shape.rank != 2:
            raise ValueError(
                f"`token_ids` must have shape (B, S), got {token_ids.shape}."
            )
        return tf.not_equal(token_ids, tf.cast(pad_id, token_ids.dtype))
    if max_length is None:
        raise ValueError("`max_length` is required when `lengths` is given.")
    lengths = tf.convert_to_tensor(lengths)
    if lengths.shape.rank is not None and lengths.shape.rank != 1:
        raise ValueError(f"`lengths` must have shape (B,), got {lengths.shape}.")
    return tf.sequence_mask(lengths, maxlen=max_length)


def causal_mask(query_length, key_length=None, query_offset=0):
    """Builds a `(T, S)` left-to-right mask: query `i` sees keys `j <= i + offset`.

    `query_offset` is the position of the first query in the key sequence,
    which is what a key/value cache needs: when one new token at position `t`
    attends over a cache of `S` slots, `causal_mask(1, S, t)` lets it see the
    slots `0..t` only.

    ```
    causal_mask(4)       causal_mask(2, 4, query_offset=2)
    1 . . .              1 1 1 .
    1 1 . .              1 1 1 1
    1 1 1 .
    1 1 1 1
    ```

    Args:
        query_length: int or scalar int tensor, `T`.
        key_length: int or scalar int tensor, `S`; defaults to `T`.
        query_offset: int or scalar int tensor.

    Returns:
        `tf.bool` tensor `(T, S)`.

    Example:

    >>> causal_mask(3).numpy().astype(int)
    array([[1, 0, 0],
           [1, 1, 0],
           [1, 1, 1]])
    """
    if key_length is None:
        key_length = query_length
    query_length = tf.cast(query_length, tf.int32)
    key_length = tf.cast(key_length, tf.int32)
    rows = tf.range(query_length)[:, None] + tf.cast(query_offset, tf.int32)
    cols = tf.range(key_length)[None, :]
    return cols <= rows


def bidirectional_mask(padding_mask):
    """Builds a `(B, S, S)` mask where every token sees every real token.

    ```
    1 1 1 1 .
    1 1 1 1 .
    1 1 1 1 .
    1 1 1 1 .
    1 1 1 1 .   <- the padding query sees the real tokens (BERT does too)
    ```

    Args:
        padding_mask: bool or int tensor `(B, S)`, `True`/1 for real tokens.

    Returns:
        `tf.bool` tensor `(B, S, S)`.

    Example:

    >>> bidirectional_mask(tf.constant([[1, 1, 0]])).numpy().astype(int)
    array([[[1, 1, 0],
            [1, 1, 0],
            [1, 1, 0]]])
    """
    keys = _as_bool(padding_mask, "padding_mask", 2)
    length = tf.shape(keys)[1]
    return tf.broadcast_to(keys[:, None, :], tf.stack([tf.shape(keys)[0], length, length]))


def left_to_right_mask(padding_mask):
    """Builds a `(B, S, S)` causal mask: token `i` sees real tokens `j <= i`.

    ```
    1 . . . .
    1 1 . . .
    1 1 1 . .
    1 1 1 1 .
    1 1 1 1 .
    ```

    Args:
        padding_mask: bool or int tensor `(B, S)`, `True`/1 for real tokens.

    Returns:
        `tf.bool` tensor `(B, S, S)`.

    Example:

    >>> left_to_right_mask(tf.constant([[1, 1, 0]])).numpy().astype(int)
    array([[[1, 0, 0],
            [1, 1, 0],
            [1, 1, 0]]])
    """
    keys = _as_bool(padding_mask, "padding_mask", 2)
    return causal_mask(tf.shape(keys)[1])[None, :, :] & keys[:, None, :]


def right_to_left_mask(padding_mask):
    """Builds a `(B, S, S)` mask where token `i` sees real tokens `j >= i`.

    ```
    1 1 1 1 .
    . 1 1 1 .
    . . 1 1 .
    . . . 1 .
    . . . . .   <- nothing to see: attention gives zeros for this row
    ```

    Args:
        padding_mask: bool or int tensor `(B, S)`, `True`/1 for real tokens.

    Returns:
        `tf.bool` tensor `(B, S, S)`.

    Example:

    >>> right_to_left_mask(tf.constant([[1, 1, 0]])).numpy().astype(int)
    array([[[1, 1, 0],
            [0, 1, 0],
            [0, 0, 0]]])
    """
    keys = _as_bool(padding_mask, "padding_mask", 2)
    upper = tf.transpose(causal_mask(tf.shape(keys)[1]))
    return upper[None, :, :] & keys[:, None, :]


def seq2seq_mask(segment_ids, padding_mask=None):
    """Builds the UniLM sequence-to-sequence mask from segment ids.

    For `[CLS] S1 [SEP] S2 [SEP]` with segment ids 0 for the source part and
    1 for the target part, source tokens see the whole source, target tokens
    see the whole source and the target up to themselves, and nobody sees
    padding. With source `[CLS] a [SEP]` and target `b [SEP]` plus one pad:

    ```
    segment  0 0 0 1 1 0
             1 1 1 . . .   [CLS]
             1 1 1 . . .   a
             1 1 1 . . .   [SEP]
             1 1 1 1 . .   b
             1 1 1 1 1 .   [SEP]
             1 1 1 1 1 .   [PAD]   (padding queries see every real token)
    ```

    It is built from the running sum of the segment ids (as bert4keras
    does): key `j` is visible to query `i` when `cumsum[j] <= cumsum[i]`.

    Args:
        segment_ids: int tensor `(B, S)`, 0 for the source, 1 for the target.
        padding_mask: optional bool or int tensor `(B, S)`; defaults to all
            tokens real.

    Returns:
        `tf.bool` tensor `(B, S, S)`.

    Example:

    >>> seq2seq_mask(tf.constant([[0, 0, 1, 1]])).numpy().astype(int)
    array([[[1, 1, 0, 0],
            [1, 1, 0, 0],
            [1, 1, 1, 0],
            [1, 1, 1, 1]]])
    """
    segment_ids = tf.convert_to_tensor(segment_ids)
    if segment_ids.shape.rank is not None and segment_ids.shape.rank != 2:
        raise ValueError(
            f"`segment_ids` must have shape (B, S), got {segment_ids.shape}."
        )
    position = tf.cumsum(tf.cast(segment_ids, tf.int32), axis=1)
    mask = position[:, None, :] <= position[:, :, None]
    if padding_mask is not None:
        mask &= _as_bool(padding_mask, "padding_mask", 2)[:, None, :]
    return mask


def next_token_mask(padding_mask):
    """A bidirectional mask that hides each token's next token: `i` sees all but `i + 1`.

    ```
    1 . 1 1 .
    1 1 . 1 .
    1 1 1 . .
    1 1 1 1 .
    1 1 1 1 .
    ```

    The "every position is a training target" shortcut for bidirectional
    training: position `i` predicts token `i + 1`, which it cannot see, so no
    `[MASK]` is needed. It is only exact for one layer: from the second layer
    on, position `i` attends to positions that saw token `i + 1`, and the
    target leaks (measured in `tests/layers/test_masks.py`: the gradient of
    the output at `i` with respect to the input at `i + 1` is exactly 0 for
    one block and not for two). Offered for experiments; the models do not
    use it.

    Args:
        padding_mask: bool or int tensor `(B, S)`, `True`/1 for real tokens.

    Returns:
        `tf.bool` tensor `(B, S, S)`.

    Example:

    >>> next_token_mask(tf.constant([[1, 1, 1]])).numpy().astype(int)
    array([[[1, 0, 1],
            [1, 1, 0],
            [1, 1, 1]]])
    """
    keys = _as_bool(padding_mask, "padding_mask", 2)
    i = tf.range(tf.shape(keys)[1])
    not_next = tf.not_equal(i[None, :], i[:, None] + 1)  # (S, S)
    return not_next[None, :, :] & keys[:, None, :]


def objective_mask(objective, segment_ids, padding_mask):
    """Builds each example's mask for its UniLM objective.

    `objective[b]` picks, for example `b`, one of `OBJECTIVES`:
    0 `bidirectional_mask`, 1 `left_to_right_mask`, 2 `right_to_left_mask`,
    3 `seq2seq_mask` (from `segment_ids`). An id outside 0..3 selects no
    mask: that example attends to nothing (its attention outputs are 0).

    Args:
        objective: int tensor `(B,)`.
        segment_ids: int tensor `(B, S)`, 0 for the first segment, 1 for the
            second (read by the seq2seq objective only).
        padding_mask: bool or int tensor `(B, S)`.

    Returns:
        `tf.bool` tensor `(B, S, S)`.

    Example:

    >>> objective_mask(tf.constant([BIDIRECTIONAL, SEQ2SEQ]), tf.constant([[0, 1], [0, 1]]),
    ...                tf.constant([[1, 1], [1, 1]])).numpy().astype(int)
    array([[[1, 1],
            [1, 1]],
    <BLANKLINE>
           [[1, 0],
            [1, 1]]])
    """
    objective = tf.convert_to_tensor(objective)
    if objective.shape.rank is not None and objective.shape.rank != 1:
        raise ValueError(f"`objective` must have shape (B,), got {objective.shape}.")
    candidates = tf.stack(
        [
            bidirectional_mask(padding_mask),
            left_to_right_mask(padding_mask),
            right_to_left_mask(padding_mask),
            seq2seq_mask(segment_ids, padding_mask),
        ],
        axis=1,
    )  # (B, 4, S, S)
    chosen = tf.one_hot(tf.cast(objective, tf.int32), len(OBJECTIVES), on_value=True,
                        off_value=False, dtype=tf.bool)  # (B, 4)
    return tf.reduce_any(candidates & chosen[:, :, None, None], axis=1)


def combine_masks(*masks):
    """Combines masks with a logical AND, broadcasting, skipping `None`.

    Args:
        *masks: bool or int tensors that broadcast to a common shape, e.g. a
            `(B, T, S)` attention mask and a `(T, S)` causal mask, or `None`.

    Returns:
        `tf.bool` tensor, or `None` when every mask is `None`.

    Example:

    >>> combine_masks(causal_mask(2), None, tf.constant([[1, 0]])).numpy()
    array([[ True, False],
           [ True, False]])
    """
    combined = None
    for mask in masks:
        if mask is None:
            continue
        mask = tf.convert_to_tensor(mask)
        if mask.dtype != tf.bool:
            mask = tf.not_equal(mask, tf.zeros((), mask.dtype))
        combined = mask if combined is None else combined & mask
    return combined
