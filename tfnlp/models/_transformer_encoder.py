"""The encoder tfnlp's from-scratch Transformer models share.

`x = sqrt(d) * TokenEmbedding + SinusoidalPositions + SegmentEmbedding`,
dropout, then blocks: the Transformer of Vaswani et al. as the text
classifier and the tagger from scratch use it. Token embeddings are drawn
from `N(0, 1 / hidden_dim)` and multiplied by `sqrt(hidden_dim)` (section
3.4 of the paper), so they start at unit scale, like the sine/cosine
encoding they are added to; a segment embedding (0 for `[CLS] A [SEP]`, 1
for `B [SEP]`); then `num_layers` post-LN `TransformerBlock`s (ReLU FFN)
that never attend to padding. `build_encoder` makes the layers the model's
attributes (`token_embedding`, `segment_embedding`, `position_encoding`,
`embeddings_add`, `embeddings_dropout`, `transformer_layers`), so `.keras`
files keep their weight paths. Functions, not a base class: a task's class
chain stays short (`tests/models/test_training_steps.py`).
"""

import math

import keras

from tfnlp import _checks
from tfnlp.data.bert_preprocessor import BertPreprocessor
from tfnlp.layers.dropout import Dropout
from tfnlp.layers.sinusoidal_position_encoding import SinusoidalPositionEncoding
from tfnlp.layers.transformer_block import TransformerBlock


def encoder_arguments(vocabulary_size, preprocessor, num_layers, num_heads, hidden_dim,
                      intermediate_dim, dropout, num_segments):
    """The encoder's arguments checked, `vocabulary_size` read from a `BertPreprocessor` (or its
    config) when not given, `intermediate_dim` defaulting to `4 * hidden_dim`."""
    if isinstance(preprocessor, dict):
        preprocessor = keras.saving.deserialize_keras_object(preprocessor)
    if vocabulary_size is None and isinstance(preprocessor, BertPreprocessor):
        vocabulary_size = preprocessor.tokenizer.vocabulary_size()
    if vocabulary_size is None:
        raise ValueError("`vocabulary_size` is required (or give a `preprocessor`).")
    vocabulary_size = _checks.positive_int("vocabulary_size", vocabulary_size)
    num_layers = _checks.positive_int("num_layers", num_layers)
    num_heads = _checks.positive_int("num_heads", num_heads)
    hidden_dim = _checks.positive_int("hidden_dim", hidden_dim)
    intermediate_dim = _checks.positive_int(
        "intermediate_dim", 4 * hidden_dim if intermediate_dim is None else intermediate_dim)
    dropout = _checks.rate("dropout", dropout)
    num_segments = _checks.positive_int("num_segments", num_segments)
    if hidden_dim % num_heads:
        raise ValueError(f"`hidden_dim` ({hidden_dim}) must be divisible by `num_heads` ({num_heads}).")
    return (vocabulary_size, preprocessor, num_layers, num_heads, hidden_dim, intermediate_dim,
            dropout, num_segments)


def build_encoder(model, vocabulary_size, num_layers, num_heads, hidden_dim, intermediate_dim, dropout,
                  num_segments, dtype):
    """Makes the encoder's layers attributes of `model` (before its Functional constructor)."""
    model.token_embedding = keras.layers.Embedding(
        vocabulary_size, hidden_dim,
        embeddings_initializer=keras.initializers.RandomNormal(stddev=hidden_dim**-0.5),
        dtype=dtype, name="token_embedding",
    )
    model.segment_embedding = keras.layers.Embedding(
        num_segments, hidden_dim,
        embeddings_initializer=keras.initializers.TruncatedNormal(stddev=0.02),
        dtype=dtype, name="segment_embedding",
    )
    model.position_encoding = SinusoidalPositionEncoding(dtype=dtype, name="position_encoding")
    model.embeddings_add = keras.layers.Add(dtype=dtype, name="embeddings_add")
    model.embeddings_dropout = Dropout(dropout, dtype=dtype, name="embeddings_dropout")
    model.transformer_layers = [
        TransformerBlock(num_heads, intermediate_dim, dropout=dropout, activation="relu", dtype=dtype,
                         name=f"transformer_layer_{i}")
        for i in range(num_layers)
    ]


def encode(model, inputs, output_positions=None):
    """The last block's output `(B, T, hidden_dim)` for the inputs' `token_ids`, `segment_ids` and
    `padding_mask`; at `output_positions` `(B, P)` only, if given (the last block computes those
    alone)."""
    hidden_dim = model.token_embedding.output_dim
    tokens = model.token_embedding(inputs["token_ids"]) * math.sqrt(hidden_dim)
    x = model.embeddings_add(
        [tokens, model.position_encoding(tokens), model.segment_embedding(inputs["segment_ids"])])
    x = model.embeddings_dropout(x)
    for index, block in enumerate(model.transformer_layers):
        last = index == len(model.transformer_layers) - 1
        x = block(x, padding_mask=inputs["padding_mask"], output_positions=output_positions if last else None)
    return x
