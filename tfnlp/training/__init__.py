"""Training utilities: learning-rate schedules, losses, metrics, callbacks and TensorBoard."""

from tfnlp.training.callbacks import AttentionImages
from tfnlp.training.callbacks import attention_weights
from tfnlp.training.callbacks import write_embedding_projector
from tfnlp.training.distribute import cluster_size
from tfnlp.training.distribute import global_sum
from tfnlp.training.distribute import strategy
from tfnlp.training.loop import fit
from tfnlp.training.loop import is_chief
from tfnlp.training.losses import SmoothedSparseCategoricalCrossentropy
from tfnlp.training.losses import sparse_softmax_cross_entropy
from tfnlp.training.metrics import Perplexity
from tfnlp.training.optimizers import NO_DECAY
from tfnlp.training.optimizers import AdamW
from tfnlp.training.optimizers import bert_adamw
from tfnlp.training.optimizers import with_loss_scaling
from tfnlp.training.schedules import InverseSquareRootDecay
from tfnlp.training.schedules import LinearWarmupLinearDecay
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
