"""Learning-rate schedules."""

import keras
import tensorflow as tf

from tfnlp import _checks


@keras.saving.register_keras_serializable(package="tfnlp")
class LinearWarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """BERT's schedule: linear warm-up to `peak`, then linear decay to `end`.

    `lr(step) = peak * step / warmup_steps` for `step < warmup_steps`, then
    falls linearly to `end_learning_rate` at `total_steps` and stays there.

    Args:
        peak_learning_rate: float.
        warmup_steps: int, may be 0.
        total_steps: int, greater than `warmup_steps`.
        end_learning_rate: float.

    Example:

    >>> schedule = LinearWarmupLinearDecay(1e-3, warmup_steps=10, total_steps=110)
    >>> [round(float(schedule(s)), 6) for s in (0, 5, 10, 60, 110, 500)]
    [0.0, 0.0005, 0.001, 0.0005, 0.0, 0.0]
    """

    def __init__(self, peak_learning_rate, warmup_steps, total_steps, end_learning_rate=0.0):
        self.peak_learning_rate = _checks.positive_float("peak_learning_rate", peak_learning_rate)
        self.warmup_steps = warmup_steps = _checks.non_negative_int("warmup_steps", warmup_steps)
        self.total_steps = _checks.positive_int("total_steps", total_steps)
        if self.total_steps <= warmup_steps:
            raise ValueError(
                f"`total_steps` ({total_steps}) must exceed `warmup_steps` ({warmup_steps})."
            )
        self.end_learning_rate = _checks.finite_float("end_learning_rate", end_learning_rate)
        if not 0.0 <= self.end_learning_rate <= self.peak_learning_rate:
            raise ValueError(
                f"`end_learning_rate` must be in [0, peak_learning_rate = {self.peak_learning_rate}], "
                f"got {end_learning_rate!r}."
            )

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        warmup = self.peak_learning_rate * step / max(self.warmup_steps, 1)
        progress = (step - self.warmup_steps) / (self.total_steps - self.warmup_steps)
        decay = self.peak_learning_rate + (self.end_learning_rate - self.peak_learning_rate) * tf.minimum(
            progress, 1.0
        )
        return tf.where(step < self.warmup_steps, warmup, decay)

    def get_config(self):
        return {
            "peak_learning_rate": self.peak_learning_rate,
            "warmup_steps": self.warmup_steps,
            "total_steps": self.total_steps,
            "end_learning_rate": self.end_learning_rate,
        }


@keras.saving.register_keras_serializable(package="tfnlp")
class InverseSquareRootDecay(keras.optimizers.schedules.LearningRateSchedule):
    """The Transformer's schedule: linear warm-up, then decay with 1/sqrt(step).

    `lr(step) = peak * min(step / warmup_steps, sqrt(warmup_steps / step))`.
    "Attention Is All You Need" (section 5.3) uses
    `d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)`,
    which is this schedule with `peak = (d_model * warmup_steps) ** -0.5`
    (7e-4 for the base model with 4000 warm-up steps).

    Args:
        peak_learning_rate: float, the rate at `warmup_steps`.
        warmup_steps: int >= 1.

    Example:

    >>> schedule = InverseSquareRootDecay(1e-3, warmup_steps=100)
    >>> [round(float(schedule(s)), 6) for s in (0, 50, 100, 400)]
    [0.0, 0.0005, 0.001, 0.0005]
    """

    def __init__(self, peak_learning_rate, warmup_steps):
        self.peak_learning_rate = _checks.positive_float("peak_learning_rate", peak_learning_rate)
        self.warmup_steps = _checks.positive_int("warmup_steps", warmup_steps)

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        warmup = tf.constant(float(self.warmup_steps))
        return self.peak_learning_rate * tf.minimum(
            step / warmup, tf.sqrt(warmup / tf.maximum(step, 1.0))
        )

    def get_config(self):
        return {"peak_learning_rate": self.peak_learning_rate, "warmup_steps": self.warmup_steps}
