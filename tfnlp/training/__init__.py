"""Training utilities: learning-rate schedules (strategies and callbacks to come)."""

from tfnlp.training.schedules import LinearWarmupLinearDecay

__all__ = ["LinearWarmupLinearDecay"]
