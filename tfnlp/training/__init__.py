"""Training utilities: learning-rate schedules, losses, metrics and callbacks."""

from tfnlp.training.callbacks import AttentionImages
from tfnlp.training.callbacks import attention_weights
from tfnlp.training.losses import SmoothedSparseCategoricalCrossentropy
from tfnlp.training.metrics import Perplexity
from tfnlp.training.optimizers import bert_adamw
from tfnlp.training.schedules import InverseSquareRootDecay
from tfnlp.training.schedules import LinearWarmupLinearDecay

__all__ = [
    "AttentionImages",
    "InverseSquareRootDecay",
    "LinearWarmupLinearDecay",
    "Perplexity",
    "SmoothedSparseCategoricalCrossentropy",
    "attention_weights",
    "bert_adamw",
]
