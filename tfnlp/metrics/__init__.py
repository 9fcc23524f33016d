"""Text-generation metrics: corpus BLEU and ROUGE, in pure Python.

Both tokenise references and hypotheses with `tokenize_for_evaluation` by
default (NFC, lower-case, words and single punctuation characters, one token
per CJK ideograph), so scores do not depend on a model's own vocabulary.
Inputs are Python `str` or UTF-8 `bytes`; no TensorFlow is involved.
"""

from tfnlp.metrics.bleu import corpus_bleu, corpus_bleu_details, tokenize_for_evaluation
from tfnlp.metrics.rouge import rouge_scores

__all__ = ["corpus_bleu", "corpus_bleu_details", "rouge_scores", "tokenize_for_evaluation"]
