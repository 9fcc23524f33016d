"""Deprecated: `Perplexity` moved to `tfnlp.metrics`; this module goes in the next release."""

import warnings


def moved_perplexity(module_name):
    """A module `__getattr__` that gives `Perplexity`, moved to `tfnlp.metrics`, with a warning.

    `tfnlp.training` and this module use it for one release (moved in 2026-11).
    """

    def __getattr__(name):
        if name == "Perplexity":
            warnings.warn(
                f"`{module_name}.Perplexity` moved to `tfnlp.metrics.Perplexity`; the old name "
                "goes in the next release.",
                DeprecationWarning, stacklevel=2,
            )
            from tfnlp.metrics import Perplexity

            return Perplexity
        raise AttributeError(f"module {module_name!r} has no attribute {name!r}")

    return __getattr__


__getattr__ = moved_perplexity(__name__)
