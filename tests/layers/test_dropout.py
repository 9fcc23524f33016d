import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.harness import run_layer_test
from tfnlp import _devices
from tfnlp.layers import Dropout


def test_harness():
    # No trainable weights: the fit step has nothing to move.
    run_layer_test(
        Dropout,
        {"rate": 0.2, "seed": 3},
        {"inputs": np.ones((2, 5, 6), "float32")},
        expected_output_shape=(2, 5, 6),
        expected_num_trainable_weights=0,
        run_training=False,
    )


@pytest.mark.parametrize("rate", [0.1, 0.5, 0.9])
@pytest.mark.parametrize("shape", [(1001,), (7, 33, 65)])  # odd sizes use half a word
def test_drop_rate_and_scale(rate, shape):
    layer = Dropout(rate, seed=1)
    x = tf.ones(shape)
    out = layer(x, training=True).numpy()
    kept = out != 0
    rounded = round(rate * 65536) / 65536  # the rate in 16-bit steps
    np.testing.assert_allclose(out[kept], 1.0 / (1.0 - rounded), rtol=1e-6)
    n = kept.size
    dropped = n - kept.sum()
    # 5 standard deviations of a binomial(n, rate).
    assert abs(dropped - n * rate) < 5 * np.sqrt(n * rate * (1 - rate)), (dropped, n * rate)


@pytest.mark.parametrize("rate", [1 / 3, 0.99])
def test_scale_uses_the_rounded_rate_not_the_rate(rate):
    # Rates far from a multiple of 1/65536 relative to 1 - rate, so that the
    # two possible scales differ by much more than the tolerance: a layer
    # scaling by 1 / (1 - rate) fails here (1/3: 7.6e-6 apart, 0.99: 5.5e-4).
    rtol = 1e-6
    rounded = round(rate * 65536) / 65536
    right, wrong = 1.0 / (1.0 - rounded), 1.0 / (1.0 - rate)
    assert abs(right - wrong) / wrong > 5 * rtol, (rate, abs(right - wrong) / wrong)
    out = Dropout(rate, seed=1)(tf.ones((4001,)), training=True).numpy()
    kept = out[out != 0]
    assert kept.size > 10
    np.testing.assert_allclose(kept, right, rtol=rtol)
    assert not np.allclose(kept, wrong, rtol=rtol, atol=0.0)
    # float32 keeps the two apart: they round to different float32 values.
    assert np.float32(right) != np.float32(wrong)


def test_both_halves_of_a_word_are_used_independently():
    # The low and high 16 bits of each word fill the first and second half
    # of the mask: each half drops at the rate, and they are uncorrelated.
    out = Dropout(0.5, seed=7)(tf.ones((200_000,)), training=True).numpy() != 0
    first, second = out[:100_000], out[100_000:]
    assert abs(first.mean() - 0.5) < 0.01 and abs(second.mean() - 0.5) < 0.01
    assert abs(np.corrcoef(first, second)[0, 1]) < 0.02


def test_inference_rate_zero_and_dtype():
    x = tf.random.normal((3, 4))
    assert Dropout(0.5)(x, training=False) is x
    assert Dropout(0.0)(x, training=True) is x
    out = Dropout(0.5, seed=1, dtype="mixed_bfloat16")(tf.ones((3, 4)), training=True)
    assert out.dtype == tf.bfloat16
    assert set(np.unique(out.numpy().astype("float32"))) <= {0.0, 2.0}


def test_noise_shape_broadcasts_the_mask():
    out = Dropout(0.5, noise_shape=(None, 1, 8), seed=2)(tf.ones((4, 5, 8)), training=True).numpy()
    np.testing.assert_array_equal(out, np.broadcast_to(out[:, :1], out.shape))


def test_seeded_layers_repeat_and_calls_differ():
    x = tf.ones((64, 64))
    a, b = Dropout(0.3, seed=5), Dropout(0.3, seed=5)
    first = a(x, training=True).numpy()
    np.testing.assert_array_equal(first, b(x, training=True).numpy())
    assert not np.array_equal(first, a(x, training=True).numpy())


def test_gradient_is_the_mask_times_the_scale():
    layer = Dropout(0.4, seed=3)
    x = tf.random.normal((16, 32))
    with tf.GradientTape() as tape:
        tape.watch(x)
        out = layer(x, training=True)
        total = tf.reduce_sum(out)
    grad = tape.gradient(total, x).numpy()
    np.testing.assert_allclose(grad, (out.numpy() != 0) / (1 - round(0.4 * 65536) / 65536), rtol=1e-6)


def test_rate_near_one_does_not_overflow():
    out = Dropout(0.999999, seed=1)(tf.ones((10_000,)), training=True).numpy()
    assert np.all(np.isfinite(out)) and (out != 0).sum() < 10


def test_xla_matches_graph():
    layer = Dropout(0.3, seed=4)
    x = tf.ones((5, 9))
    layer(x, training=True)  # advance past the first seed
    state = layer.seed_generator.state.numpy()
    graph = tf.function(lambda x: layer(x, training=True))(x).numpy()
    layer.seed_generator.state.assign(state)
    xla = tf.function(lambda x: layer(x, training=True), jit_compile=True)(x).numpy()
    np.testing.assert_array_equal(graph, xla)


def test_draws_with_philox_named_which_xla_on_cpus_runs_fast():
    """Named Philox: the bits TensorFlow's default draws on CPUs and GPUs.

    Under XLA on a CPU the default ("auto_select") is about 100x slower
    (benchmarks/README.md, item 12); `test_xla_matches_graph` shows the
    masks are the same with and without XLA.
    """
    layer = Dropout(0.3, seed=4)
    for jit in (False, True):
        function = tf.function(lambda x: layer(x, training=True), jit_compile=jit)
        graph = function.get_concrete_function(tf.TensorSpec((5, 9))).graph
        algorithms = [
            tf.get_static_value(op.inputs[3]) for op in graph.get_operations()
            if op.type == "StatelessRandomUniformFullIntV2"
        ]
        assert algorithms and all(a == 1 for a in algorithms), algorithms  # 1 = RNG_PHILOX, 3 = auto_select


def test_philox_named_gives_the_bits_of_the_default_algorithm(monkeypatch):
    """Naming Philox changed no mask: the same bits as TensorFlow's default on this CPU."""
    x = tf.ones((6, 40))
    named = Dropout(0.4, seed=11)(x, training=True)
    monkeypatch.setattr(_devices, "random_algorithm", lambda: "auto_select")
    default = Dropout(0.4, seed=11)(x, training=True)
    np.testing.assert_array_equal(named, default)


def test_same_config_as_keras_dropout():
    ours = Dropout(0.25, noise_shape=(None, 1), seed=9, name="d").get_config()
    theirs = keras.layers.Dropout(0.25, noise_shape=(None, 1), seed=9, name="d").get_config()
    assert ours == theirs


def test_rate_one_gives_zeros_and_the_expectation_is_the_input():
    np.testing.assert_array_equal(Dropout(1.0)(tf.ones((3, 4)), training=True), np.zeros((3, 4)))
    # The scale uses the rounded rate: the mean of many draws is the input.
    for rate in (0.1, 0.3, 0.99999):
        out = Dropout(rate, seed=11)(tf.ones((2_000_000,)), training=True).numpy()
        kept = (out != 0).mean()
        np.testing.assert_allclose(out[out != 0][0] * kept, 1.0, rtol=5 * np.sqrt((1 - kept) / kept / out.size) + 1e-6)
