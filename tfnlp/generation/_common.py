"""What greedy and beam search share: argument checks, n-gram blocking."""


import tensorflow as tf

from tfnlp import _checks, _devices

# Added to the log-probability of a banned token: finite (no inf - inf = NaN
# when scores are combined) yet far below any real log-probability.
BANNED = -1e9


def check_arguments(max_length, no_repeat_ngram_size, **token_ids):
    """Checks the search settings; `token_ids` are named ids (`end_id=3`, ...)."""
    max_length = _checks.positive_int("max_length", max_length)
    for name, value in token_ids.items():
        _checks.non_negative_int(name, value, note="a token id")
    _checks.non_negative_int("no_repeat_ngram_size", no_repeat_ngram_size, note="0 turns blocking off")
    return max_length


def check_length_penalty(length_penalty):
    """`length_penalty` as a float; a bool, a non-number, NaN or an infinity is refused.

    (A NaN or infinite exponent turned every score into NaN or 0, so beam
    search returned empty, unranked hypotheses.)
    """
    return _checks.finite_float("length_penalty", length_penalty)


def resolve_jit_compile(jit_compile):
    """`jit_compile` as a bool; `"auto"` is XLA exactly when a GPU or TPU is visible.

    Keras' rule for `compile(jit_compile="auto")` on one device, and what
    the measurements say for decoding (`benchmarks/generation_benchmark.py`,
    figures in benchmarks/README.md): on a GPU XLA decodes a step many times
    faster (without it the step is kernel launches); on a CPU it gains less,
    loses in bfloat16 and compiles once per input shape, so `"auto"` leaves
    it off there.

    >>> resolve_jit_compile("auto") == bool(tf.config.list_physical_devices("GPU"))
    True
    """
    if isinstance(jit_compile, str) and jit_compile == "auto":
        return _devices.accelerator_visible()
    if not isinstance(jit_compile, bool):
        raise ValueError(f"`jit_compile` must be True, False or 'auto', got {jit_compile!r}.")
    return jit_compile


def check_start_ids(start_ids):
    """`start_ids` as int32 `(B,)`: a TypeError for another dtype, a ValueError for another rank."""
    start_ids = _checks.integer_tensor("start_ids", start_ids, "(B,)", dtype_error=TypeError,
                                       unknown_rank=True)
    return tf.cast(start_ids, tf.int32)


def checked_step(step_fn, end_id):
    """`step_fn` wrapped so that a wrong return is refused with an error naming it.

    Checked on every call (at trace time inside a `tf.function`, so free in
    the loop): the return is a pair `(logits, state)`; the state has the
    nested structure of the state given, and every tensor of it keeps its
    dtype and shape (write into caches, do not grow them: `tf.while_loop`
    needs fixed shapes, and in eager mode a change would go unnoticed); and
    `end_id` is one of the logits' tokens, else no sequence could end. The
    logits' shape is checked by `log_probabilities`.
    """
    if not callable(step_fn):
        raise ValueError(f"`step_fn` must be callable, got {type(step_fn).__name__}.")

    def step(token_ids, index, state, context):
        result = step_fn(token_ids, index, state, context)
        if not isinstance(result, (tuple, list)) or len(result) != 2:
            got = type(result).__name__
            if isinstance(result, (tuple, list)):
                got += f" of length {len(result)}"
            raise ValueError(f"`step_fn` must return a pair (logits, state), got {got}.")
        logits, new_state = tf.convert_to_tensor(result[0]), result[1]
        try:
            tf.nest.assert_same_structure(state, new_state)
        except (ValueError, TypeError) as error:
            raise ValueError(
                f"`step_fn` must return the state with the nested structure it was given: {error}"
            ) from None
        pairs = zip(tf.nest.flatten(state), tf.nest.flatten(new_state), strict=True)
        for number, (old, new) in enumerate(pairs):
            old, new = tf.convert_to_tensor(old), tf.convert_to_tensor(new)
            if new.dtype != old.dtype or not new.shape.is_compatible_with(old.shape):
                raise ValueError(
                    f"`step_fn` changed state tensor {number} from {old.shape} {old.dtype.name} to "
                    f"{new.shape} {new.dtype.name}: every state tensor must keep its shape and "
                    "dtype (write into caches at `index`, do not grow them)."
                )
        size = logits.shape[-1] if logits.shape.rank else None
        if size is not None and end_id >= size:
            raise ValueError(
                f"`end_id` ({end_id}) is not one of the {size} tokens `step_fn` scores: no "
                "sequence could end."
            )
        return logits, new_state

    return step


def log_probabilities(logits, name="step_fn"):
    """float32 log-softmax of `(N, V)` logits, with a clear error on bad shapes."""
    if logits.shape.rank is not None and logits.shape.rank != 2:
        raise ValueError(
            f"`{name}` must return logits of shape (N, vocabulary_size), got {logits.shape}."
        )
    if logits.shape[-1] is not None and logits.shape[-1] < 2:
        raise ValueError(f"`{name}` must return logits over at least 2 tokens, got {logits.shape}.")
    return tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)


def write_column(sequences, column, values):
    """`sequences[:, column] = values` for `(N, L)` sequences, static shapes."""
    positions = tf.range(tf.shape(sequences)[1])
    return tf.where(positions[None, :] == column, values[:, None], sequences)


def block_repeated_ngrams(log_probs, sequences, step, n, banned=BANNED):
    """Bans every token that would repeat an n-gram already generated.

    `sequences` `(N, L + 1)` holds the start token at column 0 and the tokens
    generated so far in columns `1 .. step`; the next token goes to column
    `step + 1`. A candidate `w` is banned when `(last n - 1 tokens, w)`
    already occurs among the generated tokens (the start token is not part
    of any n-gram). Static shapes: every earlier n-gram is compared at once
    and the banned tokens are scattered into a `(N, V)` mask.

    Args:
        log_probs: float32 `(N, V)`.
        sequences: int32 `(N, L + 1)`.
        step: scalar int32, the number of tokens generated so far.
        n: Python int >= 1.
        banned: the log-probability given to banned tokens (`BANNED`, or
            `-inf` where a hypothesis with a banned n-gram must drop out).

    Returns:
        `log_probs` with banned tokens at `banned`.
    """
    width = sequences.shape[1] - n + 1  # n-grams starting at columns 0 .. width - 1
    if width <= 0:
        return log_probs
    matches = tf.ones_like(sequences[:, :width], dtype=tf.bool)  # (N, width)
    for m in range(n - 1):
        # The candidate n-gram's m-th token is the generated token step - n + 2 + m.
        previous = tf.gather(sequences, tf.maximum(step - n + 2 + m, 0), axis=1)  # (N,)
        matches &= tf.equal(sequences[:, m : m + width], previous[:, None])
    starts = tf.range(width)
    # An earlier n-gram starts after the start token and ends at or before `step`.
    matches &= ((starts >= 1) & (starts + n - 1 <= step))[None, :]
    banned_tokens = sequences[:, n - 1 : n - 1 + width]  # (N, width)
    # Unmatched slots may hold pad or start ids outside the vocabulary.
    banned_tokens = tf.clip_by_value(banned_tokens, 0, tf.shape(log_probs)[1] - 1)
    rows = tf.broadcast_to(tf.range(tf.shape(sequences)[0])[:, None], tf.shape(banned_tokens))
    indices = tf.stack([rows, banned_tokens], axis=-1)  # (N, width, 2)
    counts = tf.scatter_nd(
        tf.reshape(indices, [-1, 2]),
        tf.reshape(tf.cast(matches, tf.int32), [-1]),
        tf.shape(log_probs),
    )
    return tf.where(counts > 0, tf.constant(banned, log_probs.dtype), log_probs)


def maybe_block(log_probs, sequences, step, n, banned=BANNED):
    return block_repeated_ngrams(log_probs, sequences, step, n, banned) if n else log_probs
