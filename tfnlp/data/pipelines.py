"""tf.data pipelines from text datasets to model inputs: classification, seq2seq."""

import keras
import tensorflow as tf
import tensorflow_text as tf_text

from tfnlp import _checks
from tfnlp.data._tensors import unbatched
from tfnlp.data.bert_preprocessor import BertPreprocessor
from tfnlp.data.tuning import _prefetched
from tfnlp.data.wordpiece_tokenizer import WordPieceTokenizer

_PREPROCESS_BATCH = 256  # texts tokenized at once: vectorised, then unbatched


def _shuffled(dataset, shuffle_buffer, seed):
    return dataset.shuffle(shuffle_buffer, seed=seed) if shuffle_buffer else dataset


def classification_dataset(
    dataset,
    preprocessor,
    batch_size=32,
    shuffle_buffer=0,
    seed=0,
    drop_remainder=True,
    bucket_boundaries=None,
):
    """`(text, label)` or `((text_a, text_b), label)` -> `(inputs, label)` batches.

    Texts are tokenized and packed by a `BertPreprocessor` (`[CLS] A [SEP]`
    or `[CLS] A [SEP] B [SEP]`, longest-first truncation) in vectorised
    chunks of 256.

    Without `bucket_boundaries` every batch is `(batch_size,
    sequence_length)`, fully static. With them, examples are grouped by
    length and each batch is padded only to its bucket's length: for
    boundaries `[32, 64]` and `sequence_length` 128, batches have length 32,
    64 or 128 (three static shapes, so XLA compiles three programs, not one
    per batch). Short texts then cost far less than `sequence_length`.

    Args:
        dataset: `tf.data.Dataset` of `(text, label)` or `((a, b), label)`.
        preprocessor: a `BertPreprocessor`.
        batch_size: int.
        shuffle_buffer: int, examples shuffled before batching (0: keep
            order, for evaluation).
        seed: int, the shuffle seed.
        drop_remainder: bool, drop the last partial batch (keep True for
            training under TPUs and XLA).
        bucket_boundaries: optional increasing ints below `sequence_length`.

    Returns:
        `tf.data.Dataset` of `(dict(token_ids, segment_ids, padding_mask),
        label)`, int32. Without buckets, a dataset whose size is known
        (`cardinality()`) gives one whose number of batches is known, so
        Keras' `fit` knows its steps per epoch from the start.

    Example:

    >>> from tfnlp import data, datasets
    >>> reviews = datasets.load_fine_food_reviews("test")
    >>> vocab = data.learn_wordpiece_vocabulary(reviews.map(lambda t, y: t), 800, progress=False)
    >>> preprocessor = data.BertPreprocessor(data.WordPieceTokenizer(vocab), 64)
    >>> batches = classification_dataset(reviews, preprocessor, batch_size=16)
    >>> inputs, labels = next(iter(batches))
    >>> inputs["token_ids"].shape, labels.shape
    (TensorShape([16, 64]), TensorShape([16]))
    """
    if not isinstance(preprocessor, BertPreprocessor):
        raise ValueError(f"`preprocessor` must be a BertPreprocessor, got {type(preprocessor).__name__}.")
    batch_size = _checks.positive_int("batch_size", batch_size)
    length = preprocessor.sequence_length
    if bucket_boundaries is not None:
        bucket_boundaries = list(bucket_boundaries)
        integers = all(_checks.is_int(b) for b in bucket_boundaries)
        if not integers or bucket_boundaries != sorted(set(bucket_boundaries)) or not all(
            0 < b < length for b in bucket_boundaries
        ):
            raise ValueError(
                "`bucket_boundaries` must be increasing ints in (0, sequence_length="
                f"{length}), got {bucket_boundaries}."
            )

    if not isinstance(dataset, tf.data.Dataset):
        raise TypeError(
            f"`dataset` must be a tf.data.Dataset of (text, label), got {type(dataset).__name__}; "
            "make one with tf.data.Dataset.from_tensor_slices((texts, labels)), or give lists of "
            "texts and labels to a classifier's fit()."
        )
    spec = dataset.element_spec
    if not (isinstance(spec, tuple) and len(spec) == 2):
        raise ValueError(f"`dataset` must hold (text, label) pairs, got elements {spec}.")
    if not (spec[1].dtype.is_integer or spec[1].dtype == tf.bool):
        raise TypeError(
            f"`dataset`'s labels must be integer class ids (or bool), got dtype {spec[1].dtype.name}."
        )

    @tf.autograph.experimental.do_not_convert
    def preprocess(texts, labels):
        return preprocessor(texts), tf.cast(labels, tf.int32)

    examples = _shuffled(dataset, shuffle_buffer, seed)
    dataset = examples.batch(_PREPROCESS_BATCH).map(preprocess, num_parallel_calls=tf.data.AUTOTUNE)
    dataset = unbatched(dataset, examples)
    if bucket_boundaries is None:
        return _prefetched(dataset.batch(batch_size, drop_remainder=drop_remainder))

    @tf.autograph.experimental.do_not_convert
    def real_length(inputs, label):
        return tf.reduce_sum(inputs["padding_mask"])

    @tf.autograph.experimental.do_not_convert
    def trim(inputs, label):
        return {k: v[: real_length(inputs, label)] for k, v in inputs.items()}, label

    # Bucket i holds lengths in [b_(i-1), b_i) and is padded to b_i - 1.
    edges = [b + 1 for b in bucket_boundaries] + [length + 1]
    return _prefetched(
        dataset.map(trim)
        .bucket_by_sequence_length(
            real_length,
            edges,
            [batch_size] * (len(edges) + 1),
            padding_values=(
                {
                    "token_ids": preprocessor.tokenizer.pad_id,
                    "segment_ids": 0,
                    "padding_mask": 0,
                },
                0,
            ),
            pad_to_bucket_boundary=True,
            drop_remainder=drop_remainder,
        )
    )


def unilm_seq2seq_dataset(pairs, tokenizer, sequence_length, batch_size=32, shuffle_buffer=0, seed=0,
                          drop_remainder=True):
    """`(source, target)` texts packed as `[CLS] S [SEP] T [SEP]` for UniLM.

    `segment_ids` are 0 on `[CLS] S [SEP]` and 1 on `T [SEP]`, exactly what
    `tfnlp.layers.masks.seq2seq_mask` needs; the longer side is truncated
    first.

    Args:
        pairs: `tf.data.Dataset` of `(source, target)` strings.
        tokenizer: a `WordPieceTokenizer`.
        sequence_length: int.
        batch_size: int.
        shuffle_buffer: int (0: keep order).
        seed: int.
        drop_remainder: bool.

    Returns:
        `tf.data.Dataset` of dicts `token_ids`, `segment_ids`, `padding_mask`,
        int32 `(batch_size, sequence_length)`.
    """
    preprocessor = BertPreprocessor(tokenizer, sequence_length)
    batch_size = _checks.positive_int("batch_size", batch_size)
    examples = _shuffled(pairs, shuffle_buffer, seed)
    dataset = examples.batch(_PREPROCESS_BATCH).map(
        tf.autograph.experimental.do_not_convert(lambda s, t: preprocessor((s, t))),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    dataset = unbatched(dataset, examples)
    return _prefetched(dataset.batch(batch_size, drop_remainder=drop_remainder))


def encoder_decoder_dataset(
    pairs,
    source_tokenizer,
    target_tokenizer,
    source_length,
    target_length,
    batch_size=32,
    shuffle_buffer=0,
    seed=0,
    drop_remainder=True,
):
    """`(source, target)` texts -> encoder inputs and shifted decoder targets.

    The source becomes `S [SEP]`; the target becomes the decoder input
    `[CLS] T` (`[CLS]` starts decoding) and the labels `T [SEP]` (`[SEP]`
    ends it), i.e. the input shifted by one. Sources and targets longer than
    their length are cut (the end token is always kept).

    Args:
        pairs: `tf.data.Dataset` of `(source, target)` strings.
        source_tokenizer, target_tokenizer: `WordPieceTokenizer`s (the same
            one for a shared vocabulary).
        source_length, target_length: ints.
        batch_size: int.
        shuffle_buffer: int (0: keep order).
        seed: int.
        drop_remainder: bool.

    Returns:
        `tf.data.Dataset` of dicts of int32: `encoder_token_ids`,
        `encoder_padding_mask` `(B, source_length)`; `decoder_token_ids`,
        `decoder_padding_mask`, `decoder_target_ids` `(B, target_length)`.
    """
    for name, tokenizer in (("source_tokenizer", source_tokenizer), ("target_tokenizer", target_tokenizer)):
        if not isinstance(tokenizer, WordPieceTokenizer):
            raise ValueError(f"`{name}` must be a WordPieceTokenizer, got {type(tokenizer).__name__}.")
    source_length = _checks.positive_int("source_length", source_length)
    target_length = _checks.positive_int("target_length", target_length)
    batch_size = _checks.positive_int("batch_size", batch_size)

    @tf.autograph.experimental.do_not_convert
    def encode(sources, targets):
        return encoder_decoder_batch(sources, targets, source_tokenizer, target_tokenizer,
                                     source_length, target_length)

    examples = _shuffled(pairs, shuffle_buffer, seed)
    dataset = examples.batch(_PREPROCESS_BATCH).map(encode, num_parallel_calls=tf.data.AUTOTUNE)
    dataset = unbatched(dataset, examples)
    return _prefetched(dataset.batch(batch_size, drop_remainder=drop_remainder))


def encoder_decoder_batch(sources, targets, source_tokenizer, target_tokenizer, source_length,
                          target_length):
    """A batch of `encoder_decoder_dataset` from `(B,)` source and target texts (its arguments)."""

    def pad(ids, length, pad_id):
        padded, mask = tf_text.pad_model_inputs(ids, length, pad_value=pad_id)
        return tf.cast(padded, tf.int32), tf.cast(mask, tf.int32)

    source = source_tokenizer(sources)[:, : source_length - 1]
    target = target_tokenizer(targets)[:, : target_length - 1]
    batch = source.nrows()

    def column(token_id):
        return tf.fill([batch, 1], tf.cast(token_id, tf.int32))

    encoder_ids, encoder_mask = pad(
        tf.concat([source, column(source_tokenizer.sep_id)], 1), source_length,
        source_tokenizer.pad_id,
    )
    decoder_ids, decoder_mask = pad(
        tf.concat([column(target_tokenizer.cls_id), target], 1), target_length,
        target_tokenizer.pad_id,
    )
    labels, _ = pad(
        tf.concat([target, column(target_tokenizer.sep_id)], 1), target_length,
        target_tokenizer.pad_id,
    )
    return {
        "encoder_token_ids": encoder_ids,
        "encoder_padding_mask": encoder_mask,
        "decoder_token_ids": decoder_ids,
        "decoder_padding_mask": decoder_mask,
        "decoder_target_ids": labels,
    }


SEQ2SEQ_INPUTS = (
    "encoder_token_ids", "encoder_padding_mask", "decoder_token_ids", "decoder_padding_mask"
)


def seq2seq_batch(batch):
    """Splits a `tfnlp.data.encoder_decoder_dataset` batch into `(x, y, sample_weight)`.

    Use as `dataset.map(seq2seq_batch)` before `TransformerSeq2Seq.fit`: the
    labels are `decoder_target_ids` and padded target positions get weight 0
    (the decoder padding mask marks exactly the real targets, since inputs
    `[CLS] T` and labels `T [SEP]` have the same length).

    Args:
        batch: a dict from `encoder_decoder_dataset`.

    Returns:
        `(x, y, sample_weight)`.
    """
    x = {name: batch[name] for name in SEQ2SEQ_INPUTS}
    return x, batch["decoder_target_ids"], keras.ops.cast(batch["decoder_padding_mask"], "float32")

