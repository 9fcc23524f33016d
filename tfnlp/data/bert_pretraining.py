"""BERT pretraining inputs, in-graph: next-sentence pairs or RoBERTa's full-sentence
segments, and their masked-LM examples."""

import keras
import tensorflow as tf
import tensorflow_text as tf_text

from tfnlp import _checks
from tfnlp.data._tensors import dense_row
from tfnlp.data.segment_packer import SegmentPacker
from tfnlp.data.tuning import _prefetched, static_tuning

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
    segment_length = _checks.positive_int("segment_length", segment_length)
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


# Documents packed per step of the sequential `Dataset.scan` that packs the
# corpus: one document per step packs short texts several times slower
# (benchmarks/README.md, "Input pipelines", packing).
_DOCUMENTS_PER_STEP = 64


def _sentence_pieces(documents, tokenizer, piece_length):
    """Tokenizes documents `(G, None)` into sentence pieces, marking each document's first.

    Empty sentences give no piece; a sentence of `n > piece_length` tokens
    gives `ceil(n / piece_length)` pieces, all but the last of exactly
    `piece_length` tokens. Returns the pieces `(N, None)` and `starts`
    `(N,)`: whether a piece is the first of its document.
    """
    ids = tokenizer(documents)  # (G, sentences, tokens)
    sentences = ids.values  # (S, None)
    lengths = sentences.row_lengths()
    piece_length = tf.cast(piece_length, lengths.dtype)
    count = (lengths + piece_length - 1) // piece_length  # pieces of each sentence
    in_sentence = tf.ragged.range(lengths).flat_values // piece_length
    pieces = tf.RaggedTensor.from_value_rowids(
        sentences.flat_values,
        tf.repeat(tf.cumsum(count, exclusive=True), lengths) + in_sentence,
        nrows=tf.reduce_sum(count),
    )
    document = tf.repeat(ids.value_rowids(), count)  # (N,)
    starts = tf.concat([[True], document[1:] != document[:-1]], 0)[: tf.size(document)]
    return pieces, starts


def _greedy_segment_ids(lengths, starts, segment_length, used):
    """Segment index of each piece, packed greedily behind `used` tokens, and its `[SEP]`.

    A piece that starts a document needs a `[SEP]` before it to join a
    non-empty segment; a piece that does not fit starts the next segment
    (without the `[SEP]`). Returns the segment ids (0: the open segment)
    and whether a `[SEP]` goes before each piece.
    """

    def step(state, piece):
        segment, used, _ = state
        length, starts = piece
        separator = tf.cast(starts & (used > 0), length.dtype)
        start_new = (used > 0) & (used + separator + length > segment_length)
        return (
            tf.where(start_new, segment + 1, segment),
            tf.where(start_new, length, used + separator + length),
            (separator > 0) & ~start_new,
        )

    zero = tf.zeros([], lengths.dtype)
    segment_ids, _, separated = tf.scan(
        step, (lengths, starts), initializer=(zero, used, tf.constant(False))
    )
    return segment_ids, separated


def _pack_after(carried, pieces, starts, segment_length, sep_id):
    """Packs pieces greedily after the open segment `carried` (1-D).

    Returns the segments `(N, None)`: all closed but the last, the new open
    one (empty only if `carried` and `pieces` both are).
    """
    segment_ids, separated = _greedy_segment_ids(
        pieces.row_lengths(), starts, tf.cast(segment_length, tf.int64),
        tf.size(carried, out_type=tf.int64),
    )
    separators = tf.RaggedTensor.from_row_lengths(
        tf.fill([tf.reduce_sum(tf.cast(separated, tf.int32))], tf.cast(sep_id, carried.dtype)),
        tf.cast(separated, tf.int64),
    )
    pieces = tf.concat([separators, pieces], axis=1)  # a document's [SEP] before its first piece
    return tf.RaggedTensor.from_value_rowids(
        tf.concat([carried, pieces.flat_values], 0),
        tf.concat(
            [tf.zeros(tf.shape(carried), tf.int64), tf.repeat(segment_ids, pieces.row_lengths())], 0
        ),
        nrows=tf.reduce_max(tf.concat([[0], segment_ids], 0)) + 1,
    )


def _full_sentence_segments(documents, tokenizer, segment_length, seed=0, shuffle_buffer=10_000):
    """RoBERTa's FULL-SENTENCES inputs: the corpus cut in segments of whole sentences.

    The documents are read as one stream of sentences, in order, with a
    `[SEP]` between two documents, and packed greedily: a segment takes the
    next sentence while it fits in `segment_length` tokens (the `[SEP]`
    before a document's first sentence counts; at a cut it is dropped). A
    sentence longer than `segment_length` is cut in pieces of
    `segment_length` tokens (the last one shorter, packed like a sentence).
    Every token of the corpus is in exactly one segment; empty sentences and
    documents add nothing (no doubled `[SEP]`). Tokenization runs in
    parallel, the packing in corpus order (`Dataset.scan`, a few documents
    at a time); `shuffle_buffer` segments are then shuffled at once, seeded
    as in `next_sentence_pairs`.

    Args:
        documents: `tf.data.Dataset` of 1-D `tf.string` tensors (sentences of
            one document, in order).
        tokenizer: a `WordPieceTokenizer`.
        segment_length: int, the most tokens per segment (`L - 2` for
            packed length `L`).
        seed: int.
        shuffle_buffer: int, segments shuffled at once (0 to keep corpus order).

    Returns:
        `tf.data.Dataset` of dicts: `segment` (int32 1-D).

    Example (8 tokens per segment; a letter is a token):

    >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"abcdefghijklmnopqrs"]
    >>> documents = tf.data.Dataset.from_generator(
    ...     lambda: iter([["a b", "c d"], ["e f g", "h i j k l m n o p q"], [], ["r s"]]),
    ...     output_signature=tf.TensorSpec([None], tf.string))
    >>> segments = _full_sentence_segments(
    ...     documents, tfnlp.data.WordPieceTokenizer(vocabulary), 8, shuffle_buffer=0)
    >>> for s in segments.as_numpy_iterator():
    ...     print(" ".join(vocabulary[i] for i in s["segment"]))
    a b c d [SEP] e f g
    h i j k l m n o
    p q [SEP] r s
    """
    segment_length = _checks.positive_int("segment_length", segment_length)
    sep_id = tokenizer.sep_id

    @tf.autograph.experimental.do_not_convert
    def pieces(group):
        return (*_sentence_pieces(group, tokenizer, segment_length), False)

    @tf.autograph.experimental.do_not_convert
    def pack(carried, group):
        buffer, used = carried
        group_pieces, starts, is_end = group
        segments = _pack_after(buffer[:used], group_pieces, starts, segment_length, sep_id)
        closed = segments[: segments.nrows() - 1 + tf.cast(is_end, tf.int64)]
        closed = tf.ragged.boolean_mask(closed, closed.row_lengths() > 0)
        open_segment = dense_row(segments[-1])  # at most `segment_length` tokens
        used = tf.size(open_segment)
        buffer = tf.pad(open_segment, [[0, segment_length - used]])
        return (tf.ensure_shape(buffer, [segment_length]), used), closed

    # The open segment is carried in a buffer of `segment_length` tokens and
    # its length: a state of one shape at every step, so `scan` traces `pack`
    # once (a 1-D tensor of the segment starts as shape [0] and made it trace
    # again).
    open_segment = (tf.zeros([segment_length], tf.int32), tf.constant(0))
    # A last group without pieces marks the end of the corpus: the open segment closes.
    no_pieces = tf.RaggedTensor.from_row_lengths(tf.zeros([0], tf.int32), tf.zeros([0], tf.int64))
    end = tf.data.Dataset.from_tensors((no_pieces, tf.zeros([0], tf.bool), True))
    segments = (
        documents.ragged_batch(_DOCUMENTS_PER_STEP)
        .map(pieces, num_parallel_calls=tf.data.AUTOTUNE)
        .concatenate(end)
        .scan(open_segment, pack)
        .flat_map(tf.data.Dataset.from_tensor_slices)
    )
    if shuffle_buffer:
        segments = segments.shuffle(shuffle_buffer, seed=seed)
    return static_tuning(
        segments.map(tf.autograph.experimental.do_not_convert(lambda s: {"segment": dense_row(s)}))
    )


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


def _masked_lm_example(token_ids, segment_ids, row_seed, tokenizer, continuation, sequence_length,
                       max_predictions, masking_rate, whole_word_masking):
    """Masks one packed example `(1, None)` and pads it: BERT's masked-LM inputs and targets."""
    special_ids = [tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id]
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
    }


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
    next_sentence=True,
):
    """BERT pretraining batches: packed sentence pairs (or full sentences) with masked-LM targets.

    documents -> `next_sentence_pairs` (segments of `(L - 3) // 2` tokens) ->
    `[CLS] A [SEP] B [SEP]` truncated longest-first to `L = sequence_length`
    -> masked LM with tensorflow-text's `mask_language_model`: `masking_rate`
    of the non-special tokens are selected (at most
    `max_predictions_per_seq`), of which 80% become `[MASK]`, 10% a random
    token, 10% stay. With `whole_word_masking` the selection picks words,
    all of whose pieces are masked together.

    With `next_sentence=False` the inputs are RoBERTa's FULL-SENTENCES
    (masked LM only, for corpora of independent texts): the corpus is read
    as one stream of sentences with a `[SEP]` between documents, and cut
    greedily into segments of whole sentences of at most `L - 2` tokens, each
    example `[CLS] segment [SEP]` with `segment_ids` all 0. A `[SEP]` that
    falls at a cut is dropped; a sentence longer than `L - 2` tokens is cut
    in pieces. Every token of the corpus is in exactly one example. With
    `L = 10` (segments of 8 tokens; a letter is a token):

        documents: ["a b", "c d"], ["e f g", "h i j k l m n o p q"], ["r s"]
        examples:  [CLS] a b c d [SEP] e f g [SEP]
                   [CLS] h i j k l m n o [SEP]    (a sentence of 10: cut)
                   [CLS] p q [SEP] r s [SEP]

    The masking is the same (the document `[SEP]`s are never selected), and
    the batches have no `next_sentence_labels`.

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
        shuffle_buffer: int, pairs (or segments) shuffled at once (0: corpus
            order).
        random_next_probability: float, the rate of random second segments
            (see `next_sentence_pairs`); unused without `next_sentence`.
        next_sentence: bool, sentence pairs with next-sentence labels (BERT);
            False for full-sentence segments and masked LM only (RoBERTa).

    Returns:
        `tf.data.Dataset` of dicts of int32 tensors: `token_ids`,
        `segment_ids`, `padding_mask` `(B, L)`; `masked_positions`,
        `masked_ids` (the original tokens), `masked_weights` (1 for real
        predictions, 0 for padding) `(B, P)`; with `next_sentence`, also
        `next_sentence_labels` `(B,)`.

    Example:

    >>> from tfnlp import data, datasets
    >>> documents = datasets.load_documents("en_novels", "validation").take(4)
    >>> vocab = data.learn_wordpiece_vocabulary(documents, 500, progress=False)
    >>> batches = bert_pretraining_dataset(
    ...     documents, data.WordPieceTokenizer(vocab), sequence_length=64,
    ...     max_predictions_per_seq=10, batch_size=8)
    >>> {k: tuple(v.shape) for k, v in batches.element_spec.items()}["masked_ids"]
    (8, 10)
    >>> full_sentences = bert_pretraining_dataset(
    ...     documents, data.WordPieceTokenizer(vocab), sequence_length=64,
    ...     max_predictions_per_seq=10, batch_size=8, next_sentence=False)
    >>> "next_sentence_labels" in full_sentences.element_spec
    False
    """
    sequence_length = _checks.positive_int("sequence_length", sequence_length)
    if sequence_length < 5:
        raise ValueError(f"`sequence_length` must be at least 5, got {sequence_length}.")
    max_predictions = _checks.positive_int("max_predictions_per_seq", max_predictions_per_seq)
    batch_size = _checks.positive_int("batch_size", batch_size)
    masking_rate = _checks.fraction("masking_rate", masking_rate)
    packer = SegmentPacker(sequence_length, tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id)
    continuation = tf.constant([t.startswith("##") for t in tokenizer.get_vocabulary()])

    def masked_example(index, segments):
        token_ids, segment_ids = packer.combine(
            [tf.RaggedTensor.from_tensor(segment[None]) for segment in segments]
        )
        return _masked_lm_example(
            token_ids, segment_ids, tf.stack([seed, tf.cast(index, tf.int32)]), tokenizer,
            continuation, sequence_length, max_predictions, masking_rate, whole_word_masking,
        )

    if next_sentence:
        inputs = next_sentence_pairs(
            documents, tokenizer, (sequence_length - 3) // 2, seed=seed,
            shuffle_buffer=shuffle_buffer, random_next_probability=random_next_probability,
        )

        @tf.autograph.experimental.do_not_convert
        def example(index, pair):
            return {
                **masked_example(index, (pair["segment_a"], pair["segment_b"])),
                "next_sentence_labels": pair["next_sentence_label"],
            }
    else:
        inputs = _full_sentence_segments(
            documents, tokenizer, sequence_length - 2, seed=seed, shuffle_buffer=shuffle_buffer
        )

        @tf.autograph.experimental.do_not_convert
        def example(index, segment):
            return masked_example(index, (segment["segment"],))

    examples = inputs.enumerate().map(example, num_parallel_calls=tf.data.AUTOTUNE)
    examples = examples.map(
        tf.autograph.experimental.do_not_convert(lambda x: {k: tf.cast(v, tf.int32) for k, v in x.items()})
    )
    return _prefetched(examples.batch(batch_size, drop_remainder=True))


BACKBONE_INPUTS = ("token_ids", "segment_ids", "padding_mask")


def pretraining_batch(batch):
    """Splits a `tfnlp.data.bert_pretraining_dataset` batch into `(x, y, sample_weight)`.

    Use as `dataset.map(pretraining_batch)` before `BertPretrainer.fit`: the
    masked-LM loss is weighted by `masked_weights`, so padded prediction
    slots count for nothing.

    Args:
        batch: a dict from `bert_pretraining_dataset`.

    Returns:
        `(x, y, sample_weight)`: the model inputs, `{"mlm", "nsp"}` labels and
        their weights; `{"mlm"}` only for a batch without
        `next_sentence_labels` (`bert_pretraining_dataset(...,
        next_sentence=False)`, for a `BertPretrainer(..., next_sentence=False)`).
    """
    x = {name: batch[name] for name in BACKBONE_INPUTS + ("masked_positions",)}
    y = {"mlm": batch["masked_ids"]}
    weights = {"mlm": batch["masked_weights"]}
    if "next_sentence_labels" in batch:
        y["nsp"] = batch["next_sentence_labels"]
        weights["nsp"] = keras.ops.ones_like(batch["next_sentence_labels"])
    return x, y, weights
