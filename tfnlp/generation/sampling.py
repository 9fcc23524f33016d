"""Sampling over a cached step function: temperature, top-k, top-p, repetition penalty, seeds.

The same static-shape `tf.while_loop` as greedy search (`_loop.TokenLoop`),
with the next token drawn instead of taken: the step's logits are processed
in Hugging Face's order (repetition penalty, n-gram blocking, temperature,
top-k, top-p) and a token is drawn from their softmax by the Gumbel-max
trick, `argmax(logits + g)`, with `g = -log(-log(u))` and `u` from
Philox-4x32-10 keyed by the row's seed and counted by the step. So a row's
text depends on its seed alone (not on the batch it was decoded with), and
the same seed draws the same noise in eager mode, in a `tf.function`, under
XLA and in an exported SavedModel: the same text wherever the model's own
logits agree (XLA may change their last bits, which can only matter for a
near-tie).
"""

import numpy as np
import tensorflow as tf

from tfnlp.generation import _common, _loop, _philox

_INF = float("inf")

# name: (dtype, default, Python check, graph check, what a value must be)
_OPTIONS = {
    "temperature": (tf.float32, 1.0, lambda v: 0 < v < _INF,
                    lambda t: (t > 0) & (t < _INF), "a finite number > 0"),
    "top_k": (tf.int32, 0, lambda v: v >= 0, lambda t: t >= 0, "an int >= 0 (0: off)"),
    "top_p": (tf.float32, 1.0, lambda v: 0 < v <= 1, lambda t: (t > 0) & (t <= 1),
              "a number in (0, 1] (1: off)"),
    "repetition_penalty": (tf.float32, 1.0, lambda v: 0 < v < _INF,
                           lambda t: (t > 0) & (t < _INF), "a finite number > 0 (1: off)"),
}


def _python_values(name, value, integer):
    """The Python or NumPy scalar(s) of `value`, checked for type; None for a tensor."""
    if tf.is_tensor(value):
        return None
    values = np.asarray(value)
    if values.ndim > 1 or values.dtype == object or values.dtype.kind not in "biuf":
        raise ValueError(f"`{name}` must be a number or one number per sequence, got {value!r}.")
    if values.dtype.kind == "b" or (integer and values.dtype.kind == "f"):
        kind = "an int" if integer else "a number"
        raise ValueError(f"`{name}` must be {kind}, got {value!r}.")
    return values


def _checked_python(name, value):
    """Python or NumPy option values as a checked NumPy array (ValueError naming `name`)."""
    dtype, _, python_check, _, what = _OPTIONS[name]
    values = _python_values(name, value, dtype.is_integer)
    if not all(python_check(v) for v in values.reshape(-1).tolist()):
        raise ValueError(f"`{name}` must be {what}, got {value!r}.")
    return values


def active_options(batch_size=None, **values):
    """The options of `values` that are not at their "off" value, all of them checked.

    Python values are checked here (type, range, and one per sequence when
    `batch_size`, an int or a tensor, is known when traced); an option
    whose every value is its off value (`temperature` 1, `top_k` 0, `top_p`
    1, `repetition_penalty` 1) is then left out, so it costs nothing in
    the loop. Tensors are always kept (checked when run, see `per_row`).
    """
    static = tf.get_static_value(batch_size) if tf.is_tensor(batch_size) else batch_size
    active = {}
    for name, value in values.items():
        if tf.is_tensor(value):
            active[name] = value
            continue
        array = _checked_python(name, value)
        if array.ndim == 1 and static is not None and len(array) != int(static):
            raise ValueError(
                f"`{name}` must hold one value per sequence ({int(static)}), got {len(array)}."
            )
        if np.any(array != _OPTIONS[name][1]):
            active[name] = value
    return active


def per_row(name, value, batch_size):
    """Sampling option `name` as a `(B,)` tensor, checked (see `sample`).

    `value` is a Python or NumPy number, one number per row, or a tensor
    (scalar or `(B,)`). Python values are checked here, with a ValueError
    naming the option; tensor values by a graph assertion with the same
    message (an `InvalidArgumentError` when run; compiled out under XLA).
    """
    dtype, _, _, graph_check, what = _OPTIONS[name]
    message = f"`{name}` must be {what}"
    if not tf.is_tensor(value):
        tensor = tf.constant(_checked_python(name, value), dtype)
    else:
        tensor = value
        if not (tensor.dtype.is_integer if dtype.is_integer else tensor.dtype.is_floating):
            raise ValueError(f"{message}, got a {tensor.dtype.name} tensor.")
        tensor = tf.cast(tensor, dtype)
        check = tf.debugging.Assert(tf.reduce_all(graph_check(tensor)), [message, tensor],
                                    summarize=8)
        with tf.control_dependencies([check]):
            tensor = tf.identity(tensor)
    return _rows(name, tensor, batch_size)


def _rows(name, tensor, batch_size):
    if tensor.shape.rank not in (None, 0, 1):
        raise ValueError(f"`{name}` must be a scalar or have shape (B,), got {tensor.shape}.")
    if tensor.shape.rank == 0:
        return tf.fill([batch_size], tensor)
    check = tf.debugging.assert_equal(
        tf.size(tensor), batch_size, message=f"`{name}` must hold one value per sequence"
    )
    with tf.control_dependencies([check]):
        return tf.reshape(tensor, [batch_size])


def seeds(seed, batch_size):
    """int64 `(B,)` row seeds: from one int, a different seed per row; else one given per row.

    `seed` is a Python int in `[0, 2**63)`, one such int per row, or an
    integer tensor (a scalar is treated like an int, `(B,)` one per row).
    An int `s` gives row `b` the seed made by Philox from `(s, b)` (in
    `[0, 2**63)`, so it can be passed back as that row's seed): the rows of
    `seed=0` and `seed=1` share nothing.
    """
    if seed is None:
        raise ValueError("`seed` is required to sample: an int, or one int per sequence.")
    if not tf.is_tensor(seed):
        values = _python_values("seed", seed, integer=True)
        if not all(0 <= v < 2**63 for v in values.reshape(-1).tolist()):
            raise ValueError(f"`seed` must be an int in [0, 2**63), got {seed!r}.")
        seed = tf.constant(values, tf.int64)
    elif not seed.dtype.is_integer:
        raise ValueError(f"`seed` must be an int, got a {seed.dtype.name} tensor.")
    seed = tf.cast(seed, tf.int64)
    if seed.shape.rank == 0:
        return _row_seeds(seed, batch_size)
    return _rows("seed", seed, batch_size)


def _row_seeds(seed, batch_size):
    """Philox of key `seed` and counter `(b, 0, 0, 1)`: 63 bits per row."""
    key = tf.bitcast(seed, tf.uint64)
    key = (tf.cast(key, tf.uint32),
           tf.cast(tf.bitwise.right_shift(key, tf.constant(32, tf.uint64)), tf.uint32))
    rows = tf.cast(tf.range(batch_size), tf.uint32)
    zero = tf.zeros_like(rows)
    low, high, _, _ = _philox.philox_words((rows, zero, zero, zero + 1), key)
    high = tf.bitwise.bitwise_and(high, tf.constant(0x7FFFFFFF, tf.uint32))
    word = tf.bitwise.bitwise_or(
        tf.bitwise.left_shift(tf.cast(high, tf.uint64), tf.constant(32, tf.uint64)),
        tf.cast(low, tf.uint64))
    return tf.bitcast(word, tf.int64)


def repetition_penalized(logits, sequences, step, penalty, penalized_ids=None):
    """CTRL's repetition penalty on the tokens already generated (and `penalized_ids`).

    A seen token's logit `z` becomes `z / penalty` if `z > 0`, else `z *
    penalty` (Keskar et al., 2019; Hugging Face's rule): `penalty > 1` makes
    repeating less likely. `sequences` as in `_common.block_repeated_ngrams`
    (column 0, the start token, is not counted); `penalized_ids` `(B, P)`
    adds tokens such as a prompt's (negative ids are ignored).
    """
    batch_size, vocabulary = tf.shape(logits)[0], tf.shape(logits)[1]
    columns = tf.range(tf.shape(sequences)[1])
    generated = (columns >= 1) & (columns <= step)
    ids = sequences
    valid = tf.broadcast_to(generated[None, :], tf.shape(sequences))
    if penalized_ids is not None:
        penalized_ids = tf.cast(penalized_ids, tf.int32)
        ids = tf.concat([ids, penalized_ids], axis=1)
        valid = tf.concat([valid, penalized_ids >= 0], axis=1)
    valid &= ids < vocabulary
    rows = tf.broadcast_to(tf.range(batch_size)[:, None], tf.shape(ids))
    indices = tf.stack([rows, tf.clip_by_value(ids, 0, vocabulary - 1)], axis=-1)
    seen = tf.scatter_nd(tf.reshape(indices, [-1, 2]), tf.reshape(tf.cast(valid, tf.int32), [-1]),
                         tf.shape(logits)) > 0
    penalty = penalty[:, None]
    return tf.where(seen, tf.where(logits > 0, logits / penalty, logits * penalty), logits)


def static_top_k_cap(top_k, vocabulary_size):
    """A static bound on Python `top_k` values (a power of two), or None.

    With it, `truncated` ranks only the `cap` largest logits (`tf.math.top_k`)
    instead of sorting the vocabulary, which costs many times more on a CPU
    (benchmarks/README.md, sampling). None when `top_k` is a tensor or turns
    top-k off (0) for some row.
    """
    if top_k is None or tf.is_tensor(top_k):
        return None
    values = np.asarray(top_k).reshape(-1)
    if not values.size or (values <= 0).any():
        return None
    cap = 1 << int(values.max() - 1).bit_length()  # the next power of two
    return min(cap, vocabulary_size) if vocabulary_size else cap


def truncated(logits, top_k, top_p, cap=None):
    """Logits outside the top-k and the top-p nucleus set to `-inf` (per row).

    Tokens are ranked by logit, ties broken toward the lower id (as
    `argmax` does, so `top_k=1` is greedy search). Top-k keeps the first
    `top_k[b]` (0: all); top-p then keeps the shortest prefix of the rest
    whose probability (renormalised after top-k) reaches `top_p[b]` (1: all),
    always at least one token. Hugging Face's top-k keeps every token tied
    with the k-th; here exactly k are kept. With `cap` (a Python int no
    smaller than any `top_k[b]`, all > 0) only the `cap` largest logits
    are ranked (`tf.math.top_k`, lower ids first among ties) instead of the
    whole vocabulary being sorted: the same tokens, cheaper.
    """
    return in_vocabulary_order(*candidates(logits, top_k, top_p, cap), tf.shape(logits))


def candidates(logits, top_k, top_p, cap=None):
    """`(values, token_ids)` `(B, C)`: the ranked candidates, `-inf` where truncated.

    `truncated`'s tokens, before they are put back in vocabulary order: `C`
    is `cap`, or the vocabulary size without it.
    """
    if cap is None:
        order = tf.argsort(logits, axis=-1, direction="DESCENDING", stable=True)  # (B, V) ids
        ordered = tf.gather(logits, order, batch_dims=1)
        width = tf.shape(logits)[1]
    else:
        ordered, order = tf.math.top_k(logits, k=cap)  # (B, cap)
        width = cap
    rank = tf.range(width)[None, :]
    k = tf.where(top_k > 0, tf.minimum(top_k, width), width)[:, None]
    in_top_k = rank < k
    probabilities = tf.nn.softmax(tf.where(in_top_k, ordered, -_INF), axis=-1)
    before = tf.math.cumsum(probabilities, axis=-1, exclusive=True)
    kept = in_top_k & ((before < top_p[:, None]) | (top_p[:, None] >= 1.0))
    kept |= tf.equal(rank, 0)
    return tf.where(kept & tf.math.is_finite(ordered), ordered, -_INF), order


def processed_logits(logits, sequences, step, options, no_repeat_ngram_size=0,
                     penalized_ids=None, top_k_cap=None):
    """float32 logits to sample from: penalty, n-gram blocking, temperature, top-k, top-p.

    `options` holds `(B,)` tensors `temperature`, `top_k`, `top_p` and
    `repetition_penalty` (see `per_row`); a missing one is off. Banned and
    truncated tokens get `-inf`; the first token of a row is never removed
    by top-k or top-p.
    """
    values, token_ids = processed_candidates(logits, sequences, step, options,
                                             no_repeat_ngram_size, penalized_ids, top_k_cap)
    if token_ids is None:
        return values
    return in_vocabulary_order(values, token_ids, tf.shape(logits))


def in_vocabulary_order(values, token_ids, shape):
    """Candidates' `values` `(B, C)` put at their `token_ids` in a `(B, V)` `shape` of `-inf`."""
    rows = tf.broadcast_to(tf.range(tf.shape(token_ids)[0])[:, None], tf.shape(token_ids))
    return tf.tensor_scatter_nd_update(tf.fill(shape, -_INF),
                                       tf.stack([rows, token_ids], axis=-1), values)


def processed_candidates(logits, sequences, step, options, no_repeat_ngram_size=0,
                         penalized_ids=None, top_k_cap=None):
    """`processed_logits` as `(values, token_ids)` candidates (`candidates`) when top-k or
    top-p is on, else `(logits, None)`: with a top-k cap, only `cap` per row."""
    logits = tf.cast(logits, tf.float32)
    if "repetition_penalty" in options:
        logits = repetition_penalized(logits, sequences, step, options["repetition_penalty"],
                                      penalized_ids)
    logits = _common.maybe_block(logits, sequences, step, no_repeat_ngram_size, banned=-_INF)
    if "temperature" in options:
        logits = logits / options["temperature"][:, None]
    if "top_k" not in options and "top_p" not in options:
        return logits, None
    batch_size = tf.shape(logits)[0]
    top_k = options.get("top_k", tf.zeros([batch_size], tf.int32))
    top_p = options.get("top_p", tf.ones([batch_size], tf.float32))
    return candidates(logits, top_k, top_p, top_k_cap if "top_k" in options else None)


def gumbel_choice(logits, seeds, step, token_ids=None, vocabulary_size=None):
    """`argmax(logits + Gumbel noise)`: one draw per row from `softmax(logits)`.

    With `token_ids` `(B, C)`, `logits` are those candidates' (`candidates`)
    and the noise is the one each token gets over the whole vocabulary
    (`_philox.uniform_at`): the same draw, at the candidates' cost (when
    they are a quarter of `vocabulary_size` or more, the whole vocabulary's
    numbers are drawn and gathered: cheaper).
    """
    if token_ids is not None:
        count = token_ids.shape[-1]
        if count is not None and vocabulary_size and 4 * count > vocabulary_size:
            # Most of the vocabulary: draw it whole (a Philox block gives 4 tokens).
            numbers = tf.gather(_philox.uniform(seeds, step, vocabulary_size), token_ids,
                                batch_dims=1)
        else:
            numbers = _philox.uniform_at(seeds, step, token_ids)
        best = tf.argmax(logits - tf.math.log(-tf.math.log(numbers)), axis=-1,
                         output_type=tf.int32)
        return tf.gather(token_ids, best, batch_dims=1)
    size = logits.shape[-1]
    if size is None:
        raise ValueError("Sampling needs the vocabulary size known when traced (logits "
                         f"shape {logits.shape}).")
    noise = -tf.math.log(-tf.math.log(_philox.uniform(seeds, step, size)))
    return tf.argmax(logits + noise, axis=-1, output_type=tf.int32)


def sampling_options(batch_size, temperature=1.0, top_k=0, top_p=1.0, repetition_penalty=1.0):
    """The four sampling options as checked `(B,)` tensors (`per_row`)."""
    given = {"temperature": temperature, "top_k": top_k, "top_p": top_p,
             "repetition_penalty": repetition_penalty}
    return {name: per_row(name, value, batch_size) for name, value in given.items()}


def row_limits(max_new_tokens, max_length, batch_size):
    """int32 `(B,)` per-row token limits in `1 .. max_length`, or None for `max_length`."""
    if max_new_tokens is None:
        return None
    message = f"`max_new_tokens` must be an int in [1, {max_length}] (the search's max_length)"
    if not tf.is_tensor(max_new_tokens):
        values = _python_values("max_new_tokens", max_new_tokens, integer=True)
        if not all(1 <= v <= max_length for v in values.reshape(-1).tolist()):
            raise ValueError(f"{message}, got {max_new_tokens!r}.")
        limits = tf.constant(values, tf.int32)
    else:
        if not max_new_tokens.dtype.is_integer:
            raise ValueError(f"{message}, got a {max_new_tokens.dtype.name} tensor.")
        limits = tf.cast(max_new_tokens, tf.int32)
        check = tf.debugging.Assert(
            tf.reduce_all((limits >= 1) & (limits <= max_length)), [message, limits], summarize=8
        )
        with tf.control_dependencies([check]):
            limits = tf.identity(limits)
    return _rows("max_new_tokens", limits, batch_size)


def sampling_loop(step_fn, start_ids, max_length, end_id, seed, *, temperature=1.0, top_k=0,
                  top_p=1.0, repetition_penalty=1.0, context=(), pad_id=0,
                  no_repeat_ngram_size=0, max_new_tokens=None, penalized_ids=None,
                  top_k_cap=None):
    """The checked `TokenLoop` of `sample` (also stepped one token at a time to stream).

    `top_k_cap`: a static bound on `top_k` when it is a tensor whose values
    were Python ints (see `static_top_k_cap`); taken from Python `top_k` values
    otherwise.
    """
    max_length = _common.check_arguments(max_length, no_repeat_ngram_size, end_id=end_id,
                                         pad_id=pad_id)
    end_id, pad_id, no_repeat_ngram_size = int(end_id), int(pad_id), int(no_repeat_ngram_size)
    step_fn = _common.checked_step(step_fn, end_id)
    start_ids = _common.check_start_ids(start_ids)
    batch_size = tf.shape(start_ids)[0]
    given = active_options(batch_size, temperature=temperature, top_k=top_k, top_p=top_p,
                           repetition_penalty=repetition_penalty)
    options = {name: per_row(name, value, batch_size) for name, value in given.items()}
    row_seeds = seeds(seed, batch_size)
    limits = row_limits(max_new_tokens, max_length, batch_size)

    def choose(logits, sequences, step):
        cap = static_top_k_cap(top_k, logits.shape[-1]) if top_k_cap is None else top_k_cap
        if cap is not None and logits.shape[-1] is not None:
            cap = min(cap, logits.shape[-1])
        values, token_ids = processed_candidates(logits, sequences, step, options,
                                                 no_repeat_ngram_size, penalized_ids, cap)
        return gumbel_choice(values, row_seeds, step, token_ids, logits.shape[-1])

    loop = _loop.TokenLoop(step_fn, max_length, end_id, choose, context, pad_id, limits)
    return loop, start_ids


def sample(step_fn, start_ids, max_length, end_id, *, seed, temperature=1.0, top_k=0, top_p=1.0,
           repetition_penalty=1.0, state=(), context=(), pad_id=0, no_repeat_ngram_size=0,
           max_new_tokens=None, penalized_ids=None):
    """Draws each next token from the model's processed distribution until `end_id`.

    The decoder contract is `greedy_search`'s (`step_fn(token_ids, index,
    state, context) -> (logits, state)`, one token per sequence). At each
    step the logits are processed in this order, as Hugging Face does:

    1. `repetition_penalty` (CTRL): a token already generated (or in
       `penalized_ids`, e.g. the prompt) has its logit divided by the
       penalty if positive, multiplied if negative;
    2. `no_repeat_ngram_size`: tokens that would repeat an n-gram are removed;
    3. divided by `temperature`;
    4. `top_k`: only the k largest are kept;
    5. `top_p`: only the smallest set of the most probable tokens whose
       renormalised probability reaches `top_p` is kept;

    and the token is drawn from the softmax of what is left. Every option
    may be one value or one value per sequence (a list, array or tensor
    `(B,)`), so an exported model takes them at request time. With `top_k=1`
    (or a temperature near 0) this is greedy search.

    Randomness is stateless: row `b` draws from Philox-4x32-10 keyed by its
    seed and counted by the step, so the same seed gives the same tokens in
    eager mode, in a `tf.function`, under XLA (where TensorFlow's own
    stateless ops would differ) and in a SavedModel, whatever else is in
    the batch.

    Args:
        step_fn: the decoder step.
        start_ids: int tensor `(B,)`, the first input token of each sequence.
        max_length: int, the most tokens generated (end token included).
        end_id: int, the token that ends a sequence.
        seed: int in `[0, 2**63)` (each row gets its own, see `seeds`), one int per
            sequence, or an integer tensor.
        temperature: number > 0.
        top_k: int >= 0, 0 keeps all tokens.
        top_p: number in (0, 1], 1 keeps all tokens.
        repetition_penalty: number > 0, 1 is off.
        state: nested tensors `(B, ...)` updated by `step_fn`.
        context: nested tensors `(B, ...)` read by `step_fn`.
        pad_id: int, written after the end token.
        no_repeat_ngram_size: int, n > 0 forbids repeating an n-gram.
        max_new_tokens: optional int or `(B,)` ints in `[1, max_length]`:
            a sequence ends after this many tokens (shapes stay
            `max_length`).
        penalized_ids: optional int `(B, P)` tokens the repetition penalty
            also counts (negative entries are ignored).

    Returns:
        A dict like `greedy_search`'s: `token_ids` int32 `(B, max_length)`,
        `lengths` int32 `(B,)`, and `scores` float32 `(B,)`, the sum of the
        model's own log-probabilities (before processing) of the drawn
        tokens.

    Python option values are checked with a ValueError naming the option;
    tensor values by graph assertions (`InvalidArgumentError` when run,
    compiled out under XLA).

    Example:

    >>> # A toy decoder: token (input + 1) is likely, the end token 4 too.
    >>> def step_fn(token_ids, index, state, context):
    ...     return tf.one_hot(token_ids + 1, 5) * 3.0 + tf.one_hot([4], 5), state
    >>> a = sample(step_fn, tf.constant([0, 0]), max_length=6, end_id=4, seed=7)
    >>> b = sample(step_fn, tf.constant([0, 0]), max_length=6, end_id=4, seed=7)
    >>> bool(tf.reduce_all(a["token_ids"] == b["token_ids"]))
    True
    >>> greedy = sample(step_fn, tf.constant([0]), max_length=6, end_id=4, seed=1, top_k=1)
    >>> greedy["token_ids"].numpy()
    array([[1, 2, 3, 4, 0, 0]], dtype=int32)
    """
    loop, start_ids = sampling_loop(
        step_fn, start_ids, max_length, end_id, seed, temperature=temperature, top_k=top_k,
        top_p=top_p, repetition_penalty=repetition_penalty, context=context, pad_id=pad_id,
        no_repeat_ngram_size=no_repeat_ngram_size, max_new_tokens=max_new_tokens,
        penalized_ids=penalized_ids,
    )
    return loop.run(start_ids, state)
