import keras
import numpy as np
import pytest
import tensorflow as tf

from tests import reference
from tests.harness import assert_allclose, run_layer_test
from tfnlp.layers import TransformerBlock, masks

RNG = np.random.default_rng(0)


def _normal(*shape):
    return RNG.normal(size=shape).astype("float32")


@pytest.mark.parametrize("norm_first", [False, True])
def test_harness(norm_first):
    run_layer_test(
        TransformerBlock,
        {"num_heads": 2, "intermediate_dim": 16, "dropout": 0.1, "activation": "gelu",
         "norm_first": norm_first},
        {"inputs": _normal(2, 5, 8), "padding_mask": np.array([[1, 1, 1, 0, 0]] * 2, bool)},
        expected_output_shape=(2, 5, 8),
        expected_num_trainable_weights=16,
    )


def test_harness_with_attention_mask():
    run_layer_test(
        TransformerBlock,
        {"num_heads": 2, "intermediate_dim": 16},
        {"inputs": _normal(2, 5, 8),
         "attention_mask": np.asarray(masks.left_to_right_mask(np.ones((2, 5))))},
        expected_output_shape=(2, 5, 8),
    )


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_matches_stock_keras_layers(norm_first, activation):
    block = TransformerBlock(
        num_heads=4, intermediate_dim=32, activation=activation, norm_first=norm_first,
        layer_norm_epsilon=1e-12, bias_initializer="random_normal",
    )
    x = _normal(3, 6, 16)
    padding = np.array([[1] * 6, [1] * 4 + [0] * 2, [1] + [0] * 5], bool)
    out = block(x, padding_mask=padding)
    expected = reference.encoder_block(block, x, masks.bidirectional_mask(padding))
    assert_allclose(out, expected, atol=1e-5)


def test_implicit_mask_equals_explicit_padding_mask():
    ids = np.array([[4, 5, 6, 0, 0], [1, 2, 3, 4, 5]])
    embedding = keras.layers.Embedding(10, 8, mask_zero=True)
    block = TransformerBlock(num_heads=2, intermediate_dim=16)
    explicit = block(embedding(ids).numpy(), padding_mask=ids != 0)
    x = embedding(ids)
    assert_allclose(block(x), explicit, atol=0.0)
    assert x._keras_mask is not None  # the caller's tensor keeps its mask
    inputs = keras.Input((None,), dtype="int32")
    model = keras.Model(inputs, block(embedding(inputs)))
    assert_allclose(model(ids), explicit, atol=1e-6)


def test_padding_does_not_change_real_outputs():
    block = TransformerBlock(num_heads=2, intermediate_dim=16)
    short = _normal(1, 4, 8)
    padded = np.concatenate([short, _normal(1, 3, 8) * 50], axis=1)
    out = block(padded, padding_mask=[[1, 1, 1, 1, 0, 0, 0]])
    assert_allclose(out[:, :4], block(short), atol=1e-5)


def test_cached_decoding_equals_full_pass_with_a_unilm_mask():
    # Source of 3 tokens encoded at once (bidirectional), then 4 target tokens
    # fed one by one: UniLM seq2seq decoding.
    block = TransformerBlock(num_heads=2, intermediate_dim=16)
    x = _normal(2, 7, 8)
    segments = np.array([[0, 0, 0, 1, 1, 1, 1]] * 2)
    full_mask = masks.seq2seq_mask(segments)
    full = block(x, attention_mask=full_mask)

    cache = tf.zeros((2, 2, 7, 2, 4))
    source, cache = block(
        x[:, :3], attention_mask=full_mask[:, :3], cache=cache, cache_update_index=0
    )
    outputs = [source]
    step = tf.function(
        lambda token, mask, cache, t: block(token, attention_mask=mask, cache=cache, cache_update_index=t),
        jit_compile=True,
    )
    for t in range(3, 7):
        out, cache = step(x[:, t:t + 1], full_mask[:, t:t + 1], cache, tf.constant(t))
        outputs.append(out)
    assert_allclose(tf.concat(outputs, axis=1), full, atol=1e-5)


def test_cached_decoding_with_left_padding():
    ids = np.array([[0, 0, 5, 6, 7], [3, 4, 5, 6, 7]])
    embedding = keras.layers.Embedding(10, 8, mask_zero=True)
    block = TransformerBlock(num_heads=2, intermediate_dim=16)
    padding = ids != 0
    full = block(embedding(ids), attention_mask=masks.left_to_right_mask(padding)).numpy()
    cache, outputs = tf.zeros((2, 2, 5, 2, 4)), []
    for t in range(5):
        out, cache = block(
            embedding(ids[:, t:t + 1]), padding_mask=padding,
            attention_mask=masks.causal_mask(1, 5, t)[None], cache=cache, cache_update_index=t,
        )
        outputs.append(out)
    stepped = tf.concat(outputs, axis=1).numpy()
    np.testing.assert_allclose(stepped[padding], full[padding], atol=1e-5)


def test_cache_needs_an_attention_mask_and_index_needs_cache():
    block = TransformerBlock(num_heads=2, intermediate_dim=16)
    with pytest.raises(ValueError, match="attention_mask"):
        block(_normal(1, 1, 8), cache=tf.zeros((1, 2, 3, 2, 4)), cache_update_index=0)
    with pytest.raises(ValueError, match="without `cache`"):
        block(_normal(1, 1, 8), cache_update_index=0)
    # Without the index the cache would be read, never written: stale keys.
    with pytest.raises(ValueError, match="`cache_update_index` is required with `cache`"):
        block(_normal(1, 1, 8), attention_mask=masks.causal_mask(1, 3, 0)[None],
              cache=tf.zeros((1, 2, 3, 2, 4)))


@pytest.mark.parametrize(
    "mask_shape, message",
    # A (B, S) mask where B == T used to broadcast into a wrong (B, B, S) one.
    [((4, 4), "rank 3"), ((3, 4, 4), "B=1"), ((1, 4, 5), "S=4"), ((1, 3, 4), "T=4")],
)
def test_bad_attention_mask_shape_is_named_before_it_meets_the_padding_mask(mask_shape, message):
    block = TransformerBlock(num_heads=2, intermediate_dim=16)
    with pytest.raises(ValueError, match=message):
        block(_normal(1, 4, 8), padding_mask=np.ones((1, 4), bool),
              attention_mask=np.ones(mask_shape, bool))


def test_tensors_of_unknown_rank_in_traced_calls():
    block = TransformerBlock(num_heads=2, intermediate_dim=16)
    x = _normal(2, 4, 8)
    mask = masks.causal_mask(4, 4)[None]
    expected = block(x, attention_mask=mask)
    any_rank_mask = tf.function(
        lambda x, mask: block(x, attention_mask=mask),
        input_signature=[tf.TensorSpec((None, None, 8)), tf.TensorSpec(None, tf.bool)],
    )
    assert_allclose(any_rank_mask(x, mask), expected, atol=1e-6)  # the rank is set once checked
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"`attention_mask` must have shape"):
        any_rank_mask(x, mask[0])
    any_rank_inputs = tf.function(block, input_signature=[tf.TensorSpec(None)])
    with pytest.raises(ValueError, match="`inputs` must have shape .* unknown rank"):
        any_rank_inputs.get_concrete_function()


def test_all_padding_sequence_is_finite():
    block = TransformerBlock(num_heads=2, intermediate_dim=16)
    x = tf.constant(_normal(2, 4, 8))
    with tf.GradientTape() as tape:
        tape.watch(x)
        out = block(x, padding_mask=np.zeros((2, 4), bool))
    assert np.all(np.isfinite(out.numpy()))
    assert np.all(np.isfinite(tape.gradient(out, x).numpy()))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_heads": 0, "intermediate_dim": 8}, "num_heads"),
        ({"num_heads": 2, "intermediate_dim": 0}, "intermediate_dim"),
        ({"num_heads": 2, "intermediate_dim": 8, "dropout": -0.1}, "dropout"),
        ({"num_heads": 2, "intermediate_dim": 8, "activation": "no_such_fn"}, "activation"),
        ({"num_heads": 2, "intermediate_dim": 8, "layer_norm_epsilon": 0}, "layer_norm_epsilon"),
    ],
)
def test_bad_configuration_names_the_argument(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TransformerBlock(**kwargs)


def test_hidden_size_not_divisible_by_heads():
    block = TransformerBlock(num_heads=3, intermediate_dim=8)
    with pytest.raises(ValueError, match=r"\(8\) must be divisible by `num_heads` \(3\)"):
        block(tf.zeros((1, 2, 8)))
    with pytest.raises(ValueError, match="divisible"):
        keras.Model(keras.Input((None, 8)), block(keras.Input((None, 8))))


def test_bad_padding_mask_rank():
    block = TransformerBlock(num_heads=2, intermediate_dim=8)
    with pytest.raises(ValueError, match="padding_mask"):
        block(tf.zeros((1, 3, 8)), padding_mask=np.ones((1, 3, 3)))


def _gathered(full, positions):
    return tf.gather(full, positions, batch_dims=1)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("mask_kind", ["padding", "seq2seq", "none"])
def test_output_positions_equal_the_full_output_gathered_with_gradients(norm_first, mask_kind):
    block = TransformerBlock(
        num_heads=2, intermediate_dim=16, activation="gelu", norm_first=norm_first,
        bias_initializer="random_normal",
    )
    x = tf.constant(_normal(3, 7, 8))
    padding = np.array([[1] * 7, [1] * 5 + [0] * 2, [1] * 2 + [0] * 5], bool)
    kwargs = {
        "padding": {"padding_mask": padding},
        "seq2seq": {"padding_mask": padding,
                    "attention_mask": masks.seq2seq_mask(np.array([[0] * 3 + [1] * 4] * 3))},
        "none": {},
    }[mask_kind]
    # Repeated, unsorted and padded positions.
    positions = tf.constant([[0, 6, 3, 3], [4, 1, 0, 6], [0, 0, 5, 1]])
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        full = _gathered(block(x, **kwargs), positions)
        sparse = block(x, output_positions=positions, **kwargs)
        weights = tf.constant(_normal(3, 4, 8))
        full_loss, sparse_loss = tf.reduce_sum(full * weights), tf.reduce_sum(sparse * weights)
    assert sparse.shape == (3, 4, 8)
    assert_allclose(sparse, full, atol=1e-6)
    for wrt in [x, *block.trainable_weights]:
        assert_allclose(tape.gradient(sparse_loss, wrt), tape.gradient(full_loss, wrt), atol=1e-5)


def test_output_positions_in_graphs_with_unknown_lengths_and_under_xla():
    block = TransformerBlock(num_heads=2, intermediate_dim=16)
    x = _normal(2, 6, 8)
    padding = np.array([[1] * 6, [1] * 3 + [0] * 3])
    positions = np.array([[5, 0], [2, 1]], "int32")
    expected = _gathered(block(x, padding_mask=padding), positions)
    spec = [tf.TensorSpec((None, None, 8)), tf.TensorSpec((None, None), tf.int32),
            tf.TensorSpec((None, None), tf.int32)]
    for jit_compile in (False, True):
        call = tf.function(
            lambda x, mask, positions: block(x, padding_mask=mask, output_positions=positions),
            input_signature=spec, jit_compile=jit_compile,
        )
        assert_allclose(call(x, padding, positions), expected, atol=1e-5)


def test_output_positions_gather_the_implicit_mask():
    ids = np.array([[4, 5, 6, 0, 0], [1, 2, 3, 4, 5]])
    embedding = keras.layers.Embedding(10, 8, mask_zero=True)
    block = TransformerBlock(num_heads=2, intermediate_dim=16)
    positions = tf.constant([[3, 0], [4, 4]])
    out = block(embedding(ids), output_positions=positions)
    assert_allclose(out, _gathered(block(embedding(ids)), positions), atol=1e-6)
    np.testing.assert_array_equal(out._keras_mask, [[False, True], [True, True]])


@pytest.mark.parametrize("positional", [False, True])
def test_output_positions_carry_the_gathered_mask_through_a_functional_model(positional, tmp_path):
    # Downstream mask users (here the pooling) must see the mask of the
    # gathered rows, also when P == T would hide a wrong (B, T) mask.
    ids = np.array([[3, 4, 5, 0, 0], [6, 7, 0, 0, 0]])
    positions = np.array([[4, 3, 2, 1, 0], [0, 4, 1, 3, 2]])
    embedding = keras.layers.Embedding(10, 8, mask_zero=True)
    block = TransformerBlock(num_heads=2, intermediate_dim=16)
    ids_in = keras.Input((None,), dtype="int32")
    positions_in = keras.Input((None,), dtype="int32")
    if positional:
        out = block(embedding(ids_in), None, None, None, None, positions_in)
    else:
        out = block(embedding(ids_in), output_positions=positions_in)
    model = keras.Model([ids_in, positions_in], keras.layers.GlobalAveragePooling1D()(out))

    rows = _gathered(block(embedding(ids)), tf.constant(positions))
    kept = tf.cast(tf.gather(ids != 0, positions, batch_dims=1), "float32")[..., None]
    expected = tf.reduce_sum(rows * kept, axis=1) / tf.reduce_sum(kept, axis=1)
    assert_allclose(model([ids, positions]), expected, atol=1e-6)
    assert_allclose(model.predict([ids, positions], verbose=0), expected, atol=1e-6)
    model.save(tmp_path / "model.keras")
    reloaded = keras.models.load_model(tmp_path / "model.keras", safe_mode=True)
    assert_allclose(reloaded([ids, positions]), expected, atol=1e-6)


def test_bad_output_positions_are_named():
    block = TransformerBlock(num_heads=2, intermediate_dim=16)
    x = _normal(2, 5, 8)
    with pytest.raises(ValueError, match=r"`output_positions` must be in \[0, 5\)"):
        block(x, output_positions=tf.constant([[0, 5], [1, 2]]))
    with pytest.raises(ValueError, match=r"`output_positions` must be in \[0, 5\)"):
        block(x, output_positions=tf.constant([[0, -1], [1, 2]]))
    with pytest.raises(TypeError, match="`output_positions` must be"):
        block(x, output_positions=tf.constant([[0.0, 1.0], [1.0, 2.0]]))
    with pytest.raises(ValueError, match="`output_positions`"):
        block(x, output_positions=tf.constant([0, 1]))
    with pytest.raises(ValueError, match="`output_positions` cannot be combined with `cache`"):
        block(x[:, :1], attention_mask=masks.causal_mask(1, 5, 0)[None],
              cache=tf.zeros((2, 2, 5, 2, 4)), cache_update_index=0,
              output_positions=tf.constant([[0], [0]]))
