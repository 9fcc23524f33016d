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


def with_loss_scaling(optimizer, model):
    """`optimizer`, wrapped in a `LossScaleOptimizer` if `model` computes in float16.

    Keras wraps the optimizer itself only when the *model's* dtype policy is
    `mixed_float16`; a Functional model keeps its policy in its layers, so
    tfnlp's models call this from `compile`. float16 gradients underflow
    without loss scaling; bfloat16 (float32's exponent range) needs none.

    Args:
        optimizer: a `keras.optimizers.Optimizer` or its name.
        model: the model it will train.

    Returns:
        The optimizer, wrapped when needed (and never twice).

    Example:

    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, dtype="mixed_float16")])
    >>> type(with_loss_scaling("adam", model)).__name__
    'LossScaleOptimizer'
    """
    optimizer = keras.optimizers.get(optimizer)
    if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        return optimizer
    if any(layer.dtype_policy.name == "mixed_float16" for layer in model._flatten_layers()):
        return keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer
