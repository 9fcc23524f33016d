import numpy as np
import pytest
import tensorflow as tf

from tfnlp.layers import TransformerBlock, masks

# One sequence of 4 real tokens and 1 padding token, as in the docstrings.
PAD = np.array([[1, 1, 1, 1, 0]])


def _int(mask):
    return np.asarray(mask).astype(int)


def test_padding_mask_from_ids_and_lengths_agree():
    ids = np.array([[7, 3, 9, 0, 0], [4, 0, 0, 0, 0], [1, 2, 3, 4, 5]])
    from_ids = masks.padding_mask(ids)
    from_lengths = masks.padding_mask(lengths=[3, 1, 5], max_length=5)
    expected = [[1, 1, 1, 0, 0], [1, 0, 0, 0, 0], [1, 1, 1, 1, 1]]
    np.testing.assert_array_equal(_int(from_ids), expected)
    np.testing.assert_array_equal(_int(from_lengths), expected)
    assert from_ids.dtype == tf.bool


def test_padding_mask_custom_pad_id_and_clipped_lengths():
    np.testing.assert_array_equal(_int(masks.padding_mask([[5, 1, 1]], pad_id=1)), [[1, 0, 0]])
    np.testing.assert_array_equal(
        _int(masks.padding_mask(lengths=[9], max_length=3)), [[1, 1, 1]]
    )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({}, "exactly one"),
        ({"token_ids": [[1]], "lengths": [1], "max_length": 1}, "exactly one"),
        ({"lengths": [1]}, "max_length"),
        ({"token_ids": [1, 2]}, "token_ids"),
        ({"lengths": [[1]], "max_length": 2}, "lengths"),
    ],
)
def test_padding_mask_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        masks.padding_mask(**kwargs)


def test_causal_mask_accepts_int64_tensors():
    np.testing.assert_array_equal(
        _int(masks.causal_mask(tf.constant(2, tf.int64), tf.constant(3, tf.int64), tf.constant(1, tf.int64))),
        [[1, 1, 0], [1, 1, 1]],
    )


def test_causal_mask_with_offset():
    np.testing.assert_array_equal(
        _int(masks.causal_mask(4)),
        [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]],
    )
    np.testing.assert_array_equal(
        _int(masks.causal_mask(2, 4, query_offset=2)), [[1, 1, 1, 0], [1, 1, 1, 1]]
    )


@pytest.mark.parametrize(
    "builder, expected",
    [
        (masks.bidirectional_mask, ["11110"] * 5),
        (masks.left_to_right_mask, ["10000", "11000", "11100", "11110", "11110"]),
        (masks.right_to_left_mask, ["11110", "01110", "00110", "00010", "00000"]),
    ],
    ids=["bidirectional", "left_to_right", "right_to_left"],
)
def test_direction_masks_against_hand_written_matrices(builder, expected):
    expected = [[int(c) for c in row] for row in expected]
    np.testing.assert_array_equal(_int(builder(PAD))[0], expected)


def test_seq2seq_mask_matches_the_unilm_definition():
    # [CLS] a [SEP] | b [SEP] | [PAD]
    segments = np.array([[0, 0, 0, 1, 1, 0]])
    padding = np.array([[1, 1, 1, 1, 1, 0]])
    expected = [
        [1, 1, 1, 0, 0, 0],
        [1, 1, 1, 0, 0, 0],
        [1, 1, 1, 0, 0, 0],
        [1, 1, 1, 1, 0, 0],
        [1, 1, 1, 1, 1, 0],
        [1, 1, 1, 1, 1, 0],
    ]
    np.testing.assert_array_equal(_int(masks.seq2seq_mask(segments, padding))[0], expected)


def test_seq2seq_mask_against_a_loop_definition():
    rng = np.random.default_rng(0)
    for _ in range(20):
        source, target, pad = rng.integers(1, 6), rng.integers(1, 6), rng.integers(0, 3)
        segments = np.array([[0] * source + [1] * target + [0] * pad])
        padding = np.array([[1] * (source + target) + [0] * pad])
        n = source + target + pad
        expected = np.zeros((n, n), int)
        for i in range(n):
            for j in range(source + target):
                if j < source or (i >= source and i < source + target and j <= i):
                    expected[i, j] = 1
                if i >= source + target:  # padding queries see every real token
                    expected[i, j] = 1
        np.testing.assert_array_equal(
            _int(masks.seq2seq_mask(segments, padding))[0], expected
        )


def test_masks_accept_int_and_bool_and_work_in_graph():
    graph_fn = tf.function(masks.left_to_right_mask, jit_compile=True)
    np.testing.assert_array_equal(
        _int(graph_fn(tf.constant(PAD, tf.int32))), _int(masks.left_to_right_mask(PAD == 1))
    )


def test_combine_masks_broadcasts_and_skips_none():
    combined = masks.combine_masks(masks.causal_mask(3)[None], None, np.array([[[1, 1, 0]]]))
    np.testing.assert_array_equal(_int(combined)[0], [[1, 0, 0], [1, 1, 0], [1, 1, 0]])
    assert masks.combine_masks(None, None) is None


@pytest.mark.parametrize(
    "builder", [masks.bidirectional_mask, masks.left_to_right_mask, masks.right_to_left_mask]
)
def test_builders_reject_wrong_rank(builder):
    with pytest.raises(ValueError, match="padding_mask"):
        builder(np.ones((2, 3, 3)))


def test_objective_mask_picks_each_examples_builder():
    segment_ids = tf.constant([[0, 0, 1, 1, 0]] * 5)
    padding = tf.constant([[1, 1, 1, 1, 0]] * 5)
    chosen = masks.objective_mask(tf.constant([0, 1, 2, 3, 7]), segment_ids, padding).numpy()
    expected = [
        masks.bidirectional_mask(padding), masks.left_to_right_mask(padding),
        masks.right_to_left_mask(padding), masks.seq2seq_mask(segment_ids, padding),
    ]
    for b in range(4):
        np.testing.assert_array_equal(chosen[b], expected[b].numpy()[b])
    assert not chosen[4].any(), "an unknown objective sees nothing"
    assert masks.OBJECTIVES[masks.SEQ2SEQ] == "seq2seq"


@pytest.mark.parametrize("num_layers", [1, 2, 3])
def test_next_token_mask_leaks_the_target_from_the_second_layer_on(num_layers):
    """|d output[t] / d input[t + 1]| through Transformer blocks under next_token_mask."""
    blocks = [TransformerBlock(2, 16) for _ in range(num_layers)]
    x = tf.random.normal((1, 6, 8))
    projection = tf.random.normal((8,))  # not a plain sum: LayerNorm outputs sum to a constant
    mask = masks.next_token_mask(tf.ones((1, 6), tf.int32))
    with tf.GradientTape() as tape:
        tape.watch(x)
        h = x
        for block in blocks:
            h = block(h, attention_mask=mask)
        target = tf.reduce_sum(h[0, 2] * projection)  # position 2 predicts token 3
    gradients = tf.reduce_max(tf.abs(tape.gradient(target, x)[0]), axis=-1).numpy()
    assert gradients[2] > 1e-3 and gradients[4] > 1e-3  # it does see itself and the rest
    if num_layers == 1:
        assert gradients[3] == 0.0
    else:
        assert gradients[3] > 1e-4, "the next token leaks through the second layer"
