import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.harness import assert_allclose, run_layer_test
from tfnlp.layers import MultiHeadAttention, masks

RNG = np.random.default_rng(0)


def _normal(*shape):
    return RNG.normal(size=shape).astype("float32")


def _paired(query, value, **init):
    ours = MultiHeadAttention(**init)
    ours(query, value)
    reference = keras.layers.MultiHeadAttention(**init)
    reference(query, value)
    for mine, theirs in [
        (ours._query_dense, reference._query_dense),
        (ours._key_dense, reference._key_dense),
        (ours._value_dense, reference._value_dense),
        (ours._output_dense, reference._output_dense),
    ]:
        theirs.set_weights(mine.get_weights())
    return ours, reference


@pytest.mark.parametrize(
    "init, kwargs",
    [
        ({"num_heads": 2, "key_dim": 4}, {}),
        ({"num_heads": 3, "key_dim": 2, "value_dim": 5, "output_dim": 7}, {}),
        ({"num_heads": 2, "key_dim": 4, "dropout": 0.1}, {"return_attention_scores": True}),
    ],
)
def test_harness(init, kwargs):
    run_layer_test(
        MultiHeadAttention,
        init,
        {"query": _normal(2, 5, 6), "value": _normal(2, 4, 6)},
        call_kwargs=kwargs,
        expected_output_shape=(2, 5, init.get("output_dim", 6)),
        expected_num_trainable_weights=8,
    )


def test_harness_with_attention_mask_input():
    mask = RNG.random((2, 5, 4)) > 0.3
    run_layer_test(
        MultiHeadAttention,
        {"num_heads": 2, "key_dim": 3},
        {"query": _normal(2, 5, 6), "value": _normal(2, 4, 6), "attention_mask": mask},
        expected_output_shape=(2, 5, 6),
    )


@pytest.mark.parametrize("cross", [False, True])
@pytest.mark.parametrize("use_bias", [True, False])
def test_matches_keras_multi_head_attention(cross, use_bias):
    query = _normal(3, 6, 8)
    value = _normal(3, 9, 5) if cross else query
    ours, reference = _paired(query, value, num_heads=2, key_dim=4, value_dim=3, use_bias=use_bias)
    out, weights = ours(query, value, return_attention_scores=True)
    ref_out, ref_weights = reference(query, value, return_attention_scores=True)
    assert_allclose(out, ref_out, atol=1e-5)
    assert_allclose(weights, ref_weights, atol=1e-6)

    # Masks where every query keeps at least one key (Keras and tfnlp differ
    # only on rows with no key at all, tested separately).
    mask = RNG.random((3, 6, value.shape[1])) > 0.4
    mask[:, :, 0] = True
    assert_allclose(
        ours(query, value, attention_mask=mask),
        reference(query, value, attention_mask=mask),
        atol=1e-5,
    )


def test_matches_keras_with_implicit_masks_on_real_rows():
    ids = np.array([[1, 2, 3, 0, 0], [4, 5, 6, 7, 8]])
    embedding = keras.layers.Embedding(10, 8, mask_zero=True)
    ours, reference = _paired(embedding(ids), embedding(ids), num_heads=2, key_dim=4)
    real = ids != 0
    x = embedding(ids)
    output = ours(x, x).numpy()
    np.testing.assert_array_equal(x._keras_mask.numpy(), real)  # we leave it alone
    # keras.layers.MultiHeadAttention deletes the mask of its inputs: new ones.
    expected = reference(embedding(ids), embedding(ids)).numpy()
    assert_allclose(output[real], expected[real], atol=1e-5)
    np.testing.assert_array_equal(output[~real], 0.0)  # padded queries see nothing


def test_worked_example_single_head_scale_one():
    # The reference notes' (ANCHORS.md) worked example: three inputs of size 4, weights given.
    x = np.array([[[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]]], np.float32)
    w_key = np.array([[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]], np.float32)
    w_query = np.array([[1, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]], np.float32)
    w_value = np.array([[0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]], np.float32)
    layer = MultiHeadAttention(num_heads=1, key_dim=3, output_dim=3, use_bias=False, scale=1.0)
    layer(x, x)
    layer._query_dense.kernel.assign(w_query[:, None, :])
    layer._key_dense.kernel.assign(w_key[:, None, :])
    layer._value_dense.kernel.assign(w_value[:, None, :])
    layer._output_dense.kernel.assign(np.eye(3, dtype=np.float32)[None])
    output, weights = layer(x, x, return_attention_scores=True)
    np.testing.assert_allclose(weights[0, 0, 0], [6.3379e-02, 4.6831e-01, 4.6831e-01], rtol=1e-4)
    values = layer._value_dense(x)[0, :, 0].numpy()  # the layer's own value vectors
    np.testing.assert_array_equal(values, [[1, 2, 3], [2, 8, 0], [2, 6, 3]])
    np.testing.assert_allclose(output[0, 0], weights[0, 0, 0].numpy() @ values, rtol=1e-6)
    # The worked example rounds the weights to [0, 0.5, 0.5] and gets [2, 7, 1.5].
    np.testing.assert_allclose(np.round(weights[0, 0, 0].numpy() * 2) / 2 @ values, [2.0, 7.0, 1.5])
    np.testing.assert_allclose(output[0, 0], [1.9366, 6.6831, 1.5951], atol=1e-3)


def test_implicit_masks_equal_explicit_attention_mask():
    query_ids = np.array([[1, 2, 0, 0], [3, 4, 5, 0]])
    value_ids = np.array([[1, 2, 3, 0, 0], [1, 0, 0, 0, 0]])
    embedding = keras.layers.Embedding(10, 8, mask_zero=True)
    query, value = embedding(query_ids), embedding(value_ids)
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    implicit = layer(query, value)
    explicit_mask = (query_ids != 0)[:, :, None] & (value_ids != 0)[:, None, :]
    explicit = layer(tf.identity(query), tf.identity(value), attention_mask=explicit_mask)
    assert_allclose(implicit, explicit, atol=0.0)
    np.testing.assert_array_equal(implicit._keras_mask.numpy(), query_ids != 0)

    inputs = [keras.Input((None,), dtype="int32"), keras.Input((None,), dtype="int32")]
    model = keras.Model(inputs, layer(embedding(inputs[0]), embedding(inputs[1])))
    assert_allclose(model([query_ids, value_ids]), explicit, atol=1e-6)


def test_padding_does_not_change_real_outputs():
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    short = _normal(1, 3, 8)
    padded = np.concatenate([short, _normal(1, 4, 8) * 100], axis=1)
    mask = masks.bidirectional_mask([[1, 1, 1, 0, 0, 0, 0]])
    assert_allclose(layer(padded, padded, attention_mask=mask)[:, :3], layer(short, short), atol=1e-5)


@pytest.mark.parametrize("direction", ["left_to_right", "right_to_left"])
def test_directional_masks_hide_the_other_side(direction):
    builder = getattr(masks, f"{direction}_mask")
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    x = _normal(2, 6, 8)
    mask = builder(np.ones((2, 6)))
    base = layer(x, x, attention_mask=mask).numpy()
    for t in range(6):
        changed = x.copy()
        if direction == "left_to_right":
            changed[:, t + 1:] = _normal(2, 5 - t, 8)
            kept = slice(0, t + 1)
        else:
            changed[:, :t] = _normal(2, t, 8)
            kept = slice(t, 6)
        out = layer(changed, changed, attention_mask=mask).numpy()
        np.testing.assert_allclose(out[:, kept], base[:, kept], atol=1e-6)
        if (direction == "left_to_right" and t < 5) or (direction == "right_to_left" and t > 0):
            assert not np.allclose(out, base)  # the perturbation does reach other rows


def test_cached_decoding_equals_full_causal_pass():
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    x = _normal(2, 7, 8)
    full = layer(x, x, attention_mask=masks.causal_mask(7)[None])

    @tf.function(jit_compile=True)
    def step(token, cache, index):
        return layer(
            token, token, attention_mask=masks.causal_mask(1, 7, index)[None],
            cache=cache, cache_update_index=index,
        )

    cache = tf.zeros((2, 2, 7, 2, 4))
    outputs = []
    for t in range(7):
        out, cache = step(x[:, t:t + 1], cache, tf.constant(t))
        outputs.append(out)
    assert_allclose(tf.concat(outputs, axis=1), full, atol=1e-5)
    # Prefill 3 tokens at once, then one by one from that cache: same again.
    out, cache = layer(
        x[:, :3], x[:, :3], attention_mask=masks.causal_mask(3, 7)[None],
        cache=tf.zeros((2, 2, 7, 2, 4)), cache_update_index=0,
    )
    outputs = [out]
    for t in range(3, 7):
        out, cache = step(x[:, t:t + 1], cache, tf.constant(t))
        outputs.append(out)
    assert_allclose(tf.concat(outputs, axis=1), full, atol=1e-5)


def test_no_new_tokens_leave_the_cache_unchanged():
    from tfnlp.layers.multi_head_attention import _update_positions

    cache = tf.random.normal([2, 2, 5, 3, 4])
    empty = tf.zeros([2, 2, 0, 3, 4])
    np.testing.assert_array_equal(_update_positions(cache, empty, 1), cache)
    one = tf.ones([2, 2, 1, 3, 4])
    for jit_compile in (False, True):  # XLA compiles every branch: no tf.cond to hide in
        dynamic = tf.function(_update_positions, jit_compile=jit_compile, input_signature=[
            tf.TensorSpec([None, 2, None, 3, 4]), tf.TensorSpec([None, 2, None, 3, 4]),
            tf.TensorSpec([], tf.int32)])
        np.testing.assert_array_equal(dynamic(cache, empty, tf.constant(1)), cache)
        np.testing.assert_array_equal(dynamic(cache, empty, tf.constant(5)), cache)
        written = dynamic(cache, one, tf.constant(1))
        np.testing.assert_array_equal(written[:, :, 1], one[:, :, 0])
        np.testing.assert_array_equal(tf.concat([written[:, :, :1], written[:, :, 2:]], 2),
                                      tf.concat([cache[:, :, :1], cache[:, :, 2:]], 2))


def test_cache_overflow_is_an_error():
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    x = _normal(1, 2, 8)
    with pytest.raises(ValueError, match="do not fit"):
        layer(x, x, cache=tf.zeros((1, 2, 3, 2, 4)), cache_update_index=2)
    graph = tf.function(lambda c, i: layer(x, x, cache=c, cache_update_index=i))
    with pytest.raises(tf.errors.InvalidArgumentError, match="exceed the cache slots"):
        graph(tf.zeros((1, 2, 3, 2, 4)), tf.constant(2))


def test_implicit_value_mask_is_not_applied_to_cache_slots():
    embedding = keras.layers.Embedding(10, 8, mask_zero=True)
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    source = embedding(np.array([[3, 4, 5, 0]]))
    layer(source, source)
    cache = layer.compute_key_value_cache(source)
    token = embedding(np.array([[0]]))  # a padding token as the query
    mask = np.array([[[1, 1, 1, 0]]], bool)
    # The value carries its implicit (1-token, all False) mask: it must not hide the slots.
    out, _ = layer(tf.identity(token), token, attention_mask=mask, cache=cache)
    expected = layer(tf.identity(token), tf.identity(source), attention_mask=mask)
    assert_allclose(out, expected, atol=1e-6)


def test_compute_key_value_cache_needs_a_built_layer():
    with pytest.raises(ValueError, match="before `compute_key_value_cache`"):
        MultiHeadAttention(num_heads=2, key_dim=4).compute_key_value_cache(_normal(1, 2, 8))


def test_cross_attention_cache_equals_recomputation():
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    query, source = _normal(2, 3, 8), _normal(2, 5, 6)
    mask = np.array([[[1, 1, 1, 0, 0]], [[1, 1, 1, 1, 1]]], bool)
    expected = layer(query, source, attention_mask=mask)
    cache = layer.compute_key_value_cache(source)
    out, same_cache = layer(query, query, attention_mask=mask, cache=cache)
    assert_allclose(out, expected, atol=1e-6)
    assert same_cache is cache


@pytest.mark.parametrize(
    "dtype, scale", [("float32", 1), ("mixed_bfloat16", 1), ("mixed_float16", 1), ("mixed_float16", 300)]
)
@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_fully_masked_rows_are_zero_with_finite_gradients(dtype, scale, dropout):
    # scale 300 makes float16 scores overflow to inf at the masked positions.
    layer = MultiHeadAttention(num_heads=2, key_dim=4, dropout=dropout, dtype=dtype)
    x = _normal(2, 4, 8)
    x[:, 2:] *= scale
    x = tf.constant(x)
    mask = np.ones((2, 4, 4), bool)
    mask[:, :, 2:] = False  # the large positions are never visible
    mask[0, 1] = False
    mask[1] = False  # a whole sequence with nothing to see
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        out, weights = layer(x, x, attention_mask=mask, return_attention_scores=True, training=True)
        loss = tf.reduce_sum(tf.cast(out, tf.float32) ** 2)
        # Without the weights, the written-out gradient (_attention_weights).
        fused = layer(x, x, attention_mask=mask, training=True)
        fused_loss = tf.reduce_sum(tf.cast(fused, tf.float32) ** 2)
    for gradient in [tape.gradient(fused_loss, x)] + tape.gradient(fused_loss, layer.trainable_weights):
        assert np.all(np.isfinite(np.asarray(gradient, np.float32)))
    np.testing.assert_array_equal(fused.numpy()[0, 1], 0.0)
    np.testing.assert_array_equal(fused.numpy()[1], 0.0)
    assert np.all(np.isfinite(out.numpy().astype(np.float32)))
    np.testing.assert_array_equal(out.numpy()[0, 1], 0.0)
    np.testing.assert_array_equal(out.numpy()[1], 0.0)
    np.testing.assert_array_equal(weights.numpy()[0, :, 1], 0.0)
    np.testing.assert_array_equal(weights.numpy()[1], 0.0)
    for gradient in [tape.gradient(loss, x)] + tape.gradient(loss, layer.trainable_weights):
        assert np.all(np.isfinite(np.asarray(gradient, np.float32)))


def _gradients(layer, x, mask, seed_state, **kwargs):
    """Output and gradients of `sum(out * g)` for x and every weight, from a set dropout seed."""
    if seed_state is not None:
        layer._dropout_layer.seed_generator.state.assign(seed_state)
    with tf.GradientTape() as tape:
        tape.watch(x)
        out = layer(x, x, attention_mask=mask, training=True, **kwargs)
        out = out[0] if isinstance(out, tuple) else out
        loss = tf.reduce_sum(tf.cast(out, tf.float32) * tf.cos(tf.range(out.shape[-1], dtype=tf.float32)))
    return [out] + tape.gradient(loss, [x] + layer.trainable_weights)


@pytest.mark.parametrize(
    "dtype, atol", [("float32", 2e-6), ("mixed_bfloat16", 0.05), ("mixed_float16", 5e-3)]
)
@pytest.mark.parametrize("dropout", [0.0, 0.4])
@pytest.mark.parametrize("masked", [True, False])
def test_written_out_gradient_equals_differentiating_op_by_op(dtype, atol, dropout, masked):
    """Without `return_attention_scores` the scores' gradient is written out; with it,
    TensorFlow differentiates the select, softmax and dropout: the same function."""
    layer = MultiHeadAttention(num_heads=3, key_dim=4, dropout=dropout, dtype=dtype)
    x = tf.constant(_normal(3, 7, 8))
    mask = None
    if masked:
        mask = RNG.random((3, 7, 7)) > 0.5
        mask[0, 2] = False  # a query that sees no key
    layer(x, x, attention_mask=mask)
    seed_state = layer._dropout_layer.seed_generator.state.numpy() if dropout else None
    fused = _gradients(layer, x, mask, seed_state)
    plain = _gradients(layer, x, mask, seed_state, return_attention_scores=True)
    for a, b in zip(fused, plain, strict=True):
        scale = max(1.0, float(tf.reduce_max(tf.abs(tf.cast(b, tf.float32)))))
        assert_allclose(tf.cast(a, tf.float32), tf.cast(b, tf.float32), atol=atol * scale)
    if dropout:  # the same dropout mask was drawn: outputs agree exactly
        assert_allclose(fused[0], plain[0], atol=0)
        changed = _gradients(layer, x, mask, seed_state + 1)
        assert not np.allclose(changed[0], fused[0])


def test_written_out_gradient_equals_keras():
    query = _normal(3, 6, 8)
    ours, reference = _paired(query, query, num_heads=2, key_dim=4)
    mask = RNG.random((3, 6, 6)) > 0.4
    mask[:, :, 0] = True
    x = tf.constant(query)
    grads = []
    for layer in (ours, reference):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(layer(x, x, attention_mask=mask) ** 3)
        grads.append(tape.gradient(loss, [x] + layer.trainable_weights))
    for a, b in zip(*grads, strict=True):
        assert_allclose(a, b, atol=2e-5, rtol=1e-5)


def test_dropout_only_in_training():
    layer = MultiHeadAttention(num_heads=2, key_dim=4, dropout=0.5)
    x = _normal(2, 5, 8)
    assert_allclose(layer(x, x), layer(x, x, training=False), atol=0.0)
    assert not np.allclose(layer(x, x, training=True), layer(x, x))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_heads": 0, "key_dim": 4}, "num_heads"),
        ({"num_heads": 2.5, "key_dim": 4}, "num_heads"),
        ({"num_heads": 2, "key_dim": -1}, "key_dim"),
        ({"num_heads": 2, "key_dim": 4, "value_dim": 0}, "value_dim"),
        ({"num_heads": 2, "key_dim": 4, "dropout": 1.0}, "dropout"),
        ({"num_heads": 2, "key_dim": 4, "scale": 0.0}, "scale"),
    ],
)
def test_bad_configuration_names_the_argument(kwargs, message):
    with pytest.raises(ValueError, match=message):
        MultiHeadAttention(**kwargs)


@pytest.mark.parametrize(
    "mask_shape, message",
    [((2, 5), "rank 3"), ((2, 4, 4), "T=5"), ((2, 5, 3), "S=4"), ((3, 5, 4), "B=2")],
)
def test_bad_attention_mask_shape(mask_shape, message):
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    with pytest.raises(ValueError, match=message):
        layer(_normal(2, 5, 8), _normal(2, 4, 8), attention_mask=np.ones(mask_shape, bool))


def test_attention_mask_batch_size_is_checked_at_run_time_when_unknown_before():
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    layer(_normal(1, 5, 8), _normal(1, 4, 8))

    @tf.function(input_signature=[tf.TensorSpec([None, 5, 8]), tf.TensorSpec([None, 5, 4], tf.bool)])
    def attend(x, mask):
        return layer(x, x[:, :4], attention_mask=mask)

    assert attend(_normal(1, 5, 8), np.ones((1, 5, 4), bool)).shape == (1, 5, 8)
    assert attend(_normal(2, 5, 8), np.ones((1, 5, 4), bool)).shape == (2, 5, 8)  # broadcast
    # A batch-1 input with a batch-3 mask used to give 3 outputs.
    with pytest.raises(tf.errors.InvalidArgumentError, match="axis 0 must be the batch size"):
        attend(_normal(1, 5, 8), np.ones((3, 5, 4), bool))


def test_cache_needs_equal_key_and_value_dims():
    layer = MultiHeadAttention(num_heads=2, key_dim=4, value_dim=3)
    x = _normal(1, 1, 8)
    layer(x, x)
    with pytest.raises(ValueError, match="value_dim == key_dim"):
        layer(x, x, cache=tf.zeros((1, 2, 4, 2, 4)), cache_update_index=0)


def test_int8_quantized_layer_stays_close_to_float():
    # The projections skip EinsumDense.call for speed, except when quantized:
    # the int8 kernel's scales are applied only by the layer itself.
    inputs = keras.Input((5, 16))
    model = keras.Model(inputs, MultiHeadAttention(num_heads=2, key_dim=8)(inputs, inputs))
    x = np.random.default_rng(0).normal(size=(2, 5, 16)).astype("float32")
    before = model(x).numpy()
    model.quantize("int8")
    after = model(x).numpy()
    np.testing.assert_allclose(after, before, atol=0.05 * np.abs(before).max())


PROJECTIONS = ("_query_dense", "_key_dense", "_value_dense", "_output_dense")


@pytest.mark.parametrize("projections", [(p,) for p in PROJECTIONS] + [PROJECTIONS],
                         ids=[p.strip("_") for p in PROJECTIONS] + ["all"])
def test_lora_projections_equal_calling_the_layers(projections):
    # The projections are 2-D matmuls on the EinsumDense weights, not calls of
    # the layers: LoRA on any of them must still be applied, exactly as the
    # layer's own call applies it. Cross-attention with distinct sizes, so
    # that every projection has its own shapes.
    query = tf.random.stateless_normal((2, 3, 8), seed=(1, 1))
    value = tf.random.stateless_normal((2, 4, 6), seed=(1, 2))
    ours, keras_mha = _paired(query, value, num_heads=2, key_dim=4, value_dim=3)
    before = ours(query, value)
    assert_allclose(before, keras_mha(query, value), atol=1e-5)
    for n, name in enumerate(projections):
        mine, theirs = getattr(ours, name), getattr(keras_mha, name)
        for dense in (mine, theirs):
            dense.enable_lora(2)
        b = tf.random.stateless_normal(mine.lora_kernel_b.shape, seed=(2, n))
        mine.lora_kernel_b.assign(b)
        theirs.lora_kernel_b.assign(b)
        theirs.lora_kernel_a.assign(mine.lora_kernel_a)
    with_lora = ours(query, value)
    assert np.abs(with_lora - before).max() > 1e-3  # LoRA is applied...
    # ...exactly as the layers' own calls (in Keras' attention) apply it...
    assert_allclose(with_lora, keras_mha(query, value), atol=1e-5)
    # ...and projection by projection, against calling the layer itself.
    from tfnlp.layers.multi_head_attention import _merge_heads, _project_heads
    context = tf.random.stateless_normal((2, 2, 3, 3), seed=(3, 3))  # (B, H, T, V)
    inputs = {"_query_dense": query, "_key_dense": value, "_value_dense": value}
    for name in projections:
        dense = getattr(ours, name)
        if name == "_output_dense":
            fast, called = _merge_heads(dense, context), dense(tf.transpose(context, [0, 2, 1, 3]))
        else:
            fast, called = _project_heads(dense, inputs[name]), dense(inputs[name])
        assert_allclose(fast, called, atol=1e-5)
