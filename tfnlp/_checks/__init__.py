"""Checks shared across tfnlp: fail early, name the argument.

- `arguments`: the Python values given to constructors and functions
  (positive ints, rates, finite floats, Keras activations and initializers).
- `inputs`: call inputs, i.e. tensors' dtypes, static shapes and id ranges,
  and a Functional model's input dict.
- `deprecation`: renamed public names, kept for one release with a warning.

Both are re-exported here, so that modules call `_checks.positive_int(...)`.
Private: the messages are part of tfnlp's behaviour (tests/test_bad_inputs.py),
the functions are not part of its API.
"""

from tfnlp._checks.arguments import (
    MAX_TEXT_BYTES,
    activation,
    boolean,
    count_and_names,
    finite_float,
    fraction,
    initializer,
    integer,
    is_int,
    max_input_bytes,
    non_negative_int,
    one_of,
    positive_float,
    positive_int,
    rate,
    static_index,
    tied_embedding,
)
from tfnlp._checks.deprecation import renamed_attributes
from tfnlp._checks.inputs import (
    errors_without_input_dump,
    has_positions,
    ids_in_range,
    in_symbolic_scope,
    integer_tensor,
    last_dim,
    model_inputs,
    position_inputs_in_range,
    positions_in_range,
    tensors,
    token_ids_in_range,
)

__all__ = [
    "MAX_TEXT_BYTES",
    "activation",
    "boolean",
    "count_and_names",
    "errors_without_input_dump",
    "finite_float",
    "fraction",
    "has_positions",
    "ids_in_range",
    "in_symbolic_scope",
    "initializer",
    "integer",
    "integer_tensor",
    "is_int",
    "last_dim",
    "position_inputs_in_range",
    "max_input_bytes",
    "model_inputs",
    "non_negative_int",
    "one_of",
    "positions_in_range",
    "renamed_attributes",
    "positive_float",
    "positive_int",
    "rate",
    "static_index",
    "tensors",
    "tied_embedding",
    "token_ids_in_range",
]
