"""tfnlp models: Functional backbones and the task models built on them."""

from tfnlp.models.bert_backbone import BERT_PRESETS
from tfnlp.models.bert_backbone import BertBackbone
from tfnlp.models.bert_checkpoints import load_google_checkpoint
from tfnlp.models.bert_checkpoints import load_hugging_face_checkpoint
from tfnlp.models.bert_checkpoints import save_google_checkpoint
from tfnlp.models.bert_classifier import BertClassifier
from tfnlp.models.bert_pretrainer import BertPretrainer
from tfnlp.models.bert_pretrainer import pretraining_batch
from tfnlp.models.bilm_tf_weights import bilm_tf_options
from tfnlp.models.bilm_tf_weights import load_bilm_tf_weights
from tfnlp.models.bilm_tf_weights import options_from_bilm_tf
from tfnlp.models.bilm_tf_weights import save_bilm_tf_weights
from tfnlp.models.elmo import ELMO_PRESETS
from tfnlp.models.elmo import ELMoBiLM
from tfnlp.models.elmo import ELMoEmbedder
from tfnlp.models.elmo import elmo_batch
from tfnlp.models.transformer_classifier import TransformerClassifier
from tfnlp.models.transformer_seq2seq import TRANSFORMER_PRESETS
from tfnlp.models.transformer_seq2seq import TransformerSeq2Seq
from tfnlp.models.transformer_seq2seq import seq2seq_batch
from tfnlp.models.unilm import UniLM
from tfnlp.models.unilm import unilm_batch
from tfnlp.models.unilm_backbone import UniLMBackbone
from tfnlp.models.unilm_checkpoints import load_unilm_checkpoint

__all__ = [
    "BERT_PRESETS",
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
