"""Statistical tests of the BERT pretraining pipeline (seeded: they cannot flake)."""

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


def test_element_spec_is_fully_static(tokenizer, documents):
    dataset = bert_pretraining.bert_pretraining_dataset(
        documents, tokenizer, 64, max_predictions_per_seq=10, batch_size=4
    )
    for name, spec in dataset.element_spec.items():
        assert spec.shape.is_fully_defined(), name
        assert spec.dtype == tf.int32, name


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


def test_same_seed_same_batches_other_seed_other_batches(tokenizer, documents):
    def first(seed):
        dataset = bert_pretraining.bert_pretraining_dataset(
            documents, tokenizer, 64, max_predictions_per_seq=10, batch_size=8, seed=seed
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
