"""The one-token-per-step loop that greedy search and sampling share, whole or step by step."""

import tensorflow as tf

from tfnlp.generation import _common


class TokenLoop:
    """One token per sequence per step, until `end_id` or the length limit.

    `choose(logits, sequences, step) -> next_ids` picks the next tokens from
    the step's float32 logits `(B, V)`; `sequences` `(B, L + 1)` holds the
    start token and the tokens generated so far (see
    `_common.block_repeated_ngrams`). The loop writes them, keeps each
    sequence's score (the sum of the model's log-probabilities of its tokens)
    and length, and gives `pad_id` after a sequence's end token. `run` is
    one `tf.while_loop`; `initial`, `body` and `done` are its pieces, for a
    caller that steps the same loop one token at a time (streaming).

    Args:
        step_fn: a checked `step_fn` (`_common.checked_step`).
        max_length: Python int, the most tokens generated.
        end_id, pad_id: Python ints.
        choose: see above.
        context: nested tensors read by `step_fn`.
        limits: optional int32 `(B,)`, fewer tokens for some sequences
            (each in `1 .. max_length`): a sequence ends after `limits[b]`.
    """

    def __init__(self, step_fn, max_length, end_id, choose, context=(), pad_id=0, limits=None):
        self.step_fn = step_fn
        self.max_length = max_length
        self.end_id = end_id
        self.pad_id = pad_id
        self.choose = choose
        self.context = context
        self.limits = limits

    def initial(self, start_ids, state):
        """The loop variables before the first step."""
        batch_size = tf.shape(start_ids)[0]
        pad = tf.constant(self.pad_id, tf.int32)
        sequences = tf.concat([start_ids[:, None], tf.fill([batch_size, self.max_length], pad)], 1)
        return (tf.constant(0), sequences, tf.zeros([batch_size], tf.bool),
                tf.zeros([batch_size], tf.float32), tf.zeros([batch_size], tf.int32), state)

    def done(self, step, sequences, finished, scores, lengths, state):
        return (step >= self.max_length) | tf.reduce_all(finished)

    def body(self, step, sequences, finished, scores, lengths, state):
        tokens = tf.gather(sequences, step, axis=1)  # (B,)
        logits, state = self.step_fn(tokens, step, state, self.context)
        log_probs = _common.log_probabilities(logits)
        next_ids = self.choose(tf.cast(logits, tf.float32), sequences, step)
        next_log_probs = tf.gather(log_probs, next_ids, batch_dims=1)
        next_ids = tf.where(finished, self.pad_id, next_ids)
        scores += tf.where(finished, 0.0, next_log_probs)
        lengths += tf.cast(~finished, tf.int32)
        finished |= tf.equal(next_ids, self.end_id)
        if self.limits is not None:
            finished |= lengths >= self.limits
        sequences = _common.write_column(sequences, step + 1, next_ids)
        return step + 1, sequences, finished, scores, lengths, state

    def run(self, start_ids, state):
        """The whole loop; returns `result`'s dict."""
        final = tf.while_loop(
            lambda *loop: ~self.done(*loop), self.body, self.initial(start_ids, state),
            maximum_iterations=self.max_length,
        )
        return self.result(final)

    @staticmethod
    def result(loop):
        _, sequences, _, scores, lengths, _ = loop
        return {"token_ids": sequences[:, 1:], "lengths": lengths, "scores": scores}
