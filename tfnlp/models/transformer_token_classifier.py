"""A Transformer tagger trained from scratch: the text classifier's encoder, a tag per word."""

import keras

from tfnlp import _checks
from tfnlp.data.task_preprocessor import serialized
from tfnlp.layers.dropout import Dropout
from tfnlp.models._mixins import FromConfig
from tfnlp.models._transformer_encoder import build_encoder, encode, encoder_arguments
from tfnlp.models.bert_backbone import input_specs
from tfnlp.models.bert_pretrainer import BACKBONE_INPUTS
from tfnlp.models.text_classifier import checked_preprocessor
from tfnlp.models.token_classifier import TokenClassifier, tagger_arguments
from tfnlp.training.optimizers import bert_adamw


@keras.saving.register_keras_serializable(package="tfnlp")
class TransformerTokenClassifier(FromConfig, TokenClassifier):
    """A tag for every word from a Transformer encoder trained from scratch: no pretraining.

    The encoder of `tfnlp.models.TransformerClassifier` (token and segment
    embeddings, sinusoidal positions, `num_layers` post-LN blocks that never
    attend to padding) reads `[CLS] pieces [SEP]` as `BertTokenClassifier`
    does, and each word is tagged by `Dense(num_tags)` (float32) on the last
    block's output at its first WordPiece; the last block runs at those
    positions only. It is the control for the pretrained taggers: the same
    inputs (`tfnlp.data.TaggerPreprocessor`), loss, CRF, metrics, words in
    and tags out as `BertTokenClassifier` (see `TokenClassifier`), without
    a pretrained backbone. `compile()` without arguments uses AdamW at 1e-3
    (weight decay 0.01 off biases and LayerNorm), as the classifier from
    scratch does.

    Inputs: int32 `token_ids`, `segment_ids`, `padding_mask` `(B, T)` and
    `word_positions` `(B, W)` (each word's first-piece position; 0 for no
    word). The sinusoidal positions have no table, so any `T` is read.

    Args:
        vocabulary_size: int; may be left out with a `preprocessor`.
        num_tags: int; may be left out when `tag_names` is given.
        tag_names: optional list of tag names, one per tag (id order).
        num_layers: int, number of `TransformerBlock`s.
        num_heads: int; must divide `hidden_dim`.
        hidden_dim: int.
        intermediate_dim: int, FFN size; defaults to `4 * hidden_dim`.
        dropout: float in [0, 1), on embeddings, attention, sublayers and
            the word vectors.
        num_segments: int, size of the segment table.
        preprocessor: optional `tfnlp.data.BertPreprocessor`, so that the
            model takes words and text.
        crf: bool, a linear-chain CRF over the word logits (see
            `BertTokenClassifier`).
        **kwargs: base model arguments (`name`, `dtype`, ...).

    Returns:
        float32 word logits `(B, W, num_tags)`.

    Example:

    >>> from tfnlp import data
    >>> vocab = list(data.SPECIAL_TOKENS) + ["ada", "wrote", "in", "paris"]
    >>> preprocessor = data.BertPreprocessor(data.WordPieceTokenizer(vocab), 8)
    >>> tagger = TransformerTokenClassifier(tag_names=["O", "B-PER", "B-LOC"], hidden_dim=16,
    ...                                     preprocessor=preprocessor, crf=True)
    >>> tagger.compile()
    >>> history = tagger.fit([["Ada", "wrote"], ["in", "Paris"]], [["B-PER", "O"], ["O", "B-LOC"]],
    ...                      verbose=0)
    >>> [len(tags) for tags in tagger.predict_tags([["Ada", "wrote", "in", "Paris"], ["Paris"]])]
    [4, 1]
    """

    def __init__(self, vocabulary_size=None, num_tags=None, tag_names=None, num_layers=2, num_heads=4,
                 hidden_dim=128, intermediate_dim=None, dropout=0.1, num_segments=2, preprocessor=None,
                 crf=False, **kwargs):
        (vocabulary_size, preprocessor, num_layers, num_heads, hidden_dim, intermediate_dim, dropout,
         num_segments) = encoder_arguments(vocabulary_size, preprocessor, num_layers, num_heads,
                                                 hidden_dim, intermediate_dim, dropout, num_segments)
        preprocessor = checked_preprocessor(preprocessor, vocabulary_size)
        num_tags, tag_names, crf = tagger_arguments(num_tags, tag_names, crf, preprocessor)
        dtype = kwargs.pop("dtype", None)

        # === Layers ===
        build_encoder(self, vocabulary_size, num_layers, num_heads, hidden_dim, intermediate_dim,
                            dropout, num_segments, dtype)
        self.output_dropout = Dropout(dropout, dtype="float32", name="output_dropout")
        self.output_dense = keras.layers.Dense(num_tags, dtype="float32", name="logits")
        self._head_init(num_tags, tag_names, crf)

        # === Functional model ===
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
                  for name in (*BACKBONE_INPUTS, "word_positions")}
        words = encode(self, inputs, output_positions=inputs["word_positions"])  # (B, W, hidden_dim)
        logits = self.output_dense(self.output_dropout(keras.ops.cast(words, "float32")))
        super().__init__(inputs=inputs, outputs=logits, **kwargs)

        # === Config ===
        self._tag_config(num_tags, tag_names, preprocessor)
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.dropout = dropout
        self.num_segments = num_segments

    def _checked_inputs(self, inputs):
        specs = {**input_specs(self.vocabulary_size, self.num_segments),
                 "word_positions": ("BW", None, None)}
        with _checks.errors_without_input_dump():
            inputs = _checks.model_inputs(inputs, specs)
            inputs = _checks.has_positions(inputs, {
                "token_ids": "every sentence needs at least its [CLS] token."})
        return _checks.position_inputs_in_range(inputs, ["word_positions"])

    def _default_optimizer(self):
        return bert_adamw(1e-3)

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(self.token_embedding.dtype_policy),
            "vocabulary_size": self.vocabulary_size,
            "num_tags": self.num_tags,
            "tag_names": self.tag_names,
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "hidden_dim": self.hidden_dim,
            "intermediate_dim": self.intermediate_dim,
            "dropout": self.dropout,
            "num_segments": self.num_segments,
            "preprocessor": serialized(self.preprocessor),
            "crf": self.crf is not None,
        }
