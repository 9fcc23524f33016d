"""In-graph text data: vocabularies, tokenizers, packing and tf.data pipelines."""

from tfnlp.data.bert_preprocessor import BertPreprocessor
from tfnlp.data.segment_packer import SegmentPacker
from tfnlp.data.vocabulary import SPECIAL_TOKENS
from tfnlp.data.vocabulary import count_words
from tfnlp.data.vocabulary import learn_wordpiece_vocabulary
from tfnlp.data.vocabulary import load_vocabulary
from tfnlp.data.vocabulary import save_vocabulary
from tfnlp.data.wordpiece_tokenizer import WordPieceTokenizer

__all__ = [
    "BertPreprocessor",
    "SegmentPacker",
    "SPECIAL_TOKENS",
    "WordPieceTokenizer",
    "count_words",
    "learn_wordpiece_vocabulary",
    "load_vocabulary",
    "save_vocabulary",
]
