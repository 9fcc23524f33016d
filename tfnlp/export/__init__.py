"""SavedModel export with raw-text serving signatures (serving code lives only here)."""

from tfnlp.export.classifier import ClassifierServingModule
from tfnlp.export.classifier import export_classifier

__all__ = ["ClassifierServingModule", "export_classifier"]
