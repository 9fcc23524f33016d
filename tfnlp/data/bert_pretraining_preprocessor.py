"""Documents to BERT's pretraining batches: packing and masking, a dataset-level step."""

import keras
import numpy as np
import tensorflow as tf

from tfnlp.data.bert_pretraining import bert_pretraining_dataset, pretraining_batch
from tfnlp.data.task_preprocessor import (
    TaskPreprocessor,
    TextElement,
    checked_batch_size,
    is_texts,
    preprocessing_object,
    serialized,
    string_tensor,
)
from tfnlp.data.wordpiece_tokenizer import WordPieceTokenizer


@keras.saving.register_keras_serializable(package="tfnlp")
class BertPretrainingPreprocessor(TaskPreprocessor):
    """Documents as `BertPretrainer` trains on them: packed, masked, in batches.

    Texts are documents: in memory a list whose items are documents (each
    a list of sentences, or one `str`: one sentence), a batch of sentences
    (each a one-sentence document) or a ragged `tf.string` `(B, sentences)`;
    in a `tf.data.Dataset`, 1-D `tf.string` tensors (the sentences of one
    document, in order) or scalars (one sentence). There is no `y`: the
    labels come from masking. Packing sentences into examples changes the
    number of elements, so `batches` runs
    `tfnlp.data.bert_pretraining_dataset` (masking rate 0.15): in `fit`
    with a new seed drawn from NumPy's global generator at every call and,
    with `shuffle`, reshuffled examples at every epoch, all batches full;
    otherwise with seed 0, in corpus order and every example (batches of 1
    merged, the last batch may be smaller). `call` then splits each batch
    into `(inputs, y, sample_weight)` (`tfnlp.models.pretraining_batch`).
    `BertPretrainer` builds one from its tokenizer and sizes.

    Args:
        tokenizer: a `WordPieceTokenizer` (or its config), or None for a
            model that takes token ids only.
        sequence_length: int, tokens per example.
        max_predictions_per_seq: int, masked positions per example.
        next_sentence: bool, sentence pairs with next-sentence labels (else
            masked LM only, on full sentences).
        task_name: str, the model named in error messages.

    Call arguments:
        x: a batch of `bert_pretraining_dataset` (a dict).
        y: must be None (the labels are in the batch).
        sample_weight: must be None.

    Returns:
        `(inputs, y, sample_weight)`: the model's inputs, the `{"mlm",
        "nsp"}` labels (`{"mlm"}` without `next_sentence`) and their
        weights.

    Example:

    >>> tokenizer = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat"])
    >>> preprocessor = BertPretrainingPreprocessor(tokenizer, 8, 2, next_sentence=False)
    >>> documents = preprocessor.texts([["the cat", "the"], "cat the cat"])
    >>> documents.shape
    TensorShape([2, None])
    >>> examples = tf.data.Dataset.from_tensor_slices((documents,))
    >>> batches = preprocessor.batches(examples, batch_size=4, shuffle=False, mode="evaluate",
    ...                                count=2, batched=False)
    >>> inputs, y, weights = next(iter(batches))
    >>> inputs["token_ids"].shape, sorted(y)
    (TensorShape([2, 8]), ['mlm'])
    """

    default_task_name = "BertPretrainer"
    text_name = "documents"

    def __init__(self, tokenizer, sequence_length=None, max_predictions_per_seq=None,
                 next_sentence=True, task_name=None):
        super().__init__(task_name=task_name)
        self.tokenizer = preprocessing_object("tokenizer", tokenizer, WordPieceTokenizer)
        self.sequence_length = sequence_length
        self.max_predictions_per_seq = max_predictions_per_seq
        self.next_sentence = bool(next_sentence)

    def call(self, x, y=None, sample_weight=None):
        return self._split_batch(pretraining_batch, x, y, sample_weight, "bert_pretraining_dataset")

    # --- The text path's hooks ---

    def check(self, mode, pairs=False):
        if self.tokenizer is None:
            raise self._without(
                "tokenizer", "`tokenizer=tfnlp.data.WordPieceTokenizer(...)`",
                "the batches of `tfnlp.data.bert_pretraining_dataset(...).map(pretraining_batch)`",
            )
        if mode == "predict":
            raise ValueError(
                f"{self.task_name}.predict takes model inputs (token ids with `masked_positions`), "
                "not documents."
            )

    def texts(self, x, name="x"):
        """`x` as documents: a ragged `tf.string` `(B, sentences)`, or `(B,)` one-sentence ones."""
        if isinstance(x, tf.RaggedTensor) and x.dtype == tf.string:
            if x.shape.rank != 2:
                raise ValueError(
                    f"`{name}` must be a batch of documents (B, sentences), got shape {x.shape}."
                )
            return x
        if isinstance(x, (str, bytes)) or is_texts(x):
            return string_tensor(x, name)  # refuses a single str
        if not isinstance(x, list) or not any(isinstance(d, (list, tuple)) for d in x):
            return None
        documents = []
        for i, document in enumerate(x):
            if isinstance(document, (str, bytes)):
                document = [document]
            if not isinstance(document, (list, tuple)) or not all(
                isinstance(s, (str, bytes)) for s in document
            ):
                raise ValueError(
                    f"`{name}[{i}]` must be a document: a list of sentences (str) or one str, got "
                    f"{document!r:.80}."
                )
            documents.append([s if isinstance(s, bytes) else s.encode("utf-8") for s in document])
        return tf.ragged.constant(documents, dtype=tf.string, ragged_rank=1)

    def checked_labels(self, y, count):
        raise ValueError(
            "`y` must be None when `x` holds documents: the masked-LM labels (and the "
            "next-sentence ones) come from masking the documents."
        )

    def dataset_element(self, spec, mode):
        if isinstance(spec, (tf.TensorSpec, tf.RaggedTensorSpec)) and spec.dtype == tf.string:
            if spec.shape.rank not in (0, 1):
                raise ValueError(
                    "A dataset of documents must hold 1-D string tensors (the sentences of one "
                    f"document) or single sentences, got {spec}."
                )
            return TextElement(spec, None, batched=False)  # a document (or a sentence) each
        if any(getattr(s, "dtype", None) == tf.string for s in tf.nest.flatten(spec)):
            raise ValueError(
                "A dataset of documents must hold documents only (1-D string tensors), got "
                f"{spec}: `y` must be None, as the labels come from masking the documents."
            )
        return None  # model inputs

    def batches(self, examples, *, batch_size, shuffle, mode, count, batched):
        documents = examples.map(_as_document)
        batch_size = checked_batch_size(batch_size)
        settings = {
            "tokenizer": self.tokenizer,
            "sequence_length": self.sequence_length,
            "max_predictions_per_seq": self.max_predictions_per_seq,
            "next_sentence": self.next_sentence,
        }
        split = tf.autograph.experimental.do_not_convert(lambda batch: self(batch))
        if mode == "fit":
            seed = int(np.random.randint(0, 2**31 - 2))  # +1 is a seed too
            return bert_pretraining_dataset(
                documents, batch_size=batch_size, seed=seed,
                shuffle_buffer=10_000 if shuffle else 0, **settings,
            ).map(split)
        # Every example, in corpus order: batches of 1 drop none, then are merged.
        examples = bert_pretraining_dataset(
            documents, batch_size=1, seed=0, shuffle_buffer=0, **settings
        )
        return examples.rebatch(batch_size).map(split).prefetch(tf.data.AUTOTUNE)

    def get_config(self):
        config = super().get_config()
        config.update({
            "tokenizer": serialized(self.tokenizer),
            "sequence_length": self.sequence_length,
            "max_predictions_per_seq": self.max_predictions_per_seq,
            "next_sentence": self.next_sentence,
        })
        return config


@tf.autograph.experimental.do_not_convert
def _as_document(sentences):
    return tf.reshape(sentences, [-1])  # (num_sentences,)
