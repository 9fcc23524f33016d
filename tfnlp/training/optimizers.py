"""Optimizers as BERT trains them."""

import keras

# Substrings of the variable names that take no weight decay: biases and the
# LayerNorm scale (gamma) and offset (beta).
NO_DECAY = ("bias", "beta", "gamma", "norm")


def bert_adamw(learning_rate, weight_decay=0.01):
    """AdamW with weight decay off biases and LayerNorm weights, as in BERT.

    Args:
        learning_rate: float or a schedule (e.g. `LinearWarmupLinearDecay`).
        weight_decay: float.

    Returns:
        A `keras.optimizers.AdamW`.

    Example:

    >>> optimizer = bert_adamw(1e-4)
    >>> optimizer.weight_decay
    0.01
    """
    optimizer = keras.optimizers.AdamW(learning_rate=learning_rate, weight_decay=weight_decay)
    optimizer.exclude_from_weight_decay(var_names=list(NO_DECAY))
    return optimizer
