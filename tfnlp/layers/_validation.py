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


def tied_embedding(token_embedding, vocabulary_size):
    """Returns `token_embedding` if it is `None` or a `vocabulary_size`-row Embedding."""
    import keras  # only here: the rest of this module is plain Python

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
