"""Evaluation metrics: corpus BLEU and ROUGE for generated text, a classification report
(accuracy, macro-F1, per-class F1, confusion matrix), entity-level P/R/F1 and token accuracy for
taggers (`entity_report`, identical to seqeval's default mode), and Keras metrics.

`Perplexity` (language models) and `TagAccuracy` (taggers' words) are Keras
metrics, updated batch by batch inside `fit` and `evaluate`; the others are
pure Python, run on a model's outputs after the fact.

BLEU and ROUGE tokenise references and hypotheses with `tokenize_for_evaluation` by
default (NFC, lower-case, words and single punctuation characters, one token
per CJK ideograph), so scores do not depend on a model's own vocabulary.
Their inputs are Python `str` or UTF-8 `bytes`; no TensorFlow is involved.
"""

from tfnlp.metrics.bleu import corpus_bleu, corpus_bleu_details, tokenize_for_evaluation
from tfnlp.metrics.classification import classification_report
from tfnlp.metrics.entities import entity_report, entity_spans, token_accuracy
from tfnlp.metrics.perplexity import Perplexity
from tfnlp.metrics.rouge import rouge_scores
from tfnlp.metrics.tagging import TagAccuracy

__all__ = [
    "Perplexity",
    "TagAccuracy",
    "classification_report",
    "corpus_bleu",
    "corpus_bleu_details",
    "entity_report",
    "entity_spans",
    "rouge_scores",
    "token_accuracy",
    "tokenize_for_evaluation",
]
