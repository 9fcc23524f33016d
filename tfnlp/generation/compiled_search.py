"""What every model's `generate` shares: checks, tracing once per setting, search choice."""

import tensorflow as tf

from tfnlp.generation import _common
from tfnlp.generation.beam_search import beam_search
from tfnlp.generation.greedy_search import greedy_search
from tfnlp.layers import _validation


def check_source(token_ids, padding_mask, name):
    """`(token_ids, padding_mask)` as int32 `(B, S)`, or a ValueError naming `name`.

    The mask (named like `name`, `..._padding_mask`) must have the ids'
    shape: a `(B, 1)` or `(1, S)` mask would otherwise broadcast. Shapes
    unknown when traced are compared when run (a `tf.debugging` assertion,
    which XLA compiles out).
    """
    token_ids = tf.convert_to_tensor(token_ids)
    if not token_ids.dtype.is_integer or token_ids.shape.rank != 2:
        raise ValueError(
            f"`{name}` must be an int tensor of shape (B, S), got "
            f"{token_ids.dtype.name} {token_ids.shape}."
        )
    token_ids = tf.cast(token_ids, tf.int32)
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


class CompiledSearch:
    """A model's `generate`: one traced `tf.function` per search setting.

    `run` checks the settings (clear errors before any tracing), then calls
    the function traced for them, with any batch size and source length:
    greedy search for `beam_size=1`, else beam search, returning the best
    hypothesis. A plain object, so neither Keras nor `tf.Module` tracks it:
    the functions are rebuilt on demand, never saved with the model.

    Args:
        step_fn: the model's `decoding_step`.
        initial_state_fn: `(source_ids, source_mask, max_length, use_cache,
            **model_ids) -> (state, context)`, e.g. the model's
            `initial_decoding_state`.
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

    def run(self, source_ids, source_mask, *, start_id, end_id, max_length, beam_size,
            length_penalty, no_repeat_ngram_size, pad_id, use_cache, jit_compile, **model_ids):
        """Decodes `(B, S)` sources; `model_ids` (e.g. `mask_id`) go to `initial_state_fn`."""
        # The model's own ids first: UniLM passes its mask_id as start_id too.
        _common.check_arguments(max_length, no_repeat_ngram_size, **model_ids,
                                start_id=start_id, end_id=end_id, pad_id=pad_id)
        ids = {name: int(value) for name, value in model_ids.items()}
        start_id, end_id, pad_id = int(start_id), int(end_id), int(pad_id)
        max_length, no_repeat_ngram_size = int(max_length), int(no_repeat_ngram_size)
        beam_size = _validation.positive_int("beam_size", beam_size)
        jit_compile = _common.resolve_jit_compile(jit_compile)
        length_penalty = _common.check_length_penalty(length_penalty)
        if self.check_fn is not None and tf.executing_eagerly():
            self.check_fn(source_ids, source_mask, max_length, bool(use_cache))
        key = (max_length, beam_size, length_penalty, no_repeat_ngram_size, start_id,
               end_id, pad_id, bool(use_cache), jit_compile, tuple(sorted(ids.items())))
        function = self.by_setting.get(key)
        if function is None:

            def search(source_ids, source_mask):
                state, context = self.initial_state_fn(
                    source_ids, source_mask, max_length, use_cache, **ids
                )
                common = {
                    "start_ids": tf.fill([tf.shape(source_ids)[0]], start_id),
                    "max_length": max_length, "end_id": end_id, "state": state,
                    "context": context, "pad_id": pad_id,
                    "no_repeat_ngram_size": no_repeat_ngram_size,
                }
                if beam_size == 1:
                    return greedy_search(self.step_fn, **common)
                result = beam_search(self.step_fn, beam_size=beam_size,
                                     length_penalty=float(length_penalty), **common)
                return {name: result[name][:, 0] for name in ("token_ids", "lengths", "scores")}

            function = tf.function(
                search, input_signature=[tf.TensorSpec([None, None], tf.int32)] * 2,
                jit_compile=jit_compile,
            )
            self.by_setting[key] = function
        return function(source_ids, source_mask)
