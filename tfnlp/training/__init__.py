"""Training utilities: learning-rate schedules, losses, optimizers, callbacks and TensorBoard.

`Perplexity` moved to `tfnlp.metrics`; `tfnlp.training.Perplexity` still
gives it, with a `DeprecationWarning`, for one release.
"""

from tfnlp.training.callbacks import AttentionImages, attention_weights, write_embedding_projector
from tfnlp.training.distribute import cluster_size, global_sum, strategy
from tfnlp.training.loop import fit, is_chief
from tfnlp.training.losses import (
    SmoothedSparseCategoricalCrossentropy,
    TaggingCrossEntropy,
    sparse_softmax_cross_entropy,
)
from tfnlp.training.metrics import moved_perplexity as _moved_perplexity
from tfnlp.training.optimizers import NO_DECAY, AdamW, bert_adamw, with_loss_scaling
from tfnlp.training.schedules import InverseSquareRootDecay, LinearWarmupLinearDecay
from tfnlp.training.validation import ValidationEvaluation

__all__ = [
    "AdamW",
    "AttentionImages",
    "InverseSquareRootDecay",
    "LinearWarmupLinearDecay",
    "NO_DECAY",
    "SmoothedSparseCategoricalCrossentropy",
    "TaggingCrossEntropy",
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

__getattr__ = _moved_perplexity(__name__)  # the deprecated `Perplexity`
