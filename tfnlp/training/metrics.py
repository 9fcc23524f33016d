"""Deprecated: `Perplexity` moved to `tfnlp.metrics`; this module goes in the next release."""

import warnings


def __getattr__(name):
    if name == "Perplexity":
        warnings.warn(
            "`tfnlp.training.metrics.Perplexity` moved to `tfnlp.metrics.Perplexity`; the old "
            "module goes in the next release.",
            DeprecationWarning, stacklevel=2,
        )
        from tfnlp.metrics import Perplexity

        return Perplexity
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
