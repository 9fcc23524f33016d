"""Training utilities: learning-rate schedules, losses and callbacks."""

from tfnlp.training.callbacks import AttentionImages
from tfnlp.training.callbacks import attention_weights
from tfnlp.training.losses import SmoothedSparseCategoricalCrossentropy
from tfnlp.training.optimizers import bert_adamw
from tfnlp.training.schedules import InverseSquareRootDecay
from tfnlp.training.schedules import LinearWarmupLinearDecay

__all__ = [
    "AttentionImages",
    "InverseSquareRootDecay",
    "LinearWarmupLinearDecay",
    "SmoothedSparseCategoricalCrossentropy",
    "attention_weights",
    "bert_adamw",
]
