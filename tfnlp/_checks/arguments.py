"""Checks of the Python values given to tfnlp's constructors and functions.

Each returns the value (converted: an int, a float, a Keras object) or raises
a ValueError that names the argument and shows what it got, so that a bad
setting fails where it is given, not deep inside TensorFlow.
"""

import numbers

import keras
import numpy as np
import tensorflow as tf


def is_int(value):
    """Whether `value` is an integer (Python or NumPy) and not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def integer(name, value):
    """Returns `value` as an int if it is an integer (not a bool), else a ValueError naming `name`."""
    if not is_int(value):
        raise ValueError(f"`{name}` must be an integer, got {value!r}.")
    return int(value)


def positive_int(name, value, allow_none=False):
    """Returns `value` if it is a positive int (or `None` when allowed)."""
    if value is None and allow_none:
        return None
    if not is_int(value) or value <= 0:
        raise ValueError(f"`{name}` must be a positive integer, got {value!r}.")
    return int(value)


MAX_TEXT_BYTES = 2**31 - 1  # tf.strings counts bytes in int32


def max_input_bytes(value, name="max_input_bytes"):
    """Returns `value` if it is a positive int that TensorFlow's string ops can count to."""
    value = positive_int(name, value)
    if value > MAX_TEXT_BYTES:
        raise ValueError(
            f"`{name}` must be at most {MAX_TEXT_BYTES} (TensorFlow counts a string's bytes in "
            f"int32), got {value}."
        )
    return value


def non_negative_int(name, value, note=None):
    """Returns `value` if it is an int >= 0; `note` adds what 0 or the value means."""
    if not is_int(value) or value < 0:
        extra = f" ({note})" if note else ""
        raise ValueError(f"`{name}` must be a non-negative integer{extra}, got {value!r}.")
    return int(value)


def rate(name, value):
    """Returns `value` if it is a float in [0, 1)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 <= value < 1.0:
        raise ValueError(f"`{name}` must be a float in [0, 1), got {value!r}.")
    return float(value)


def fraction(name, value, one_allowed=False):
    """Returns `value` as a float if it is a real number in (0, 1), or (0, 1] with `one_allowed`."""
    interval = "(0, 1]" if one_allowed else "(0, 1)"
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not (0.0 < value <= 1.0 if one_allowed else 0.0 < value < 1.0)
    ):
        raise ValueError(f"`{name}` must be a float in {interval}, got {value!r}.")
    return float(value)


def finite_float(name, value):
    """Returns `value` as a float if it is a finite real number (NumPy scalars included)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not float("-inf") < value < float("inf")
    ):
        raise ValueError(f"`{name}` must be a finite number, got {value!r}.")
    return float(value)


def positive_float(name, value, allow_none=False):
    """Returns `value` if it is a positive finite float (or `None` when allowed)."""
    if value is None and allow_none:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not 0.0 < value < float("inf")
    ):
        raise ValueError(f"`{name}` must be a positive number, got {value!r}.")
    return float(value)


def one_of(name, value, choices):
    """Returns `value` if it is one of `choices` (shown in the error as given)."""
    try:
        allowed = value in choices
    except TypeError:  # an unhashable value against a set or a dict's keys
        allowed = False
    if not allowed:
        raise ValueError(f"`{name}` must be one of {choices}, got {value!r}.")
    return value


def boolean(name, value, note=None, numpy_bool=False):
    """Returns `value` if it is `True` or `False` (a NumPy bool too if `numpy_bool`), as a bool.

    `note` says more in the error, e.g. "at export".
    """
    if not isinstance(value, (bool, np.bool_) if numpy_bool else bool):
        extra = f" {note}" if note else ""
        raise ValueError(f"`{name}` must be True or False{extra}, got {value!r}.")
    return bool(value)


def tied_embedding(token_embedding, vocabulary_size):
    """Returns `token_embedding` if it is `None` or a `vocabulary_size`-row Embedding."""
    if token_embedding is None:
        return None
    if not isinstance(token_embedding, keras.layers.Embedding):
        raise ValueError(
            "`token_embedding` must be a keras.layers.Embedding, got "
            f"{type(token_embedding).__name__}."
        )
    if token_embedding.input_dim != vocabulary_size:
        raise ValueError(
            f"`token_embedding` has {token_embedding.input_dim} rows but "
            f"`vocabulary_size` is {vocabulary_size}."
        )
    return token_embedding


def _keras_object(get, what, name, value):
    try:
        return get(value)
    except (ValueError, TypeError) as error:
        raise ValueError(f"`{name}` must name a Keras {what}, got {value!r}.") from error


def activation(name, value):
    """`keras.activations.get(value)`, or a ValueError naming `name`."""
    return _keras_object(keras.activations.get, "activation", name, value)


def initializer(name, value):
    """`keras.initializers.get(value)`, or a ValueError naming `name`."""
    return _keras_object(keras.initializers.get, "initializer", name, value)


def static_index(name, index):
    """`index` (an int or int scalar tensor) as a Python int when known now, else None.

    A known negative index raises a ValueError naming `name`.
    """
    if is_int(index):
        value = int(index)
    elif tf.executing_eagerly() and tf.is_tensor(index) and index.shape.rank == 0:
        value = int(index)
    else:
        return None
    if value < 0:
        raise ValueError(f"`{name}` must be >= 0, got {value}.")
    return value




def count_and_names(count, names, count_name, names_name, what, minimum=1):
    """`(count, names)` checked and made consistent: either may be given, or both.

    How a task model takes its output classes (`num_classes`, `labels`) or
    tags (`num_tags`, `tag_names`): `names` (`what` names, one per id, each
    once) gives the count; a count alone leaves `names` None.
    """
    if names is not None:
        if isinstance(names, (str, bytes)) or not hasattr(names, "__iter__"):
            raise ValueError(f"`{names_name}` must be a list of {what} names, got {names!r}.")
        names = [str(name) for name in names]
        if len(set(names)) != len(names):
            repeated = sorted({name for name in names if names.count(name) > 1})
            raise ValueError(f"`{names_name}` must name each {what} once, got {repeated} more than once.")
        if count is None:
            count = len(names)
    if count is None:
        raise ValueError(f"`{count_name}` is required (or give `{names_name}`, the {what} names).")
    count = positive_int(count_name, count)
    if count < minimum:
        raise ValueError(f"`{count_name}` must be at least {minimum}, got {count}.")
    if names is not None and len(names) != count:
        raise ValueError(f"`{names_name}` has {len(names)} names for `{count_name}`={count}.")
    return count, names
