"""UniLM pipelines: pretraining with mixed objectives, left-to-right LM, seq2seq fine-tuning."""

import math

import keras
import tensorflow as tf

from tfnlp import _checks
from tfnlp.data.bert_pretraining import _full_sentence_segments, bert_pretraining_dataset
from tfnlp.data.pipelines import unilm_seq2seq_dataset
from tfnlp.data.segment_packer import SegmentPacker
from tfnlp.data.tuning import _prefetched
from tfnlp.layers import masks as masks_lib

UNILM_INPUTS = ("token_ids", "segment_ids", "padding_mask", "objective", "masked_positions")
# A left-to-right LM batch (`tfnlp.data.left_to_right_lm_dataset`): every token a target.
LEFT_TO_RIGHT_INPUTS = ("token_ids", "padding_mask", "mask_id")
# A pseudo-masked seq2seq batch (`tfnlp.data.unilm_pseudo_masked_dataset`).
PSEUDO_MASKED_INPUTS = ("token_ids", "segment_ids", "padding_mask", "mask_id")


def unilm_batch(batch):
    """Splits a UniLM dataset batch into `(x, y, sample_weight)` for `UniLM.fit`.

    Works for `tfnlp.data.unilm_pretraining_dataset` and
    `unilm_finetuning_dataset`: labels are the original tokens at the
    masked positions, weighted by `masked_weights` (0 on padded slots).
    For `tfnlp.data.left_to_right_lm_dataset` (no `objective`): labels are
    the tokens themselves, weighted by `padding_mask` except `[CLS]`, which
    is given, not predicted. For `tfnlp.data.unilm_pseudo_masked_dataset`
    (no `objective`, with `segment_ids`): labels are the tokens, weighted
    on the real target tokens (segment 1, the final `[SEP]` included).
    """
    if _is_pseudo_masked_batch(batch):
        x = {name: batch[name] for name in PSEUDO_MASKED_INPUTS}
        weights = keras.ops.cast(batch["padding_mask"], "float32")
        target = keras.ops.cast(keras.ops.greater(batch["segment_ids"], 0), "float32")
        return x, batch["token_ids"], weights * target
    if _is_left_to_right_batch(batch):
        x = {name: batch[name] for name in LEFT_TO_RIGHT_INPUTS}
        weights = keras.ops.cast(batch["padding_mask"], "float32")
        first = keras.ops.cast(keras.ops.arange(keras.ops.shape(weights)[1]) > 0, "float32")
        return x, batch["token_ids"], weights * first[None, :]
    x = {name: batch[name] for name in UNILM_INPUTS}
    return x, batch["masked_ids"], keras.ops.cast(batch["masked_weights"], "float32")


def _is_left_to_right_batch(inputs):
    """A left-to-right LM or a pseudo-masked seq2seq batch: logits at every position."""
    return isinstance(inputs, dict) and "objective" not in inputs and "mask_id" in inputs


def _is_pseudo_masked_batch(inputs):
    return _is_left_to_right_batch(inputs) and "segment_ids" in inputs


def objective_counts(batch_size):
    """Examples per objective in a batch: 1/3 bidirectional, 1/3 seq2seq, 1/6 each LM.

    Args:
        batch_size: int.

    Returns:
        A dict objective name -> count, summing to `batch_size` (exact
        proportions when `batch_size` is a multiple of 6).

    Example:

    >>> objective_counts(32)
    {'bidirectional': 11, 'left_to_right': 5, 'right_to_left': 5, 'seq2seq': 11}
    """
    batch_size = _checks.positive_int("batch_size", batch_size)
    third = round(batch_size / 3)
    rest = batch_size - 2 * third
    return {"bidirectional": third, "left_to_right": rest // 2,
            "right_to_left": rest - rest // 2, "seq2seq": third}


def _objectives(batch_size, seed):
    counts = objective_counts(batch_size)
    ids = tf.constant(
        [masks_lib.OBJECTIVES.index(name) for name, n in counts.items() for _ in range(n)],
        tf.int32,
    )
    return tf.random.experimental.stateless_shuffle(ids, seed=seed)


def unilm_pretraining_dataset(
    documents,
    tokenizer,
    sequence_length=128,
    max_predictions_per_seq=20,
    batch_size=36,
    masking_rate=0.15,
    seed=0,
    shuffle_buffer=10_000,
):
    """UniLM pretraining batches: masked LM under four objectives in every batch.

    The examples are BERT's (`bert_pretraining_dataset`: `[CLS] A [SEP] B
    [SEP]` from consecutive chunks of a document, B always the true
    continuation here; 15% of the tokens selected, 80% `[MASK]`, 10% random,
    10% kept). Each batch then gets the paper's mix of objectives (section
    2.3): 1/3 bidirectional, 1/3 seq2seq (A is the source, B the target),
    1/6 left-to-right, 1/6 right-to-left (`objective_counts`), in a seeded
    random order per batch. The model picks each example's attention mask
    and segment rows from its `objective` (`UniLMBackbone`). Unlike the
    paper, which feeds one text segment to the unidirectional LMs, every
    example here is the same `A [SEP] B` pair (one pipeline, static shapes);
    for left-to-right and right-to-left both segments share one segment row.

    Args:
        documents: `tf.data.Dataset` of 1-D `tf.string` tensors (documents).
        tokenizer: a `WordPieceTokenizer`.
        sequence_length: int.
        max_predictions_per_seq: int.
        batch_size: int (a multiple of 6 gives exact proportions).
        masking_rate: float in (0, 1).
        seed: int.
        shuffle_buffer: int (0: corpus order).

    Returns:
        `tf.data.Dataset` of dicts of int32: `token_ids`, `segment_ids`,
        `padding_mask` `(B, L)`, `objective` `(B,)`, `masked_positions`,
        `masked_ids`, `masked_weights` `(B, P)`. Map with
        `tfnlp.models.unilm_batch` before `UniLM.fit`.

    Example:

    >>> from tfnlp import data, datasets
    >>> documents = datasets.load_documents("en_novels", "validation").take(4)
    >>> vocab = data.learn_wordpiece_vocabulary(documents, 500, progress=False)
    >>> batches = unilm_pretraining_dataset(documents, data.WordPieceTokenizer(vocab),
    ...                                     sequence_length=64, batch_size=12)
    >>> sorted(next(iter(batches))["objective"].numpy().tolist())
    [0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 3, 3]
    """
    batch_size = _checks.positive_int("batch_size", batch_size)
    batches = bert_pretraining_dataset(
        documents, tokenizer, sequence_length, max_predictions_per_seq, batch_size,
        masking_rate, seed=seed, shuffle_buffer=shuffle_buffer, random_next_probability=0.0,
    )

    @tf.autograph.experimental.do_not_convert
    def add_objectives(index, batch):
        batch = {k: v for k, v in batch.items() if k != "next_sentence_labels"}
        batch["objective"] = _objectives(batch_size, tf.stack([seed, tf.cast(index, tf.int32)]))
        return batch

    return _prefetched(batches.enumerate().map(add_objectives))


def left_to_right_lm_dataset(
    documents,
    tokenizer,
    sequence_length=128,
    batch_size=32,
    seed=0,
    shuffle_buffer=10_000,
):
    """Left-to-right language-model batches for `UniLM`: every token is a target.

    The corpus is cut as in `bert_pretraining_dataset(next_sentence=False)`
    (RoBERTa's FULL-SENTENCES: one stream of sentences, a `[SEP]` between
    documents, greedy segments of whole sentences of at most `L - 2`
    tokens, longer sentences cut), each example `[CLS] segment [SEP]`
    padded to `L = sequence_length`. Nothing is masked here: `UniLM` reads
    such a batch (no `objective` key) as its left-to-right LM with
    pseudo-masks (UniLMv2's layout, see `UniLM.left_to_right_log_probs`):
    the text is followed by one `[MASK]` per token, and the `[MASK]` at
    position `t` predicts token `t` from the tokens before it. One pass
    trains every position, where the masked left-to-right objective of
    `unilm_pretraining_dataset` trains 15% of the tokens of 1/6 of the
    examples; decoding (`UniLM.continue_prompt`) predicts from exactly
    this view.

    Args:
        documents: `tf.data.Dataset` of 1-D `tf.string` tensors (sentences of
            one document, in order).
        tokenizer: a `WordPieceTokenizer`.
        sequence_length: int, at least 3 (`[CLS]`, one token, `[SEP]`); at
            most the backbone's `max_sequence_length`.
        batch_size: int.
        seed: int, the shuffle's seed.
        shuffle_buffer: int, examples shuffled at once (0 keeps corpus order).

    Returns:
        `tf.data.Dataset` of dicts of int32: `token_ids` and `padding_mask`
        `(B, L)`, `mask_id` `(B,)` (the tokenizer's `[MASK]`, what the
        model puts after the text). Map with `tfnlp.models.unilm_batch`
        before `UniLM.fit`: the labels are `token_ids`, weighted by
        `padding_mask` except `[CLS]` (given, not predicted).

    Example:

    >>> from tfnlp import data, datasets
    >>> documents = datasets.load_documents("en_novels", "validation").take(4)
    >>> vocab = data.learn_wordpiece_vocabulary(documents, 500, progress=False)
    >>> batches = left_to_right_lm_dataset(documents, data.WordPieceTokenizer(vocab),
    ...                                    sequence_length=64, batch_size=8)
    >>> {k: v.shape.as_list() for k, v in batches.element_spec.items()}
    {'token_ids': [8, 64], 'padding_mask': [8, 64], 'mask_id': [8]}
    """
    # The packer checks `sequence_length` (at least 3: [CLS], a token, [SEP]).
    packer = SegmentPacker(sequence_length, tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id)
    sequence_length = packer.sequence_length
    batch_size = _checks.positive_int("batch_size", batch_size)
    segments = _full_sentence_segments(
        documents, tokenizer, sequence_length - 2, seed=seed, shuffle_buffer=shuffle_buffer
    )
    mask_id = tf.constant(tokenizer.mask_id, tf.int32)

    @tf.autograph.experimental.do_not_convert
    def pack(batch):
        packed = packer(batch["segment"])
        shape = [batch_size, sequence_length]  # static, as every tfnlp pipeline's
        return {
            "token_ids": tf.ensure_shape(packed["token_ids"], shape),
            "padding_mask": tf.ensure_shape(packed["padding_mask"], shape),
            "mask_id": tf.fill([batch_size], mask_id),
        }

    batches = segments.ragged_batch(batch_size, drop_remainder=True)
    return _prefetched(batches.map(pack, num_parallel_calls=tf.data.AUTOTUNE))


def unilm_finetuning_dataset(
    pairs,
    tokenizer,
    sequence_length,
    masking_rate=0.7,
    max_predictions=None,
    batch_size=32,
    shuffle_buffer=0,
    seed=0,
    drop_remainder=True,
):
    """Seq2seq fine-tuning batches as in UniLM: masked target tokens, seq2seq mask.

    `(source, target)` pairs are packed `[CLS] S [SEP] T [SEP]`
    (`unilm_seq2seq_dataset`); then `masking_rate` of the target tokens,
    the final `[SEP]` included (so the model learns to end), are selected
    (at least one per example, at most `max_predictions`): 80% become
    `[MASK]`, 10% a random token, 10% stay. Every example has the seq2seq
    objective. All of it is batched tensor code with stateless, seeded
    randomness: the same `seed` gives the same batches, and every pass over
    the dataset (every epoch) draws new masks.

    Args:
        pairs: `tf.data.Dataset` of `(source, target)` strings.
        tokenizer: a `WordPieceTokenizer`.
        sequence_length: int.
        masking_rate: float in (0, 1] (UniLM used 0.7 for summarisation).
        max_predictions: int, predictions per example; defaults to
            `masking_rate * sequence_length` rounded up.
        batch_size: int.
        shuffle_buffer: int (0: keep order).
        seed: int.
        drop_remainder: bool.

    Returns:
        `tf.data.Dataset` of dicts of int32: `token_ids`, `segment_ids`,
        `padding_mask` `(B, L)`, `objective` `(B,)`, `masked_positions`,
        `masked_ids`, `masked_weights` `(B, P)`.
    """
    sequence_length = _checks.positive_int("sequence_length", sequence_length)
    masking_rate = _checks.fraction("masking_rate", masking_rate, one_allowed=True)
    if max_predictions is None:
        max_predictions = max(1, math.ceil(masking_rate * sequence_length))
    max_predictions = min(
        _checks.positive_int("max_predictions", max_predictions), sequence_length
    )
    # Packing first: it checks `tokenizer`.
    batches = unilm_seq2seq_dataset(pairs, tokenizer, sequence_length, batch_size,
                                    shuffle_buffer, seed, drop_remainder)
    vocabulary_size = tokenizer.vocabulary_size()

    @tf.autograph.experimental.do_not_convert
    def mask_targets(batch_seed, batch):
        token_ids = batch["token_ids"]
        shape = tf.shape(token_ids)
        row_seed = tf.cast(batch_seed, tf.int32)
        is_target = (batch["segment_ids"] == 1) & (batch["padding_mask"] == 1)
        # Random scores; non-targets score 2 so that they are never chosen.
        scores = tf.where(is_target, tf.random.stateless_uniform(shape, row_seed), 2.0)
        lowest, positions = tf.math.top_k(-scores, k=max_predictions)  # (B, P)
        lowest = -lowest
        first = tf.range(max_predictions)[None, :] == 0
        chosen = (lowest < masking_rate) | (first & (lowest < 2.0))
        originals = tf.gather(token_ids, positions, batch_dims=1)
        draw = tf.random.stateless_uniform(tf.shape(positions), row_seed + 1)
        random_ids = tf.random.stateless_uniform(
            tf.shape(positions), row_seed + 2, maxval=vocabulary_size, dtype=tf.int32
        )
        replaced = tf.where(draw < 0.8, tokenizer.mask_id,
                            tf.where(draw < 0.9, random_ids, originals))
        rows = tf.broadcast_to(tf.range(shape[0])[:, None], tf.shape(positions))
        token_ids = tf.tensor_scatter_nd_update(
            token_ids, tf.stack([rows, positions], -1), tf.where(chosen, replaced, originals)
        )
        weights = tf.cast(chosen, tf.int32)
        return {
            "token_ids": token_ids,
            "segment_ids": batch["segment_ids"],
            "padding_mask": batch["padding_mask"],
            "objective": tf.fill([shape[0]], masks_lib.SEQ2SEQ),
            "masked_positions": positions * weights,
            "masked_ids": originals * weights,
            "masked_weights": weights,
        }

    # One seed per batch, drawn anew on every pass: each epoch masks differently,
    # yet the same `seed` gives the same sequence of epochs.
    seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True).batch(2)
    seeds = seeds.map(tf.autograph.experimental.do_not_convert(lambda pair: pair % (2**31 - 1)))
    return _prefetched(tf.data.Dataset.zip(seeds, batches).map(mask_targets))


def unilm_pseudo_masked_dataset(
    pairs,
    tokenizer,
    sequence_length,
    batch_size=32,
    shuffle_buffer=0,
    seed=0,
    drop_remainder=True,
):
    """Seq2seq fine-tuning batches with pseudo-masks: every target token is predicted.

    `(source, target)` pairs are packed `[CLS] S [SEP] T [SEP]`
    (`unilm_seq2seq_dataset`) and nothing is masked here: `UniLM` reads
    such a batch (`segment_ids` and `mask_id`, no `objective`) as s2s-ft's
    pseudo-masked fine-tuning of UniLMv2. The packed tokens are followed by
    one `[MASK]` per position; the `[MASK]` at target position `t` sees the
    source and the real target tokens before `t`, and predicts token `t`.
    Each target is thus trained from the real tokens before it, exactly as
    `UniLM.generate` predicts it, where `unilm_finetuning_dataset` (the
    paper's recipe) hides a random `masking_rate` (0.7) of the target and
    predicts each hidden token from a context with `[MASK]`s in it. The
    network reads twice the sequence, so a step costs more than one of
    `unilm_finetuning_dataset` (measured in `docs/results.md`).

    Args:
        pairs: `tf.data.Dataset` of `(source, target)` strings.
        tokenizer: a `WordPieceTokenizer`.
        sequence_length: int; twice as many positions go through the network.
        batch_size: int.
        shuffle_buffer: int (0: keep order).
        seed: int, the shuffle's seed.
        drop_remainder: bool.

    Returns:
        `tf.data.Dataset` of dicts of int32: `token_ids`, `segment_ids`,
        `padding_mask` `(B, L)` and `mask_id` `(B,)` (the tokenizer's
        `[MASK]`). Map with `tfnlp.models.unilm_batch` before `UniLM.fit`:
        the labels are `token_ids`, weighted on the real target tokens.

    Example:

    >>> from tfnlp import data, datasets
    >>> pairs = datasets.load_text_pairs("bible_archaic_modern", "validation").take(8)
    >>> texts = [s for pair in pairs.as_numpy_iterator() for s in pair]
    >>> vocab = data.learn_wordpiece_vocabulary(texts, 300, progress=False)
    >>> batches = unilm_pseudo_masked_dataset(pairs, data.WordPieceTokenizer(vocab), 64,
    ...                                       batch_size=4)
    >>> {k: v.shape.as_list() for k, v in batches.element_spec.items()}
    {'token_ids': [4, 64], 'segment_ids': [4, 64], 'padding_mask': [4, 64], 'mask_id': [4]}
    """
    batches = unilm_seq2seq_dataset(pairs, tokenizer, sequence_length, batch_size,
                                    shuffle_buffer, seed, drop_remainder)
    mask_id = tf.constant(tokenizer.mask_id, tf.int32)

    @tf.autograph.experimental.do_not_convert
    def add_mask_id(batch):
        return {**batch, "mask_id": tf.fill(tf.shape(batch["token_ids"])[:1], mask_id)}

    return _prefetched(batches.map(add_mask_id))
