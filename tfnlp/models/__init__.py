"""tfnlp models: Functional backbones and the task models built on them."""

from tfnlp import _checks
from tfnlp.models.backbone import Backbone
from tfnlp.models.bert_backbone import BERT_ARCHITECTURES, BertBackbone
from tfnlp.models.bert_checkpoints import (
    load_google_checkpoint,
    load_hugging_face_checkpoint,
    load_hugging_face_token_classifier,
    save_google_checkpoint,
)
from tfnlp.models.bert_classifier import BertClassifier
from tfnlp.models.bert_pretrainer import BertPretrainer, pretraining_batch
from tfnlp.models.bert_token_classifier import BertTokenClassifier
from tfnlp.models.bilm_tf_weights import (
    bilm_tf_options,
    load_bilm_tf_weights,
    options_from_bilm_tf,
    save_bilm_tf_weights,
)
from tfnlp.models.bilstm_token_classifier import BiLSTMTokenClassifier
from tfnlp.models.elmo import ELMO_ARCHITECTURES, ELMoBiLM, ELMoEmbedder, elmo_batch
from tfnlp.models.transformer_classifier import TransformerClassifier
from tfnlp.models.transformer_seq2seq import (
    TRANSFORMER_ARCHITECTURES,
    TransformerSeq2Seq,
    seq2seq_batch,
)
from tfnlp.models.transformer_token_classifier import TransformerTokenClassifier
from tfnlp.models.unilm import UniLM, unilm_batch
from tfnlp.models.unilm_backbone import UniLMBackbone
from tfnlp.models.unilm_checkpoints import load_unilm_checkpoint

__all__ = [
    "BERT_ARCHITECTURES",
    "Backbone",
    "BertBackbone",
    "BertClassifier",
    "BertPretrainer",
    "BertTokenClassifier",
    "BiLSTMTokenClassifier",
    "ELMO_ARCHITECTURES",
    "ELMoBiLM",
    "ELMoEmbedder",
    "TRANSFORMER_ARCHITECTURES",
    "TransformerClassifier",
    "TransformerSeq2Seq",
    "TransformerTokenClassifier",
    "UniLM",
    "UniLMBackbone",
    "bilm_tf_options",
    "load_bilm_tf_weights",
    "load_google_checkpoint",
    "load_hugging_face_checkpoint",
    "load_hugging_face_token_classifier",
    "load_unilm_checkpoint",
    "options_from_bilm_tf",
    "save_bilm_tf_weights",
    "elmo_batch",
    "pretraining_batch",
    "save_google_checkpoint",
    "seq2seq_batch",
    "unilm_batch",
]

# Renamed 2026-11-29 (keras-hub's "preset" means released weights): for one release.
__getattr__ = _checks.renamed_attributes(__name__, {
    "BERT_PRESETS": ("BERT_ARCHITECTURES", BERT_ARCHITECTURES),
    "ELMO_PRESETS": ("ELMO_ARCHITECTURES", ELMO_ARCHITECTURES),
    "TRANSFORMER_PRESETS": ("TRANSFORMER_ARCHITECTURES", TRANSFORMER_ARCHITECTURES),
})
