"""Token embeddings learned from co-occurrence counts (PPMI + truncated SVD).

A transformer trained from random weights with masked LM on a few million
tokens spends its first thousands of steps predicting frequent tokens from
nothing but their frequency: its token embeddings carry no meaning yet, so
its attention has nothing to look for. Counting which tokens occur near which
(a few seconds) and factorising the positive pointwise mutual information of
those counts gives every token a vector placed near the tokens that share its
contexts: the classic distributional word vectors (Levy, Goldberg and Dagan,
"Improving Distributional Similarity with Lessons Learned from Word
Embeddings", TACL 2015: context distribution smoothing 0.75, harmonically
weighted windows, `U·sqrt(S)`). `learn_token_embeddings` computes them for a
tokenizer's ids, to start a backbone's token embedding from them before
pretraining (`examples/pretrain_bert.py --token-embeddings ppmi`; what it
changes downstream is in docs/results.md).
"""

import numpy as np
import tensorflow as tf

from tfnlp._checks import arguments as _args


def _as_id_arrays(token_ids):
    """Each sequence of `token_ids` as a 1-D int64 NumPy array."""
    if isinstance(token_ids, tf.RaggedTensor):
        # Split the flat values at the row boundaries: `to_list()` builds a
        # Python int per id (seconds for the demo's 1.9M tokens).
        token_ids = np.split(token_ids.flat_values.numpy(), token_ids.row_splits.numpy()[1:-1])
    elif isinstance(token_ids, tf.data.Dataset):
        token_ids = token_ids.as_numpy_iterator()
    for i, sequence in enumerate(token_ids):
        array = np.asarray(sequence.numpy() if isinstance(sequence, tf.Tensor) else sequence)
        if array.size and array.ndim != 1:
            raise ValueError(f"token_ids[{i}] must be one sequence of ids (rank 1), got shape {array.shape}.")
        if array.size and not np.issubdtype(array.dtype, np.integer):
            raise TypeError(f"token_ids[{i}] must hold integer ids, got dtype {array.dtype}.")
        yield array.reshape(-1).astype(np.int64)


def cooccurrence_counts(token_ids, vocabulary_size, window=5):
    """Symmetric, harmonically weighted co-occurrence counts of token ids.

    Two ids `k` positions apart in one sequence (`1 <= k <= window`) add
    `1 / k` to each other's count; sequences do not reach into each other.

    Args:
        token_ids: sequences of integer ids: a list of lists or arrays, a
            `tf.RaggedTensor`, or a `tf.data.Dataset` of 1-D tensors.
        vocabulary_size: int, ids must lie in `[0, vocabulary_size)`.
        window: int, how far apart two counted ids may be.

    Returns:
        `(rows, columns, counts)`: NumPy arrays of the non-zero entries
        (int64, int64, float64), each pair in both orders.

    Example:
        >>> rows, columns, counts = cooccurrence_counts([[1, 2, 3]], 4, window=1)
        >>> sorted(zip(rows.tolist(), columns.tolist(), counts.tolist()))
        [(1, 2, 1.0), (2, 1, 1.0), (2, 3, 1.0), (3, 2, 1.0)]
    """
    _args.positive_int("vocabulary_size", vocabulary_size)
    _args.positive_int("window", window)
    arrays = list(_as_id_arrays(token_ids))
    ids = np.concatenate(arrays or [np.zeros(0, np.int64)])
    if ids.size and (ids.min() < 0 or ids.max() >= vocabulary_size):
        raise ValueError(
            f"token_ids must lie in [0, vocabulary_size={vocabulary_size}), "
            f"got {ids.min() if ids.min() < 0 else ids.max()}."
        )
    # One array with `window` separators (-1) between sequences: shifted
    # copies of it pair every id with those after it, never across sequences.
    gap = np.full(window, -1, np.int64)
    flat = np.concatenate([part for array in arrays for part in (array, gap)] or [gap])
    codes, weights = [], []
    for distance in range(1, window + 1):
        left, right = flat[:-distance], flat[distance:]
        keep = (left >= 0) & (right >= 0)
        pair = left[keep] * vocabulary_size + right[keep]
        codes += [pair, right[keep] * vocabulary_size + left[keep]]
        weights += [np.full(2 * pair.size, 1.0 / distance)]
    codes = np.concatenate(codes)
    unique, index = np.unique(codes, return_inverse=True)
    counts = np.bincount(index, weights=np.concatenate(weights), minlength=unique.size)
    return unique // vocabulary_size, unique % vocabulary_size, counts


def learn_token_embeddings(token_ids, vocabulary_size, dimension, window=5, smoothing=0.75,
                           stddev=0.02, seed=0):
    """Token embeddings from the PPMI of co-occurrence counts, by truncated SVD.

    The positive pointwise mutual information of each pair of ids,
    `max(0, log(P(i, j) / (P(i) P_s(j))))` with the context distribution
    smoothed to the power `smoothing`, is factorised by a randomised SVD
    (`dimension` components); row `i` of `U·sqrt(S)` is id `i`'s vector,
    scaled so that its entries' root mean square is `stddev` (the scale of
    the backbone's initializer, so the rest of its initialisation keeps its
    proportions). Ids that never occur next to another id get zeros.

    Args:
        token_ids: sequences of integer ids: a list of lists or arrays, a
            `tf.RaggedTensor`, or a `tf.data.Dataset` of 1-D tensors.
        vocabulary_size: int, the embedding's rows.
        dimension: int, its columns (the backbone's hidden size); at most
            `vocabulary_size`.
        window: int, how far apart two counted ids may be (weighted `1/k`).
        smoothing: float in (0, 1], the context distribution's exponent.
        stddev: positive float, the root mean square of the result's entries.
        seed: int, the randomised SVD's.

    Returns:
        float32 NumPy array `[vocabulary_size, dimension]`.

    Example:
        >>> ids = [[1, 2, 3, 1, 2, 4], [4, 3, 2, 1]] * 10
        >>> learn_token_embeddings(ids, vocabulary_size=5, dimension=2).shape
        (5, 2)
    """
    _args.positive_int("vocabulary_size", vocabulary_size)
    _args.positive_int("dimension", dimension)
    if dimension > vocabulary_size:
        raise ValueError(f"dimension ({dimension}) must be at most vocabulary_size ({vocabulary_size}).")
    _args.fraction("smoothing", smoothing, one_allowed=True)
    if smoothing == 0:
        raise ValueError("smoothing must be in (0, 1], got 0.")
    _args.positive_float("stddev", stddev)
    rows, columns, counts = cooccurrence_counts(token_ids, vocabulary_size, window)
    if not counts.size:
        raise ValueError("token_ids hold no two neighbouring ids: nothing to learn from.")
    row_sums = np.bincount(rows, weights=counts, minlength=vocabulary_size)
    context = row_sums**smoothing
    pmi = np.log(counts * context.sum() / (row_sums[rows] * context[columns]))
    keep = pmi > 0
    if not keep.any():
        raise ValueError("token_ids give no pair of ids that co-occur more than chance: nothing to learn.")
    ppmi = tf.sparse.reorder(tf.sparse.SparseTensor(
        np.stack([rows[keep], columns[keep]], axis=1), pmi[keep].astype(np.float32),
        [vocabulary_size, vocabulary_size],
    ))
    vectors = _randomized_svd_vectors(ppmi, dimension, seed)
    vectors[row_sums == 0] = 0.0  # exactly, not the sketch's rounding noise
    # The root mean square, not the standard deviation: that would depend on
    # the columns' signs, which an SVD leaves arbitrary.
    scale = np.sqrt(np.mean(np.square(vectors)))
    return (vectors * (stddev / scale if scale > 0 else 0.0)).astype(np.float32)


def _randomized_svd_vectors(matrix, rank, seed, oversampling=16, power_iterations=4):
    """`U·sqrt(S)` of a sparse square matrix's top `rank` singular triplets.

    Halko, Martinsson and Tropp's range finder ("Finding structure with
    randomness", 2011): a Gaussian sketch, power iterations re-orthonormalised
    by QR, then the exact SVD of the small projected matrix.
    """
    size = matrix.dense_shape[0]
    width = int(min(rank + oversampling, size))
    sketch = tf.random.stateless_normal([size, width], seed=[seed, 0])
    basis, _ = tf.linalg.qr(tf.sparse.sparse_dense_matmul(matrix, sketch))
    for _ in range(power_iterations):
        basis, _ = tf.linalg.qr(tf.sparse.sparse_dense_matmul(matrix, basis, adjoint_a=True))
        basis, _ = tf.linalg.qr(tf.sparse.sparse_dense_matmul(matrix, basis))
    # B = Qᵀ A (width × size), its SVD B = Û S Vᵀ, and A ≈ (Q Û) S Vᵀ.
    projected = tf.transpose(tf.sparse.sparse_dense_matmul(matrix, basis, adjoint_a=True))
    singular, left, _ = tf.linalg.svd(projected)
    vectors = tf.matmul(basis, left[:, :rank]) * tf.sqrt(singular[:rank])
    return vectors.numpy()
