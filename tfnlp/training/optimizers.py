"""Optimizers as BERT trains them."""

import keras
import tensorflow as tf

# Substrings of the variable names that take no weight decay: biases and the
# LayerNorm scale (gamma) and offset (beta).
NO_DECAY = ("bias", "beta", "gamma", "norm")


@keras.saving.register_keras_serializable(package="tfnlp")
class AdamW(keras.optimizers.AdamW):
    """`keras.optimizers.AdamW`, with each variable's Adam update done by one fused kernel.

    The same update as Keras' (`m += (g - m)(1 - β1)`, `v += (g² - v)(1 - β2)`,
    `w -= lr √(1 - β2^t) / (1 - β1^t) · m / (√v + ε)`, decoupled weight decay
    first), but computed by TensorFlow's `ResourceApplyAdam` kernel in one
    pass over the variable instead of about ten element-wise ops, each
    reading and writing the whole tensor. At BERT's 30,522 x H embedding that
    is what the optimizer's time goes to (see `benchmarks/bert_benchmark.py`).
    Results equal Keras' to float32 rounding (tested). Sparse gradients
    (`IndexedSlices`) are summed into a dense one first, which also makes
    the update right under `MirroredStrategy`, where the all-reduced slices
    repeat rows and Keras' own AdamW squares each repeat separately.
    AMSGrad falls back to Keras' update. The variable names excluded from
    weight decay (`exclude_from_weight_decay(var_names=...)`) are part of
    the configuration, so a `.keras` file or `get_config` round trip keeps
    them (Keras' AdamW forgets them and decays every variable after
    loading); excluded variable *lists* cannot be serialized and are not kept.

    Args:
        exclude_from_weight_decay_names: optional list of substrings of the
            variable names that take no weight decay (as
            `exclude_from_weight_decay(var_names=...)`).
        **kwargs: `keras.optimizers.AdamW` arguments.

    Example:

    >>> optimizer = AdamW(learning_rate=1e-3, weight_decay=0.01)
    >>> variable = keras.Variable([1.0, 2.0])
    >>> optimizer.apply([tf.constant([0.5, -0.5])], [variable])
    >>> [round(float(x), 5) for x in variable.numpy()]
    [0.99899, 2.00098]
    """

    def __init__(self, *args, exclude_from_weight_decay_names=None, **kwargs):
        super().__init__(*args, **kwargs)  # positional as Keras' (`AdamW(1e-3)`)
        self._excluded_names = ()
        if exclude_from_weight_decay_names:
            self.exclude_from_weight_decay(var_names=list(exclude_from_weight_decay_names))

    def exclude_from_weight_decay(self, var_list=None, var_names=None):
        super().exclude_from_weight_decay(var_list=var_list, var_names=var_names)
        self._excluded_names = tuple(sorted(set(var_names or ())))

    def get_config(self):
        config = super().get_config()
        config["exclude_from_weight_decay_names"] = list(self._excluded_names)
        return config

    def _apply_weight_decay(self, variables):
        if self.amsgrad:
            super()._apply_weight_decay(variables)
        # Otherwise update_step decays each variable with one fused kernel.

    def update_step(self, gradient, variable, learning_rate):
        if self.amsgrad:
            return super().update_step(gradient, variable, learning_rate)
        if isinstance(variable, keras.Variable):
            variable = variable.value
        dtype = variable.dtype
        if self.weight_decay is not None and self._use_weight_decay(variable):
            # w -= lr * decay * w (Keras: two multiplications and a subtraction).
            tf.raw_ops.ResourceApplyGradientDescent(
                var=variable.handle,
                alpha=tf.cast(learning_rate, dtype) * tf.cast(self.weight_decay, dtype),
                delta=tf.convert_to_tensor(variable),
            )
        if isinstance(gradient, tf.IndexedSlices):
            gradient = tf.convert_to_tensor(gradient)
        step = tf.cast(self.iterations + 1, dtype)
        beta_1 = tf.cast(self.beta_1, dtype)
        beta_2 = tf.cast(self.beta_2, dtype)
        index = self._get_variable_index(variable)
        tf.raw_ops.ResourceApplyAdam(
            var=variable.handle,
            m=self._momentums[index].value.handle,
            v=self._velocities[index].value.handle,
            beta1_power=tf.pow(beta_1, step),
            beta2_power=tf.pow(beta_2, step),
            lr=tf.cast(learning_rate, dtype),
            beta1=beta_1,
            beta2=beta_2,
            epsilon=tf.cast(self.epsilon, dtype),
            grad=tf.cast(gradient, dtype),
        )


def bert_adamw(learning_rate, weight_decay=0.01):
    """AdamW with weight decay off biases and LayerNorm weights, as in BERT.

    Args:
        learning_rate: float or a schedule (e.g. `LinearWarmupLinearDecay`).
        weight_decay: float.

    Returns:
        A fused `tfnlp.training.AdamW`.

    Example:

    >>> optimizer = bert_adamw(1e-4)
    >>> optimizer.weight_decay
    0.01
    """
    return AdamW(learning_rate=learning_rate, weight_decay=weight_decay,
                 exclude_from_weight_decay_names=NO_DECAY)


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
