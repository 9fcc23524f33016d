"""In-graph text data: vocabularies, tokenizers, packing and tf.data pipelines.

Every pipeline here returns its dataset with tf.data's autotuner off
(`static_tuning`, measured faster under `model.fit`; see `tfnlp.data.tuning`).
Their map functions are plain graph code (no Python `if`, `for` or `while` on
tensors) marked `tf.autograph.experimental.do_not_convert`: AutoGraph would
otherwise rewrite them and the tensorflow-text functions they call in every
process, seconds before the first batch (benchmarks/README.md, "Time to a
pipeline's first batch"; `tests/data/test_pipelines.py` checks the mark).
"""

from tfnlp.data.bert_preprocessor import BertPreprocessor
from tfnlp.data.bert_pretraining import bert_pretraining_dataset, next_sentence_pairs
from tfnlp.data.bert_pretraining_preprocessor import BertPretrainingPreprocessor
from tfnlp.data.elmo import (
    build_word_vocabulary,
    character_ids,
    elmo_dataset,
    sentence_tokens,
    split_words,
)
from tfnlp.data.elmo_preprocessor import ELMoPreprocessor
from tfnlp.data.embeddings import cooccurrence_counts, learn_token_embeddings
from tfnlp.data.entity_chunks import entity_chunks, entity_type_names, is_entity_tag_set
from tfnlp.data.labelled import LabelledData, read_labelled, read_texts, suggest_sequence_length
from tfnlp.data.pipelines import (
    classification_dataset,
    encoder_decoder_dataset,
    unilm_seq2seq_dataset,
)
from tfnlp.data.segment_packer import SegmentPacker
from tfnlp.data.seq2seq_preprocessor import Seq2SeqPreprocessor
from tfnlp.data.tagged import TaggedData, read_conll, read_conllu
from tfnlp.data.tagger_preprocessor import TaggerPreprocessor
from tfnlp.data.task_preprocessor import TaskPreprocessor
from tfnlp.data.text_classifier_preprocessor import TextClassifierPreprocessor
from tfnlp.data.tfrecord import read_tfrecords, write_tfrecords
from tfnlp.data.tuning import static_tuning
from tfnlp.data.unilm import (
    left_to_right_lm_dataset,
    objective_counts,
    unilm_finetuning_dataset,
    unilm_pretraining_dataset,
    unilm_pseudo_masked_dataset,
)
from tfnlp.data.unilm_seq2seq_preprocessor import UniLMSeq2SeqPreprocessor
from tfnlp.data.vocabulary import (
    SPECIAL_TOKENS,
    count_words,
    learn_wordpiece_vocabulary,
    load_vocabulary,
    save_vocabulary,
    unknown_rate,
)
from tfnlp.data.word_tagger_preprocessor import WordTaggerPreprocessor, build_tagger_vocabulary
from tfnlp.data.wordpiece_tokenizer import WordPieceTokenizer

__all__ = [
    "BertPreprocessor",
    "BertPretrainingPreprocessor",
    "ELMoPreprocessor",
    "LabelledData",
    "SegmentPacker",
    "TaggedData",
    "TaggerPreprocessor",
    "WordTaggerPreprocessor",
    "Seq2SeqPreprocessor",
    "SPECIAL_TOKENS",
    "TaskPreprocessor",
    "TextClassifierPreprocessor",
    "UniLMSeq2SeqPreprocessor",
    "WordPieceTokenizer",
    "bert_pretraining_dataset",
    "build_tagger_vocabulary",
    "build_word_vocabulary",
    "character_ids",
    "classification_dataset",
    "cooccurrence_counts",
    "elmo_dataset",
    "entity_chunks",
    "entity_type_names",
    "encoder_decoder_dataset",
    "is_entity_tag_set",
    "learn_token_embeddings",
    "left_to_right_lm_dataset",
    "next_sentence_pairs",
    "objective_counts",
    "read_conll",
    "read_conllu",
    "read_labelled",
    "read_texts",
    "read_tfrecords",
    "unilm_finetuning_dataset",
    "unilm_pseudo_masked_dataset",
    "unilm_pretraining_dataset",
    "unilm_seq2seq_dataset",
    "write_tfrecords",
    "count_words",
    "learn_wordpiece_vocabulary",
    "load_vocabulary",
    "save_vocabulary",
    "sentence_tokens",
    "split_words",
    "static_tuning",
    "suggest_sequence_length",
    "unknown_rate",
]
