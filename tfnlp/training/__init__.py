"""Training utilities: learning-rate schedules and callbacks."""

from tfnlp.training.callbacks import AttentionImages
from tfnlp.training.callbacks import attention_weights
from tfnlp.training.schedules import LinearWarmupLinearDecay

__all__ = ["AttentionImages", "LinearWarmupLinearDecay", "attention_weights"]
