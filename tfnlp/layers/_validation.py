"""Argument checks shared by tfnlp layers: fail early, name the argument."""

import numbers


def positive_int(name, value, allow_none=False):
    """Returns `value` if it is a positive int (or `None` when allowed)."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise ValueError(f"`{name}` must be a positive integer, got {value!r}.")
    return int(value)


def rate(name, value):
    """Returns `value` if it is a float in [0, 1)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 <= value < 1.0:
        raise ValueError(f"`{name}` must be a float in [0, 1), got {value!r}.")
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


def last_dim(name, shape):
    """Returns the static last dimension of `shape`, or raises naming `name`."""
    if shape is None or len(shape) < 2 or shape[-1] is None:
        raise ValueError(
            f"`{name}` must have a known last (feature) dimension and rank >= 2, "
            f"got shape {shape}."
        )
    return int(shape[-1])
