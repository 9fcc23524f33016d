"""SavedModel export with raw-text serving signatures (serving code lives only here)."""

from tfnlp.export.bert import BackboneServingModule
from tfnlp.export.bert import FillMaskServingModule
from tfnlp.export.bert import export_backbone
from tfnlp.export.bert import export_fill_mask
from tfnlp.export.classifier import ClassifierServingModule
from tfnlp.export.classifier import export_classifier
from tfnlp.export.elmo import ELMoServingModule
from tfnlp.export.elmo import export_elmo
from tfnlp.export.seq2seq import Seq2SeqServingModule
from tfnlp.export.seq2seq import export_seq2seq

__all__ = [
    "BackboneServingModule",
    "ClassifierServingModule",
    "ELMoServingModule",
    "FillMaskServingModule",
    "Seq2SeqServingModule",
    "export_backbone",
    "export_classifier",
    "export_elmo",
    "export_fill_mask",
    "export_seq2seq",
]
