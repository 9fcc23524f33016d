"""BERT pretraining inputs: next-sentence pairs and masked-LM examples, in-graph."""

import tensorflow as tf
import tensorflow_text as tf_text

from tfnlp.data._tensors import dense_row
from tfnlp.data.segment_packer import SegmentPacker
from tfnlp.data.tuning import _prefetched
from tfnlp.data.tuning import static_tuning
from tfnlp.layers import _validation

# NSP labels as in BERT: 0 = B really follows A, 1 = B is a random segment.
IS_NEXT, IS_RANDOM = 0, 1


def _greedy_chunk_ids(lengths, segment_length):
    """Chunk index of each sentence: a chunk takes whole sentences while they fit.

    A sentence that does not fit the current chunk starts a new one; a
    sentence longer than `segment_length` is a chunk of its own.
    """

    def step(state, length):
        chunk, used = state
        start_new = (used > 0) & (used + length > segment_length)
        chunk = tf.where(start_new, chunk + 1, chunk)
        used = tf.where(start_new, length, used + length)
        return chunk, used

    zero = tf.zeros([], lengths.dtype)
    chunk_ids, _ = tf.scan(step, lengths, initializer=(zero, zero))
    return chunk_ids


def _document_chunks(sentences, tokenizer, segment_length):
    """Tokenizes a document and packs whole sentences into chunks (greedily)."""
    ids = tokenizer(sentences)  # (num_sentences, None)
    ids = tf.ragged.boolean_mask(ids, ids.row_lengths() > 0)
    lengths = ids.row_lengths()
    chunk_of_sentence = _greedy_chunk_ids(lengths, tf.cast(segment_length, lengths.dtype))
    return tf.RaggedTensor.from_value_rowids(
        ids.flat_values,
        tf.repeat(chunk_of_sentence, lengths),
        nrows=tf.reduce_max(tf.concat([chunk_of_sentence + 1, [0]], 0)),
    )


def next_sentence_pairs(documents, tokenizer, segment_length, seed=0, shuffle_buffer=10_000,
                        random_next_probability=0.5):
    """Segment pairs for next-sentence prediction, 50% true next, 50% random.

    Each document's sentences are tokenized and packed greedily into chunks
    of at most `segment_length` tokens (whole sentences; a longer sentence is
    a chunk of its own and is cut later by the packer, as in BERT). Every
    pair of consecutive chunks `(A, B)` of a document becomes an example;
    with probability `random_next_probability` (0.5) its `B` is replaced by a random chunk of *another*
    document (label 1), else it stays the true next chunk (label 0). When the
    random chunk happens to come from A's own document the pair stays a true
    pair, so a negative never comes from A's document; this lowers the
    negative rate by about the sum of the squared shares of the documents
    (negligible for many documents, total for a one-document corpus). A
    document of a single chunk yields no pair.

    Randomness is seeded: with the same `seed` (and the same global
    TensorFlow seed, which `Dataset.shuffle` also reads) the pairs are the
    same. Each pass reshuffles, unless `shuffle_buffer=0`, in which case
    every pass is identical.

    Args:
        documents: `tf.data.Dataset` of 1-D `tf.string` tensors (sentences of
            one document, in order), e.g. `tfnlp.datasets.load_documents`.
        tokenizer: a `WordPieceTokenizer`.
        segment_length: int, target tokens per chunk (`(L - 3) // 2` for
            packed length `L`).
        seed: int.
        shuffle_buffer: int, pairs shuffled at once (0 to keep corpus order).
        random_next_probability: float in [0, 1], the rate of random `B`s
            (0: every `B` is the true continuation, as UniLM uses).

    Returns:
        `tf.data.Dataset` of dicts: `segment_a`, `segment_b` (int32 1-D),
        `next_sentence_label` (int32), and the provenance `document`,
        `chunk`, `b_document`, `b_chunk` (int64: document and chunk index).
    """
    segment_length = _validation.positive_int("segment_length", segment_length)
    if not 0.0 <= random_next_probability <= 1.0:
        raise ValueError(
            f"`random_next_probability` must be in [0, 1], got {random_next_probability!r}."
        )
    documents = documents.enumerate()

    @tf.autograph.experimental.do_not_convert
    def chunked(document_id, sentences):
        chunks = _document_chunks(sentences, tokenizer, segment_length)
        return {
            "document": tf.fill([chunks.nrows()], document_id),
            "chunk": tf.range(chunks.nrows()),
            "tokens": chunks,
        }

    @tf.autograph.experimental.do_not_convert
    def pairs(document_id, sentences):
        chunks = _document_chunks(sentences, tokenizer, segment_length)
        count = tf.maximum(chunks.nrows() - 1, 0)
        return tf.data.Dataset.from_tensor_slices(
            {
                "document": tf.fill([count], document_id),
                "chunk": tf.range(count),
                "segment_a": chunks[:count],
                "segment_b": chunks[1:],
            }
        )

    candidates = documents.flat_map(pairs)
    randoms = documents.map(chunked).flat_map(tf.data.Dataset.from_tensor_slices)
    if shuffle_buffer:
        candidates = candidates.shuffle(shuffle_buffer, seed=seed)
        randoms = randoms.shuffle(shuffle_buffer, seed=seed + 1)
    examples = tf.data.Dataset.zip(candidates, randoms.repeat()).enumerate()

    @tf.autograph.experimental.do_not_convert
    def choose(index, zipped):
        candidate, random = zipped
        coin = tf.random.stateless_uniform([], seed=tf.stack([seed, tf.cast(index, tf.int32)]))
        is_random = (coin < random_next_probability) & (
            random["document"] != candidate["document"]
        )
        return {
            "segment_a": dense_row(candidate["segment_a"]),
            "segment_b": tf.cond(
                is_random,
                lambda: dense_row(random["tokens"]),
                lambda: dense_row(candidate["segment_b"]),
            ),
            "next_sentence_label": tf.where(is_random, IS_RANDOM, IS_NEXT),
            "document": candidate["document"],
            "chunk": candidate["chunk"],
            "b_document": tf.where(is_random, random["document"], candidate["document"]),
            "b_chunk": tf.where(is_random, random["chunk"], candidate["chunk"] + 1),
        }

    return static_tuning(examples.map(choose, num_parallel_calls=tf.data.AUTOTUNE))


class _StatelessMaskValues(tf_text.MaskValuesChooser):
    """80% `[MASK]`, 10% random token, 10% unchanged, from a stateless seed."""

    def __init__(self, vocab_size, mask_token, seed, mask_token_rate=0.8, random_token_rate=0.1):
        super().__init__(vocab_size, mask_token, mask_token_rate, random_token_rate)
        self._seed = seed
        self._rates = (mask_token_rate, random_token_rate)

    def get_mask_values(self, masked_lm_ids):
        ids = masked_lm_ids.flat_values
        draw = tf.random.stateless_uniform(tf.shape(ids), seed=self._seed)
        random_ids = tf.random.stateless_uniform(
            tf.shape(ids), seed=self._seed + 1, maxval=self.vocab_size, dtype=ids.dtype
        )
        mask_rate, random_rate = self._rates
        values = tf.where(
            draw < mask_rate,
            tf.cast(self.mask_token, ids.dtype),
            tf.where(draw < mask_rate + random_rate, random_ids, ids),
        )
        return masked_lm_ids.with_flat_values(values)


def _stateless_shuffle(seed):
    return lambda x: tf.random.experimental.stateless_shuffle(x, seed=seed)


def _word_indices(token_ids, continuation, positions):
    """The index of the word (a token and its `##` pieces) of each of `positions`."""
    starts = tf.cast(~tf.gather(continuation, token_ids), tf.int32)
    return tf.gather(tf.cumsum(starts) - 1, positions)


def _whole_items_within(items, limit):
    """How many of the selections to keep: those of the items wholly among the first `limit`.

    `items` `(N,)` names the item (word) of each selection; an item's
    selections are adjacent. If the selection at `limit` belongs to an item
    that starts before it, that item is cut as well.
    """
    # A sentinel item (-1: no real item) after the last selection.
    items = tf.concat([tf.cast(items, tf.int64), [-1]], 0)
    cut = items[tf.minimum(limit, tf.size(items) - 1)]
    return tf.cast(tf.argmax(tf.cast(tf.equal(items, cut), tf.int32)), tf.int32)


def _pad(values, length):
    """Pads/cuts a ragged `(1, None)` row to a dense `(length,)` and its mask."""
    padded, mask = tf_text.pad_model_inputs(values, length)
    return padded[0], mask[0]


def bert_pretraining_dataset(
    documents,
    tokenizer,
    sequence_length=128,
    max_predictions_per_seq=20,
    batch_size=32,
    masking_rate=0.15,
    whole_word_masking=False,
    seed=0,
    shuffle_buffer=10_000,
    random_next_probability=0.5,
):
    """BERT pretraining batches: packed sentence pairs with masked-LM targets.

    documents -> `next_sentence_pairs` (segments of `(L - 3) // 2` tokens) ->
    `[CLS] A [SEP] B [SEP]` truncated longest-first to `L = sequence_length`
    -> masked LM with tensorflow-text's `mask_language_model`: `masking_rate`
    of the non-special tokens are selected (at most
    `max_predictions_per_seq`), of which 80% become `[MASK]`, 10% a random
    token, 10% stay. With `whole_word_masking` the selection picks words,
    all of whose pieces are masked together.

    Everything is in-graph and statically shaped (`drop_remainder=True`), so
    the dataset feeds TPUs and XLA-compiled steps. Masking randomness is
    stateless, seeded per example; with the same `seed` and global
    TensorFlow seed the batches are the same. Each pass over the dataset
    (each epoch) is shuffled anew unless `shuffle_buffer=0`.

    When whole words push the selection past `max_predictions_per_seq`, the
    word that crosses it and the words after it are restored to their
    original tokens, whole: every changed token has a label and no word is
    masked in part.

    Args:
        documents: `tf.data.Dataset` of 1-D `tf.string` tensors (documents).
        tokenizer: a `WordPieceTokenizer`.
        sequence_length: int, `L`.
        max_predictions_per_seq: int, masked positions per example (`P`).
        batch_size: int, `B`.
        masking_rate: float in (0, 1), fraction of tokens selected.
        whole_word_masking: bool.
        seed: int.
        shuffle_buffer: int, pairs shuffled at once (0: corpus order).
        random_next_probability: float, the rate of random second segments
            (see `next_sentence_pairs`).

    Returns:
        `tf.data.Dataset` of dicts of int32 tensors: `token_ids`,
        `segment_ids`, `padding_mask` `(B, L)`; `masked_positions`,
        `masked_ids` (the original tokens), `masked_weights` (1 for real
        predictions, 0 for padding) `(B, P)`; `next_sentence_labels` `(B,)`.

    Example:

    >>> from tfnlp import data, datasets
    >>> documents = datasets.load_documents("en_novels", "validation").take(4)
    >>> vocab = data.learn_wordpiece_vocabulary(documents, 500, progress=False)
    >>> batches = bert_pretraining_dataset(
    ...     documents, data.WordPieceTokenizer(vocab), sequence_length=64,
    ...     max_predictions_per_seq=10, batch_size=8)
    >>> {k: tuple(v.shape) for k, v in batches.element_spec.items()}["masked_ids"]
    (8, 10)
    """
    sequence_length = _validation.positive_int("sequence_length", sequence_length)
    if sequence_length < 5:
        raise ValueError(f"`sequence_length` must be at least 5, got {sequence_length}.")
    max_predictions = _validation.positive_int("max_predictions_per_seq", max_predictions_per_seq)
    batch_size = _validation.positive_int("batch_size", batch_size)
    masking_rate = _validation.fraction("masking_rate", masking_rate)
    special_ids = [tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id]
    packer = SegmentPacker(sequence_length, tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id)
    continuation = tf.constant([t.startswith("##") for t in tokenizer.get_vocabulary()])
    pairs = next_sentence_pairs(
        documents, tokenizer, (sequence_length - 3) // 2, seed=seed, shuffle_buffer=shuffle_buffer,
        random_next_probability=random_next_probability,
    )

    @tf.autograph.experimental.do_not_convert
    def example(index, pair):
        row_seed = tf.stack([seed, tf.cast(index, tf.int32)])
        token_ids, segment_ids = packer.combine(
            [tf.RaggedTensor.from_tensor(pair[k][None]) for k in ("segment_a", "segment_b")]
        )
        items = token_ids
        flat = token_ids.flat_values
        if whole_word_masking:
            starts = tf.where(~tf.gather(continuation, flat))[:, 0]
            words = tf.RaggedTensor.from_row_starts(flat, starts)
            items = tf.RaggedTensor.from_row_lengths(words, [words.nrows()])
        masked, positions, originals = tf_text.mask_language_model(
            items,
            item_selector=tf_text.RandomItemSelector(
                max_predictions,
                selection_rate=masking_rate,
                unselectable_ids=special_ids,
                shuffle_fn=_stateless_shuffle(row_seed + 2),
            ),
            mask_values_chooser=_StatelessMaskValues(
                tokenizer.vocabulary_size(), tokenizer.mask_id, row_seed + 4
            ),
        )
        # Whole words can push the count past P. The word that crosses P and
        # those after it are dropped whole, their tokens back to the
        # originals: no unlabelled [MASK], no word masked in part.
        selected = positions.flat_values
        keep = _whole_items_within(
            _word_indices(flat, continuation, selected) if whole_word_masking else selected,
            max_predictions,
        )
        masked = masked.with_flat_values(
            tf.tensor_scatter_nd_update(
                masked.flat_values, tf.cast(selected[keep:, None], tf.int32),
                originals.flat_values[keep:],
            )
        )
        positions = tf.RaggedTensor.from_row_lengths(selected[:keep], [keep])
        originals = tf.RaggedTensor.from_row_lengths(originals.flat_values[:keep], [keep])
        token_ids, padding_mask = _pad(masked, sequence_length)
        segment_ids, _ = _pad(segment_ids, sequence_length)
        positions, weights = _pad(positions, max_predictions)
        originals, _ = _pad(originals, max_predictions)
        return {
            "token_ids": token_ids,
            "segment_ids": segment_ids,
            "padding_mask": padding_mask,
            "masked_positions": positions,
            "masked_ids": originals,
            "masked_weights": weights,
            "next_sentence_labels": pair["next_sentence_label"],
        }

    examples = pairs.enumerate().map(example, num_parallel_calls=tf.data.AUTOTUNE)
    examples = examples.map(
        tf.autograph.experimental.do_not_convert(lambda x: {k: tf.cast(v, tf.int32) for k, v in x.items()})
    )
    return _prefetched(examples.batch(batch_size, drop_remainder=True))
