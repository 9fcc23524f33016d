"""tfnlp models: Functional backbones and the task models built on them."""

from tfnlp.models.backbone import Backbone
from tfnlp.models.bert_backbone import BERT_PRESETS, BertBackbone
from tfnlp.models.bert_checkpoints import (
    load_google_checkpoint,
    load_hugging_face_checkpoint,
    save_google_checkpoint,
)
from tfnlp.models.bert_classifier import BertClassifier
from tfnlp.models.bert_pretrainer import BertPretrainer, pretraining_batch
from tfnlp.models.bilm_tf_weights import (
    bilm_tf_options,
    load_bilm_tf_weights,
    options_from_bilm_tf,
    save_bilm_tf_weights,
)
from tfnlp.models.elmo import ELMO_PRESETS, ELMoBiLM, ELMoEmbedder, elmo_batch
from tfnlp.models.transformer_classifier import TransformerClassifier
from tfnlp.models.transformer_seq2seq import TRANSFORMER_PRESETS, TransformerSeq2Seq, seq2seq_batch
from tfnlp.models.unilm import UniLM, unilm_batch
from tfnlp.models.unilm_backbone import UniLMBackbone
from tfnlp.models.unilm_checkpoints import load_unilm_checkpoint

__all__ = [
    "BERT_PRESETS",
    "Backbone",
    "BertBackbone",
    "BertClassifier",
    "BertPretrainer",
    "ELMO_PRESETS",
    "ELMoBiLM",
    "ELMoEmbedder",
    "TRANSFORMER_PRESETS",
    "TransformerClassifier",
    "TransformerSeq2Seq",
    "UniLM",
    "UniLMBackbone",
    "bilm_tf_options",
    "load_bilm_tf_weights",
    "load_google_checkpoint",
    "load_hugging_face_checkpoint",
    "load_unilm_checkpoint",
    "options_from_bilm_tf",
    "save_bilm_tf_weights",
    "elmo_batch",
    "pretraining_batch",
    "save_google_checkpoint",
    "seq2seq_batch",
    "unilm_batch",
]
