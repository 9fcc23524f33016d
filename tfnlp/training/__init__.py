"""Training utilities: learning-rate schedules and callbacks."""

from tfnlp.training.callbacks import AttentionImages
from tfnlp.training.callbacks import attention_weights
from tfnlp.training.optimizers import bert_adamw
from tfnlp.training.schedules import LinearWarmupLinearDecay

__all__ = ["AttentionImages", "LinearWarmupLinearDecay", "attention_weights", "bert_adamw"]
