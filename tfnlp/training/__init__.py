"""Training utilities: learning-rate schedules, losses, optimizers, callbacks and TensorBoard.

`Perplexity` moved to `tfnlp.metrics`; `tfnlp.training.Perplexity` still
gives it, with a `DeprecationWarning`, for one release.
"""

import warnings

from tfnlp.training.callbacks import AttentionImages, attention_weights, write_embedding_projector
from tfnlp.training.distribute import cluster_size, global_sum, strategy
from tfnlp.training.loop import fit, is_chief
from tfnlp.training.losses import (
    SmoothedSparseCategoricalCrossentropy,
    sparse_softmax_cross_entropy,
)
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


def __getattr__(name):
    if name == "Perplexity":  # moved in 2026-11; the alias goes in the next release
        warnings.warn(
            "`tfnlp.training.Perplexity` moved to `tfnlp.metrics.Perplexity`; the old name "
            "goes in the next release.",
            DeprecationWarning, stacklevel=2,
        )
        from tfnlp.metrics import Perplexity

        return Perplexity
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
