import contextlib
import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfnlp.training import (
    AdamW,
    InverseSquareRootDecay,
    SmoothedSparseCategoricalCrossentropy,
    sparse_softmax_cross_entropy,
)

LOGITS = tf.random.stateless_normal((3, 4, 9), seed=(1, 2)) * 3.0
LABELS = tf.constant([[0, 4, 8, 2], [1, 1, 3, 5], [7, 6, 0, 0]])


def test_without_smoothing_equals_keras_sparse_cross_entropy():
    ours = SmoothedSparseCategoricalCrossentropy(reduction="sum_over_batch_size")
    keras_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    np.testing.assert_allclose(ours(LABELS, LOGITS), keras_loss(LABELS, LOGITS), rtol=1e-6)


@pytest.mark.parametrize("epsilon", [0.1, 0.3])
def test_smoothing_equals_keras_dense_label_smoothing(epsilon):
    ours = SmoothedSparseCategoricalCrossentropy(epsilon, reduction="sum_over_batch_size")
    dense = keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=epsilon)
    np.testing.assert_allclose(ours(LABELS, LOGITS), dense(tf.one_hot(LABELS, 9), LOGITS),
                               rtol=1e-5)


def test_mean_over_the_weighted_positions_only():
    weights = tf.constant([[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1]], tf.float32)
    loss = SmoothedSparseCategoricalCrossentropy(0.1)
    per_position = SmoothedSparseCategoricalCrossentropy(0.1, reduction="none")(LABELS, LOGITS)
    expected = np.sum(per_position * weights) / np.sum(weights)
    np.testing.assert_allclose(loss(LABELS, LOGITS, sample_weight=weights), expected, rtol=1e-6)


def test_bfloat16_logits_give_a_float32_loss():
    loss = SmoothedSparseCategoricalCrossentropy(0.1)(LABELS, tf.cast(LOGITS, tf.bfloat16) * 100)
    assert loss.dtype == tf.float32 and np.isfinite(loss)


def test_serialization():
    loss = SmoothedSparseCategoricalCrossentropy(0.2, name="smooth")
    restored = keras.saving.deserialize_keras_object(
        json.loads(json.dumps(keras.saving.serialize_keras_object(loss)))
    )
    assert restored.get_config() == loss.get_config()


def test_bad_smoothing():
    with pytest.raises(ValueError, match="label_smoothing"):
        SmoothedSparseCategoricalCrossentropy(1.0)


def test_inverse_square_root_matches_the_paper_formula():
    d_model, warmup = 512, 4000
    schedule = InverseSquareRootDecay((d_model * warmup) ** -0.5, warmup)
    for step in (1, 100, 3999, 4000, 4001, 10_000, 100_000):
        paper = d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)
        np.testing.assert_allclose(float(schedule(step)), paper, rtol=1e-5)
    restored = InverseSquareRootDecay.from_config(schedule.get_config())
    assert restored.get_config() == schedule.get_config()
    with pytest.raises(ValueError, match="warmup_steps"):
        InverseSquareRootDecay(1e-3, 0)


@pytest.mark.parametrize("scale", [1.0, 40.0, 2000.0])  # 2000: exp underflows for all but the max
@pytest.mark.parametrize("epsilon", [0.0, 0.1])
def test_fast_cross_entropy_equals_the_reference_with_gradients(scale, epsilon):
    logits = tf.random.stateless_normal((5, 7, 301), seed=(3, 4)) * scale
    labels = tf.random.stateless_uniform((5, 7), (5, 6), 0, 301, tf.int32)
    weights = tf.random.stateless_uniform((5, 7), (7, 8))
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(logits)
        ours = sparse_softmax_cross_entropy(labels, logits, epsilon)
        reference = (1 - epsilon) * tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        reference -= epsilon * tf.reduce_mean(tf.nn.log_softmax(logits), -1)
        ours_total, reference_total = tf.reduce_sum(ours * weights), tf.reduce_sum(reference * weights)
    np.testing.assert_allclose(ours, reference, rtol=1e-6, atol=1e-6 * scale)
    np.testing.assert_allclose(tape.gradient(ours_total, logits),
                               tape.gradient(reference_total, logits), atol=1e-6)


def test_fast_cross_entropy_bfloat16_logits_xla_and_bad_labels():
    logits = tf.cast(LOGITS, tf.bfloat16)
    expected = tf.nn.sparse_softmax_cross_entropy_with_logits(LABELS, tf.cast(logits, tf.float32))
    graph = sparse_softmax_cross_entropy(LABELS, logits)
    assert graph.dtype == tf.float32 and graph.shape == (3, 4)
    np.testing.assert_allclose(graph, expected, rtol=1e-6, atol=1e-6)
    xla = tf.function(sparse_softmax_cross_entropy, jit_compile=True)(LABELS, logits)
    np.testing.assert_allclose(xla, expected, rtol=1e-5)
    with pytest.raises(tf.errors.InvalidArgumentError, match="not in"):
        sparse_softmax_cross_entropy(tf.constant([9]), tf.zeros((1, 9)))


def _adamw_run(cls, strategy=None, densify=False):
    """Five steps of `cls` on a kernel (sparse gradients, or densified) and a bias."""
    scope = strategy.scope() if strategy else contextlib.nullcontext()
    with scope:
        kernel = keras.Variable(np.linspace(-1, 1, 40).reshape(10, 4).astype("f4"), name="kernel")
        bias = keras.Variable(np.arange(4, dtype="f4"), name="bias")
        optimizer = cls(learning_rate=0.01, weight_decay=0.1)
        optimizer.exclude_from_weight_decay(var_names=["bias"])
        optimizer.build([kernel, bias])

    @tf.function
    def step(i):
        rows = tf.stack([i % 10, (3 * i + 1) % 10])
        sparse = tf.IndexedSlices(tf.fill((2, 4), tf.cast(i, tf.float32) - 2.0), rows,
                                  tf.constant([10, 4]))
        if densify:
            sparse = tf.convert_to_tensor(sparse)
        dense = tf.sin(tf.range(4, dtype=tf.float32) + tf.cast(i, tf.float32))
        optimizer.apply([sparse, dense], [kernel, bias])

    for i in range(5):
        if strategy:
            strategy.run(step, (tf.constant(i),))
        else:
            step(tf.constant(i))
    return kernel.numpy(), bias.numpy(), [v.numpy() for v in optimizer.variables]


def test_fused_adamw_equals_keras_adamw(mirrored_strategy):
    # The reference gets the sparse gradient densified: under MirroredStrategy
    # the all-reduced IndexedSlices repeat rows, and Keras' AdamW squares
    # each repeat separately (sum of squares, not square of the sum; 0.015
    # off here). The fused update densifies first, so it is right there too.
    for strategy in (None, mirrored_strategy):
        expected = _adamw_run(keras.optimizers.AdamW, strategy, densify=True)
        got = _adamw_run(AdamW, strategy)
        for a, b in zip(tf.nest.flatten(got), tf.nest.flatten(expected), strict=True):
            np.testing.assert_allclose(a, b, atol=1e-6)


def test_fused_adamw_serializes_and_falls_back_for_amsgrad():
    optimizer = AdamW(learning_rate=0.01, weight_decay=0.05, amsgrad=True)
    restored = keras.optimizers.deserialize(json.loads(json.dumps(keras.optimizers.serialize(optimizer))))
    assert type(restored) is AdamW and restored.get_config() == optimizer.get_config()
    variable = keras.Variable([1.0, 2.0])
    reference = keras.Variable([1.0, 2.0])
    keras_optimizer = keras.optimizers.AdamW(learning_rate=0.01, weight_decay=0.05, amsgrad=True)
    for _ in range(3):
        restored.apply([tf.constant([0.5, -0.5])], [variable])
        keras_optimizer.apply([tf.constant([0.5, -0.5])], [reference])
    np.testing.assert_allclose(variable.numpy(), reference.numpy(), atol=1e-7)


def test_fast_cross_entropy_keeps_precision_with_large_logits_and_checks_shapes():
    logits = tf.constant([[1e4, 1e4 - 1.2345, 1e4 - 3.0]])
    expected = tf.nn.sparse_softmax_cross_entropy_with_logits(tf.constant([1]), logits)
    np.testing.assert_allclose(sparse_softmax_cross_entropy(tf.constant([1]), logits), expected,
                               atol=2e-6)
    with pytest.raises(ValueError, match="labels"):
        sparse_softmax_cross_entropy(tf.zeros((4, 3), tf.int32), tf.zeros((3, 4, 7)))


@pytest.mark.parametrize("rows", [[0], [1], [0, 1]])
def test_fast_cross_entropy_below_and_above_the_probability_floor(rows):
    # Row 0: p_y = e^-60 ~ 1e-26, read off the softmax; row 1: p_y = e^-100
    # is below float32's normal range, so the loss comes from the logits.
    logits = tf.gather(tf.constant([[0.0, -60.0, -1e9], [0.0, -100.0, -1e9]]), rows)
    loss = sparse_softmax_cross_entropy(tf.ones((len(rows),), tf.int32), logits)
    np.testing.assert_allclose(loss.numpy(), np.array([60.0, 100.0])[rows], rtol=1e-6)


def _both_formulas(labels, logits):
    """`-log p_y` and `(max l - l_y) - log max p`, as the two paths compute them."""
    probabilities = tf.nn.softmax(logits)
    from_probability = -tf.math.log(tf.gather(probabilities, labels, batch_dims=1))
    from_logits = (tf.reduce_max(logits, -1) - tf.gather(logits, labels, batch_dims=1)) - (
        tf.math.log(tf.reduce_max(probabilities, -1))
    )
    return from_probability.numpy(), from_logits.numpy()


@pytest.mark.parametrize("accelerator", [False, True])
def test_fast_cross_entropy_takes_the_probability_path_on_cpu_only(monkeypatch, accelerator):
    # A GPU/TPU (faked here) gets no branch: its condition would be read on
    # the host every step; CPUs skip the two row maxima when they can.
    if accelerator:
        gpu = tf.config.PhysicalDevice("/physical_device:GPU:0", "GPU")
        monkeypatch.setattr(tf.config, "list_physical_devices", lambda *args: [gpu])
    logits = tf.random.stateless_normal((64, 1000), seed=(9, 9)) * 3.0
    labels = tf.random.stateless_uniform((64,), (8, 8), 0, 1000, tf.int32)
    from_probability, from_logits = _both_formulas(labels, logits)
    assert not np.array_equal(from_probability, from_logits)  # the paths are told apart
    np.testing.assert_array_equal(
        sparse_softmax_cross_entropy(labels, logits).numpy(),
        from_logits if accelerator else from_probability,
    )
    graph = tf.function(sparse_softmax_cross_entropy).get_concrete_function(labels, logits).graph
    branches = [op for op in graph.get_operations() if op.type in ("If", "StatelessIf")]
    assert bool(branches) != accelerator


def _loss_and_gradient(labels, logits, epsilon, weights):
    with tf.GradientTape() as tape:
        tape.watch(logits)
        loss = sparse_softmax_cross_entropy(labels, logits, epsilon)
        total = tf.reduce_sum(loss * weights) if weights is not None else tf.reduce_sum(loss)
    return loss, tape.gradient(total, logits)


def _scatters_in_place(function, *arguments):
    graph = tf.function(function).get_concrete_function(*arguments).graph
    return any(op.type == "ScatterNdNonAliasingAdd" for op in graph.get_operations())


@pytest.mark.parametrize("epsilon", [0.0, 0.1])
@pytest.mark.parametrize("weighted", [False, True])  # unweighted: an upstream of ones
def test_the_one_hot_part_of_the_gradient_is_the_same_in_place_and_scattered(
        monkeypatch, epsilon, weighted):
    # On a CPU outside XLA the label's share comes off the gradient in its
    # own buffer (ScatterNdNonAliasingAdd); XLA and accelerators scatter into
    # a copy. Every way of running it gives the same loss and gradient.
    logits = tf.random.stateless_normal((6, 50), seed=(1, 2)) * 4.0
    labels = tf.random.stateless_uniform((6,), (3, 4), 0, 50, tf.int32)
    weights = tf.random.stateless_uniform((6,), (5, 6)) if weighted else tf.ones((6,))

    def run(labels, logits, weights):
        return _loss_and_gradient(labels, logits, epsilon, weights if weighted else None)

    expected = run(labels, logits, weights)  # eager
    unknown = [tf.TensorSpec((None,), tf.int32), tf.TensorSpec((None, None), tf.float32),
               tf.TensorSpec((None,), tf.float32)]
    ways = {
        "graph": (tf.function(run), 0.0),
        "graph, unknown shapes": (tf.function(run, input_signature=unknown), 0.0),
        # XLA may fuse the softmax differently: equal to float32 rounding.
        "xla": (tf.function(run, jit_compile=True), 1e-6),
    }
    for name, (way, tolerance) in ways.items():
        for actual, wanted in zip(way(labels, logits, weights), expected, strict=True):
            np.testing.assert_allclose(actual.numpy(), wanted.numpy(), atol=tolerance,
                                       rtol=tolerance, err_msg=name)
    assert _scatters_in_place(run, labels, logits, weights)
    gpu = tf.config.PhysicalDevice("/physical_device:GPU:0", "GPU")
    monkeypatch.setattr(tf.config, "list_physical_devices", lambda *args: [gpu])
    assert not _scatters_in_place(run, labels, logits, weights)
    # The scattered gradient (what a GPU runs, here on the CPU): bit for bit.
    # (Its loss takes the max-based formula there, equal to rounding.)
    gradient = tf.function(run)(labels, logits, weights)[1]
    np.testing.assert_array_equal(gradient.numpy(), expected[1].numpy())


def test_a_loss_taken_twice_gets_twice_the_gradient():
    # Grappler merges the two identical losses' softmax and gradient products
    # into one buffer; the in-place subtraction must not then run twice on it
    # (an aliasing InplaceSub did: the label entries were off by 2).
    logits = tf.random.stateless_normal((6, 50), seed=(7, 8))
    labels = tf.random.stateless_uniform((6,), (9, 9), 0, 50, tf.int32)

    @tf.function
    def twice(labels, logits):
        with tf.GradientTape() as tape:
            tape.watch(logits)
            total = tf.reduce_sum(sparse_softmax_cross_entropy(labels, logits))
            total += tf.reduce_sum(sparse_softmax_cross_entropy(labels, logits))
        return tape.gradient(total, logits)

    with tf.GradientTape() as tape:
        tape.watch(logits)
        reference = 2 * tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
    np.testing.assert_allclose(twice(labels, logits), tape.gradient(reference, logits), atol=1e-6)


def test_an_xla_compiled_loss_differentiated_outside_xla_compiles_its_gradient():
    # TensorFlow compiles the gradient of an XLA function with XLA, though
    # it builds it outside the XLA context: the forward pass's context picks
    # the scatter XLA knows.
    logits = tf.random.stateless_normal((6, 50), seed=(1, 2))
    labels = tf.random.stateless_uniform((6,), (3, 4), 0, 50, tf.int32)
    compiled = tf.function(lambda x: tf.reduce_sum(sparse_softmax_cross_entropy(labels, x)),
                           jit_compile=True)

    @tf.function
    def gradient(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = compiled(x)
        return tape.gradient(loss, x)

    with tf.GradientTape() as tape:
        tape.watch(logits)
        reference = tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
    np.testing.assert_allclose(gradient(logits), tape.gradient(reference, logits), atol=1e-6)
