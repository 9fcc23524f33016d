import keras
import numpy as np
import pytest
import tensorflow as tf

from tests import reference
from tests.harness import assert_allclose, run_layer_test
from tfnlp.layers import TransformerDecoderBlock, masks

RNG = np.random.default_rng(0)


def _normal(*shape):
    return RNG.normal(size=shape).astype("float32")


@pytest.mark.parametrize("with_encoder", [True, False])
def test_harness(with_encoder):
    inputs = {"decoder_sequence": _normal(2, 5, 8)}
    if with_encoder:
        inputs["encoder_sequence"] = _normal(2, 3, 6)
        inputs["encoder_padding_mask"] = np.array([[1, 1, 0], [1, 1, 1]], bool)
    run_layer_test(
        TransformerDecoderBlock,
        {"num_heads": 2, "intermediate_dim": 16, "dropout": 0.1},
        inputs,
        expected_output_shape=(2, 5, 8),
        expected_num_trainable_weights=26 if with_encoder else 16,
    )


@pytest.mark.parametrize("norm_first", [False, True])
def test_matches_stock_keras_layers(norm_first):
    block = TransformerDecoderBlock(
        num_heads=2, intermediate_dim=16, norm_first=norm_first, bias_initializer="random_normal"
    )
    target, source = _normal(2, 5, 8), _normal(2, 4, 6)
    target_padding = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], bool)
    source_padding = np.array([[1, 1, 1, 1], [1, 1, 0, 0]], bool)
    out = block(target, source, decoder_padding_mask=target_padding,
                encoder_padding_mask=source_padding)
    expected = reference.decoder_block(
        block, target, source,
        self_mask=masks.left_to_right_mask(target_padding),
        cross_mask=masks.combine_masks(source_padding[:, None, :], np.ones((1, 5, 1), bool)),
    )
    assert_allclose(out, expected, atol=1e-5)


def test_is_causal():
    block = TransformerDecoderBlock(num_heads=2, intermediate_dim=16)
    target, source = _normal(1, 6, 8), _normal(1, 4, 8)
    base = block(target, source).numpy()
    for t in range(5):
        changed = target.copy()
        changed[:, t + 1:] = _normal(1, 5 - t, 8)
        out = block(changed, source).numpy()
        np.testing.assert_allclose(out[:, :t + 1], base[:, :t + 1], atol=1e-6)
        assert not np.allclose(out[:, t + 1:], base[:, t + 1:])  # the change does arrive


def test_implicit_masks_equal_explicit_ones():
    target_ids = np.array([[1, 2, 3, 0], [4, 5, 6, 7]])
    source_ids = np.array([[1, 2, 0], [3, 0, 0]])
    embedding = keras.layers.Embedding(10, 8, mask_zero=True)
    block = TransformerDecoderBlock(num_heads=2, intermediate_dim=16)
    explicit = block(
        embedding(target_ids).numpy(), embedding(source_ids).numpy(),
        decoder_padding_mask=target_ids != 0, encoder_padding_mask=source_ids != 0,
    )
    assert_allclose(block(embedding(target_ids), embedding(source_ids)), explicit, atol=0.0)


@pytest.mark.parametrize("with_encoder", [True, False])
def test_cached_decoding_equals_full_pass(with_encoder):
    block = TransformerDecoderBlock(num_heads=2, intermediate_dim=16)
    target, source = _normal(2, 6, 8), _normal(2, 4, 8)
    source_padding = np.array([[1, 1, 1, 0], [1, 1, 1, 1]], bool)
    if with_encoder:
        full = block(target, source, encoder_padding_mask=source_padding)
        cross = block.compute_cross_attention_cache(source)
        extra = {"cross_attention_cache": cross, "encoder_padding_mask": source_padding}
    else:
        full = block(target)
        extra = {}

    @tf.function(jit_compile=True)
    def step(token, cache, index):
        return block(token, self_attention_cache=cache, self_attention_cache_update_index=index, **extra)

    cache = tf.zeros((2, 2, 6, 2, 4))
    outputs = []
    for t in range(6):
        out, cache = step(target[:, t:t + 1], cache, tf.constant(t))
        outputs.append(out)
    assert_allclose(tf.concat(outputs, axis=1), full, atol=1e-5)


def test_cached_decoding_with_left_padding_and_masked_embeddings():
    ids = np.array([[0, 0, 5, 6], [3, 4, 5, 6]])
    embedding = keras.layers.Embedding(10, 8, mask_zero=True)
    block = TransformerDecoderBlock(num_heads=2, intermediate_dim=16)
    full = block(embedding(ids)).numpy()  # implicit mask in the full pass
    padding = ids != 0
    cache = tf.zeros((2, 2, 4, 2, 4))
    outputs = []
    for t in range(4):
        # The step's implicit (1-token) mask is ignored; the explicit
        # (B, T_max) padding mask hides the padded cache slots.
        out, cache = block(
            embedding(ids[:, t:t + 1]), decoder_padding_mask=padding,
            self_attention_cache=cache, self_attention_cache_update_index=t,
        )
        outputs.append(out)
    stepped = tf.concat(outputs, axis=1).numpy()
    np.testing.assert_allclose(stepped[padding], full[padding], atol=1e-5)


def test_update_index_without_cache_is_an_error():
    block = TransformerDecoderBlock(num_heads=2, intermediate_dim=16)
    with pytest.raises(ValueError, match="without"):
        block(_normal(1, 2, 8), self_attention_cache_update_index=0)


def test_cross_attention_needs_an_encoder_at_build():
    block = TransformerDecoderBlock(num_heads=2, intermediate_dim=16)
    block(_normal(1, 3, 8))
    with pytest.raises(ValueError, match="without an encoder sequence"):
        block(_normal(1, 3, 8), _normal(1, 2, 8))


def test_a_block_with_cross_attention_needs_the_encoder_at_every_call():
    block = TransformerDecoderBlock(num_heads=2, intermediate_dim=16)
    with pytest.raises(ValueError, match="not built yet"):
        block.compute_cross_attention_cache(_normal(1, 2, 8))
    block(_normal(1, 3, 8), _normal(1, 2, 8))
    # Called without it, the output would silently skip the encoder.
    with pytest.raises(ValueError, match="built with cross-attention"):
        block(_normal(1, 3, 8))


def test_cache_needs_its_update_index():
    block = TransformerDecoderBlock(num_heads=2, intermediate_dim=16)
    block(_normal(1, 3, 8))
    with pytest.raises(ValueError, match="self_attention_cache_update_index"):
        block(_normal(1, 1, 8), self_attention_cache=tf.zeros((1, 2, 3, 2, 4)))


def test_hidden_size_not_divisible_by_heads():
    with pytest.raises(ValueError, match="num_heads"):
        TransformerDecoderBlock(num_heads=3, intermediate_dim=8)(tf.zeros((1, 2, 8)))
