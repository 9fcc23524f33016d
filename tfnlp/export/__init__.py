"""SavedModel export with raw-text serving signatures (serving code lives only here)."""

from tfnlp.export.bert import (
    BackboneServingModule,
    FillMaskServingModule,
    export_backbone,
    export_fill_mask,
)
from tfnlp.export.classifier import ClassifierServingModule, export_classifier
from tfnlp.export.elmo import ELMoServingModule, export_elmo
from tfnlp.export.seq2seq import Seq2SeqServingModule, export_seq2seq
from tfnlp.export.tagger import TaggerServingModule, export_tagger

__all__ = [
    "BackboneServingModule",
    "ClassifierServingModule",
    "ELMoServingModule",
    "FillMaskServingModule",
    "Seq2SeqServingModule",
    "TaggerServingModule",
    "export_backbone",
    "export_classifier",
    "export_elmo",
    "export_fill_mask",
    "export_seq2seq",
    "export_tagger",
]
