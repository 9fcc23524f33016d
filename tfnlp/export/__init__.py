"""SavedModel export with raw-text serving signatures (serving code lives only here)."""

from tfnlp.export.bert import BackboneServingModule
from tfnlp.export.bert import FillMaskServingModule
from tfnlp.export.bert import export_backbone
from tfnlp.export.bert import export_fill_mask
from tfnlp.export.classifier import ClassifierServingModule
from tfnlp.export.classifier import export_classifier

__all__ = [
    "BackboneServingModule",
    "ClassifierServingModule",
    "FillMaskServingModule",
    "export_backbone",
    "export_classifier",
    "export_fill_mask",
]
