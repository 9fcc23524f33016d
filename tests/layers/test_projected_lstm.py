import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.harness import assert_allclose, assert_finite, run_layer_test
from tfnlp.layers import ProjectedLSTM

RNG = np.random.default_rng(0)
MASK = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], np.int32)
LENGTHS = MASK.sum(axis=1)


def _normal(*shape, scale=1.0):
    return (scale * RNG.normal(size=shape)).astype("float32")


def _randomized(layer, inputs, scale=0.7):
    layer(inputs)
    layer.set_weights([_normal(*w.shape, scale=scale) for w in layer.get_weights()])
    return layer


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _numpy_lstmp(layer, inputs):
    """Independent step loop (forward, no mask) from the layer's weights."""
    weights = layer.get_weights()
    kernel, recurrent_kernel, bias = weights[:3]
    projection = weights[3] if len(weights) == 4 else None
    units = layer.units
    batch, steps, _ = inputs.shape
    cell = np.zeros((batch, units), np.float64)
    output = np.zeros((batch, layer.output_dim), np.float64)
    outputs = []
    for t in range(steps):
        z = inputs[:, t] @ kernel + output @ recurrent_kernel + bias
        i, f, g, o = (z[:, k * units : (k + 1) * units] for k in range(4))
        cell = _sigmoid(f) * cell + _sigmoid(i) * np.tanh(g)
        if layer.cell_clip is not None:
            cell = np.clip(cell, -layer.cell_clip, layer.cell_clip)
        output = _sigmoid(o) * np.tanh(cell)
        if projection is not None:
            output = output @ projection
            if layer.projection_clip is not None:
                output = np.clip(output, -layer.projection_clip, layer.projection_clip)
        outputs.append(output)
    return np.stack(outputs, axis=1)


def _reverse_within_lengths(x, lengths):
    out = np.array(x, copy=True)
    for b, n in enumerate(lengths):
        out[b, :n] = x[b, :n][::-1]
    return out


@pytest.mark.parametrize(
    "init, use_mask, width",
    [
        ({"units": 4}, False, 4),
        ({"units": 6, "projection_dim": 3, "cell_clip": 2.0, "projection_clip": 1.5}, True, 3),
        ({"units": 4, "projection_dim": 3, "go_backwards": True}, True, 3),
    ],
)
def test_harness(init, use_mask, width):
    data = {"inputs": _normal(3, 5, 2)}
    if use_mask:
        data["padding_mask"] = MASK
    weights = 4 if "projection_dim" in init else 3
    out = run_layer_test(
        ProjectedLSTM,
        init,
        data,
        expected_output_shape=(3, 5, width),
        expected_num_trainable_weights=weights,
    )
    if use_mask:
        np.testing.assert_array_equal(np.asarray(out)[MASK == 0], 0.0)


def test_matches_keras_lstm():
    x = _normal(3, 6, 5)
    layer = _randomized(ProjectedLSTM(4), x)
    reference = keras.layers.LSTM(4, return_sequences=True)
    reference(x)
    reference.set_weights(layer.get_weights())  # kernel, recurrent_kernel, bias; gates i, f, c, o
    assert_allclose(layer(x), reference(x), atol=1e-5)
    assert_allclose(layer(x), _numpy_lstmp(layer, x), atol=1e-5)


def test_projection_and_clipping_match_numpy():
    x = _normal(3, 7, 5, scale=2.0)
    layer = _randomized(
        ProjectedLSTM(6, projection_dim=3, cell_clip=0.5, projection_clip=0.3), x, scale=1.5
    )
    out = layer(x).numpy()
    # Large weights: both clips are active somewhere.
    assert np.max(np.abs(out)) == pytest.approx(0.3)
    assert_allclose(out, _numpy_lstmp(layer, x), atol=1e-5)


@pytest.mark.parametrize("projection_dim", [None, 3])
def test_go_backwards_reverses_within_lengths(projection_dim):
    x = _normal(3, 5, 2)
    forward = _randomized(ProjectedLSTM(4, projection_dim=projection_dim), x)
    backward = ProjectedLSTM(4, projection_dim=projection_dim, go_backwards=True)
    backward(x)
    backward.set_weights(forward.get_weights())
    expected = _reverse_within_lengths(
        forward(_reverse_within_lengths(x, LENGTHS), padding_mask=MASK).numpy(), LENGTHS
    )
    assert_allclose(backward(x, padding_mask=MASK), expected, atol=1e-6)
    # Without a mask: the whole sequence reversed.
    assert_allclose(backward(x), forward(x[:, ::-1]).numpy()[:, ::-1], atol=1e-6)


@pytest.mark.parametrize("go_backwards", [False, True])
def test_right_padding_never_changes_real_outputs(go_backwards):
    init = {"units": 5, "projection_dim": 3, "cell_clip": 3.0, "go_backwards": go_backwards}
    x = _normal(3, 5, 2)
    layer = _randomized(ProjectedLSTM(**init), x)
    real = layer(x, padding_mask=MASK).numpy()
    garbage = np.concatenate([x, _normal(3, 4, 2, scale=100.0)], axis=1)
    longer_mask = np.concatenate([MASK, np.zeros((3, 4), np.int32)], axis=1)
    # Padding inside the first five steps gets garbage too.
    garbage[:, :5][MASK == 0] = 100.0
    padded = layer(garbage, padding_mask=longer_mask).numpy()
    assert_allclose(padded[:, :5], real, atol=1e-6)
    np.testing.assert_array_equal(padded[longer_mask == 0], 0.0)
    # Real outputs of a sequence equal those of the sequence alone.
    for b, n in enumerate(LENGTHS):
        assert_allclose(layer(x[b : b + 1, :n]).numpy()[0], real[b, :n], atol=1e-6)


@pytest.mark.parametrize("go_backwards", [False, True])
def test_unroll_matches_while_loop(go_backwards):
    x = _normal(3, 5, 2)
    looped = _randomized(ProjectedLSTM(4, projection_dim=3, go_backwards=go_backwards), x)
    unrolled = ProjectedLSTM(4, projection_dim=3, go_backwards=go_backwards, unroll=True)
    unrolled(x)
    unrolled.set_weights(looped.get_weights())
    assert_allclose(unrolled(x, padding_mask=MASK), looped(x, padding_mask=MASK), atol=1e-6)


@pytest.mark.parametrize("unroll", [False, True])
@pytest.mark.parametrize("go_backwards", [False, True])
def test_no_time_steps_give_an_empty_output(unroll, go_backwards):
    layer = ProjectedLSTM(4, projection_dim=3, go_backwards=go_backwards, unroll=unroll)
    empty = np.zeros((2, 0, 5), np.float32)
    assert layer(empty, padding_mask=np.zeros((2, 0), bool)).shape == (2, 0, 3)

    # Also when T (and B) are known only at run time, with gradients, and
    # under XLA (which compiles the loop body even when it never runs).
    for jit_compile in (False, True):
        @tf.function(input_signature=[tf.TensorSpec([None, None, 5])], jit_compile=jit_compile)
        def loss_and_gradients(x):
            with tf.GradientTape() as tape:
                outputs = layer(x)
                loss = tf.reduce_sum(outputs)
            return tf.shape(outputs), loss, tape.gradient(loss, layer.trainable_weights)

        shape, loss, gradients = loss_and_gradients(empty)
        assert shape.numpy().tolist() == [2, 0, 3] and float(loss) == 0.0
        assert all(np.all(g.numpy() == 0) for g in gradients)
        x = _normal(2, 4, 5)
        assert_allclose(loss_and_gradients(x)[1], tf.reduce_sum(layer(x)), atol=1e-5)
        # Padded rows too (a run-time T reverses by gather under XLA).
        masked = tf.function(lambda x, m: layer(x, padding_mask=m), jit_compile=jit_compile,
                             input_signature=[tf.TensorSpec([None, None, 5]), tf.TensorSpec([None, None], tf.int32)])
        x = _normal(3, 5, 5)
        assert_allclose(masked(x, MASK.astype("int32")), layer(x, padding_mask=MASK), atol=1e-5)


def test_gradients_are_finite():
    x = tf.constant(_normal(3, 5, 2, scale=3.0))
    layer = _randomized(ProjectedLSTM(4, projection_dim=3, cell_clip=1.0, projection_clip=0.5), x)
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = tf.reduce_sum(tf.square(layer(x, padding_mask=MASK)))
    gradients = tape.gradient(loss, [x] + layer.trainable_weights)
    assert all(g is not None for g in gradients)
    assert_finite(gradients)
    # No gradient reaches padded inputs.
    np.testing.assert_array_equal(gradients[0].numpy()[MASK == 0], 0.0)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"units": 4, "projection_clip": 1.0}, "projection_clip"),
        ({"units": 0}, "units"),
        ({"units": -2}, "units"),
        ({"units": 4, "projection_dim": 0}, "projection_dim"),
        ({"units": 4, "cell_clip": 0.0}, "cell_clip"),
        ({"units": 4, "projection_dim": 2, "projection_clip": -1.0}, "projection_clip"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ProjectedLSTM(**kwargs)


@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 4, 5)])
def test_inputs_must_be_rank_3(shape):
    with pytest.raises(ValueError, match="rank 3"):
        ProjectedLSTM(4)(tf.ones(shape))
