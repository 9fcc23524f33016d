"""Checks of call inputs: dtypes, static shapes and id ranges of tensors.

Static checks cost nothing at run time; id ranges are checked eagerly with
an error naming the input, and in graphs as `tf.debugging` assertions.
"""

import contextlib
import numbers
import os

import keras
import tensorflow as tf

from tfnlp._checks.arguments import is_int

# Whether Keras is tracing a model for its output shapes only
# (`compute_output_spec`): its placeholders carry whatever dtype Keras derived
# from the data spec (under `MirroredStrategy`, `fit` derives float64 for int32
# ids), and nothing traced there ever runs, so `model_inputs` checks only
# shapes there.
try:
    from keras.src.backend.common.symbolic_scope import in_symbolic_scope
except ImportError:  # a Keras without it: check everything
    def in_symbolic_scope():
        return False


def integer_tensor(name, value, shape, dtype_error=ValueError, unknown_rank=False):
    """`value` as an integer tensor of `shape` (e.g. `"(B, T)"`: its rank), or an error naming `name`.

    A non-integer dtype raises `dtype_error` (ValueError, or TypeError where
    the function's contract says so); another rank a ValueError, an unknown
    one too unless `unknown_rank` (then checked where the tensor is used).
    The dtype is kept: range-check int64 ids before casting them to int32.
    """
    value = tf.convert_to_tensor(value)
    rank = len([d for d in shape.strip("()").split(",") if d.strip()])
    if not value.dtype.is_integer:
        raise dtype_error(
            f"`{name}` must be an int tensor of shape {shape}, got {value.dtype.name} {value.shape}."
        )
    if value.shape.rank != rank and not (unknown_rank and value.shape.rank is None):
        raise ValueError(
            f"`{name}` must be an int tensor of shape {shape}, got {value.dtype.name} {value.shape}."
        )
    return value


def last_dim(name, shape):
    """Returns the static last dimension of `shape`, or raises naming `name`."""
    if shape is None or len(shape) < 2 or shape[-1] is None:
        raise ValueError(
            f"`{name}` must have a known last (feature) dimension and rank >= 2, "
            f"got shape {shape}."
        )
    return int(shape[-1])


# dtype kinds of call arguments: (what the message says, which dtypes pass).
_KINDS = {
    "float": ("a floating-point", lambda d: d.is_floating),
    "number": ("a real-valued (float or int)", lambda d: d.is_floating or d.is_integer),
    "int": ("an integer", lambda d: d.is_integer),
    "mask": ("a bool, int or float", lambda d: d.is_bool or d.is_integer or d.is_floating),
    "string": ("a tf.string", lambda d: d == tf.string),
}


def tensors(*entries, limits=None, ranks_known=False, **known):
    """Checks the dtypes and static shapes of call arguments against shape patterns.

    Each entry is `(name, value, pattern, kind)`; entries whose value is None
    are skipped. `pattern` has one letter per axis (`"BTD"`), or starts with
    `"..."` for any number of leading axes (`"...D"`); a letter must have the
    same size in every entry, and `known` fixes sizes, as an int or
    `(size, where it comes from)` (e.g. `D=8` from the built weights).
    `limits` maps a letter to `(maximum, argument name)`. `kind` is
    `"float"`, `"number"`, `"int"`, `"mask"`, `"string"` or None (any dtype). Only
    static sizes are compared (`None` matches anything), so this costs
    nothing at run time. A value of unknown rank is let through, except
    that with `ranks_known=True` (for layers whose ops need the rank) a
    floating-point value with a pattern gets an error naming it.

    Raises:
        TypeError: for a value of the wrong dtype, naming it.
        ValueError: for a wrong rank or size, naming the value, the axis and
            the expected size.
    """
    sizes = {}
    for letter, size in known.items():
        size, source = size if isinstance(size, tuple) else (size, "the layer's weights")
        if size is not None:
            sizes[letter] = (int(size), source)
    for name, value, pattern, kind in entries:
        if value is None:
            continue
        if not (tf.is_tensor(value) or isinstance(value, keras.KerasTensor)):
            value = tf.convert_to_tensor(value)  # lists, NumPy arrays
        dtype = tf.as_dtype(value.dtype)
        if kind is not None and not _KINDS[kind][1](dtype):
            raise TypeError(f"`{name}` must be {_KINDS[kind][0]} tensor, got dtype {dtype.name}.")
        shape = tf.TensorShape(value.shape)
        if pattern is None:
            continue
        any_lead = pattern.startswith("...")
        letters = pattern[3:] if any_lead else pattern
        axes = (["..."] if any_lead else []) + list(letters)
        expected = f"({axes[0]},)" if len(axes) == 1 else "(" + ", ".join(axes) + ")"
        if shape.rank is None:
            if ranks_known and dtype.is_floating:
                raise ValueError(
                    f"`{name}` must have shape {expected}, got a tensor of unknown rank; give "
                    "it a static rank (e.g. a `tf.function` input_signature with one, or "
                    "`tf.ensure_shape`)."
                )
            continue
        if shape.rank < len(letters) or (not any_lead and shape.rank != len(letters)):
            rank = f">= {len(letters)}" if any_lead else str(len(letters))
            raise ValueError(f"`{name}` must have shape {expected} (rank {rank}), got shape {shape}.")
        for letter, size in zip(letters, shape[shape.rank - len(letters) :], strict=True):
            if size is None:
                continue
            if letter in sizes and sizes[letter][0] != size:
                want, source = sizes[letter]
                raise ValueError(
                    f"`{name}` has shape {shape}, but its axis {letter} of {expected} must be "
                    f"{want} (as in {source}), got {size}."
                )
            sizes.setdefault(letter, (size, f"`{name}` {shape}"))
            maximum, limit_name = (limits or {}).get(letter, (None, None))
            if maximum is not None and size > maximum:
                raise ValueError(
                    f"`{name}` has shape {shape}: its axis {letter} of {expected} is {size}, "
                    f"more than `{limit_name}` ({maximum})."
                )


def ids_in_range(name, ids, upper, what):
    """Returns `ids` (ints, a tensor or a ragged tensor), checked to lie in `[0, upper)`.

    The check is one `reduce_min` and one `reduce_max`. Concrete ids (Python
    ints, or eager tensors) that are out of range raise a ValueError naming
    `name`, the offending id and the range. Symbolic ids (inside
    `tf.function`, `model.fit`, a SavedModel) get the same check as
    `tf.debugging` assertions, which fail at run time with an
    `InvalidArgumentError` carrying the same message; XLA (`jit_compile`)
    compiles assertions out, so there an out-of-range id is not reported
    (the embedding gather then clamps it or returns zeros).

    Args:
        name: the argument's name.
        ids: int ids.
        upper: int or scalar int tensor, the exclusive upper bound.
        what: what `upper` is, for the message (e.g. `"`vocabulary_size`"`).
    """
    if isinstance(ids, numbers.Integral):
        bad = None if 0 <= ids < upper else ids
    else:
        values = ids.flat_values if isinstance(ids, tf.RaggedTensor) else ids
        # int64, so that a bound never wraps around in a narrow dtype (uint8
        # positions against T = 512); empty ids give (max, min): no error.
        bounds = tf.cast(tf.stack([tf.reduce_min(values), tf.reduce_max(values)]), tf.int64)
        if not tf.executing_eagerly():
            message = f"`{name}` must be in [0, {what})"
            if isinstance(upper, numbers.Integral):
                message = f"`{name}` must be in [0, {upper}) ({what})"
            checks = [
                tf.debugging.assert_greater_equal(bounds[0], tf.zeros((), tf.int64), message=message),
                tf.debugging.assert_less(bounds[1], tf.cast(upper, tf.int64), message=message),
            ]
            with tf.control_dependencies(checks):
                return tf.identity(ids)
        low, high = bounds.numpy().tolist()  # one device-to-host copy
        bad = low if low < 0 else high if high >= int(upper) else None
    if bad is not None:
        raise ValueError(f"`{name}` must be in [0, {int(upper)}) ({what}), got {bad}.")
    return ids


def positions_in_range(name, positions, sequence, what):
    """`positions` into axis 1 of `sequence` `(B, T, ...)`, checked to lie in `[0, T)`, as int32.

    The check is `ids_in_range`'s, against the static `T` where it is known.
    `what` names the sequence for the message (`"the length of `inputs`"`).
    """
    length = sequence.shape[1] if sequence.shape[1] is not None else tf.shape(sequence)[1]
    return tf.cast(ids_in_range(name, positions, length, what), tf.int32)


def position_inputs_in_range(inputs, names):
    """A checked input dict (`model_inputs`) with its position inputs `names` (into
    `token_ids`'s axis 1) checked to lie in `[0, T)`; as given in Keras' symbolic pass."""
    if not isinstance(inputs, dict) or in_symbolic_scope():
        return inputs  # Keras names what is wrong / its shape-only pass
    token_ids = inputs.get("token_ids")
    for name in names:
        value = inputs.get(name)
        if tf.is_tensor(token_ids) and tf.is_tensor(value):
            inputs[name] = positions_in_range(name, value, token_ids, "the length of `token_ids`")
    return inputs


def token_ids_in_range(upper, what, **ids):
    """Checks named Python-int token ids (`end_id=3`, ...) against `[0, upper)`.

    Values that are not ints are left to the callee's own checks.
    """
    for name, value in ids.items():
        if is_int(value):
            ids_in_range(name, value, upper, what)


def has_positions(inputs, reasons):
    """Refuses the sequences of a model's input dict whose length axis is statically 0.

    `reasons`: `{name: why a sequence needs a position}`. An empty sequence
    would otherwise fail deep in TensorFlow (Keras' `Add` of empty axes).
    """
    if isinstance(inputs, dict):
        for name, why in reasons.items():
            value = inputs.get(name)
            shape = getattr(value, "shape", None)
            if shape is not None and shape.rank is not None and shape.rank >= 2 and shape[1] == 0:
                raise ValueError(f"`{name}` has no positions (shape {tuple(shape)}); {why}")
    return inputs


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _raised_by_tfnlp(error):
    """Whether the innermost frame of `error`'s traceback is in tfnlp's own code."""
    traceback = error.__traceback__
    while traceback is not None and traceback.tb_next is not None:
        traceback = traceback.tb_next
    return traceback is not None and os.path.abspath(
        traceback.tb_frame.f_code.co_filename
    ).startswith(_PACKAGE_DIR + os.sep)


@contextlib.contextmanager
def errors_without_input_dump():
    """Lets tfnlp's own `TypeError`s and `ValueError`s raised inside reach the user as they are.

    Ours name the input, its shape and the limit. Keras (3.x,
    `traceback_utils.inject_argument_info_in_traceback`) would append every
    argument's whole value to an error raised in a layer's or model's
    `call`; it leaves errors so marked as they are. Errors raised inside
    TensorFlow or Keras keep Keras' note (which layer, which arguments).
    Works as a decorator too (`@errors_without_input_dump()` on `call`).
    """
    try:
        yield
    except (TypeError, ValueError) as error:
        if _raised_by_tfnlp(error):
            error._keras_call_info_injected = True
        raise


def model_inputs(inputs, specs, limits=None, check_ranges=True, **known):
    """A Functional model's int inputs, checked before Keras casts them to int32.

    Keras would silently cast float token ids to int32; this names the
    argument instead. Checks dtypes (ids: integers; names ending in `mask`:
    bool, int or float), static shapes and, with `check_ranges` (or for ids
    wider than int32, which Keras' cast would wrap), id ranges (see
    `ids_in_range` for what happens in graphs).

    A list or tuple for a model with several inputs is refused, naming the
    keys (Keras would match it to them in sorted order, which is not the
    order users read them in). For a one-input model a list of one is
    checked as its tensor (Keras would take it unchecked).

    Args:
        inputs: the dict passed to the model (or one tensor, or a list of
            one, when `specs` has one entry). Missing keys are left to
            Keras, which names them.
        specs: `{name: (pattern, upper, what)}`, see `tensors` for patterns;
            `upper` (or None) bounds the ids, `what` names the bound.
        limits: as for `tensors`.
        check_ranges: bool.
        **known: as for `tensors`.

    Returns:
        `inputs` with the checked values as tensors (a list of one becomes
        its tensor).
    """
    single = not isinstance(inputs, dict)
    if single and isinstance(inputs, (list, tuple)):
        if len(specs) != 1:
            names = ", ".join(f"`{name}`" for name in specs)
            raise ValueError(
                f"The model's inputs must be a dict with the keys {names}, got a "
                f"{type(inputs).__name__} of {len(inputs)}."
            )
        if len(inputs) != 1:
            return inputs  # Keras refuses it, naming the input
        inputs = inputs[0]
    if single:
        if len(specs) != 1:
            return inputs  # one tensor for a dict: Keras names the keys
        inputs = {next(iter(specs)): inputs}
    checked = dict(inputs)
    entries = []
    shape_pass = in_symbolic_scope()  # Keras' shape-only pass: dtypes and ranges unchecked
    for name, (pattern, _, _) in specs.items():
        value = checked.get(name)
        if value is None or isinstance(value, keras.KerasTensor):
            continue  # missing (Keras names it) or symbolic (Keras checks its spec)
        if not tf.is_tensor(value):
            value = tf.convert_to_tensor(value)
        if value.shape.rank == len(pattern) + 1 and value.shape[-1] == 1:
            value = tf.squeeze(value, -1)  # as Keras does for a trailing axis of 1
        checked[name] = value
        kind = None if shape_pass else "mask" if name.endswith("mask") else "int"
        entries.append((name, value, pattern, kind))
    tensors(*entries, limits=limits, **known)
    for name, value, _, _ in entries:
        upper, what = specs[name][1:]
        # Keras casts the ids to int32 before any later check: wider ids
        # (2**32 + 5 would become 5) are checked here whatever `check_ranges`.
        if shape_pass:
            continue
        wider = value.dtype in (tf.int64, tf.uint32, tf.uint64)
        if (check_ranges or wider) and upper is not None:
            checked[name] = ids_in_range(name, checked[name], upper, what)
        elif wider and not name.endswith("mask"):  # bounded later, after the cast
            checked[name] = ids_in_range(name, checked[name], 2**31, "int32, which Keras casts to")
    return next(iter(checked.values())) if single else checked
