"""Beam search over a cached step function, in one `tf.while_loop`."""

import tensorflow as tf

from tfnlp import _checks
from tfnlp.generation import _common


def length_penalty_factor(length, alpha):
    """GNMT's length normalisation `((5 + length) / 6) ** alpha` (Wu et al., 2016)."""
    return tf.pow((5.0 + tf.cast(length, tf.float32)) / 6.0, alpha)


def tile_beams(tensor, beam_size):
    """`(B, ...)` -> `(B * beam_size, ...)`, each entry repeated `beam_size` times."""
    return tf.repeat(tensor, beam_size, axis=0)


def _merge(tensor, batch_size, beam_size):
    return tf.reshape(tensor, tf.concat([[batch_size * beam_size], tf.shape(tensor)[2:]], 0))


def _split(tensor, batch_size, beam_size):
    return tf.reshape(tensor, tf.concat([[batch_size, beam_size], tf.shape(tensor)[1:]], 0))


def beam_search(
    step_fn,
    start_ids,
    max_length,
    end_id,
    beam_size=4,
    length_penalty=0.0,
    state=(),
    context=(),
    pad_id=0,
    no_repeat_ngram_size=0,
    early_stopping=True,
):
    """Keeps the `beam_size` most probable hypotheses of every sequence.

    Same decoder contract as `greedy_search`: `step_fn(token_ids, index,
    state, context) -> (logits, state)` for one token per hypothesis, with
    `state` and `context` of batch size `B` here; they are repeated for the
    `B * beam_size` hypotheses inside (`context` once, `state` reordered after
    every step to follow the surviving hypotheses).

    At each step every live hypothesis is extended by every token; of the
    `2 * beam_size` best extensions, those among the best `beam_size` that
    end in `end_id` become finished hypotheses, scored `log P / ((5 + length) / 6) ** length_penalty` (GNMT),
    and the best `beam_size` others stay live. A sequence is done when it has
    `beam_size` finished hypotheses and no live one can still beat the worst
    of them; hypotheses still live after `max_length` tokens are finished
    there. Slots that no possible hypothesis fills (fewer than `beam_size`
    sequences of nonzero probability, for instance when `no_repeat_ngram_size`
    bans all others) are empty: `pad_id` tokens, length 0, score and
    log-probability `-inf`; no returned hypothesis repeats an n-gram.
    Sequences of a batch do not influence each other. One
    `tf.while_loop` with static shapes (traces once, compiles under XLA).

    With `beam_size=1` and `length_penalty=0` the result equals
    `greedy_search`.

    Args:
        step_fn: the decoder step (see `greedy_search`).
        start_ids: int tensor `(B,)`.
        max_length: int, the most tokens generated (the end token included).
        end_id: int.
        beam_size: int >= 1.
        length_penalty: float, GNMT's alpha (0: plain log-probability; larger
            values favour longer outputs).
        state: nested tensors `(B, ...)` updated by `step_fn`.
        context: nested tensors `(B, ...)` read by `step_fn`.
        pad_id: int, written after the end token.
        no_repeat_ngram_size: int, if n > 0 no hypothesis contains an n-gram
            twice (3: trigram blocking).
        early_stopping: bool, stop a sequence as soon as no live hypothesis
            can beat its worst finished one (exact: False runs every step to
            `max_length` and returns the same hypotheses, only slower).

    Returns:
        A dict, hypotheses sorted best first: `token_ids` int32 `(B,
        beam_size, max_length)`, `lengths` int32 `(B, beam_size)`, `scores`
        float32 `(B, beam_size)` (length-normalised) and `log_probs` float32
        `(B, beam_size)` (sums of token log-probabilities).

    Example:

    >>> # A toy decoder: after token t, t + 1 has probability 0.6, end (4) 0.4.
    >>> def step_fn(token_ids, index, state, context):
    ...     probs = 0.6 * tf.one_hot(token_ids + 1, 5) + 0.4 * tf.one_hot([4], 5)
    ...     return tf.math.log(probs + 1e-9), state
    >>> result = beam_search(step_fn, tf.constant([1]), max_length=5, end_id=4, beam_size=2)
    >>> result["token_ids"].numpy()  # P = 0.4 and 0.6 * 0.6 * 1.0
    array([[[4, 0, 0, 0, 0],
            [2, 3, 4, 0, 0]]], dtype=int32)
    >>> result["log_probs"].numpy().round(3)
    array([[-0.916, -1.022]], dtype=float32)

    References:
        Wu et al., "Google's Neural Machine Translation System", 2016, section 7
        (length normalisation); the static-shape loop follows tensor2tensor.
    """
    max_length = _common.check_arguments(
        max_length, no_repeat_ngram_size, end_id=end_id, pad_id=pad_id
    )
    end_id, pad_id, no_repeat_ngram_size = int(end_id), int(pad_id), int(no_repeat_ngram_size)
    step_fn = _common.checked_step(step_fn, end_id)
    beam_size = _checks.positive_int("beam_size", beam_size)
    if tf.is_tensor(early_stopping):  # a bool scalar, e.g. a signature's input
        if early_stopping.dtype != tf.bool or early_stopping.shape.rank != 0:
            raise ValueError(f"`early_stopping` must be a bool scalar, got {early_stopping!r}.")
    else:
        early_stopping = _checks.boolean("early_stopping", early_stopping, numpy_bool=True)
    alpha = _common.check_length_penalty(length_penalty)
    start_ids = _common.check_start_ids(start_ids)
    batch_size = tf.shape(start_ids)[0]
    k = beam_size
    pad = tf.constant(pad_id, tf.int32)

    alive_sequences = tf.concat(
        [tile_beams(start_ids, k)[:, None], tf.fill([batch_size * k, max_length], pad)], 1
    )
    alive_sequences = _split(alive_sequences, batch_size, k)  # (B, K, L + 1)
    # Only the first copy of each sequence is live at first: the K copies are equal.
    alive_log_probs = tf.tile(
        tf.constant([[0.0] + [-float("inf")] * (k - 1)], tf.float32), [batch_size, 1]
    )  # (B, K)
    # Slots never filled (fewer than K reachable hypotheses) stay pad / -inf.
    finished_sequences = tf.fill(tf.shape(alive_sequences), pad)
    finished_scores = tf.fill([batch_size, k], -float("inf"))
    finished_log_probs = tf.fill([batch_size, k], -float("inf"))
    finished_lengths = tf.zeros([batch_size, k], tf.int32)
    state = tf.nest.map_structure(lambda t: tile_beams(t, k), state)
    context = tf.nest.map_structure(lambda t: tile_beams(t, k), context)
    best_possible_factor = length_penalty_factor(max_length, alpha) if alpha >= 0 else None

    def top(scores, count, *tensors):
        """The `count` best of `scores` `(B, N)` and the matching rows of `tensors`."""
        values, indices = tf.math.top_k(scores, k=count)
        return (values,) + tuple(tf.gather(t, indices, batch_dims=1) for t in tensors)

    def cond(step, alive_sequences, alive_log_probs, finished_sequences, finished_scores,
             finished_log_probs, finished_lengths, state):
        # The best a live hypothesis can still reach: its log-probability only
        # falls, and its length factor is largest at the longest length.
        if best_possible_factor is None:
            factor = length_penalty_factor(step + 1, alpha)
        else:
            factor = best_possible_factor
        best_alive = alive_log_probs[:, 0] / factor
        worst_finished = tf.reduce_min(finished_scores, axis=1)  # -inf until K finished
        # Done: no live hypothesis can beat the worst finished one, or none is possible.
        done = (best_alive < worst_finished) | tf.equal(best_alive, -float("inf"))
        return (step < max_length) & ~(early_stopping & tf.reduce_all(done))

    def body(step, alive_sequences, alive_log_probs, finished_sequences, finished_scores,
             finished_log_probs, finished_lengths, state):
        flat_sequences = _merge(alive_sequences, batch_size, k)
        tokens = tf.gather(flat_sequences, step, axis=1)  # (B * K,)
        logits, state = step_fn(tokens, step, state, context)
        log_probs = _common.log_probabilities(logits)
        # A banned n-gram makes a hypothesis impossible (probability 0), so
        # that it can only fill a slot no possible hypothesis reaches, and
        # such slots are emptied at the end.
        log_probs = _common.maybe_block(
            log_probs, flat_sequences, step, no_repeat_ngram_size, banned=-float("inf")
        )
        vocabulary_size = tf.shape(log_probs)[-1]
        candidates = alive_log_probs[:, :, None] + _split(log_probs, batch_size, k)  # (B, K, V)
        candidates = tf.reshape(candidates, [batch_size, -1])  # (B, K * V)
        candidate_log_probs, indices = tf.math.top_k(candidates, k=2 * k)  # (B, 2K)
        origins = indices // vocabulary_size
        new_tokens = indices % vocabulary_size
        candidate_sequences = tf.gather(alive_sequences, origins, batch_dims=1)  # (B, 2K, L + 1)
        candidate_sequences = _split(
            _common.write_column(
                _merge(candidate_sequences, batch_size, 2 * k), step + 1,
                tf.reshape(new_tokens, [-1]),
            ),
            batch_size, 2 * k,
        )
        ended = tf.equal(new_tokens, end_id)

        # Live: the best K extensions that did not end.
        alive_log_probs, alive_sequences, alive_origins = top(
            tf.where(ended, -float("inf"), candidate_log_probs), k,
            candidate_sequences, origins,
        )
        flat_origins = tf.reshape(alive_origins + tf.range(batch_size)[:, None] * k, [-1])
        state = tf.nest.map_structure(lambda t: tf.gather(t, flat_origins), state)

        # Finished: the best K of the old finished and the newly ended. As in
        # fairseq, an ending counts only if it ranks among the best K
        # extensions (so that beam size 1 is exactly greedy search).
        ranked = tf.range(2 * k)[None, :] < k
        new_scores = tf.where(
            ended & ranked,
            candidate_log_probs / length_penalty_factor(step + 1, alpha),
            -float("inf"),
        )
        lengths = tf.fill([batch_size, 2 * k], step + 1)
        finished_scores, finished_sequences, finished_log_probs, finished_lengths = top(
            tf.concat([finished_scores, new_scores], 1), k,
            tf.concat([finished_sequences, candidate_sequences], 1),
            tf.concat([finished_log_probs, candidate_log_probs], 1),
            tf.concat([finished_lengths, lengths], 1),
        )
        return (step + 1, alive_sequences, alive_log_probs, finished_sequences, finished_scores,
                finished_log_probs, finished_lengths, state)

    (step, alive_sequences, alive_log_probs, finished_sequences, finished_scores,
     finished_log_probs, finished_lengths, _) = tf.while_loop(
        cond,
        body,
        (tf.constant(0), alive_sequences, alive_log_probs, finished_sequences, finished_scores,
         finished_log_probs, finished_lengths, state),
        maximum_iterations=max_length,
    )
    # Hypotheses still live at max_length end there and compete with the
    # finished ones (after an early stop they cannot win: not considered).
    at_limit = step >= max_length
    alive_scores = tf.where(
        at_limit, alive_log_probs / length_penalty_factor(max_length, alpha), -float("inf")
    )
    scores, token_ids, log_probs, lengths = top(
        tf.concat([finished_scores, alive_scores], 1), k,
        tf.concat([finished_sequences, alive_sequences], 1),
        tf.concat([finished_log_probs, alive_log_probs], 1),
        tf.concat([finished_lengths, tf.fill([batch_size, k], max_length)], 1),
    )
    # Impossible hypotheses (probability 0: a banned n-gram, or a token the
    # step gave -inf) rank last and only fill slots nothing possible reaches;
    # those slots are empty, as are slots never filled.
    possible = log_probs > -float("inf")
    return {
        "token_ids": tf.where(possible[:, :, None], token_ids[:, :, 1:], pad),
        "lengths": tf.where(possible, lengths, 0),
        "scores": tf.where(possible, scores, -float("inf")),
        "log_probs": log_probs,
    }
