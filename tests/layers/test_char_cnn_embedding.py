import numpy as np
import pytest
import tensorflow as tf

from tests.harness import assert_allclose, run_layer_test
from tfnlp.data.elmo import character_ids
from tfnlp.layers import CharCNNEmbedding

RNG = np.random.default_rng(0)
FILTERS = ((1, 2), (2, 3), (4, 3))
INIT = {
    "output_dim": 5,
    "filters": FILTERS,
    "character_dim": 4,
    "num_highway_layers": 2,
}
WORDS = [["The", "cat", "sat", ""], ["Hello", ",", "<S>", "wonderful"]]


def _ids(words=WORDS, max_characters=8):
    return character_ids(tf.constant(words), max_characters).numpy()


def _randomized(layer, ids):
    """Builds `layer` and gives every weight (biases included) random values."""
    layer(ids)
    layer.set_weights([RNG.normal(size=w.shape).astype("float32") for w in layer.get_weights()])
    return layer


def _reference(layer, ids):
    """Independent numpy forward pass from the layer's weights."""
    relu = lambda x: np.maximum(x, 0.0)  # noqa: E731
    sigmoid = lambda x: 1.0 / (1.0 + np.exp(-x))  # noqa: E731
    chars = layer.character_embedding.get_weights()[0][ids]  # (B, T, C, E)
    num_characters = ids.shape[-1]
    features = []
    for conv, (width, _) in zip(layer.convolutions, FILTERS, strict=True):
        kernel, bias = conv.get_weights()  # (width, E, count), (count,)
        positions = [
            np.einsum("btje,jen->btn", chars[:, :, p : p + width], kernel) + bias
            for p in range(num_characters - width + 1)
        ]
        features.append(relu(np.max(np.stack(positions), axis=0)))
    x = np.concatenate(features, axis=-1)
    width = x.shape[-1]
    for highway in layer.highways:
        kernel, bias = highway.get_weights()
        transform = relu(x @ kernel[:, :width] + bias[:width])
        gate = sigmoid(x @ kernel[:, width:] + bias[width:])
        x = gate * transform + (1.0 - gate) * x
    kernel, bias = layer.projection.get_weights()
    x = x @ kernel + bias
    return np.where(np.any(ids != 0, axis=-1, keepdims=True), x, 0.0)


@pytest.mark.parametrize("num_highway_layers", [0, 2])
def test_harness(num_highway_layers):
    run_layer_test(
        CharCNNEmbedding,
        dict(INIT, num_highway_layers=num_highway_layers),
        {"character_ids": _ids()},
        expected_output_shape=(2, 4, 5),
        # embedding + 3 x (kernel, bias) + highways x (kernel, bias) + projection (kernel, bias)
        expected_num_trainable_weights=1 + 6 + 2 * num_highway_layers + 2,
    )


def test_matches_numpy():
    ids = _ids()
    layer = _randomized(CharCNNEmbedding(**INIT), ids)
    assert_allclose(layer(ids), _reference(layer, ids), atol=1e-4)


def test_padding_tokens_are_zero_and_inert():
    ids = _ids()
    layer = _randomized(CharCNNEmbedding(**INIT), ids)
    out = layer(ids).numpy()
    np.testing.assert_array_equal(out[0, 3], np.zeros(5))  # the empty string
    assert np.all(np.abs(out[1]).sum(-1) > 0)
    padded = np.concatenate([ids, np.zeros((2, 3, 8), np.int32)], axis=1)
    padded_out = layer(padded).numpy()
    # A longer batch may block the convolution differently: a few float32
    # ulps of these outputs (up to ~50 in size), where leaking padding would
    # move them by O(1).
    assert_allclose(padded_out[:, :4], out, atol=1e-6, rtol=1e-6)
    np.testing.assert_array_equal(padded_out[:, 4:], np.zeros((2, 3, 5)))


def test_tokens_are_independent():
    ids = _ids()
    layer = _randomized(CharCNNEmbedding(**INIT), ids)
    out = layer(ids).numpy()
    # Each token alone gives the vector it has in context (to a few float32
    # ulps: other batch shapes may block the convolution differently).
    for b in range(2):
        for t in range(4):
            assert_allclose(layer(ids[b : b + 1, t : t + 1]).numpy()[0, 0], out[b, t],
                            atol=1e-5, rtol=1e-6)
    # Shuffling the tokens (across rows too) shuffles the vectors.
    order = RNG.permutation(8)
    shuffled = ids.reshape(8, 8)[order].reshape(2, 4, 8)
    assert_allclose(layer(shuffled), out.reshape(8, 5)[order].reshape(2, 4, 5),
                    atol=1e-5, rtol=1e-6)


def test_fewer_characters_than_widest_filter():
    with pytest.raises(ValueError, match="widest filter"):
        CharCNNEmbedding(**INIT)(np.ones((1, 2, 3), np.int32))


def test_character_ids_must_be_rank_3():
    with pytest.raises(ValueError, match="character_ids"):
        CharCNNEmbedding(**INIT)(np.ones((2, 8), np.int32))


@pytest.mark.parametrize(
    "filters",
    [
        (),
        [(0, 2)],
        [(2, -1)],
        [(2,)],
        "abc",
        None,
        [(1, 2, 3)],
        [(1.5, 2)],
        [("2", 3)],
        [(True, 2)],
    ],
)
def test_bad_filters(filters):
    with pytest.raises(ValueError, match="`filters`"):
        CharCNNEmbedding(5, filters=filters)


@pytest.mark.parametrize("num_highway_layers", [-1, 1.5, "2", True, None])
def test_bad_num_highway_layers(num_highway_layers):
    with pytest.raises(ValueError, match="num_highway_layers"):
        CharCNNEmbedding(5, filters=FILTERS, num_highway_layers=num_highway_layers)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"output_dim": 0}, "output_dim"),
        ({"output_dim": 4, "character_dim": 0}, "character_dim"),
        ({"output_dim": 4, "character_vocabulary_size": -3}, "character_vocabulary_size"),
    ],
)
def test_bad_sizes(kwargs, name):
    with pytest.raises(ValueError, match=name):
        CharCNNEmbedding(filters=FILTERS, **kwargs)
