"""Source and target texts to UniLM's seq2seq fine-tuning batches."""

import keras
import tensorflow as tf

from tfnlp.data.seq2seq_preprocessor import SourceTargetTexts, fit_settings
from tfnlp.data.task_preprocessor import preprocessing_object, serialized
from tfnlp.data.unilm import unilm_batch, unilm_finetuning_dataset
from tfnlp.data.wordpiece_tokenizer import WordPieceTokenizer


@keras.saving.register_keras_serializable(package="tfnlp")
class UniLMSeq2SeqPreprocessor(SourceTargetTexts):
    """Source texts `x` and target texts `y` as `UniLM` fine-tunes on them.

    Texts are read as by `Seq2SeqPreprocessor` (the same checks and
    messages: source texts `x`, target texts `y`, none in `predict`); `batches` packs each pair `[CLS] S [SEP] T [SEP]` and masks
    its targets with `tfnlp.data.unilm_finetuning_dataset` (UniLM's masking
    rate 0.7), drawing a new seed for every batch: a dataset-level step.
    `call` then splits each of those batches into `(inputs, y,
    sample_weight)` (`tfnlp.models.unilm_batch`). `UniLM` builds one from
    its tokenizer and lengths.

    Args:
        tokenizer: the model's `WordPieceTokenizer` (or its config); None
            where the model reads token ids only.
        sequence_length: int, `source_length + max_length` of the model.
        task_name: str, the model named in error messages.

    Call arguments:
        x: one batch of `unilm_finetuning_dataset`, its dict of tensors.
        y: None: the masked tokens, the labels, are in the batch.
        sample_weight: None: their weights are in it too.

    Returns:
        `(inputs, y, sample_weight)`: the model's five inputs, the masked
        tokens' ids and their weights (float32).

    Example:

    >>> tokenizer = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hola", "hello"])
    >>> preprocessor = UniLMSeq2SeqPreprocessor(tokenizer, sequence_length=8)
    >>> pairs = tf.data.Dataset.from_tensor_slices((["hello"], ["hola"]))
    >>> batches = preprocessor.batches(pairs, batch_size=2, shuffle=False, mode="evaluate",
    ...                                count=1, batched=False)
    >>> inputs, y, weights = next(iter(batches))
    >>> sorted(inputs), inputs["token_ids"].shape
    (['masked_positions', 'objective', 'padding_mask', 'segment_ids', 'token_ids'], TensorShape([1, 8]))
    """

    default_task_name = "UniLM"

    def __init__(self, tokenizer, sequence_length=None, task_name=None):
        super().__init__(task_name=task_name)
        self.tokenizer = preprocessing_object("tokenizer", tokenizer, WordPieceTokenizer)
        self.sequence_length = sequence_length

    def call(self, x, y=None, sample_weight=None):
        return self._split_batch(unilm_batch, x, y, sample_weight, "unilm_finetuning_dataset")

    def check(self, mode, pairs=False):
        if self.tokenizer is None:
            raise self._without("tokenizer", "`tokenizer=tfnlp.data.WordPieceTokenizer(...)`",
                                "token ids")
        self._no_texts_to_predict(mode)

    def batches(self, examples, *, batch_size, shuffle, mode, count, batched):
        return unilm_finetuning_dataset(
            examples.unbatch() if batched else examples, self.tokenizer, self.sequence_length,
            **fit_settings(batch_size, shuffle, mode, count),
        ).map(tf.autograph.experimental.do_not_convert(lambda batch: self(batch)))

    def get_config(self):
        config = super().get_config()
        config.update({
            "tokenizer": serialized(self.tokenizer),
            "sequence_length": self.sequence_length,
        })
        return config
