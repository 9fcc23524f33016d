"""The BERT encoder as a Keras Functional model."""

import copy

import keras

from tfnlp import _checks
from tfnlp.layers.activations import gelu_approximate
from tfnlp.layers.dropout import Dropout
from tfnlp.layers.layer_normalization import LayerNormalization
from tfnlp.layers.position_embedding import PositionEmbedding
from tfnlp.layers.transformer_block import TransformerBlock
from tfnlp.models.backbone import Backbone

# Sizes of Google's released BERT models (Turc et al., 2019 for the small ones).
BERT_ARCHITECTURES = {
    "bert_tiny": {"num_layers": 2, "hidden_dim": 128, "num_heads": 2},
    "bert_mini": {"num_layers": 4, "hidden_dim": 256, "num_heads": 4},
    "bert_small": {"num_layers": 4, "hidden_dim": 512, "num_heads": 8},
    "bert_medium": {"num_layers": 8, "hidden_dim": 512, "num_heads": 8},
    "bert_base": {"num_layers": 12, "hidden_dim": 768, "num_heads": 12},
    "bert_large": {"num_layers": 24, "hidden_dim": 1024, "num_heads": 16},
}


# `activation` -> what the blocks (and the masked-LM heads) compute: exact
# GELU (erf), or the tanh approximation google-research/bert computes today.
ACTIVATIONS = {"gelu": "gelu", "gelu_approximate": gelu_approximate}


def input_specs(vocabulary_size, num_segments):
    """`{input: (shape, id bound, its name)}` of BERT-style inputs, see `_checks.model_inputs`."""
    return {
        "token_ids": ("BT", vocabulary_size, "`vocabulary_size`"),
        "segment_ids": ("BT", num_segments, "`num_segments`"),
        "padding_mask": ("BT", None, None),
    }


def bert_kernel_initializer():
    """BERT initialises every kernel from a truncated normal with stddev 0.02."""
    return keras.initializers.TruncatedNormal(stddev=0.02)


@keras.saving.register_keras_serializable(package="tfnlp")
class BertBackbone(Backbone):
    """BERT: token + segment + learned position embeddings and post-LN blocks.

    `embeddings = LayerNorm(token + segment + position)`, dropout, then
    `num_layers` post-LN `TransformerBlock`s with GELU (exact, or its tanh
    approximation), and a pooler:
    `tanh(Dense(sequence_output[:, 0]))`.

    Inputs (a dict, all int32 `(B, T)`, any `T <= max_sequence_length`):
    `token_ids`, `segment_ids` (0 / 1), `padding_mask` (1 real, 0 padding;
    int so that `tf.distribute` can feed it). Outputs (a dict):
    `sequence_output` `(B, T, hidden_dim)` and `pooled_output`
    `(B, hidden_dim)`.

    Bad inputs (given as the documented dict) fail at the call with an
    error naming the input: a float or string id is a TypeError; mismatched
    shapes, `T = 0`, `T > max_sequence_length` or an id outside
    `[0, vocabulary_size)` (`[0, num_segments)` for segments) a ValueError.
    In a graph (`tf.function`, `fit`, a SavedModel) the id ranges are
    checked by assertions, an `InvalidArgumentError` at run time with the
    same message; XLA (`jit_compile`) compiles those out.

    Args:
        vocabulary_size: int.
        num_layers: int.
        num_heads: int; must divide `hidden_dim`.
        hidden_dim: int.
        intermediate_dim: int, FFN size; defaults to `4 * hidden_dim`.
        dropout: float in [0, 1), on embeddings, attention and sublayers.
        max_sequence_length: int, size of the position table.
        num_segments: int, size of the segment table.
        layer_norm_epsilon: float > 0, epsilon of every layer norm (the
            embeddings' and the blocks'); 1e-12 as Google released BERT,
            1e-5 in microsoft/unilm v1 and PyTorch's default.
        activation: `"gelu"` (exact, with erf: Hugging Face's `"gelu"`,
            Google's October 2018 code) or `"gelu_approximate"` (the tanh
            form google-research/bert computes since February 2019), in
            the blocks' feed-forward layers and the task models' masked-LM
            transform. `docs/weights.md` says which released checkpoints
            use which.
        **kwargs: base model arguments (`name`, `dtype`, ...).

    Example:

    >>> backbone = BertBackbone.from_architecture("bert_tiny", vocabulary_size=1000)
    >>> outputs = backbone({
    ...     "token_ids": tf.constant([[2, 45, 67, 3, 0]]),
    ...     "segment_ids": tf.zeros((1, 5), tf.int32),
    ...     "padding_mask": tf.constant([[1, 1, 1, 1, 0]]),
    ... })
    >>> outputs["sequence_output"].shape, outputs["pooled_output"].shape
    (TensorShape([1, 5, 128]), TensorShape([1, 128]))

    References:
        Devlin et al., "BERT: Pre-training of Deep Bidirectional Transformers
        for Language Understanding", 2019.
    """

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_heads,
        hidden_dim,
        intermediate_dim=None,
        dropout=0.1,
        max_sequence_length=512,
        num_segments=2,
        layer_norm_epsilon=1e-12,
        activation="gelu",
        **kwargs,
    ):
        vocabulary_size = _checks.positive_int("vocabulary_size", vocabulary_size)
        num_layers = _checks.positive_int("num_layers", num_layers)
        num_heads = _checks.positive_int("num_heads", num_heads)
        hidden_dim = _checks.positive_int("hidden_dim", hidden_dim)
        intermediate_dim = _checks.positive_int(
            "intermediate_dim", 4 * hidden_dim if intermediate_dim is None else intermediate_dim
        )
        dropout = _checks.rate("dropout", dropout)
        max_sequence_length = _checks.positive_int("max_sequence_length", max_sequence_length)
        num_segments = _checks.positive_int("num_segments", num_segments)
        layer_norm_epsilon = _checks.positive_float("layer_norm_epsilon", layer_norm_epsilon)
        activation = _checks.one_of("activation", activation, tuple(ACTIVATIONS))
        if hidden_dim % num_heads:
            raise ValueError(
                f"`hidden_dim` ({hidden_dim}) must be divisible by `num_heads` ({num_heads})."
            )
        dtype = kwargs.pop("dtype", None)
        initializer = bert_kernel_initializer()

        # === Layers ===
        self.token_embedding = keras.layers.Embedding(
            vocabulary_size, hidden_dim, embeddings_initializer=initializer,
            dtype=dtype, name="token_embedding",
        )
        self.segment_embedding = keras.layers.Embedding(
            num_segments, hidden_dim, embeddings_initializer=initializer,
            dtype=dtype, name="segment_embedding",
        )
        self.position_embedding = PositionEmbedding(
            max_sequence_length, initializer=initializer, dtype=dtype, name="position_embedding"
        )
        self.embeddings_add = keras.layers.Add(dtype=dtype, name="embeddings_add")
        self.embeddings_norm = LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=dtype, name="embeddings_norm"
        )
        self.embeddings_dropout = Dropout(dropout, dtype=dtype, name="embeddings_dropout")
        self.transformer_layers = [
            TransformerBlock(
                num_heads, intermediate_dim, dropout=dropout, activation=ACTIVATIONS[activation],
                layer_norm_epsilon=layer_norm_epsilon, kernel_initializer=initializer, dtype=dtype,
                name=f"transformer_layer_{i}",
            )
            for i in range(num_layers)
        ]
        self.pooler = keras.layers.Dense(
            hidden_dim, activation="tanh", kernel_initializer=initializer, dtype=dtype, name="pooler"
        )

        # === Functional model ===
        inputs = self._functional_inputs()
        x = self.encode(inputs)
        pooled = self.pooler(x[:, 0, :])
        super().__init__(
            inputs=inputs,
            outputs={"sequence_output": x, "pooled_output": pooled},
            dtype=dtype,
            **kwargs,
        )

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.dropout = dropout
        self.max_sequence_length = max_sequence_length
        self.num_segments = num_segments
        self.layer_norm_epsilon = layer_norm_epsilon
        self.activation = activation

    def _checked_inputs(self, inputs, **position_inputs):
        """The inputs checked before Keras casts them (dtypes, shapes, id ranges).

        A task model that calls `encode` adds its position inputs as
        `name=pattern` (`masked_positions="BP"`): ints in `[0, T)`.
        """
        specs = {**self._input_specs(), **{
            name: (pattern, None, None) for name, pattern in position_inputs.items()
        }}
        with _checks.errors_without_input_dump():
            inputs = _checks.model_inputs(
                inputs, specs, limits={"T": (self.max_sequence_length, "max_sequence_length")},
            )
            inputs = _checks.has_positions(inputs, {
                "token_ids": "every sequence needs at least its [CLS] token, which the pooled output reads.",
            })
        return _checks.position_inputs_in_range(inputs, position_inputs)

    def encode(self, inputs, output_positions=None):
        """The last block's output, at every position or at `output_positions` only.

        `backbone(inputs)["sequence_output"]` is `encode(inputs)`. With
        `output_positions` `(B, P)` the last block computes its output at
        those positions only (`TransformerBlock`): what task models read
        (BERT pretraining: `[CLS]` and the masked positions) at a fraction of
        the last block's cost. Task models call this on their own
        `keras.Input`s, running the backbone's layers one by one (see
        `_mixins.CallsBackboneLayers`); on tensors, the inputs and positions
        are checked as the model's call checks them. Dropout follows Keras'
        training phase: on inside `fit`'s training step, off when called
        directly (call the model with `training=True` for the whole pass).

        Args:
            inputs: dict of int `(B, T)` tensors `token_ids`, `segment_ids`
                and `padding_mask` (as the model takes).
            output_positions: optional int `(B, P)`, positions in `[0, T)`.

        Returns:
            float `(B, T, hidden_dim)`, or `(B, P, hidden_dim)` with
            `output_positions`.

        Example:

        >>> backbone = BertBackbone(100, num_layers=1, num_heads=2, hidden_dim=16)
        >>> inputs = {"token_ids": tf.constant([[2, 7, 9, 3]]), "segment_ids": tf.zeros((1, 4), "int32"),
        ...           "padding_mask": tf.ones((1, 4), "int32")}
        >>> backbone.encode(inputs, output_positions=tf.constant([[0, 2]])).shape
        TensorShape([1, 2, 16])
        """
        if isinstance(inputs, dict) and not any(  # tensors: checked; KerasTensors: Keras checks
            isinstance(v, keras.KerasTensor) for v in (*inputs.values(), output_positions)
        ):
            positions = {} if output_positions is None else {"output_positions": output_positions}
            inputs = self._checked_inputs({**inputs, **positions}, **dict.fromkeys(positions, "BP"))
            output_positions = inputs.pop("output_positions", None)
        x = self._embed(inputs)
        attention_mask = self._attention_mask(inputs)
        for index, block in enumerate(self.transformer_layers):
            last = index == len(self.transformer_layers) - 1
            x = block(
                x,
                padding_mask=inputs["padding_mask"],
                attention_mask=attention_mask,
                output_positions=output_positions if last else None,
            )
        return x

    # --- What subclasses (UniLMBackbone) change ---

    def _input_specs(self):
        return input_specs(self.vocabulary_size, self.num_segments)

    def _functional_inputs(self):
        return {
            name: keras.Input(shape=(None,), dtype="int32", name=name)
            for name in ("token_ids", "segment_ids", "padding_mask")
        }

    def _embed(self, inputs):
        tokens = self.token_embedding(inputs["token_ids"])
        x = self.embeddings_add(
            [tokens, self.segment_embedding(inputs["segment_ids"]), self.position_embedding(tokens)]
        )
        return self.embeddings_dropout(self.embeddings_norm(x))

    def _attention_mask(self, inputs):
        return None  # BERT: bidirectional, padding only

    @classmethod
    def from_architecture(cls, architecture, vocabulary_size, **overrides):
        """A backbone of a released BERT size (random weights).

        Args:
            architecture: one of `BERT_ARCHITECTURES` (`"bert_tiny"` ... `"bert_large"`).
            vocabulary_size: int (30,522 for Google's English vocabulary).
            **overrides: any other constructor argument.
        """
        _checks.one_of("architecture", architecture, sorted(BERT_ARCHITECTURES))
        config = copy.deepcopy(BERT_ARCHITECTURES[architecture])
        config.update(overrides)
        return cls(vocabulary_size=vocabulary_size, **config)

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(self.token_embedding.dtype_policy),
            "vocabulary_size": self.vocabulary_size,
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "hidden_dim": self.hidden_dim,
            "intermediate_dim": self.intermediate_dim,
            "dropout": self.dropout,
            "max_sequence_length": self.max_sequence_length,
            "num_segments": self.num_segments,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "activation": self.activation,
        }


# The name before 2026-11-29 (keras-hub's "preset" means released weights).
__getattr__ = _checks.renamed_attributes(__name__, {"BERT_PRESETS": ("BERT_ARCHITECTURES", BERT_ARCHITECTURES)})
