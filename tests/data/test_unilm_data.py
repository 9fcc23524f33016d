"""UniLM pipelines: objective proportions in every batch, target-only masking, left-to-right LM."""

import numpy as np
import pytest
import tensorflow as tf

from tfnlp import data, datasets, models
from tfnlp.layers import masks


@pytest.fixture(scope="module")
def tokenizer(corpus_vocabulary):
    return data.WordPieceTokenizer(corpus_vocabulary)


@pytest.mark.parametrize("batch_size", [36, 32, 7])
def test_objective_counts(batch_size):
    counts = data.objective_counts(batch_size)
    assert sum(counts.values()) == batch_size
    if batch_size % 6 == 0:
        assert counts == {"bidirectional": batch_size // 3, "left_to_right": batch_size // 6,
                          "right_to_left": batch_size // 6, "seq2seq": batch_size // 3}


def test_pretraining_batches_mix_objectives_in_the_paper_proportions(tokenizer):
    documents = datasets.load_documents("en_novels", "validation").take(12)
    batches = data.unilm_pretraining_dataset(documents, tokenizer, sequence_length=64,
                                             batch_size=36, seed=3)
    orders, total = set(), np.zeros(4)
    for batch in batches.take(25):
        objective = batch["objective"].numpy()
        counts = np.bincount(objective, minlength=4)
        # Within every batch: 1/3 bidirectional, 1/6 l2r, 1/6 r2l, 1/3 seq2seq.
        np.testing.assert_array_equal(counts, [12, 6, 6, 12])
        total += counts
        orders.add(tuple(objective))
        assert "next_sentence_labels" not in batch
        assert batch["token_ids"].shape == (36, 64) and batch["masked_ids"].shape == (36, 20)
    assert len(orders) > 20, "the order of objectives must vary between batches"
    np.testing.assert_allclose(total / total.sum(), [1 / 3, 1 / 6, 1 / 6, 1 / 3])


def test_pretraining_pairs_are_true_continuations(tokenizer):
    documents = datasets.load_documents("en_novels", "validation").take(6)
    pairs = data.next_sentence_pairs(documents, tokenizer, 30, random_next_probability=0.0)
    for pair in pairs.take(200):
        assert pair["b_document"] == pair["document"] and pair["b_chunk"] == pair["chunk"] + 1
        assert pair["next_sentence_label"] == 0
    with pytest.raises(ValueError, match="random_next_probability"):
        data.next_sentence_pairs(documents, tokenizer, 30, random_next_probability=1.5)


def finetuning_batch(tokenizer, **kwargs):
    pairs = datasets.load_text_pairs("bible_archaic_modern", "validation").take(64)
    return next(iter(data.unilm_finetuning_dataset(pairs, tokenizer, 64, batch_size=64, **kwargs)))


def test_finetuning_masks_only_target_tokens(tokenizer):
    batch = finetuning_batch(tokenizer, seed=1)
    plain = next(iter(data.unilm_seq2seq_dataset(
        datasets.load_text_pairs("bible_archaic_modern", "validation").take(64), tokenizer, 64,
        batch_size=64)))
    np.testing.assert_array_equal(batch["objective"], masks.SEQ2SEQ)
    np.testing.assert_array_equal(batch["segment_ids"], plain["segment_ids"])
    positions = batch["masked_positions"].numpy()
    weights = batch["masked_weights"].numpy().astype(bool)
    original = plain["token_ids"].numpy()
    changed = batch["token_ids"].numpy() != original
    targets = (plain["segment_ids"].numpy() == 1) & (plain["padding_mask"].numpy() == 1)
    ends_masked = 0
    for b in range(64):
        chosen = positions[b][weights[b]]
        assert len(chosen) >= 1 and len(set(chosen)) == len(chosen)
        assert targets[b, chosen].all(), "only target tokens (and the final [SEP]) are masked"
        np.testing.assert_array_equal(batch["masked_ids"].numpy()[b][weights[b]],
                                      original[b, chosen])
        # Every changed token is a prediction target.
        assert set(np.flatnonzero(changed[b])) <= set(chosen)
        ends_masked += int(np.flatnonzero(targets[b])[-1] in chosen)
        rate = len(chosen) / targets[b].sum()
        assert 0.3 < rate <= 1.0
    assert ends_masked > 20, "the final [SEP] must be a target too"
    masked_tokens = batch["token_ids"].numpy()[changed]
    assert np.mean(masked_tokens == tokenizer.mask_id) > 0.7


def test_pseudo_masked_batches_are_the_packed_pairs_with_the_mask_id(tokenizer):
    pairs = datasets.load_text_pairs("bible_archaic_modern", "validation").take(10)
    batches = list(data.unilm_pseudo_masked_dataset(pairs, tokenizer, 64, batch_size=4,
                                                    drop_remainder=False))
    plain = list(data.unilm_seq2seq_dataset(pairs, tokenizer, 64, batch_size=4,
                                            drop_remainder=False))
    assert [len(b["token_ids"]) for b in batches] == [4, 4, 2]
    for batch, expected in zip(batches, plain, strict=True):
        assert set(batch) == set(expected) | {"mask_id"}
        for name, values in expected.items():
            np.testing.assert_array_equal(batch[name], values)
        np.testing.assert_array_equal(batch["mask_id"], tokenizer.mask_id)
    x, labels, weights = models.unilm_batch(batches[0])
    np.testing.assert_array_equal(labels, plain[0]["token_ids"])
    np.testing.assert_array_equal(weights, plain[0]["segment_ids"] * plain[0]["padding_mask"])


def test_finetuning_is_seeded_and_masks_anew_every_epoch(tokenizer):
    first, again = finetuning_batch(tokenizer, seed=4), finetuning_batch(tokenizer, seed=4)
    other = finetuning_batch(tokenizer, seed=5)
    np.testing.assert_array_equal(first["token_ids"], again["token_ids"])
    assert not np.array_equal(first["token_ids"], other["token_ids"])
    pairs = datasets.load_text_pairs("bible_archaic_modern", "validation").take(64)
    dataset = data.unilm_finetuning_dataset(pairs, tokenizer, 64, batch_size=64, seed=4)
    epoch_1, epoch_2 = (next(iter(dataset))["masked_positions"].numpy() for _ in range(2))
    assert not np.array_equal(epoch_1, epoch_2), "each pass must draw new masks"


@pytest.mark.parametrize("kwargs, message", [({"masking_rate": 0.0}, "masking_rate"),
                                             ({"masking_rate": True}, "`masking_rate` must be a float"),
                                             ({"masking_rate": "0.5"}, "`masking_rate` must be a float"),
                                             ({"tokenizer": "vocab.txt"}, "`tokenizer` must be a WordPiece"),
                                             ({"max_predictions": 0}, "max_predictions")])
def test_bad_finetuning_arguments(tokenizer, kwargs, message):
    with pytest.raises(ValueError, match=message):
        data.unilm_finetuning_dataset(tf.data.Dataset.from_tensor_slices((["a"], ["b"])),
                                      kwargs.pop("tokenizer", tokenizer), 16, **kwargs)


LETTERS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"abcdefghijklmnopqrs"]


def letter_documents():
    return tf.data.Dataset.from_generator(
        lambda: iter([["a b", "c d"], ["e f g", "h i j k l m n o p q"], [], ["r s"]]),
        output_signature=tf.TensorSpec([None], tf.string))


def test_left_to_right_batches_are_the_corpus_in_order_every_token_a_target():
    tokenizer = data.WordPieceTokenizer(LETTERS)
    batches = data.left_to_right_lm_dataset(letter_documents(), tokenizer, sequence_length=10,
                                            batch_size=3, shuffle_buffer=0)
    assert {k: v.shape.as_list() for k, v in batches.element_spec.items()} == {
        "token_ids": [3, 10], "padding_mask": [3, 10], "mask_id": [3]}
    (batch,) = list(batches)
    rows = [" ".join(LETTERS[i] for i in row[mask > 0])
            for row, mask in zip(batch["token_ids"].numpy(), batch["padding_mask"].numpy(),
                                 strict=True)]
    assert rows == ["[CLS] a b c d [SEP] e f g [SEP]", "[CLS] h i j k l m n o [SEP]",
                    "[CLS] p q [SEP] r s [SEP]"]
    assert np.all(batch["token_ids"].numpy()[batch["padding_mask"].numpy() == 0] == 0)
    assert batch["mask_id"].numpy().tolist() == [tokenizer.mask_id] * 3
    x, labels, weights = models.unilm_batch(batch)
    assert sorted(x) == ["mask_id", "padding_mask", "token_ids"]
    np.testing.assert_array_equal(labels, batch["token_ids"])
    # Every real token is a target but [CLS], which is given.
    expected = batch["padding_mask"].numpy().astype("float32")
    expected[:, 0] = 0
    np.testing.assert_array_equal(weights, expected)


def test_left_to_right_batches_are_seeded_and_check_their_arguments(tokenizer):
    documents = datasets.load_documents("en_novels", "validation").take(6)

    def first(seed):
        batches = data.left_to_right_lm_dataset(documents, tokenizer, 32, batch_size=16,
                                                seed=seed, shuffle_buffer=100)
        return next(iter(batches))["token_ids"].numpy()

    np.testing.assert_array_equal(first(1), first(1))
    assert not np.array_equal(first(1), first(2))
    with pytest.raises(ValueError, match="`sequence_length` must be at least 3"):
        data.left_to_right_lm_dataset(documents, tokenizer, 2)
    with pytest.raises(ValueError, match="batch_size"):
        data.left_to_right_lm_dataset(documents, tokenizer, 32, batch_size=0)
