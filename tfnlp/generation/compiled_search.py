"""What every model's `generate` shares: checks, tracing once per setting, search choice, streaming."""

import numbers
import os
import random

import numpy as np
import tensorflow as tf

from tfnlp import _checks
from tfnlp.generation import _common
from tfnlp.generation import sampling as sampling_lib
from tfnlp.generation.beam_search import beam_search
from tfnlp.generation.greedy_search import greedy_loop


def check_source(token_ids, padding_mask, name):
    """`(token_ids, padding_mask)` as int32 `(B, S)`, or a ValueError naming `name`.

    The mask (named like `name`, `..._padding_mask`) must have the ids'
    shape: a `(B, 1)` or `(1, S)` mask would otherwise broadcast. Shapes
    unknown when traced are compared when run (a `tf.debugging` assertion,
    which XLA compiles out).
    """
    token_ids = tf.cast(_checks.integer_tensor(name, token_ids, "(B, S)"), tf.int32)
    if padding_mask is None:
        return token_ids, tf.ones_like(token_ids)
    padding_mask = tf.convert_to_tensor(padding_mask)
    if padding_mask.shape.rank is None:
        padding_mask = tf.ensure_shape(padding_mask, [None, None])  # the rank, when run
    mask_name = name.replace("token_ids", "padding_mask")
    message = f"`{mask_name}` must have the shape of `{name}`"
    if not padding_mask.shape.is_compatible_with(token_ids.shape):
        raise ValueError(f"{message} {token_ids.shape}, got {padding_mask.shape}.")
    if not (padding_mask.shape.is_fully_defined() and token_ids.shape.is_fully_defined()):
        check = tf.debugging.assert_equal(tf.shape(padding_mask), tf.shape(token_ids),
                                          message=message)
        with tf.control_dependencies([check]):
            padding_mask = tf.identity(padding_mask)
    return token_ids, tf.cast(tf.cast(padding_mask, tf.bool), tf.int32)


def decoding_options(beam_size, temperature=None, top_k=None, top_p=None, seed=None,
                     repetition_penalty=1.0, max_new_tokens=None):
    """`(sampling, options)` of a model's `generate` arguments, checked.

    Sampling is on when any of `temperature`, `top_k`, `top_p` or `seed` is
    given (a missing seed is drawn at random); it needs `beam_size=1`, as do
    `repetition_penalty` and `max_new_tokens`. `options` keeps the given
    values (Python or tensors) for `CompiledSearch.run`, which makes them
    `(B,)` tensors.
    """
    given = {"temperature": temperature, "top_k": top_k, "top_p": top_p, "seed": seed}
    sampling = any(value is not None for value in given.values())
    options = {}
    if sampling:  # options not given stay out (off, at no cost in the loop)
        options = {name: value for name, value in given.items() if value is not None}
        options.setdefault("seed", random.SystemRandom().randrange(2**63))
    options.update(sampling_lib.active_options(repetition_penalty=repetition_penalty))
    if max_new_tokens is not None:
        options["max_new_tokens"] = max_new_tokens
    if options and not (isinstance(beam_size, numbers.Integral) and beam_size == 1):
        names = ", ".join(f"`{name}`" for name in options)
        raise ValueError(
            f"{names} work with greedy search and sampling only (`beam_size=1`), got "
            f"beam_size={beam_size!r}."
        )
    return sampling, options


def check_stream(stream, beam_size):
    """Refuses a non-bool `stream`, and streaming with beam search."""
    _checks.boolean("stream", stream)
    if stream and beam_size != 1:
        raise ValueError(
            f"Streaming decodes one hypothesis per sequence: `beam_size` must be 1, got "
            f"{beam_size!r}."
        )


def streamed_texts(tokenizer, steps):
    """Yields, for each step of `steps` (`(B,)` token ids), the new text of every sequence.

    The prefix decoded so far is detokenized at every step and the part
    after the text already yielded is the piece (a WordPiece `##` piece
    continues a word, any other token starts one with a space). WordPiece
    detokenization only appends as tokens come, so the pieces join into
    the final texts (`tests/models/test_sampling_models.py`); a
    detokenizer that rewrote earlier text would break that.
    """
    tokens, previous = [], None
    for ids in steps:
        tokens.append(ids)
        texts = [t.decode("utf-8") for t in
                 tokenizer.detokenize(tf.constant(np.stack(tokens, axis=1))).numpy()]
        previous = previous or [""] * len(texts)
        pieces = []
        for old, new in zip(previous, texts, strict=True):
            shared = len(os.path.commonprefix([old, new]))
            pieces.append(new[shared:])
        previous = texts
        yield pieces


def _option_tensors(options, batch_size, max_length):
    """The options as checked `(B,)` tensors (`sampling.per_row` and friends)."""
    tensors = {}
    for name, value in options.items():
        if name == "seed":
            tensors[name] = sampling_lib.seeds(value, batch_size)
        elif name == "max_new_tokens":
            tensors[name] = sampling_lib.row_limits(value, max_length, batch_size)
        else:
            tensors[name] = sampling_lib.per_row(name, value, batch_size)
    return tensors


class CompiledSearch:
    """A model's `generate`: one traced `tf.function` per search setting.

    `run` checks the settings (clear errors before any tracing), then calls
    the function traced for them, with any batch size and source length:
    greedy search for `beam_size=1`, sampling when sampling options are
    given, else beam search, returning the best hypothesis. Sampling
    options (`temperature`, `top_k`, `top_p`, `seed`,
    `repetition_penalty`, `max_new_tokens`) are inputs of the traced
    function, so new values do not trace again. `stream` steps the same
    loop one token at a time. A plain object, so neither Keras nor
    `tf.Module` tracks it: the functions are rebuilt on demand, never saved
    with the model.

    Args:
        step_fn: the model's `decoding_step`.
        initial_state_fn: `(source_ids, source_mask, max_length, use_cache,
            **model_ids) -> (state, context)`, e.g. the model's
            `initial_decoding_state`. A dict context's `penalized_ids`
            `(B, P)` (e.g. a prompt's, -1 for none) count for the
            repetition penalty like generated tokens.
        check_fn: optional `(source_ids, source_mask, max_length, use_cache)`
            called after the settings are checked, on eager sources only: a
            model's checks of the data against the settings that must not
            depend on graph assertions (XLA compiles those out).
    """

    def __init__(self, step_fn, initial_state_fn, check_fn=None):
        self.step_fn = step_fn
        self.initial_state_fn = initial_state_fn
        self.check_fn = check_fn
        self.by_setting = {}

    def _settings(self, source_ids, source_mask, start_id, end_id, max_length, beam_size,
                  length_penalty, no_repeat_ngram_size, pad_id, use_cache, jit_compile,
                  options, model_ids):
        # The model's own ids first: UniLM passes its mask_id as start_id too.
        _common.check_arguments(max_length, no_repeat_ngram_size, **model_ids,
                                start_id=start_id, end_id=end_id, pad_id=pad_id)
        beam_size = _checks.positive_int("beam_size", beam_size)
        jit_compile = _common.resolve_jit_compile(jit_compile)
        length_penalty = _common.check_length_penalty(length_penalty)
        max_length = int(max_length)
        if self.check_fn is not None and tf.executing_eagerly():
            self.check_fn(source_ids, source_mask, max_length, bool(use_cache))
        return {
            "start_id": int(start_id), "end_id": int(end_id), "pad_id": int(pad_id),
            "max_length": max_length, "beam_size": beam_size, "length_penalty": length_penalty,
            "no_repeat_ngram_size": int(no_repeat_ngram_size), "use_cache": bool(use_cache),
            "jit_compile": jit_compile, "options": tuple(sorted(options)),
            # Python top-k values: rank only the largest logits (a power-of-two bound).
            "top_k_cap": sampling_lib.static_top_k_cap(options.get("top_k"), None),
            "ids": tuple(sorted((name, int(value)) for name, value in model_ids.items())),
        }

    def _begin(self, setting, source_ids, source_mask, options):
        """`((loop, start_ids), state, context)`; `(None, None)` for beam search."""
        state, context = self.initial_state_fn(
            source_ids, source_mask, setting["max_length"], setting["use_cache"],
            **dict(setting["ids"])
        )
        if setting["beam_size"] > 1:
            return (None, None), state, context
        return self._loop(setting, context, options, tf.shape(source_ids)[0]), state, context

    def _loop(self, setting, context, options, batch_size):
        start_ids = tf.fill([batch_size], setting["start_id"])
        common = {"context": context, "pad_id": setting["pad_id"],
                  "no_repeat_ngram_size": setting["no_repeat_ngram_size"],
                  "max_new_tokens": options.get("max_new_tokens"),
                  "repetition_penalty": options.get("repetition_penalty", 1.0),
                  "penalized_ids": context.get("penalized_ids") if isinstance(context, dict)
                  else None}
        args = (self.step_fn, start_ids, setting["max_length"], setting["end_id"])
        if "seed" in options:
            loop, _ = sampling_lib.sampling_loop(
                *args, options["seed"], temperature=options.get("temperature", 1.0),
                top_k=options.get("top_k", 0), top_p=options.get("top_p", 1.0),
                top_k_cap=setting["top_k_cap"], **common)
        else:
            loop, _ = greedy_loop(*args, **common)
        return loop, start_ids

    def run(self, source_ids, source_mask, *, start_id, end_id, max_length, beam_size,
            length_penalty, no_repeat_ngram_size, pad_id, use_cache, jit_compile, options=None,
            **model_ids):
        """Decodes `(B, S)` sources; `model_ids` (e.g. `mask_id`) go to `initial_state_fn`.

        `options`: the sampling options of `decoding_options` (`{}` for
        plain greedy or beam search).
        """
        options = options or {}
        setting = self._settings(source_ids, source_mask, start_id, end_id, max_length,
                                 beam_size, length_penalty, no_repeat_ngram_size, pad_id,
                                 use_cache, jit_compile, options, model_ids)
        key = tuple(setting.items())
        function = self.by_setting.get(key)
        if function is None:

            def search(source_ids, source_mask, options):
                (loop, start_ids), state, context = self._begin(setting, source_ids,
                                                                source_mask, options)
                if loop is not None:
                    return loop.run(start_ids, state)
                result = beam_search(
                    self.step_fn, tf.fill([tf.shape(source_ids)[0]], setting["start_id"]),
                    setting["max_length"], setting["end_id"], beam_size=setting["beam_size"],
                    length_penalty=setting["length_penalty"], state=state, context=context,
                    pad_id=setting["pad_id"],
                    no_repeat_ngram_size=setting["no_repeat_ngram_size"])
                return {name: result[name][:, 0] for name in ("token_ids", "lengths", "scores")}

            specs = {name: tf.TensorSpec([None], _OPTION_DTYPES[name]) for name in options}
            function = tf.function(
                search, input_signature=[tf.TensorSpec([None, None], tf.int32)] * 2 + [specs],
                jit_compile=setting["jit_compile"],
            )
            self.by_setting[key] = function
        tensors = _option_tensors(options, tf.shape(source_ids)[0], setting["max_length"])
        return function(source_ids, source_mask, tensors)

    def stream(self, source_ids, source_mask, *, start_id, end_id, max_length, beam_size,
               length_penalty, no_repeat_ngram_size, pad_id, use_cache, jit_compile,
               options=None, **model_ids):
        """Yields the next token of every sequence, int32 NumPy `(B,)`, as each step is decoded.

        The steps of `run`'s loop for greedy search or sampling (the same
        tokens: `tests/models/test_sampling_models.py`), one `tf.function`
        call per step; stops when every sequence has ended or after
        `max_length` tokens. A sequence that has ended yields `pad_id`.
        """
        options = options or {}
        check_stream(True, beam_size)
        setting = self._settings(source_ids, source_mask, start_id, end_id, max_length,
                                 beam_size, length_penalty, no_repeat_ngram_size, pad_id,
                                 use_cache, jit_compile, options, model_ids)
        # The options checked now, not at the generator's first step.
        tensors = _option_tensors(options, tf.shape(source_ids)[0], setting["max_length"])
        return self._stream(setting, source_ids, source_mask, tensors)

    def _stream(self, setting, source_ids, source_mask, tensors):
        key = ("stream",) + tuple(setting.items())
        functions = self.by_setting.get(key)
        if functions is None:

            def begin(source_ids, source_mask, options):
                (loop, start_ids), state, context = self._begin(setting, source_ids,
                                                                source_mask, options)
                return loop.initial(start_ids, state), context

            def advance(loop_variables, context, options):
                loop, _ = self._loop(setting, context, options, tf.shape(loop_variables[1])[0])
                loop_variables = loop.body(*loop_variables)
                return loop_variables, loop.done(*loop_variables)

            functions = tuple(tf.function(f, jit_compile=setting["jit_compile"],
                                          reduce_retracing=True) for f in (begin, advance))
            self.by_setting[key] = functions
        begin, advance = functions
        loop_variables, context = begin(source_ids, source_mask, tensors)
        for step in range(setting["max_length"]):
            loop_variables, done = advance(loop_variables, context, tensors)
            yield loop_variables[1][:, step + 1].numpy()
            if bool(done):
                return


_OPTION_DTYPES = {**{name: spec[0] for name, spec in sampling_lib._OPTIONS.items()},
                  "seed": tf.int64, "max_new_tokens": tf.int32}
