"""Statistical tests of the BERT pretraining pipeline (seeded: they cannot flake)."""

import collections

import numpy as np
import pytest
import tensorflow as tf

from tfnlp import data, datasets
from tfnlp.data import bert_pretraining

SEQUENCE_LENGTH = 128


@pytest.fixture(scope="module")
def tokenizer(corpus_vocabulary):
    return data.WordPieceTokenizer(corpus_vocabulary)


@pytest.fixture(scope="module")
def documents():
    return datasets.load_documents("en_novels", "train").take(60)


def _collect(dataset, limit):
    batches = list(dataset.take(limit).as_numpy_iterator())
    return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


@pytest.fixture(scope="module")
def masked_and_original(tokenizer, documents):
    """Masked batches, and the same examples packed without masking."""
    masked = _collect(
        bert_pretraining.bert_pretraining_dataset(
            documents, tokenizer, SEQUENCE_LENGTH, max_predictions_per_seq=40, batch_size=32, seed=7
        ),
        36,
    )
    pairs = bert_pretraining.next_sentence_pairs(documents, tokenizer, (SEQUENCE_LENGTH - 3) // 2, seed=7)
    packer = data.SegmentPacker(SEQUENCE_LENGTH, tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id)
    originals = pairs.ragged_batch(32).map(lambda p: packer((p["segment_a"], p["segment_b"])))
    original = _collect(originals, 36)
    return masked, original


@pytest.mark.parametrize("next_sentence", [True, False])
def test_element_spec_is_fully_static(tokenizer, documents, next_sentence):
    dataset = bert_pretraining.bert_pretraining_dataset(
        documents, tokenizer, 64, max_predictions_per_seq=10, batch_size=4, next_sentence=next_sentence
    )
    for name, spec in dataset.element_spec.items():
        assert spec.shape.is_fully_defined(), name
        assert spec.dtype == tf.int32, name
    # Without next-sentence prediction there is no label to pretend with.
    assert ("next_sentence_labels" in dataset.element_spec) == next_sentence
    assert len(dataset.element_spec) == 6 + next_sentence


def test_masked_lm_statistics_over_100k_tokens(masked_and_original, tokenizer):
    masked, original = masked_and_original
    np.testing.assert_array_equal(masked["segment_ids"], original["segment_ids"])
    np.testing.assert_array_equal(masked["padding_mask"], original["padding_mask"])
    special = np.isin(original["token_ids"], [tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id])
    selectable = (~special).sum()
    assert selectable > 100_000

    weights = masked["masked_weights"].astype(bool)
    rows = np.repeat(np.arange(len(weights))[:, None], weights.shape[1], 1)[weights]
    positions = masked["masked_positions"][weights]
    labels = masked["masked_ids"][weights]
    # Labels are the original tokens; special tokens are never selected.
    np.testing.assert_array_equal(labels, original["token_ids"][rows, positions])
    assert not special[rows, positions].any()
    assert abs(len(positions) / selectable - 0.15) < 0.005

    shown = masked["token_ids"][rows, positions]
    as_mask = np.mean(shown == tokenizer.mask_id)
    unchanged = np.mean(shown == labels)
    randomised = 1 - as_mask - unchanged
    assert abs(as_mask - 0.8) < 0.015 and abs(unchanged - 0.1) < 0.015 and abs(randomised - 0.1) < 0.015
    # Outside the selected positions nothing changed.
    changed = masked["token_ids"] != original["token_ids"]
    changed[rows, positions] = False
    assert not changed.any()


def test_next_sentence_pairs_are_balanced_and_true(tokenizer, documents):
    pairs = list(
        bert_pretraining.next_sentence_pairs(documents, tokenizer, 62, seed=3).as_numpy_iterator()
    )
    labels = np.array([p["next_sentence_label"] for p in pairs])
    assert len(pairs) > 1500
    assert abs(labels.mean() - 0.5) < 0.02
    streams = [
        "," + ",".join(map(str, tokenizer(doc).flat_values.numpy())) + ","
        for doc in documents
    ]

    def contiguous(tokens, document):
        return "," + ",".join(map(str, tokens)) + "," in streams[document]

    for p in pairs:
        a_then_b = np.concatenate([p["segment_a"], p["segment_b"]])
        assert contiguous(p["segment_a"], p["document"])
        if p["next_sentence_label"] == bert_pretraining.IS_NEXT:
            assert p["b_document"] == p["document"] and p["b_chunk"] == p["chunk"] + 1
            assert contiguous(a_then_b, p["document"])
        else:
            assert p["b_document"] != p["document"]
            assert not contiguous(a_then_b, p["document"])
            assert contiguous(p["segment_b"], p["b_document"])


def test_whole_word_masking_masks_every_piece_of_a_word(tokenizer, documents):
    batches = _collect(
        bert_pretraining.bert_pretraining_dataset(
            documents, tokenizer, 64, max_predictions_per_seq=64, batch_size=16,
            whole_word_masking=True, seed=1,
        ),
        10,
    )
    vocabulary = tokenizer.get_vocabulary()
    continuation = np.array([t.startswith("##") for t in vocabulary])
    pieces = 0
    for row in range(len(batches["token_ids"])):
        selected = set(batches["masked_positions"][row][batches["masked_weights"][row] == 1])
        original = batches["token_ids"][row].copy()
        weights = batches["masked_weights"][row] == 1
        original[batches["masked_positions"][row][weights]] = batches["masked_ids"][row][weights]
        for position in selected:
            if continuation[original[position]]:
                assert position - 1 in selected  # the word's previous piece too
                pieces += 1
            if position + 1 < len(original) and continuation[original[position + 1]]:
                assert position + 1 in selected  # and its next piece
    assert pieces > 20


def test_whole_word_cap_leaves_no_unlabelled_change(tokenizer, documents):
    # With a small cap whole words overflow it; every changed token needs a label.
    batches = _collect(
        bert_pretraining.bert_pretraining_dataset(
            documents, tokenizer, 128, max_predictions_per_seq=5, batch_size=16,
            whole_word_masking=True, seed=2,
        ),
        6,
    )
    assert batches["masked_weights"].sum(axis=1).max() == 5
    masks = batches["token_ids"] == tokenizer.mask_id
    continuation = np.array([t.startswith("##") for t in tokenizer.get_vocabulary()])
    cut_words = 0
    for row in range(len(masks)):
        weights = batches["masked_weights"][row] == 1
        labelled = set(batches["masked_positions"][row][weights])
        assert set(np.flatnonzero(masks[row])) <= labelled
        # The word crossing the cap is restored whole: no word is labelled in part.
        original = batches["token_ids"][row].copy()
        original[batches["masked_positions"][row][weights]] = batches["masked_ids"][row][weights]
        word = np.cumsum(~continuation[original])
        for position in labelled:
            assert set(np.flatnonzero(word == word[position])) <= labelled, (row, position)
        cut_words += weights.sum() < 5 and len(labelled) > 0
    assert cut_words > 0  # some rows did stop short of the cap to keep words whole


def test_chunks_pack_whole_sentences_greedily():
    lengths = tf.constant([10, 100, 10, 61, 61, 30, 31, 1], tf.int64)
    chunks = bert_pretraining._greedy_chunk_ids(lengths, tf.constant(62, tf.int64)).numpy()
    # 10 | 100 (alone: too long) | 10 (61 would overflow) | 61 | 61 | 30 + 31 + 1 = 62
    np.testing.assert_array_equal(chunks, [0, 1, 2, 3, 4, 5, 5, 5])


@pytest.mark.parametrize("next_sentence", [True, False])
def test_same_seed_same_batches_other_seed_other_batches(tokenizer, documents, next_sentence):
    def first(seed):  # 8 documents: the shuffle buffer fills from them, not all 60
        dataset = bert_pretraining.bert_pretraining_dataset(
            documents.take(8), tokenizer, 64, max_predictions_per_seq=10, batch_size=8, seed=seed,
            next_sentence=next_sentence,
        )
        return next(iter(dataset))

    a, b, c = first(5), first(5), first(6)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])
    assert not np.array_equal(a["token_ids"], c["token_ids"])


@pytest.mark.parametrize(
    "kwargs, message",
    [({"sequence_length": 4}, "sequence_length"), ({"max_predictions_per_seq": 0}, "max_predictions"),
     ({"masking_rate": 1.5}, "masking_rate"), ({"batch_size": 0}, "batch_size")],
)
def test_bad_arguments(tokenizer, documents, kwargs, message):
    with pytest.raises(ValueError, match=message):
        bert_pretraining.bert_pretraining_dataset(documents, tokenizer, **kwargs)


# --- Masked LM only: RoBERTa's FULL-SENTENCES packing ---

LETTERS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"abcdefghijklmnopqrstuvwxyz"]


def _documents(documents):
    return tf.data.Dataset.from_generator(
        lambda: iter(documents), output_signature=tf.TensorSpec([None], tf.string)
    )


def _expected_segments(documents, tokenizer, segment_length):
    """FULL-SENTENCES packing written plainly: whole sentences (long ones in pieces),
    a [SEP] between documents, greedy, across documents."""
    segments, open_segment = [], []
    for document in documents:
        first = True
        for sentence in tokenizer(tf.constant(document, tf.string)).to_list():
            for start in range(0, len(sentence), segment_length):
                piece = sentence[start:start + segment_length]
                separator = [tokenizer.sep_id] if first and open_segment else []
                first = False
                if open_segment and len(open_segment) + len(separator) + len(piece) > segment_length:
                    segments.append(open_segment)
                    open_segment = piece
                else:
                    open_segment = open_segment + separator + piece
    return segments + ([open_segment] if open_segment else [])


@pytest.mark.parametrize(
    "documents, expected",
    [
        # The docstring's example: a [SEP] between documents where they share a
        # segment, a long sentence cut, an empty document adding nothing.
        ([["a b", "c d"], ["e f g", "h i j k l m n o p q"], [], ["r s"]],
         ["a b c d [SEP] e f g", "h i j k l m n o", "p q [SEP] r s"]),
        ([["a b c d e f"], ["g"]], ["a b c d e f [SEP] g"]),  # 6 + [SEP] + 1 fits in 8
        ([["a b c d e f g"], ["h"]], ["a b c d e f g", "h"]),  # 7 + [SEP] + 1 does not: [SEP] dropped
        ([["a b c d e f g", "h"]], ["a b c d e f g h"]),  # within a document, no [SEP]
        ([["a b c", "d e f g h i"]], ["a b c", "d e f g h i"]),  # whole sentences only
        ([["a b c d e f g h i j k l m n o p q"], ["r"]],
         ["a b c d e f g h", "i j k l m n o p", "q [SEP] r"]),  # pieces of 8; the last one packs on
        ([[""], ["", "a"], [], ["b", ""]], ["a [SEP] b"]),  # empty sentences and documents: nothing
        ([["a b c d e f g h"], ["i"]], ["a b c d e f g h", "i"]),
        ([], []),
    ],
)
def test_full_sentence_segments_by_hand(documents, expected):
    tokenizer = data.WordPieceTokenizer(LETTERS)
    segments = bert_pretraining._full_sentence_segments(
        _documents(documents), tokenizer, 8, shuffle_buffer=0
    )
    actual = [" ".join(LETTERS[i] for i in s["segment"]) for s in segments.as_numpy_iterator()]
    assert actual == expected
    assert actual == [
        " ".join(LETTERS[i] for i in s) for s in _expected_segments(documents, tokenizer, 8)
    ]


@pytest.mark.parametrize("documents_per_step", [1, 7, 64])
def test_full_sentence_segments_hold_every_token_in_order(tokenizer, documents, documents_per_step,
                                                          monkeypatch):
    # The packing carries its open segment from one group of documents to the next.
    monkeypatch.setattr(bert_pretraining, "_DOCUMENTS_PER_STEP", documents_per_step)
    segment_length = 30
    actual = [
        s["segment"].tolist()
        for s in bert_pretraining._full_sentence_segments(
            documents, tokenizer, segment_length, shuffle_buffer=0
        ).as_numpy_iterator()
    ]
    texts = [d.tolist() for d in documents.as_numpy_iterator()]
    assert actual == _expected_segments(texts, tokenizer, segment_length)
    # Independently of the reference: the segments are the corpus' token
    # stream (documents joined by [SEP]) cut in order, a [SEP] at a cut dropped.
    sep = tokenizer.sep_id
    streams = [tokenizer(tf.constant(d, tf.string)).flat_values.numpy().tolist() for d in texts]
    stream = sum(([sep] + s for s in streams if s), [])[1:]
    position, cuts_at_documents = 0, 0
    for segment in actual:
        assert 0 < len(segment) <= segment_length
        assert segment[0] != sep and segment[-1] != sep
        if position and stream[position] == sep:
            position += 1
            cuts_at_documents += 1
        assert segment == stream[position:position + len(segment)]
        position += len(segment)
    assert position == len(stream)
    # The corpus exercises every case: long sentences cut, documents sharing a
    # segment, and documents starting one.
    assert max(len(s) for t in texts for s in tokenizer(tf.constant(t, tf.string)).to_list()) > segment_length
    assert sum(s.count(sep) for s in actual) >= 3 and cuts_at_documents >= 3


@pytest.mark.parametrize("whole_word_masking", [False, True])
def test_full_sentence_batches_are_the_segments_masked(tokenizer, documents, whole_word_masking):
    sequence_length, batch_size, documents = 32, 8, documents.take(15)
    batches = _collect(
        bert_pretraining.bert_pretraining_dataset(
            documents, tokenizer, sequence_length, max_predictions_per_seq=8, batch_size=batch_size,
            whole_word_masking=whole_word_masking, seed=4, shuffle_buffer=0, next_sentence=False,
        ),
        -1,
    )
    assert "next_sentence_labels" not in batches
    # The original tokens: the labels put back at the masked positions.
    original = batches["token_ids"].copy()
    rows, slots = np.nonzero(batches["masked_weights"])
    positions = batches["masked_positions"][rows, slots]
    original[rows, positions] = batches["masked_ids"][rows, slots]
    texts = [d.tolist() for d in documents.as_numpy_iterator()]
    expected = _expected_segments(texts, tokenizer, sequence_length - 2)
    assert len(original) == len(expected) // batch_size * batch_size  # drop_remainder
    for row, segment in enumerate(expected[: len(original)]):
        n = len(segment) + 2
        assert original[row, :n].tolist() == [tokenizer.cls_id, *segment, tokenizer.sep_id]
        assert not original[row, n:].any() and batches["padding_mask"][row].tolist() == [1] * n + [0] * (
            sequence_length - n
        )
    assert not batches["segment_ids"].any()
    # Masked where labelled only, never a [CLS] or [SEP] (document ones included).
    changed = batches["token_ids"] != original
    assert changed.any()
    changed[rows, positions] = False
    assert not changed.any()
    assert not np.isin(original[rows, positions], [tokenizer.cls_id, tokenizer.sep_id]).any()
    selectable = ~np.isin(original, [tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id])
    assert abs(len(positions) / selectable.sum() - 0.15) < 0.03


def test_full_sentence_batches_are_shuffled_and_keep_every_segment(tokenizer, documents):
    documents = documents.take(15)
    batches = _collect(
        bert_pretraining.bert_pretraining_dataset(
            documents, tokenizer, 32, max_predictions_per_seq=8, batch_size=8, seed=4,
            shuffle_buffer=1000, next_sentence=False,
        ),
        -1,
    )
    original = batches["token_ids"].copy()
    rows, slots = np.nonzero(batches["masked_weights"])
    original[rows, batches["masked_positions"][rows, slots]] = batches["masked_ids"][rows, slots]
    texts = [d.tolist() for d in documents.as_numpy_iterator()]
    expected = [
        (tokenizer.cls_id, *s, tokenizer.sep_id) for s in _expected_segments(texts, tokenizer, 30)
    ]
    lengths = batches["padding_mask"].sum(axis=1)
    actual = [tuple(row[:n].tolist()) for row, n in zip(original, lengths, strict=True)]
    assert len(actual) == len(expected) // 8 * 8  # drop_remainder
    assert actual != expected[: len(actual)]  # shuffled
    # The same segments, each as often (less the few of the last, partial batch).
    assert not collections.Counter(actual) - collections.Counter(expected)


def test_full_sentence_functions_are_left_unconverted(tokenizer, monkeypatch):
    # As in every tfnlp pipeline (tests/data/test_pipelines.py): AutoGraph converts none of them.
    from tensorflow.python.autograph.impl import api as autograph_api

    entities, convert = [], autograph_api._convert_actual
    monkeypatch.setattr(autograph_api, "_convert_actual",
                        lambda entity, *args: entities.append(entity) or convert(entity, *args))
    documents = datasets.load_documents("en_novels", "validation").take(4)
    next(iter(bert_pretraining.bert_pretraining_dataset(
        documents, tokenizer, 32, 4, batch_size=4, whole_word_masking=True, next_sentence=False
    )))
    assert not [e for e in entities if getattr(e, "__module__", "").startswith("tfnlp")]
