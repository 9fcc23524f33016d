"""PPMI-SVD token embeddings == a dense reference; their counts == a plain loop."""

import collections
import math

import numpy as np
import pytest
import tensorflow as tf

from tfnlp import data


def loop_counts(sequences, window):
    """Co-occurrence counts the obvious way: every pair within `window`, both orders."""
    counts = collections.defaultdict(float)
    for sequence in sequences:
        for i, left in enumerate(sequence):
            for j in range(i + 1, min(i + window + 1, len(sequence))):
                counts[left, sequence[j]] += 1 / (j - i)
                counts[sequence[j], left] += 1 / (j - i)
    return counts


def dense_ppmi_vectors(sequences, vocabulary_size, window, smoothing):
    """PPMI as a dense matrix from the loop's counts, and U·sqrt(S) by NumPy's exact SVD."""
    counts = np.zeros((vocabulary_size, vocabulary_size))
    for (i, j), count in loop_counts(sequences, window).items():
        counts[i, j] = count
    rows = counts.sum(1)
    context = rows**smoothing
    with np.errstate(divide="ignore"):
        pmi = np.log(counts * context.sum() / np.outer(rows, context).clip(1e-300))
    ppmi = np.where(counts > 0, np.maximum(pmi, 0), 0)
    u, s, _ = np.linalg.svd(ppmi)
    return u * np.sqrt(s)


def random_sequences(seed, count=40, vocabulary_size=30):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, vocabulary_size, rng.integers(0, 12)).tolist() for _ in range(count)]


@pytest.mark.parametrize("window", [1, 3])
def test_counts_equal_a_loop_over_every_pair(window):
    sequences = random_sequences(0)
    rows, columns, counts = data.cooccurrence_counts(sequences, 30, window=window)
    expected = loop_counts(sequences, window)
    assert len(counts) == len(expected)
    for i, j, count in zip(rows, columns, counts, strict=True):
        assert count == pytest.approx(expected[i, j])


def test_counts_never_pair_ids_of_two_sequences():
    rows, columns, _ = data.cooccurrence_counts([[1, 2], [3, 4]], 5, window=5)
    assert sorted(zip(rows.tolist(), columns.tolist(), strict=True)) == [(1, 2), (2, 1), (3, 4), (4, 3)]


def test_counts_read_ragged_tensors_and_datasets_like_lists():
    sequences = [[1, 2, 3], [], [4, 1]]
    expected = data.cooccurrence_counts(sequences, 5)
    ragged = tf.ragged.constant(sequences, dtype=tf.int64)
    dataset = tf.data.Dataset.from_tensor_slices(ragged)
    for given in (ragged, dataset):
        for got, want in zip(data.cooccurrence_counts(given, 5), expected, strict=True):
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("window, smoothing", [(2, 0.75), (4, 1.0)])
def test_embeddings_equal_the_exact_svd_of_dense_ppmi(window, smoothing):
    # 20 ids: the randomised SVD's sketch (dimension + 16 columns) spans the
    # whole space, so its result is exact.
    sequences = random_sequences(1, count=60, vocabulary_size=20)
    dimension = 6
    got = data.learn_token_embeddings(sequences, 20, dimension, window=window, smoothing=smoothing)
    reference = dense_ppmi_vectors(sequences, 20, window, smoothing)[:, :dimension]
    reference *= 0.02 / np.sqrt(np.mean(reference**2))
    # Columns are defined up to their signs: compare the Gram matrices.
    np.testing.assert_allclose(got @ got.T, reference @ reference.T, atol=1e-6)
    assert got.dtype == np.float32 and got.shape == (20, dimension)
    assert np.sqrt(np.mean(got**2)) == pytest.approx(0.02, rel=1e-5)


def test_randomised_svd_finds_the_leading_components_of_a_larger_matrix():
    # 300 ids in 8 topics (a sentence draws its ids from one topic), 8
    # components: the sketch spans 24 of the 300 dimensions.
    rng = np.random.default_rng(2)
    topics = rng.permutation(296).reshape(8, 37)  # ids 296-299 never occur
    sequences = [rng.choice(topics[rng.integers(8)], rng.integers(2, 12)).tolist() for _ in range(3000)]
    got = data.learn_token_embeddings(sequences, 300, 8, stddev=1.0)
    reference = dense_ppmi_vectors(sequences, 300, 5, 0.75)[:, :8]
    reference /= np.sqrt(np.mean(reference**2))
    np.testing.assert_allclose(got @ got.T, reference @ reference.T, atol=0.02 * np.abs(reference @ reference.T).max())


def test_tokens_that_share_contexts_get_close_vectors():
    # Adjectives of two groups, each seen only next to its group's nouns.
    rng = np.random.default_rng(0)
    groups = [list(range(4, 10)), list(range(10, 16))]
    nouns = [list(range(16, 22)), list(range(22, 28))]
    sequences = []
    for _ in range(600):
        group = rng.integers(2)
        sequences.append([1, int(rng.choice(groups[group])), int(rng.choice(nouns[group])), 2])
    vectors = data.learn_token_embeddings(sequences, 30, 8)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True).clip(1e-12)
    within = np.mean([unit[a] @ unit[b] for g in groups for a in g for b in g if a != b])
    across = np.mean([unit[a] @ unit[b] for a in groups[0] for b in groups[1]])
    assert within > 0.6 and across < 0.2, (within, across)


def test_ids_never_seen_get_zero_vectors():
    vectors = data.learn_token_embeddings([[1, 2, 3, 1, 2]] * 5, 8, 2)
    np.testing.assert_array_equal(vectors[[0, 4, 5, 6, 7]], 0)
    assert np.all(np.isfinite(vectors))


@pytest.mark.parametrize(
    "token_ids, kwargs, error, message",
    [
        ([[1, 2]], dict(vocabulary_size=4, dimension=5), ValueError, "dimension"),
        ([[1, 9]], dict(vocabulary_size=4, dimension=2), ValueError, "vocabulary_size=4"),
        ([[-1, 2]], dict(vocabulary_size=4, dimension=2), ValueError, "vocabulary_size=4"),
        ([[1.5, 2.0]], dict(vocabulary_size=4, dimension=2), TypeError, "integer ids"),
        ([[[1, 2]]], dict(vocabulary_size=4, dimension=2), ValueError, "rank 1"),
        ([[1], []], dict(vocabulary_size=4, dimension=2), ValueError, "no two neighbouring ids"),
        ([[1, 2]], dict(vocabulary_size=4, dimension=2, smoothing=0), ValueError, "smoothing"),
        ([[1, 2]], dict(vocabulary_size=4, dimension=2, window=0), ValueError, "window"),
        ([[1, 2]], dict(vocabulary_size=4, dimension=2, stddev=-1.0), ValueError, "stddev"),
    ],
)
def test_bad_arguments_are_named(token_ids, kwargs, error, message):
    with pytest.raises(error, match=message):
        data.learn_token_embeddings(token_ids, **kwargs)


def test_the_bundled_novels_give_neighbours_of_meaning():
    """On real text: the words for times of day are closer to each other than to the rest."""
    from tfnlp import datasets

    sentences = [s for d in datasets.read_documents("en_novels", "train")[:60] for s in d]
    vocabulary = data.learn_wordpiece_vocabulary(
        tf.data.Dataset.from_tensor_slices(sentences), 1500, progress=False
    )
    tokenizer = data.WordPieceTokenizer(vocabulary)
    vectors = data.learn_token_embeddings(tokenizer(tf.constant(sentences)), len(vocabulary), 32)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True).clip(1e-12)
    index = {token: i for i, token in enumerate(vocabulary)}
    days = [index[t] for t in ("morning", "evening", "night", "day") if t in index]
    assert len(days) >= 3
    pair = np.mean([unit[a] @ unit[b] for a in days for b in days if a != b])
    baseline = np.mean(unit[days] @ unit.T)
    assert pair > baseline + 0.2 and not math.isnan(pair), (pair, baseline)
