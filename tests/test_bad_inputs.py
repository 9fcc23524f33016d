"""Bad configurations and bad first calls of every public layer and model.

Each case is `(class, kind, action, exception type, message regex)`,
kind "init" or "call": the action
either constructs an instance with a bad argument or calls a tiny, already
built instance with a bad input. The error must name the argument and the
expected value, and come from tfnlp's own checks (or Keras' argument
checks), never from deep inside a TensorFlow kernel.
"""

import functools
import inspect
import json
import os
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests import families
from tfnlp import data, layers, models

V = 30  # vocabulary size of the tiny models
VOCABULARY = list(data.SPECIAL_TOKENS) + ["good", "food"]


# --- Tiny shared instances, built once (and called once, so built) ---


def _ones(*shape, dtype="float32"):
    return tf.ones(shape, dtype)


def _built(layer, *args, **kwargs):
    layer(*args, **kwargs)
    return layer


@functools.cache
def _layer(name):
    x = _ones(2, 5, 8)
    return {
        "char_cnn": lambda: _built(
            layers.CharCNNEmbedding(8, filters=((1, 4), (2, 4)), num_highway_layers=1,
                                    character_dim=4),
            _ones(2, 5, 6, dtype="int32"),
        ),
        "highway": lambda: _built(layers.Highway(), x),
        "layer_norm": lambda: _built(layers.LayerNormalization(), x),
        "mlm_head": lambda: _built(layers.MaskedLMHead(V), x, masked_positions=[[1, 2], [0, 3]]),
        "mha": lambda: _built(layers.MultiHeadAttention(num_heads=2, key_dim=4), x, x),
        "position": lambda: _built(layers.PositionEmbedding(8), x),
        "lstm": lambda: _built(layers.ProjectedLSTM(8, projection_dim=4), x),
        "mix": lambda: _built(layers.ScalarMix(layer_norm=True), _ones(2, 3, 5, 8)),
        "logits": lambda: _built(layers.TokenLogits(V), x),
        "block": lambda: _built(layers.TransformerBlock(num_heads=2, intermediate_dim=16), x),
        "decoder": lambda: _built(
            layers.TransformerDecoderBlock(num_heads=2, intermediate_dim=16), x, _ones(2, 7, 8)
        ),
        "word_softmax": lambda: _built(
            layers.WordSoftmax(V, num_sampled=5), x, _ones(2, 5, dtype="int32")
        ),
        "packer": lambda: data.SegmentPacker(8, start_id=2, end_id=3),
        "tokenizer": lambda: data.WordPieceTokenizer(VOCABULARY),
        "preprocessor": lambda: data.BertPreprocessor(data.WordPieceTokenizer(VOCABULARY), 8),
    }[name]()


def _bert_config(**overrides):
    config = {"vocabulary_size": V, "num_layers": 1, "num_heads": 2, "hidden_dim": 8,
              "intermediate_dim": 16, "dropout": 0.0, "max_sequence_length": 16}
    return {**config, **overrides}


@functools.cache
def _model(name):
    return {
        "bert": lambda: models.BertBackbone(**_bert_config()),
        "classifier": lambda: models.BertClassifier(_model("bert"), num_classes=3),
        "pretrainer": lambda: models.BertPretrainer(_model("bert")),
        "tagger": lambda: models.BertTokenClassifier(_model("bert"), num_tags=3),
        "unilm_backbone": lambda: models.UniLMBackbone(**_bert_config()),
        "unilm": lambda: models.UniLM(_model("unilm_backbone")),
        "text_classifier": lambda: models.TransformerClassifier(
            V, num_classes=2, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16
        ),
        "seq2seq": lambda: models.TransformerSeq2Seq(
            V, 20, num_encoder_layers=1, num_decoder_layers=1, hidden_dim=8, num_heads=2,
            intermediate_dim=16,
        ),
        "bilm": lambda: models.ELMoBiLM(**_elmo_config()),
        "embedder": lambda: models.ELMoEmbedder(_model("bilm")),
    }[name]()


def _elmo_config(**overrides):
    config = {"word_vocabulary_size": V, "num_layers": 1, "units": 8, "projection_dim": 4,
              "filters": ((1, 4), (2, 4)), "num_highway_layers": 0, "max_characters": 6,
              "num_sampled": 5}
    return {**config, **overrides}


def _bert_inputs(token_ids=None, segment_ids=None, padding_mask=None, **extra):
    """A `(1, 5)` BERT batch, with any input replaced."""
    inputs = {
        "token_ids": np.array([[2, 5, 6, 3, 0]], "int32"),
        "segment_ids": np.zeros((1, 5), "int32"),
        "padding_mask": np.array([[1, 1, 1, 1, 0]], "int32"),
    }
    replaced = {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}
    inputs.update({k: np.asarray(v) for k, v in replaced.items() if v is not None})
    return {**inputs, **{k: np.asarray(v) for k, v in extra.items()}}


def _unilm_inputs(**replaced):
    inputs = _bert_inputs(segment_ids=[[0, 0, 0, 1, 1]], objective=[3], masked_positions=[[3]])
    return {**inputs, **{k: np.asarray(v) for k, v in replaced.items()}}


def _seq2seq_inputs(**replaced):
    inputs = {
        "encoder_token_ids": np.array([[5, 6, 7, 3]], "int32"),
        "encoder_padding_mask": np.ones((1, 4), "int32"),
        "decoder_token_ids": np.array([[2, 8, 9]], "int32"),
        "decoder_padding_mask": np.ones((1, 3), "int32"),
    }
    return {**inputs, **{k: np.asarray(v) for k, v in replaced.items()}}


def _characters(value=1, shape=(1, 3, 6), dtype="int32"):
    return np.full(shape, value, dtype)


# --- The table: (class, "init" or "call", action, exception, message regex) ---

L, M, D = layers, models, data
x = functools.partial(_ones, 2, 5, 8)
# Keyword arguments of the tiny layers, and of a sublayer config with one argument changed.
MHA = {"num_heads": 2, "key_dim": 4}
BLOCK = {"num_heads": 2, "intermediate_dim": 16}


def init(cls, error, message, *args, **kwargs):
    return (cls, "init", lambda: cls(*args, **kwargs), error, message)


def call(cls, error, message, action):
    return (cls, "call", action, error, message)


CASES = [
    # CharCNNEmbedding
    init(L.CharCNNEmbedding, ValueError, r"`output_dim` must be a positive integer, got 0", 0),
    init(L.CharCNNEmbedding, ValueError, r"`filters` must be .*positive \(width, count\)", 8,
         filters=((0, 4),)),
    init(L.CharCNNEmbedding, ValueError, r"`num_highway_layers` must be a non-negative integer, "
         r"got -1", 8, num_highway_layers=-1),
    init(L.CharCNNEmbedding, ValueError, r"`activation` must name a Keras activation, got 'nope'",
         8, activation="nope"),
    call(L.CharCNNEmbedding, TypeError, r"`character_ids` must be an integer tensor, got dtype "
         r"float32", lambda: _layer("char_cnn")(_ones(2, 5, 6))),
    call(L.CharCNNEmbedding, TypeError, r"`character_ids` must be an integer tensor, got dtype "
         r"string", lambda: _layer("char_cnn")(tf.fill((2, 5, 6), "a"))),
    call(L.CharCNNEmbedding, ValueError, r"`character_ids` must have shape \(B, T, C\) \(rank 3\)",
         lambda: _layer("char_cnn")(_ones(2, 5, dtype="int32"))),
    call(L.CharCNNEmbedding, ValueError, r"`character_ids` must be in \[0, 262\) "
         r"\(`character_vocabulary_size`\), got 262",
         lambda: _layer("char_cnn")(262 * _ones(2, 5, 6, dtype="int32"))),
    call(L.CharCNNEmbedding, ValueError, r"`character_ids` must be in \[0, 262\) .*got -1",
         lambda: _layer("char_cnn")(-_ones(2, 5, 6, dtype="int32"))),
    call(L.CharCNNEmbedding, ValueError, r"`character_ids` have 1 characters .* widest filter "
         r"\(2\)", lambda: L.CharCNNEmbedding(8, filters=((2, 4),))(_ones(1, 3, 1, dtype="int32"))),
    # Dropout (its rate is checked by Keras' own Dropout)
    init(L.Dropout, ValueError, r"`rate`.*between 0 and 1.*rate=1.5", 1.5),
    call(L.Dropout, TypeError, r"`inputs` must be a floating-point tensor, got dtype int32",
         lambda: L.Dropout(0.5)(_ones(2, 8, dtype="int32"), training=True)),
    call(L.Dropout, ValueError, r"`noise_shape` \(2, 3\) does not broadcast .* \(2, 8\)",
         lambda: L.Dropout(0.5, noise_shape=(2, 3))(_ones(2, 8), training=True)),
    # Highway
    init(L.Highway, ValueError, r"`gate_bias` must be a finite number, got 'x'", gate_bias="x"),
    init(L.Highway, ValueError, r"`gate_bias` must be a finite number, got nan", gate_bias=float("nan")),
    init(L.Highway, ValueError, r"`activation` must name a Keras activation, got 'nope'",
         activation="nope"),
    init(L.Highway, ValueError, r"`kernel_initializer` must name a Keras initializer, got 'nope'",
         kernel_initializer="nope"),
    call(L.Highway, ValueError, r"`inputs` has shape \(2, 5, 6\), but its axis W .* must be 8",
         lambda: _layer("highway")(_ones(2, 5, 6))),
    call(L.Highway, TypeError, r"`inputs` must be a floating-point tensor, got dtype int32",
         lambda: _layer("highway")(_ones(2, 5, 8, dtype="int32"))),
    # LayerNormalization
    init(L.LayerNormalization, ValueError, r"`epsilon` must be a positive number, got -1",
         epsilon=-1.0),
    call(L.LayerNormalization, ValueError, r"`inputs` has shape \(2, 5, 6\), but its axis D .* "
         r"must be 8", lambda: _layer("layer_norm")(_ones(2, 5, 6))),
    call(L.LayerNormalization, TypeError, r"`inputs` must be a real-valued .* got dtype string",
         lambda: _layer("layer_norm")(tf.fill((2, 8), "a"))),
    # MaskedLMHead
    init(L.MaskedLMHead, ValueError, r"`vocabulary_size` must be a positive integer, got 0", 0),
    init(L.MaskedLMHead, ValueError, r"`token_embedding` has 31 rows but `vocabulary_size` is 30",
         V, token_embedding=keras.layers.Embedding(31, 8)),
    init(L.MaskedLMHead, ValueError, r"`layer_norm_epsilon` must be a positive number, got 0", V,
         layer_norm_epsilon=0),
    call(L.MaskedLMHead, ValueError, r"tied `token_embedding` has width 4.* hidden size 8",
         lambda: L.MaskedLMHead(V, token_embedding=_built(keras.layers.Embedding(V, 4), tf.ones(1)))(
             x(), masked_positions=[[1], [2]])),
    call(L.MaskedLMHead, ValueError, r"`masked_positions` must be in \[0, 5\) \(the length of "
         r"`inputs`\), got 5", lambda: _layer("mlm_head")(x(), masked_positions=[[1, 5], [0, 3]])),
    call(L.MaskedLMHead, ValueError, r"`masked_positions` must be in \[0, 5\) .*got -1",
         lambda: _layer("mlm_head")(x(), masked_positions=[[1, -1], [0, 3]])),
    call(L.MaskedLMHead, TypeError, r"`masked_positions` must be an integer tensor, got dtype "
         r"float32", lambda: _layer("mlm_head")(x(), masked_positions=_ones(2, 2))),
    call(L.MaskedLMHead, ValueError, r"`masked_positions` must have shape \(B, P\) \(rank 2\)",
         lambda: _layer("mlm_head")(x(), masked_positions=[1, 2])),
    call(L.MaskedLMHead, ValueError, r"`masked_positions` has shape \(3, 1\), but its axis B .* "
         r"must be 2", lambda: _layer("mlm_head")(x(), masked_positions=[[1], [2], [3]])),
    call(L.MaskedLMHead, ValueError, r"`inputs` has shape \(2, 5, 6\), but its axis H .* must be 8",
         lambda: _layer("mlm_head")(_ones(2, 5, 6), masked_positions=[[1], [2]])),
    # MultiHeadAttention
    init(L.MultiHeadAttention, ValueError, r"`num_heads` must be a positive integer, got 0",
         num_heads=0, key_dim=4),
    init(L.MultiHeadAttention, ValueError, r"`key_dim` must be a positive integer, got 2.0",
         num_heads=2, key_dim=2.0),
    init(L.MultiHeadAttention, ValueError, r"`dropout` must be a float in \[0, 1\), got 1.0",
         dropout=1.0, **MHA),
    init(L.MultiHeadAttention, ValueError, r"`kernel_initializer` must name a Keras initializer",
         kernel_initializer="nope", **MHA),
    call(L.MultiHeadAttention, TypeError, r"`query` must be a real-valued .* got dtype string",
         lambda: _layer("mha")(tf.fill((2, 5, 8), "a"), x())),
    call(L.MultiHeadAttention, ValueError, r"`query` must have shape \(B, T, Q\) \(rank 3\)",
         lambda: _layer("mha")(_ones(5, 8), _ones(5, 8))),
    call(L.MultiHeadAttention, ValueError, r"`query` has shape \(2, 5, 6\), but its axis Q .* "
         r"must be 8", lambda: _layer("mha")(_ones(2, 5, 6), x())),
    call(L.MultiHeadAttention, ValueError, r"`value` has shape \(2, 5, 6\), but its axis V .* "
         r"must be 8", lambda: _layer("mha")(x(), _ones(2, 5, 6))),
    call(L.MultiHeadAttention, ValueError, r"`value` has shape \(3, 5, 8\), but its axis B .* "
         r"must be 2", lambda: _layer("mha")(x(), _ones(3, 5, 8))),
    call(L.MultiHeadAttention, ValueError, r"`key` has shape \(2, 6, 8\), but its axis S .* "
         r"must be 5", lambda: _layer("mha")(x(), x(), key=_ones(2, 6, 8))),
    call(L.MultiHeadAttention, ValueError, r"`attention_mask` has shape \(2, 4, 5\), but its axis 1 "
         r"must be T=5", lambda: _layer("mha")(x(), x(), attention_mask=_ones(2, 4, 5) > 0)),
    call(L.MultiHeadAttention, ValueError, r"`cache` has shape \(2, 2, 5, 3, 4\), but its axis H "
         r".* must be 2", lambda: _layer("mha")(
             _ones(2, 1, 8), _ones(2, 1, 8), cache=tf.zeros((2, 2, 5, 3, 4)), cache_update_index=0,
             attention_mask=_ones(2, 1, 5) > 0)),
    call(L.MultiHeadAttention, ValueError, r"`cache_update_index` must be >= 0, got -1",
         lambda: _layer("mha")(
             _ones(2, 1, 8), _ones(2, 1, 8), cache=tf.zeros((2, 2, 5, 2, 4)),
             cache_update_index=tf.constant(-1), attention_mask=_ones(2, 1, 5) > 0)),
    call(L.MultiHeadAttention, ValueError, r"`cache_update_index` \(5\) \+ 1 new tokens do not fit "
         r"the cache's 5 slots", lambda: _layer("mha")(
             _ones(2, 1, 8), _ones(2, 1, 8), cache=tf.zeros((2, 2, 5, 2, 4)),
             cache_update_index=tf.constant(5), attention_mask=_ones(2, 1, 5) > 0)),
    # PositionEmbedding
    init(L.PositionEmbedding, ValueError, r"`sequence_length` must be a positive integer, got 0", 0),
    init(L.PositionEmbedding, ValueError, r"`initializer` must name a Keras initializer", 8,
         initializer="nope"),
    call(L.PositionEmbedding, ValueError, r"9 positions starting at start_index=0, but "
         r"`sequence_length` is 8", lambda: _layer("position")(_ones(2, 9, 8))),
    call(L.PositionEmbedding, ValueError, r"start_index=6, but `sequence_length` is 8",
         lambda: _layer("position")(x(), start_index=tf.constant(6))),
    call(L.PositionEmbedding, ValueError, r"`start_index` must be >= 0, got -1",
         lambda: _layer("position")(x(), start_index=-1)),
    call(L.PositionEmbedding, ValueError, r"`inputs` has shape \(2, 5, 6\), but its axis D .* "
         r"must be 8", lambda: _layer("position")(_ones(2, 5, 6))),
    call(L.PositionEmbedding, ValueError, r"`inputs` must have a known last .* rank >= 2",
         lambda: L.PositionEmbedding(8)(_ones(8))),
    # CRF
    init(L.CRF, ValueError, r"`num_tags` must be a positive integer, got 0", 0),
    init(L.CRF, ValueError, r"`allowed_transitions\['transitions'\]` must have shape \(3, 3\)", 3,
         allowed_transitions={"transitions": [[True] * 2] * 2}),
    call(L.CRF, ValueError, r"`potentials` has shape \(2, 5, 8\), but its axis N .* must be 3",
         lambda: L.CRF(3)(x())),
    call(L.CRF, ValueError, r"`tags` has shape \(2, 4\), but its axis T .* must be 5",
         lambda: L.CRF(3).log_likelihood(_ones(2, 5, 3), np.zeros((2, 4), np.int32))),
    # ProjectedLSTM
    init(L.ProjectedLSTM, ValueError, r"`units` must be a positive integer, got 0", 0),
    init(L.ProjectedLSTM, ValueError, r"`cell_clip` must be a positive number, got -1.0", 8,
         cell_clip=-1.0),
    init(L.ProjectedLSTM, ValueError, r"`projection_clip` needs a `projection_dim`", 8,
         projection_clip=3.0),
    call(L.ProjectedLSTM, ValueError, r"`inputs` has shape \(2, 5, 6\), but its axis D .* "
         r"must be 8", lambda: _layer("lstm")(_ones(2, 5, 6))),
    call(L.ProjectedLSTM, ValueError, r"`padding_mask` has shape \(2, 4\), but its axis T .* "
         r"must be 5", lambda: _layer("lstm")(x(), padding_mask=_ones(2, 4, dtype="int32"))),
    call(L.ProjectedLSTM, TypeError, r"`padding_mask` must be a bool, int or float tensor, got "
         r"dtype string", lambda: _layer("lstm")(x(), padding_mask=tf.fill((2, 5), "1"))),
    call(L.ProjectedLSTM, ValueError, r"`inputs` must have rank 3 \(batch, steps, features\)",
         lambda: L.ProjectedLSTM(8)(_ones(5, 8))),
    # ScalarMix
    init(L.ScalarMix, ValueError, r"`initial_scale` must be a finite number, got 'x'",
         initial_scale="x"),
    init(L.ScalarMix, ValueError, r"`initial_scale` must be a finite number, got inf",
         initial_scale=float("inf")),
    init(L.ScalarMix, ValueError, r"`initial_weights\[0\]` must be a finite number, got 'a'",
         initial_weights=["a"]),
    init(L.ScalarMix, ValueError, r"`initial_weights\[1\]` must be a finite number, got nan",
         initial_weights=[0.0, float("nan"), 1.0]),
    init(L.ScalarMix, ValueError, r"`initial_weights` must be a list of numbers, got '123'",
         initial_weights="123"),
    call(L.ScalarMix, ValueError, r"`inputs` has shape \(2, 4, 5, 8\), but its axis L .* must "
         r"be 3", lambda: _layer("mix")(_ones(2, 4, 5, 8))),
    call(L.ScalarMix, ValueError, r"`padding_mask` has shape \(2, 4\), but its axis T .* must "
         r"be 5", lambda: _layer("mix")(_ones(2, 3, 5, 8), padding_mask=_ones(2, 4))),
    call(L.ScalarMix, ValueError, r"`initial_weights` has 2 entries but `inputs` have 3 layers",
         lambda: L.ScalarMix(initial_weights=[0.0, 1.0])(_ones(2, 3, 5, 8))),
    # SinusoidalPositionEncoding
    init(L.SinusoidalPositionEncoding, ValueError, r"`max_wavelength` must be a positive number, "
         r"got 0", max_wavelength=0),
    call(L.SinusoidalPositionEncoding, ValueError, r"`inputs` must have shape \(\.\.\., T, D\) "
         r"\(rank >= 2\), got shape \(8,\)", lambda: L.SinusoidalPositionEncoding()(_ones(8))),
    call(L.SinusoidalPositionEncoding, ValueError, r"`start_index` must be >= 0, got -2",
         lambda: L.SinusoidalPositionEncoding()(x(), start_index=-2)),
    # TokenLogits
    init(L.TokenLogits, ValueError, r"`vocabulary_size` must be a positive integer, got -1", -1),
    init(L.TokenLogits, ValueError, r"`token_embedding` has 31 rows but `vocabulary_size` is 30", V,
         token_embedding=keras.layers.Embedding(31, 8)),
    init(L.TokenLogits, ValueError, r"`token_embedding` must be a keras.layers.Embedding, got "
         r"Dense", V, token_embedding=keras.layers.Dense(8)),
    call(L.TokenLogits, ValueError, r"`inputs` has shape \(2, 5, 6\), but its axis H .* must be 8",
         lambda: _layer("logits")(_ones(2, 5, 6))),
    call(L.TokenLogits, TypeError, r"`inputs` must be a floating-point tensor, got dtype int32",
         lambda: _layer("logits")(_ones(2, 5, 8, dtype="int32"))),
    # TransformerBlock
    init(L.TransformerBlock, ValueError, r"`num_heads` must be a positive integer, got 0",
         num_heads=0, intermediate_dim=16),
    init(L.TransformerBlock, ValueError, r"`intermediate_dim` must be a positive integer, got 0",
         num_heads=2, intermediate_dim=0),
    init(L.TransformerBlock, ValueError, r"`dropout` must be a float in \[0, 1\), got -0.1",
         dropout=-0.1, **BLOCK),
    init(L.TransformerBlock, ValueError, r"`activation` must name a Keras activation, got 'nope'",
         activation="nope", **BLOCK),
    init(L.TransformerBlock, ValueError, r"`layer_norm_epsilon` must be a positive number, got 0",
         layer_norm_epsilon=0, **BLOCK),
    call(L.TransformerBlock, ValueError, r"hidden size of `inputs` \(8\) must be divisible by "
         r"`num_heads` \(3\)", lambda: L.TransformerBlock(num_heads=3, intermediate_dim=16)(x())),
    call(L.TransformerBlock, TypeError, r"`inputs` must be a floating-point tensor, got dtype int32",
         lambda: _layer("block")(_ones(2, 5, 8, dtype="int32"))),
    call(L.TransformerBlock, ValueError, r"`inputs` must have shape \(B, T, D\) \(rank 3\)",
         lambda: L.TransformerBlock(**BLOCK)(_ones(5, 8))),
    call(L.TransformerBlock, ValueError, r"`inputs` has shape \(2, 5, 6\), but its axis D .* must "
         r"be 8", lambda: _layer("block")(_ones(2, 5, 6))),
    call(L.TransformerBlock, ValueError, r"`padding_mask` has shape \(2, 4\), but its axis T .* "
         r"must be 5", lambda: _layer("block")(x(), padding_mask=_ones(2, 4, dtype="int32"))),
    call(L.TransformerBlock, ValueError, r"`padding_mask` has shape \(3, 5\), but its axis B .* "
         r"must be 2", lambda: _layer("block")(x(), padding_mask=_ones(3, 5, dtype="int32"))),
    call(L.TransformerBlock, ValueError, r"`attention_mask` has shape \(2, 5, 4\), but its axis 2 "
         r"must be S=5", lambda: _layer("block")(x(), attention_mask=_ones(2, 5, 4) > 0)),
    # TransformerDecoderBlock
    init(L.TransformerDecoderBlock, ValueError, r"`intermediate_dim` must be a positive integer, "
         r"got None", num_heads=2, intermediate_dim=None),
    init(L.TransformerDecoderBlock, ValueError, r"`bias_initializer` must name a Keras "
         r"initializer", bias_initializer="nope", **BLOCK),
    call(L.TransformerDecoderBlock, ValueError, r"hidden size of `decoder_sequence` \(8\) must be "
         r"divisible by `num_heads` \(3\)",
         lambda: L.TransformerDecoderBlock(num_heads=3, intermediate_dim=16)(x())),
    call(L.TransformerDecoderBlock, ValueError, r"`encoder_sequence` has shape \(3, 7, 8\), but "
         r"its axis B .* must be 2", lambda: _layer("decoder")(x(), _ones(3, 7, 8))),
    call(L.TransformerDecoderBlock, ValueError, r"`encoder_sequence` has shape \(2, 7, 6\), but "
         r"its axis E .* must be 8", lambda: _layer("decoder")(x(), _ones(2, 7, 6))),
    call(L.TransformerDecoderBlock, ValueError, r"`decoder_padding_mask` has shape \(2, 6\), but "
         r"its axis T .* must be 5", lambda: _layer("decoder")(
             x(), _ones(2, 7, 8), decoder_padding_mask=_ones(2, 6))),
    call(L.TransformerDecoderBlock, ValueError, r"`encoder_padding_mask` has shape \(2, 6\), but "
         r"its axis S .* must be 7", lambda: _layer("decoder")(
             x(), _ones(2, 7, 8), encoder_padding_mask=_ones(2, 6))),
    call(L.TransformerDecoderBlock, TypeError, r"`decoder_sequence` must be a floating-point "
         r"tensor, got dtype int32", lambda: _layer("decoder")(_ones(2, 5, 8, dtype="int32"))),
    call(L.TransformerDecoderBlock, ValueError, r"built without an encoder sequence",
         lambda: _built(L.TransformerDecoderBlock(**BLOCK), x())(x(), _ones(2, 7, 8))),
    # WordSoftmax
    init(L.WordSoftmax, ValueError, r"`vocabulary_size` must be a positive integer, got 0", 0),
    init(L.WordSoftmax, ValueError, r"`num_sampled` \(30\) must be smaller than `vocabulary_size` "
         r"\(30\)", V, num_sampled=V),
    init(L.WordSoftmax, ValueError, r"`seed` must be an integer, got 1.5", V, seed=1.5),
    call(L.WordSoftmax, ValueError, r"`target_ids` must be in \[0, 30\) \(`vocabulary_size`\), got "
         r"30", lambda: _layer("word_softmax")(x(), 30 * _ones(2, 5, dtype="int32"))),
    call(L.WordSoftmax, ValueError, r"`target_ids` must be in \[0, 30\) .*got -1",
         lambda: _layer("word_softmax")(x(), -_ones(2, 5, dtype="int32"), training=True)),
    call(L.WordSoftmax, TypeError, r"`target_ids` must be an integer tensor, got dtype float32",
         lambda: _layer("word_softmax")(x(), _ones(2, 5))),
    call(L.WordSoftmax, ValueError, r"`target_ids` has shape \(2, 4\), but its axis T .* must be 5",
         lambda: _layer("word_softmax")(x(), _ones(2, 4, dtype="int32"))),
    call(L.WordSoftmax, ValueError, r"`inputs` has shape \(2, 5, 6\), but its axis H .* must be 8",
         lambda: _layer("word_softmax")(_ones(2, 5, 6), _ones(2, 5, dtype="int32"))),
    # WordPieceTokenizer
    init(D.WordPieceTokenizer, ValueError, r"`vocabulary` lacks the special tokens \['\[PAD\]'",
         ["good", "food"]),
    init(D.WordPieceTokenizer, TypeError, r"`vocabulary` must hold strings, got 5", VOCABULARY + [5]),
    init(D.WordPieceTokenizer, ValueError, r"`vocabulary` has duplicated tokens",
         VOCABULARY + ["good"]),
    init(D.WordPieceTokenizer, ValueError, r"`max_input_bytes` must be a positive integer, got 0",
         VOCABULARY, max_input_bytes=0),
    # TensorFlow counts string bytes in int32: 2**32 + 5 cut texts to 5 bytes.
    init(D.WordPieceTokenizer, ValueError, r"`max_input_bytes` must be at most 2147483647 "
         r"\(TensorFlow counts a string's bytes in int32\), got 4294967301",
         VOCABULARY, max_input_bytes=2**32 + 5),
    call(D.WordPieceTokenizer, TypeError, r"`inputs` must be tf.string, got int32",
         lambda: _layer("tokenizer")(tf.constant([1, 2]))),
    call(D.WordPieceTokenizer, TypeError, r"`token_ids` must be an integer tensor, got dtype "
         r"float32", lambda: _layer("tokenizer").detokenize(tf.constant([[1.5]]))),
    call(D.WordPieceTokenizer, IndexError, r"`token_id` 99 is outside the vocabulary's ids \[0, 7\)",
         lambda: _layer("tokenizer").id_to_token(99)),
    # SegmentPacker
    init(D.SegmentPacker, ValueError, r"`sequence_length` must be at least 3 .*got 2", 2,
         start_id=2, end_id=3),
    call(D.SegmentPacker, ValueError, r"`sequence_length` must be at least 5 for pairs .*got 4",
         lambda: D.SegmentPacker(4, start_id=2, end_id=3)(
             (tf.ragged.constant([[5, 6]]), tf.ragged.constant([[7]])))),
    init(D.SegmentPacker, ValueError, r"`start_id` must be a non-negative integer, got -1", 8,
         start_id=-1, end_id=3),
    init(D.SegmentPacker, ValueError, r"`end_id` must be a non-negative integer, got 2.5", 8,
         start_id=2, end_id=2.5),
    init(D.SegmentPacker, ValueError, r"`pad_id` must be a non-negative integer, got '0'", 8,
         start_id=2, end_id=3, pad_id="0"),
    call(D.SegmentPacker, TypeError, r"`inputs\[0\]` must be an integer tensor, got dtype float32",
         lambda: _layer("packer")(tf.ragged.constant([[1.5, 2.0]]))),
    call(D.SegmentPacker, TypeError, r"`inputs\[1\]` must be an integer tensor, got dtype string",
         lambda: _layer("packer")((tf.ragged.constant([[1]]), tf.ragged.constant([["a"]])))),
    call(D.SegmentPacker, ValueError, r"`inputs\[0\]` must have shape \(B, L\) \(rank 2\)",
         lambda: _layer("packer")(tf.constant([1, 2, 3]))),
    call(D.SegmentPacker, ValueError, r"`inputs\[1\]` has shape \(2, None\), but its axis B .* "
         r"must be 1", lambda: _layer("packer")(
             (tf.ragged.constant([[1]]), tf.ragged.constant([[1], [2]])))),
    call(D.SegmentPacker, ValueError, r"`inputs` must hold one or two segments, got 3",
         lambda: _layer("packer")((tf.ragged.constant([[1]]),) * 3)),
    # BertPreprocessor
    init(D.BertPreprocessor, ValueError, r"`tokenizer` must be a WordPieceTokenizer, got str",
         "vocab.txt", 8),
    (D.BertPreprocessor, "init", lambda: D.BertPreprocessor(_layer("tokenizer"), 0),
     ValueError, r"`sequence_length` must be a positive integer, got 0"),
    call(D.BertPreprocessor, TypeError, r"`inputs` must be tf.string, got int32",
         lambda: _layer("preprocessor")(tf.constant([1]))),
    call(D.BertPreprocessor, ValueError, r"`inputs\[0\]` must have shape \(B,\) \(rank 1\)",
         lambda: _layer("preprocessor")(tf.constant([["good"]]))),
    call(D.BertPreprocessor, ValueError, r"`inputs\[1\]` has shape \(2,\), but its axis B .* must "
         r"be 1", lambda: _layer("preprocessor")((tf.constant(["good"]),
                                                  tf.constant(["good", "food"])))),
    call(D.BertPreprocessor, ValueError, r"`inputs` must be one text tensor or a pair, got 3",
         lambda: _layer("preprocessor")((tf.constant(["good"]),) * 3)),
    # Backbone: the base is no model; what it promises, checked inputs, holds for its subclasses
    init(M.Backbone, TypeError, r"`Backbone` is the base of tfnlp's backbones, not a model: build a "
         r"`BertBackbone`", inputs={}, outputs={}),
    call(M.Backbone, ValueError, r"`token_ids` must be in \[0, 30\) \(`vocabulary_size`\)",
         lambda: M.Backbone.__call__(_model("bert"), _bert_inputs(token_ids=[[2, 5, 30, 3, 0]]))),
    # BertBackbone
    init(M.BertBackbone, ValueError, r"`hidden_dim` \(8\) must be divisible by `num_heads` \(3\)",
         **_bert_config(num_heads=3)),
    init(M.BertBackbone, ValueError, r"`num_layers` must be a positive integer, got 0",
         **_bert_config(num_layers=0)),
    init(M.BertBackbone, ValueError, r"`intermediate_dim` must be a positive integer, got 0",
         **_bert_config(intermediate_dim=0)),
    init(M.BertBackbone, ValueError, r"`dropout` must be a float in \[0, 1\), got 1.0",
         **_bert_config(dropout=1.0)),
    init(M.BertBackbone, ValueError, r"`max_sequence_length` must be a positive integer, got 0",
         **_bert_config(max_sequence_length=0)),
    (M.BertBackbone, "init", lambda: M.BertBackbone.from_architecture("bert_huge", vocabulary_size=V),
     ValueError, r"`architecture` must be one of \['bert_base'"),
    (M.BertBackbone, "init", lambda: M.BertBackbone.from_architecture("bert_tiny", vocabulary_size=0),
     ValueError, r"`vocabulary_size` must be a positive integer, got 0"),
    call(M.BertBackbone, TypeError, r"`token_ids` must be an integer tensor, got dtype float64",
         lambda: _model("bert")(_bert_inputs(token_ids=[[2.0, 5.5, 6.0, 3.0, 0.0]]))),
    call(M.BertBackbone, ValueError, r"`token_ids` has no positions \(shape \(1, 0\)\)",
         lambda: _model("bert")({k: np.zeros((1, 0), "int32") for k in _bert_inputs()})),
    call(M.BertBackbone, TypeError, r"`token_ids` must be an integer tensor, got dtype string",
         lambda: _model("bert")(_bert_inputs(token_ids=[["a", "b", "c", "d", "e"]]))),
    call(M.BertBackbone, TypeError, r"`segment_ids` must be an integer tensor, got dtype float",
         lambda: _model("bert")(_bert_inputs(segment_ids=np.zeros((1, 5))))),
    call(M.BertBackbone, ValueError, r"`token_ids` must be in \[0, 30\) \(`vocabulary_size`\), "
         r"got 30", lambda: _model("bert")(_bert_inputs(token_ids=[[2, 5, 30, 3, 0]]))),
    call(M.BertBackbone, ValueError, r"`token_ids` must be in \[0, 30\) .*got -1",
         lambda: _model("bert")(_bert_inputs(token_ids=[[2, 5, -1, 3, 0]]))),
    call(M.BertBackbone, ValueError, r"`segment_ids` must be in \[0, 2\) \(`num_segments`\), got 2",
         lambda: _model("bert")(_bert_inputs(segment_ids=[[0, 0, 2, 0, 0]]))),
    call(M.BertBackbone, ValueError, r"`token_ids` has shape \(1, 20\): its axis T of \(B, T\) is "
         r"20, more than `max_sequence_length` \(16\)", lambda: _model("bert")(_bert_inputs(
             np.ones((1, 20), "int32"), np.zeros((1, 20), "int32"), np.ones((1, 20), "int32")))),
    call(M.BertBackbone, ValueError, r"`token_ids` must have shape \(B, T\) \(rank 2\), got shape "
         r"\(1, 5, 2\)", lambda: _model("bert")(_bert_inputs(token_ids=np.ones((1, 5, 2), "int32")))),
    call(M.BertBackbone, ValueError, r"`padding_mask` has shape \(1, 4\), but its axis T of "
         r"\(B, T\) must be 5", lambda: _model("bert")(_bert_inputs(padding_mask=[[1, 1, 1, 1]]))),
    call(M.BertBackbone, ValueError, r"`segment_ids` has shape \(2, 5\), but its axis B of \(B, T\) "
         r"must be 1", lambda: _model("bert")(_bert_inputs(segment_ids=np.zeros((2, 5), "int32")))),
    # BertClassifier (Keras would cast float ids to int32 before the backbone sees them)
    init(M.BertClassifier, ValueError, r"`backbone` must be a BertBackbone, got Sequential",
         keras.Sequential(), 2),
    (M.BertClassifier, "init", lambda: M.BertClassifier(_model("bert"), num_classes=0),
     ValueError, r"`num_classes` must be a positive integer, got 0"),
    (M.BertClassifier, "init", lambda: M.BertClassifier(_model("bert"), 2, dropout=-0.5),
     ValueError, r"`dropout` must be a float in \[0, 1\), got -0.5"),
    call(M.BertClassifier, TypeError, r"`token_ids` must be an integer tensor, got dtype float64",
         lambda: _model("classifier")(_bert_inputs(token_ids=[[2.0, 5.5, 6.0, 3.0, 0.0]]))),
    call(M.BertClassifier, ValueError, r"`token_ids` must be in \[0, 30\) .*got 31",
         lambda: _model("classifier")(_bert_inputs(token_ids=[[2, 5, 31, 3, 0]]))),
    # int64 ids beyond int32 (Keras' cast to int32 would wrap 2**32 + 5 to 5)
    call(M.BertClassifier, ValueError, r"`token_ids` must be in \[0, 30\) .*got 4294967301",
         lambda: _model("classifier")(_bert_inputs(token_ids=np.array([[2, 5, 2**32 + 5, 3, 0]])))),
    call(M.BertClassifier, ValueError, r"`segment_ids` must be in \[0, 2\) .*got 4294967296",
         lambda: _model("classifier")(_bert_inputs(segment_ids=np.array([[0, 0, 2**32, 0, 0]])))),
    call(M.BertPretrainer, ValueError, r"`masked_positions` must be in \[0, 2147483648\) \(int32, which "
         r"Keras casts to\), got 4294967297", lambda: _model("pretrainer")(_bert_inputs(
             masked_positions=np.array([[1, 2**32 + 1]])))),
    call(M.BertPretrainer, ValueError, r"`token_ids` must be in \[0, 30\) .*got 4294967301",
         lambda: _model("pretrainer")(_bert_inputs(token_ids=np.array([[2, 5, 2**32 + 5, 3, 0]]),
                                                   masked_positions=[[1, 2]]))),
    call(M.BertClassifier, ValueError, r"`padding_mask` has shape \(1, 6\), but its axis T .* must "
         r"be 5", lambda: _model("classifier")(_bert_inputs(padding_mask=np.ones((1, 6))))),
    # BertTokenClassifier
    init(M.BertTokenClassifier, ValueError, r"`backbone` must be a BertBackbone, got Sequential",
         keras.Sequential(), 3),
    (M.BertTokenClassifier, "init", lambda: M.BertTokenClassifier(_model("bert"), num_tags=1),
     ValueError, r"`num_tags` must be at least 2, got 1"),
    (M.BertTokenClassifier, "init", lambda: M.BertTokenClassifier(_model("bert"), 3, crf="yes"),
     ValueError, r"`crf` must be True or False, got 'yes'"),
    (M.BertTokenClassifier, "init", lambda: M.BertTokenClassifier(_model("bert"), 3, tag_names=["O", "O", "X"]),
     ValueError, r"`tag_names` must name each tag once, got \['O'\] more than once"),
    call(M.BertTokenClassifier, ValueError, r"`word_positions` must be in \[0, 5\) .*got 5",
         lambda: _model("tagger")(_bert_inputs(word_positions=[[1, 5]]))),
    call(M.BertTokenClassifier, TypeError, r"`word_positions` must be an integer tensor, got dtype float",
         lambda: _model("tagger")(_bert_inputs(word_positions=[[1.0, 2.5]]))),
    # TransformerTokenClassifier
    init(M.TransformerTokenClassifier, ValueError, r"`hidden_dim` \(10\) must be divisible by `num_heads` \(4\)",
         V, 3, hidden_dim=10),
    call(M.TransformerTokenClassifier, ValueError, r"`word_positions` must be in \[0, 5\) .*got 5",
         lambda: M.TransformerTokenClassifier(V, 3, hidden_dim=8, num_heads=2)(_bert_inputs(word_positions=[[1, 5]]))),
    # BiLSTMTokenClassifier
    init(M.BiLSTMTokenClassifier, ValueError, r"`elmo` must be an ELMoBiLM \(or None\), got Sequential",
         V, 3, elmo=keras.Sequential()),
    call(M.BiLSTMTokenClassifier, ValueError, r"`word_ids` must be in \[0, 30\) .*got 31",
         lambda: M.BiLSTMTokenClassifier(V, 3, word_dim=4, character_dim=4, units=4)(
             {"word_ids": np.array([[2, 31, 3]], "int32"), "character_ids": np.ones((1, 3, 50), "int32")})),
    # BertPretrainer
    init(M.BertPretrainer, ValueError, r"`backbone` must be a BertBackbone, got Sequential",
         keras.Sequential()),
    call(M.BertPretrainer, ValueError, r"`masked_positions` must be in \[0, 5\) .*got 7",
         lambda: _model("pretrainer")(_bert_inputs(masked_positions=[[1, 7]]))),
    call(M.BertPretrainer, TypeError, r"`masked_positions` must be an integer tensor, got dtype "
         r"float", lambda: _model("pretrainer")(_bert_inputs(masked_positions=[[1.0, 2.5]]))),
    call(M.BertPretrainer, ValueError, r"`masked_positions` has shape \(2, 2\), but its axis B .* "
         r"must be 1", lambda: _model("pretrainer")(_bert_inputs(masked_positions=[[1, 2], [1, 2]]))),
    call(M.BertPretrainer, ValueError, r"must be a dict with the keys `token_ids`, `segment_ids`, "
         r"`padding_mask`, `masked_positions`, got a list of 4", lambda: _model("pretrainer")(
             list(_bert_inputs(masked_positions=[[1, 2]]).values()))),
    # UniLMBackbone
    init(M.UniLMBackbone, ValueError, r"`num_segments` must be 6 \(UniLM's segment table has 6 rows\), got 2",
         **_bert_config(num_segments=2)),
    init(M.UniLMBackbone, ValueError, r"`hidden_dim` \(8\) must be divisible by `num_heads` \(5\)",
         **_bert_config(num_heads=5)),
    (M.UniLMBackbone, "init", lambda: M.UniLMBackbone.from_bert(_model("unilm_backbone")),
     ValueError, r"`bert_backbone` must be a BertBackbone, got UniLMBackbone"),
    call(M.UniLMBackbone, ValueError, r"`objective` must be in \[0, 4\) \(one of "
         r"`masks.OBJECTIVES`\), got 4", lambda: _model("unilm_backbone")(
             {k: v for k, v in _unilm_inputs(objective=[4]).items() if k != "masked_positions"})),
    call(M.UniLMBackbone, ValueError, r"`segment_ids` must be in \[0, 2\) \(segments A and B\), "
         r"got 2", lambda: _model("unilm_backbone")({k: v for k, v in _unilm_inputs(
             segment_ids=[[0, 0, 0, 2, 1]]).items() if k != "masked_positions"})),
    call(M.UniLMBackbone, ValueError, r"`objective` has shape \(2,\), but its axis B of \(B,\) "
         r"must be 1", lambda: _model("unilm_backbone")({k: v for k, v in _unilm_inputs(
             objective=[3, 3]).items() if k != "masked_positions"})),
    # UniLM
    (M.UniLM, "init", lambda: M.UniLM(_model("bert")),
     ValueError, r"`backbone` must be a UniLMBackbone, got BertBackbone"),
    call(M.UniLM, ValueError, r"`objective` must be in \[0, 4\) .*got -1",
         lambda: _model("unilm")(_unilm_inputs(objective=[-1]))),
    call(M.UniLM, ValueError, r"`masked_positions` must be in \[0, 5\) .*got 9",
         lambda: _model("unilm")(_unilm_inputs(masked_positions=[[9]]))),
    call(M.UniLM, TypeError, r"`objective` must be an integer tensor, got dtype float",
         lambda: _model("unilm")(_unilm_inputs(objective=[3.0]))),
    call(M.UniLM, ValueError, r"`source_token_ids` must be in \[0, 30\) \(`vocabulary_size`\), "
         r"got 46", lambda: _model("unilm").generate(
             tf.constant([[2, 45, 46, 3]]), end_id=3, mask_id=4, max_length=3)),
    call(M.UniLM, ValueError, r"`mask_id` must be in \[0, 30\) \(`vocabulary_size`\), got 40",
         lambda: _model("unilm").generate(
             tf.constant([[2, 5, 6, 3]]), end_id=3, mask_id=40, max_length=3)),
    call(M.UniLM, ValueError, r"`token_ids` must be in \[0, 30\) .*got 45",
         lambda: _model("unilm").left_to_right_log_probs(tf.constant([[2, 45, 3]]), mask_id=4)),
    call(M.UniLM, ValueError, r"`mask_id` must be in \[0, 30\) \(`vocabulary_size`\), got 30",
         lambda: _model("unilm")({"token_ids": np.array([[2, 5, 3]]), "padding_mask": np.ones((1, 3)),
                                  "mask_id": np.array([30])})),
    call(M.UniLM, ValueError, r"left-to-right LM batch .* missing: \['padding_mask'\]",
         lambda: _model("unilm")({"token_ids": np.array([[2, 5, 3]]), "mask_id": np.array([4])})),
    # TransformerClassifier
    init(M.TransformerClassifier, ValueError, r"`pooling` must be one of \('mean', 'first'\), got "
         r"'max'", V, 2, pooling="max"),
    init(M.TransformerClassifier, ValueError, r"`activation` must be one of \(None, 'softmax'\)",
         V, 2, activation="relu"),
    init(M.TransformerClassifier, ValueError, r"`hidden_dim` \(8\) must be divisible by "
         r"`num_heads` \(3\)", V, 2, hidden_dim=8, num_heads=3),
    init(M.TransformerClassifier, ValueError, r"`num_classes` must be a positive integer, got 0",
         V, 0),
    call(M.TransformerClassifier, TypeError, r"`token_ids` must be an integer tensor, got dtype "
         r"float", lambda: _model("text_classifier")(
             _bert_inputs(token_ids=[[2.0, 5.5, 6.0, 3.0, 0.0]]))),
    call(M.TransformerClassifier, ValueError, r"`token_ids` must be in \[0, 30\) .*got 30",
         lambda: _model("text_classifier")(_bert_inputs(token_ids=[[2, 5, 30, 3, 0]]))),
    call(M.TransformerClassifier, ValueError, r"`segment_ids` must be in \[0, 2\) .*got 5",
         lambda: _model("text_classifier")(_bert_inputs(segment_ids=[[0, 0, 5, 0, 0]]))),
    call(M.TransformerClassifier, ValueError, r"must be a dict with the keys `token_ids`, "
         r"`segment_ids`, `padding_mask`, got a list of 3",
         lambda: _model("text_classifier")(list(_bert_inputs().values()))),
    call(M.TransformerClassifier, ValueError, r"`segment_ids` has shape \(1, 6\), but its axis T "
         r".* must be 5", lambda: _model("text_classifier")(
             _bert_inputs(segment_ids=np.zeros((1, 6), "int32")))),
    call(M.TransformerClassifier, ValueError, r"`token_ids` has no positions \(shape \(1, 0\)\)",
         lambda: _model("text_classifier")({k: np.zeros((1, 0), "int32") for k in _bert_inputs()})),
    # TransformerSeq2Seq
    init(M.TransformerSeq2Seq, ValueError, r"`hidden_dim` \(8\) must be divisible by `num_heads` "
         r"\(3\)", V, hidden_dim=8, num_heads=3),
    init(M.TransformerSeq2Seq, ValueError, r"`target_vocabulary_size` must be a positive integer, "
         r"got 0", V, 0),
    init(M.TransformerSeq2Seq, ValueError, r"`intermediate_dim` must be a positive integer, got 0",
         V, hidden_dim=8, num_heads=2, intermediate_dim=0),
    (M.TransformerSeq2Seq, "init", lambda: M.TransformerSeq2Seq.from_architecture("transformer_huge", V),
     ValueError, r"`architecture` must be one of \['transformer_base'"),
    call(M.TransformerSeq2Seq, ValueError, r"`encoder_token_ids` must be in \[0, 30\) "
         r"\(`source_vocabulary_size`\), got 30", lambda: _model("seq2seq")(
             _seq2seq_inputs(encoder_token_ids=[[5, 6, 30, 3]]))),
    call(M.TransformerSeq2Seq, ValueError, r"`decoder_token_ids` must be in \[0, 20\) "
         r"\(`target_vocabulary_size`.*\), got 25", lambda: _model("seq2seq")(
             _seq2seq_inputs(decoder_token_ids=[[2, 8, 25]]))),
    call(M.TransformerSeq2Seq, ValueError, r"`decoder_token_ids` must be in \[0, 20\) .*got -3",
         lambda: _model("seq2seq")(_seq2seq_inputs(decoder_token_ids=[[2, 8, -3]]))),
    call(M.TransformerSeq2Seq, TypeError, r"`decoder_token_ids` must be an integer tensor, got "
         r"dtype float", lambda: _model("seq2seq")(
             _seq2seq_inputs(decoder_token_ids=[[2.0, 8.0, 9.5]]))),
    call(M.TransformerSeq2Seq, ValueError, r"must be a dict with the keys `encoder_token_ids`, "
         r".*got a tuple of 4", lambda: _model("seq2seq")(tuple(_seq2seq_inputs().values()))),
    call(M.TransformerSeq2Seq, ValueError, r"`decoder_padding_mask` has shape \(1, 4\), but its "
         r"axis T .* must be 3", lambda: _model("seq2seq")(
             _seq2seq_inputs(decoder_padding_mask=np.ones((1, 4), "int32")))),
    call(M.TransformerSeq2Seq, ValueError, r"`decoder_token_ids` has shape \(2, 3\), but its axis "
         r"B .* must be 1", lambda: _model("seq2seq")(
             _seq2seq_inputs(decoder_token_ids=np.ones((2, 3), "int32")))),
    call(M.TransformerSeq2Seq, ValueError, r"`encoder_token_ids` has no positions \(shape \(1, 0\)\)",
         lambda: _model("seq2seq")(_seq2seq_inputs(encoder_token_ids=np.zeros((1, 0), "int32"),
                                                   encoder_padding_mask=np.zeros((1, 0), "int32")))),
    call(M.TransformerSeq2Seq, ValueError, r"`start_id` must be in \[0, 20\) .*got 25",
         lambda: _model("seq2seq").generate(
             tf.constant([[5, 6, 7, 3]]), start_id=25, end_id=3, max_length=4)),
    call(M.TransformerSeq2Seq, ValueError, r"`encoder_token_ids` must be in \[0, 30\) .*got 40",
         lambda: _model("seq2seq").generate(
             tf.constant([[5, 6, 40, 3]]), start_id=2, end_id=3, max_length=4)),
    call(M.TransformerSeq2Seq, ValueError, r"`encoder_token_ids` must be an int tensor of shape "
         r"\(B, S\), got float32", lambda: _model("seq2seq").encode(tf.constant([[5.0, 6.0]]))),
    # ELMoBiLM
    init(M.ELMoBiLM, ValueError, r"`word_vocabulary_size` must be a positive integer, got 0",
         **_elmo_config(word_vocabulary_size=0)),
    init(M.ELMoBiLM, ValueError, r"`num_sampled` \(40\) must be smaller than `vocabulary_size` "
         r"\(30\)", **_elmo_config(num_sampled=40)),
    init(M.ELMoBiLM, ValueError, r"`units` must be a positive integer, got 0",
         **_elmo_config(units=0)),
    init(M.ELMoBiLM, ValueError, r"`cell_clip` must be a positive number, got -3.0",
         **_elmo_config(cell_clip=-3.0)),
    init(M.ELMoBiLM, ValueError, r"`max_characters` \(6\) must be at least the widest filter of "
         r"`filters` \(7\)", **_elmo_config(filters=((1, 4), (7, 4)))),
    call(M.ELMoBiLM, TypeError, r"`character_ids` must be an integer tensor, got dtype float",
         lambda: _model("bilm")(_characters(1.5, dtype="float32"))),
    call(M.ELMoBiLM, ValueError, r"`character_ids` must be in \[0, 262\) "
         r"\(`character_vocabulary_size`\), got 300", lambda: _model("bilm")(_characters(300))),
    call(M.ELMoBiLM, ValueError, r"`character_ids` must have shape \(B, T, C\) \(rank 3\)",
         lambda: _model("bilm")(np.ones((1, 3), "int32"))),
    # A list of one is checked as its tensor (Keras would take it unchecked).
    call(M.ELMoBiLM, TypeError, r"`character_ids` must be an integer tensor, got dtype float",
         lambda: _model("bilm")([_characters(1.5, dtype="float32")])),
    call(M.ELMoBiLM, ValueError, r"`character_ids` must be in \[0, 262\) .*got 300",
         lambda: _model("bilm")((_characters(300),))),
    call(M.ELMoBiLM, ValueError, r"`target_ids` must be in \[0, 30\) \(`vocabulary_size`\), got 30",
         lambda: _model("bilm").word_losses(
             tf.zeros((1, 2, 3, 8)), {"next_word_ids": tf.fill((1, 3), 30),
                                      "previous_word_ids": tf.zeros((1, 3), tf.int32)})),
    # ELMoEmbedder
    init(M.ELMoEmbedder, ValueError, r"`bilm` must be an ELMoBiLM, got Sequential",
         keras.Sequential()),
    (M.ELMoEmbedder, "init", lambda: M.ELMoEmbedder(_model("bilm"), dropout=1.0),
     ValueError, r"`dropout` must be a float in \[0, 1\), got 1.0"),
    call(M.ELMoEmbedder, TypeError, r"`character_ids` must be an integer tensor, got dtype float",
         lambda: _model("embedder")(_characters(1.5, dtype="float32"))),
    call(M.ELMoEmbedder, ValueError, r"`character_ids` must be in \[0, 262\) .*got -2",
         lambda: _model("embedder")(_characters(-2))),
]

# Cases whose check is Keras' own (clear, but not raised from tfnlp code).
KERAS_CHECKS = {(L.Dropout, r"`rate`.*between 0 and 1.*rate=1.5")}


def _case_id(case):
    cls, kind, _, error, message = case
    return f"{cls.__name__}-{kind}-{error.__name__}-{message[:40]}"


@pytest.mark.parametrize(
    "cls, kind, action, error, message", CASES, ids=[_case_id(c) for c in CASES]
)
def test_bad_input_raises_a_clear_error(cls, kind, action, error, message):
    assert not issubclass(error, tf.errors.OpError)  # the table expects Python-level errors
    # Any exception is caught, so that a TensorFlow kernel error (an OpError,
    # which is no ValueError/TypeError) or another type is reported as such.
    with pytest.raises(Exception) as info:  # noqa: B017 (the type is checked below)
        action()
    raised = info.value
    assert not isinstance(raised, tf.errors.OpError), (
        f"a TensorFlow kernel error instead of a checked {error.__name__}: {raised!r}"
    )
    assert type(raised) is error, (
        f"expected {error.__name__}, got {type(raised).__name__}: {raised}"
    )
    assert re.search(message, str(raised)), f"{message!r} not in {str(raised)!r}"
    # The message names the offending argument, e.g. `token_ids` or `inputs[0]`.
    assert re.search(r"`[^`\s]+`", str(raised)), f"no `argument` named in {str(raised)!r}"
    assert "function_node" not in str(info.value)  # no kernel-level TensorFlow message
    # The message alone: no Keras dump of every argument's value after it.
    assert "Arguments received" not in str(raised), str(raised)[:500]
    # Raised by tfnlp's own checks, not from deep inside TensorFlow or Keras.
    origin = str(info.traceback[-1].path)
    if (cls, message) in KERAS_CHECKS:
        assert f"{os.sep}keras{os.sep}" in origin, origin
    else:
        assert f"{os.sep}tfnlp{os.sep}" in origin and f"{os.sep}tests{os.sep}" not in origin, origin


def test_the_exception_list_names_cases_of_the_table():
    cases = {(cls, message) for cls, _, _, _, message in CASES}
    assert KERAS_CHECKS <= cases


def _public_classes(module):
    """The layers and models of `module` (not its plain data classes, e.g. `data.LabelledData`)."""
    return {
        getattr(module, name) for name in module.__all__
        if inspect.isclass(getattr(module, name)) and issubclass(getattr(module, name), keras.layers.Layer)
    }


@pytest.mark.parametrize("module", [layers, data, models], ids=lambda m: m.__name__)
def test_every_public_class_has_bad_configuration_and_bad_call_cases(module):
    for kind in ("init", "call"):
        covered = {cls for cls, case_kind, *_ in CASES if case_kind == kind}
        missing = _public_classes(module) - covered
        assert not missing, f"no {kind!r} case for {sorted(c.__name__ for c in missing)}"


# --- In graphs, under XLA, and for checkpoints ---


def test_out_of_range_ids_in_a_graph_fail_at_run_time_with_the_same_message():
    backbone = _model("bert")
    graph = tf.function(lambda inputs: backbone(inputs)["sequence_output"])
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"`token_ids` must be in \[0, 30\)"):
        graph({k: tf.constant(v) for k, v in _bert_inputs(token_ids=[[2, 5, 30, 3, 0]]).items()})
    head = _layer("mlm_head")
    positions = tf.function(
        lambda h, p: head(h, masked_positions=p),
        input_signature=[tf.TensorSpec([None, None, 8]), tf.TensorSpec([None, None], tf.int32)],
    )
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match=r"`masked_positions` must be in \[0, the length of `inputs`\)",
    ):
        positions(x(), tf.constant([[1, 5], [0, 3]]))


def test_the_checks_compile_with_xla_and_leave_valid_outputs_unchanged():
    backbone = _model("bert")
    inputs = {k: tf.constant(v) for k, v in _bert_inputs().items()}
    compiled = tf.function(lambda i: backbone(i)["sequence_output"], jit_compile=True)
    np.testing.assert_allclose(
        compiled(inputs), backbone(inputs)["sequence_output"], atol=1e-5
    )


def test_a_vocabulary_that_does_not_belong_to_the_checkpoint(tmp_path):
    models.save_google_checkpoint(_model("bert"), str(tmp_path))
    extra = [f"extra{i}" for i in range(26)]
    data.save_vocabulary(VOCABULARY + extra, str(tmp_path / "vocab.txt"))  # 33 tokens, not 30
    with pytest.raises(ValueError, match=r"vocab.txt has 33 tokens but the checkpoint's "
                                         r"`vocab_size` is only 30"):
        models.load_google_checkpoint(str(tmp_path))
    # Fewer tokens than embedding rows is valid (releases pad the embedding).
    data.save_vocabulary(VOCABULARY, str(tmp_path / "vocab.txt"))
    assert models.load_google_checkpoint(str(tmp_path)).vocabulary_size == 30
    os.remove(tmp_path / "vocab.txt")
    config = json.loads((tmp_path / "bert_config.json").read_text())
    (tmp_path / "bert_config.json").write_text(json.dumps({**config, "vocab_size": 31}))
    with pytest.raises(ValueError, match=r"word_embeddings: shape \(30, 8\) does not fit"):
        models.load_google_checkpoint(str(tmp_path))


def test_only_tfnlps_own_errors_are_spared_keras_argument_dump():
    from tfnlp import _checks

    def foreign():
        raise ValueError("raised outside tfnlp")  # this file is not tfnlp's code

    for action, ours in ((lambda: _checks.positive_int("units", -1), True), (foreign, False)):
        with pytest.raises(ValueError) as info, _checks.errors_without_input_dump():
            action()
        assert getattr(info.value, "_keras_call_info_injected", False) is ours


@pytest.mark.parametrize("family", families.FAMILIES)
def test_every_family_names_its_id_input_when_its_rank_or_range_is_wrong(family):
    # The registry's side of the table above: a new family gets these cases
    # by being registered (its float ids: tests/models/test_model_harness.py).
    model = families.model(family)
    x, _, _ = families.first_batch(family)
    name, ids, replaced = families.id_input(family, x)
    ids = np.array(ids)  # a copy, changed below
    rank = ids.ndim
    with pytest.raises(ValueError, match=rf"^`{name}` must have shape \(B, .*\) \(rank {rank}\), "
                                         rf"got shape \({', '.join(map(str, ids.shape[1:]))},?\)\.$"):
        model(replaced(ids[0]))
    ids.flat[0] = 10_000
    with pytest.raises(ValueError, match=rf"^`{name}` must be in \[0, \d+\) \(`\w+`\), got 10000\.$"):
        model(replaced(ids))
