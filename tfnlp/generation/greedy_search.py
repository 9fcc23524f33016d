"""Greedy decoding over a cached step function, in one `tf.while_loop`."""

import tensorflow as tf

from tfnlp.generation import _common, _loop, sampling


def greedy_search(
    step_fn,
    start_ids,
    max_length,
    end_id,
    state=(),
    context=(),
    pad_id=0,
    no_repeat_ngram_size=0,
    repetition_penalty=1.0,
    max_new_tokens=None,
):
    """Generates the most probable token at every step until `end_id`.

    The decoder is any `step_fn(token_ids, index, state, context) ->
    (logits, state)`: it reads one token per sequence, `token_ids` int32
    `(B,)` at decoder position `index` (a scalar int32 tensor, 0 for the
    start token), and returns `logits` `(B, V)` for the next token and the
    updated `state` (e.g. key/value caches written at `index`). `state` and
    `context` are nested structures of tensors with batch as the first axis;
    `context` (e.g. an encoder output) never changes. A step that returns
    something else, changes a state tensor's shape or dtype, or scores fewer
    tokens than `end_id` needs is refused with a `ValueError` naming
    `step_fn`.

    Every sequence stops on its own: once it has produced `end_id`, its later
    steps produce `pad_id` and add nothing to its score; the loop ends when
    all sequences ended or after `max_length` tokens. Everything runs in one
    `tf.while_loop` with static shapes, so it traces once inside a
    `tf.function` (and compiles under XLA).

    Args:
        step_fn: the decoder step, see above.
        start_ids: int tensor `(B,)`, the first input token of each sequence.
        max_length: int, the most tokens generated (the end token included).
        end_id: int, the token that ends a sequence.
        state: nested tensors `(B, ...)` updated by `step_fn`.
        context: nested tensors `(B, ...)` read by `step_fn`.
        pad_id: int, written after the end token.
        no_repeat_ngram_size: int, if n > 0 no n-gram occurs twice in a
            generated sequence (3 is UniLM's trigram blocking). `end_id`
            is never banned (it occurs once), so a sequence whose every
            other continuation is banned ends.
        repetition_penalty: number > 0 (1: off), or one per sequence: CTRL's
            penalty on tokens already generated (see `sample`).
        max_new_tokens: optional int or `(B,)` ints in `[1, max_length]`, a
            sequence ends after this many tokens.

    Returns:
        A dict: `token_ids` int32 `(B, max_length)` (the generated tokens, the
        end token included, then `pad_id`), `lengths` int32 `(B,)` and
        `scores` float32 `(B,)`, the sum of the log-probabilities of the
        generated tokens.

    Example:

    >>> # A toy decoder: always prefers token (input + 1) and ends at 4.
    >>> def step_fn(token_ids, index, state, context):
    ...     return tf.one_hot(token_ids + 1, 5) * 10.0, state
    >>> result = greedy_search(step_fn, tf.constant([0, 2]), max_length=6, end_id=4)
    >>> result["token_ids"].numpy()
    array([[1, 2, 3, 4, 0, 0],
           [3, 4, 0, 0, 0, 0]], dtype=int32)
    >>> result["lengths"].numpy()
    array([4, 2], dtype=int32)
    """
    loop, start_ids = greedy_loop(
        step_fn, start_ids, max_length, end_id, context=context, pad_id=pad_id,
        no_repeat_ngram_size=no_repeat_ngram_size, repetition_penalty=repetition_penalty,
        max_new_tokens=max_new_tokens,
    )
    return loop.run(start_ids, state)


def greedy_loop(step_fn, start_ids, max_length, end_id, *, context=(), pad_id=0,
                no_repeat_ngram_size=0, repetition_penalty=1.0, max_new_tokens=None,
                penalized_ids=None):
    """The checked `TokenLoop` of `greedy_search` (also stepped one token at a time to stream).

    `penalized_ids` `(B, P)`: more tokens the repetition penalty counts (a
    prompt's; negative entries are ignored), as in `sample`.
    """
    max_length = _common.check_arguments(
        max_length, no_repeat_ngram_size, end_id=end_id, pad_id=pad_id
    )
    end_id, pad_id, no_repeat_ngram_size = int(end_id), int(pad_id), int(no_repeat_ngram_size)
    step_fn = _common.checked_step(step_fn, end_id)
    start_ids = _common.check_start_ids(start_ids)
    batch_size = tf.shape(start_ids)[0]
    penalty = None
    if sampling.active_options(batch_size, repetition_penalty=repetition_penalty):
        penalty = sampling.per_row("repetition_penalty", repetition_penalty, batch_size)
    limits = sampling.row_limits(max_new_tokens, max_length, batch_size)

    def choose(logits, sequences, step):
        if penalty is not None:
            logits = sampling.repetition_penalized(logits, sequences, step, penalty,
                                                   penalized_ids)
        log_probs = tf.nn.log_softmax(logits, axis=-1)
        log_probs = _common.maybe_block(log_probs, sequences, step, no_repeat_ngram_size)
        return tf.argmax(log_probs, axis=-1, output_type=tf.int32)

    return _loop.TokenLoop(step_fn, max_length, end_id, choose, context, pad_id, limits), start_ids
