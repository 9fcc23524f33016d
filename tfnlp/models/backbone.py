"""The base of tfnlp's backbones: what a task model needs of the encoder it is built on."""

import keras

from tfnlp.models._mixins import ChecksInputs, FromConfig, FromPresetAlias


@keras.saving.register_keras_serializable(package="tfnlp")
class Backbone(ChecksInputs, FromConfig, FromPresetAlias, keras.Model):
    """An encoder of token ids that task models (classifiers, pretrainers) build on.

    A backbone is a Functional model whose config is its constructor's
    arguments. What a task model may rely on, and all it may rely on:

    - `vocabulary_size` and `num_segments` (ints): the id ranges of its
      `token_ids` and `segment_ids` inputs (a preprocessor or exporter
      checks its tokenizer and text pairs against them);
    - `encode(inputs, output_positions=None)`: the last layer's output for
      the model's input dict, optionally only at `output_positions`
      `(B, P)` (what a head reads);
    - `from_architecture(architecture, vocabulary_size, **overrides)`: a
      published size with random weights;
    - inputs checked before Keras casts them (`_checked_inputs`), so bad ids
      are named rather than failing inside TensorFlow.

    `BertBackbone` and `UniLMBackbone` are backbones. `ELMoBiLM` is not: it
    is a task model (a bidirectional language model with its word softmax,
    trained on its own) whose layers `ELMoEmbedder` mixes into features for
    other models; it reads characters, not token ids and segments.

    Args:
        inputs: the Functional model's inputs (a dict of `keras.Input`s).
        outputs: its outputs (a dict).
        **kwargs: base model arguments (`name`, `dtype`, ...).

    Example:

    >>> from tfnlp import models
    >>> backbone = models.BertBackbone.from_architecture("bert_tiny", vocabulary_size=100)
    >>> isinstance(backbone, Backbone), backbone.vocabulary_size, backbone.num_segments
    (True, 100, 2)
    """

    def __init__(self, *, inputs, outputs, **kwargs):
        if type(self) is Backbone:
            raise TypeError(
                "`Backbone` is the base of tfnlp's backbones, not a model: build a `BertBackbone` or "
                "a `UniLMBackbone` (or subclass `Backbone`)."
            )
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

    def encode(self, inputs, output_positions=None):
        """The last layer's output `(B, T, H)`, or `(B, P, H)` at `output_positions`."""
        raise NotImplementedError

    @classmethod
    def from_architecture(cls, architecture, vocabulary_size, **overrides):
        """A backbone of a published size (random weights)."""
        raise NotImplementedError
