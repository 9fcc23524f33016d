"""Training utilities: learning-rate schedules, losses, metrics, callbacks and TensorBoard."""

from tfnlp.training.callbacks import AttentionImages, attention_weights, write_embedding_projector
from tfnlp.training.distribute import cluster_size, global_sum, strategy
from tfnlp.training.loop import fit, is_chief
from tfnlp.training.losses import (
    SmoothedSparseCategoricalCrossentropy,
    sparse_softmax_cross_entropy,
)
from tfnlp.training.metrics import Perplexity
from tfnlp.training.optimizers import NO_DECAY, AdamW, bert_adamw, with_loss_scaling
from tfnlp.training.schedules import InverseSquareRootDecay, LinearWarmupLinearDecay
from tfnlp.training.validation import ValidationEvaluation

__all__ = [
    "AdamW",
    "AttentionImages",
    "InverseSquareRootDecay",
    "LinearWarmupLinearDecay",
    "NO_DECAY",
    "Perplexity",
    "SmoothedSparseCategoricalCrossentropy",
    "ValidationEvaluation",
    "attention_weights",
    "bert_adamw",
    "cluster_size",
    "fit",
    "global_sum",
    "is_chief",
    "sparse_softmax_cross_entropy",
    "strategy",
    "with_loss_scaling",
    "write_embedding_projector",
]
