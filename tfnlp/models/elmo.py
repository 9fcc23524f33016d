"""ELMo: a character-CNN bidirectional LSTM language model and its embedder."""

import keras
import tensorflow as tf

from tfnlp import _checks
from tfnlp.data.elmo import sentence_character_ids  # noqa: F401  (re-exported)
from tfnlp.data.elmo_preprocessor import ELMoPreprocessor
from tfnlp.layers.char_cnn_embedding import ELMO_FILTERS, CharCNNEmbedding
from tfnlp.layers.dropout import Dropout
from tfnlp.layers.projected_lstm import ProjectedLSTM
from tfnlp.layers.scalar_mix import ScalarMix
from tfnlp.layers.word_softmax import WordSoftmax
from tfnlp.metrics.perplexity import Perplexity
from tfnlp.models._mixins import FromConfig, FromPresetAlias
from tfnlp.models.task import Task
from tfnlp.training.distribute import global_sum

ELMO_ARCHITECTURES = {
    # Trains on a CPU in minutes (benchmarks/README.md has its speed).
    "elmo_small": {
        "num_layers": 2,
        "units": 512,
        "projection_dim": 128,
        "filters": ((1, 32), (2, 32), (3, 64), (4, 128), (5, 256)),
        "num_highway_layers": 1,
        "num_sampled": 1024,
    },
    # Peters et al. (2018): elmo_2x4096_512_2048cnn_2xhighway, 93.6M
    # parameters without the softmax.
    "elmo_original": {
        "num_layers": 2,
        "units": 4096,
        "projection_dim": 512,
        "filters": ELMO_FILTERS,
        "num_highway_layers": 2,
        "num_sampled": 8192,
    },
}

TARGET_KEYS = ("next_word_ids", "next_word_weights", "previous_word_ids", "previous_word_weights")


def elmo_batch(features):
    """An `elmo_dataset` element -> `(character_ids, targets)` for `ELMoBiLM.fit`.

    Args:
        features: dict from `tfnlp.data.elmo_dataset`.

    Returns:
        `(character_ids, targets)`, `targets` the dict of the four
        `next_/previous_word_ids/weights` tensors.

    Example:

    >>> features = {"character_ids": tf.zeros((1, 3, 50), tf.int32)}
    >>> features.update({k: tf.zeros((1, 3), tf.int32) for k in TARGET_KEYS})
    >>> x, y = elmo_batch(features)
    >>> x.shape, sorted(y)[0]
    (TensorShape([1, 3, 50]), 'next_word_ids')
    """
    missing = [k for k in ("character_ids", *TARGET_KEYS) if k not in features]
    if missing:
        raise ValueError(f"`features` lacks {missing}; build it with tfnlp.data.elmo_dataset.")
    return features["character_ids"], {k: features[k] for k in TARGET_KEYS}


def _without_compile_config(serialized):
    """A serialized model without its compile config (optimizer, losses)."""
    return {k: v for k, v in serialized.items() if k != "compile_config"}


def _checked_characters(inputs, max_characters):
    """`character_ids` with its dtype and shape checked before Keras casts it to int32.

    `CharCNNEmbedding` checks the ids' range when it is called on them.
    """
    specs = {"character_ids": ("BTC", None, None)}
    return _checks.model_inputs(inputs, specs, C=(max_characters, "`max_characters`"))


def checked_max_tokens(max_tokens, allow_none=False):
    """`max_tokens` (tokens per text, `<S>` and `</S>` included) if it leaves room for a word."""
    max_tokens = _checks.positive_int("max_tokens", max_tokens, allow_none=allow_none)
    if max_tokens is not None and max_tokens < 3:
        raise ValueError(
            f"`max_tokens` must leave room for one word besides <S> and </S>, got {max_tokens}."
        )
    return max_tokens


@keras.saving.register_keras_serializable(package="tfnlp")
class ELMoBiLM(FromConfig, FromPresetAlias, Task):
    """ELMo's bidirectional language model over character-CNN token vectors.

    Each token's characters become a context-independent vector
    `x_k = CharCNNEmbedding(chars_k)` (`projection_dim` wide). A forward
    stack of `num_layers` `ProjectedLSTM`s reads `x_1..x_k` and predicts
    token `k + 1`; a backward stack (its own weights) reads `x_k..x_n` and
    predicts token `k - 1`. From the second layer on each LSTM has a
    residual connection; dropout is applied to every LSTM's input and to the
    top outputs while training. Both directions share one `WordSoftmax` over
    the word vocabulary: sampled (`num_sampled` candidates) while training,
    exact when evaluating.

    Calling the model gives ELMo's `2L + 1` representations of every token,
    stacked: layer 0 is `[x_k; x_k]`, layer `j` is `[→h_kj; ←h_kj]`, each
    `2 * projection_dim` wide; trailing padding tokens (all character ids
    0) get zeros and never change the vectors of real tokens (see
    `padding_mask`). `ELMoEmbedder` mixes
    them for a downstream task.

    Training: `fit` on `(character_ids, targets)` pairs, `targets` the
    `next_/previous_word_ids/weights` of `tfnlp.data.elmo_dataset` (use
    `elmo_batch`). The loss is the mean of the two directions' mean
    negative log-likelihood over the weighted (real) targets, and
    `forward_perplexity` / `backward_perplexity` are reported: exact under
    `evaluate`, those of the sampled softmax (lower, not comparable) while
    `fit` trains with `num_sampled`. `compile()` without arguments uses Adam (learning rate
    1e-3, gradients clipped to global norm 10; bilm-tf used Adagrad).

    Args:
        word_vocabulary_size: int, output vocabulary (sorted by frequency,
            see `WordSoftmax`).
        num_layers: int, LSTM layers per direction (`L`).
        units: int, LSTM cell size.
        projection_dim: int, LSTM output and token-vector size.
        cell_clip: positive float or None.
        projection_clip: positive float or None.
        filters: `(width, count)` pairs of the character CNN.
        num_highway_layers: int.
        character_dim: int.
        max_characters: int, characters per token (`C`).
        character_vocabulary_size: int.
        residual: bool, residual connections from the second layer on.
        dropout: float in [0, 1).
        num_sampled: int or None (full softmax while training).
        seed: int, seed of the sampled softmax.
        unroll: bool, unroll the LSTMs (static sequence lengths only).
        **kwargs: base model arguments (`name`, `dtype`, ...).

    Call arguments:
        character_ids: int32 `(B, T, max_characters)` from
            `tfnlp.data.character_ids` / `elmo_dataset`; a float id is a
            TypeError, an id outside `[0, character_vocabulary_size)` a
            ValueError (in a graph, an `InvalidArgumentError` at run time;
            not checked under XLA).

    Returns:
        dict: `"layers"` `(B, L + 1, T, 2 * projection_dim)`,
        `"padding_mask"` int32 `(B, T)`.

    Example:

    >>> bilm = ELMoBiLM(word_vocabulary_size=100, num_layers=2, units=32, projection_dim=8,
    ...                 filters=((1, 4), (2, 4)), num_sampled=20)
    >>> words = tf.constant([["<S>", "Hello", "world", "</S>", ""]])
    >>> outputs = bilm(tfnlp.data.character_ids(words))
    >>> outputs["layers"].shape
    TensorShape([1, 3, 5, 16])

    References:
        Peters et al., "Deep contextualized word representations", 2018.
    """

    def __init__(
        self,
        word_vocabulary_size,
        num_layers=2,
        units=4096,
        projection_dim=512,
        cell_clip=3.0,
        projection_clip=3.0,
        filters=ELMO_FILTERS,
        num_highway_layers=2,
        character_dim=16,
        max_characters=50,
        character_vocabulary_size=262,
        residual=True,
        dropout=0.1,
        num_sampled=8192,
        seed=0,
        unroll=False,
        **kwargs,
    ):
        word_vocabulary_size = _checks.positive_int("word_vocabulary_size", word_vocabulary_size)
        num_layers = _checks.positive_int("num_layers", num_layers)
        projection_dim = _checks.positive_int("projection_dim", projection_dim)
        max_characters = _checks.positive_int("max_characters", max_characters)
        dropout = _checks.rate("dropout", dropout)
        dtype = kwargs.pop("dtype", None)
        kwargs.setdefault("name", "elmo_bilm")

        # === Layers ===
        self.character_cnn = CharCNNEmbedding(
            projection_dim,
            filters=filters,
            character_vocabulary_size=character_vocabulary_size,
            character_dim=character_dim,
            num_highway_layers=num_highway_layers,
            dtype=dtype,
            name="character_cnn",
        )
        widest = max(width for width, _ in self.character_cnn.filters)
        if max_characters < widest:
            raise ValueError(
                f"`max_characters` ({max_characters}) must be at least the widest filter of "
                f"`filters` ({widest})."
            )

        def lstm(direction, i):
            return ProjectedLSTM(
                units,
                projection_dim=projection_dim,
                cell_clip=cell_clip,
                projection_clip=projection_clip,
                go_backwards=direction == "backward",
                unroll=unroll,
                dtype=dtype,
                name=f"{direction}_lstm_{i}",
            )

        self.forward_layers = [lstm("forward", i) for i in range(num_layers)]
        self.backward_layers = [lstm("backward", i) for i in range(num_layers)]
        self.lstm_dropout = Dropout(dropout, dtype=dtype, name="lstm_dropout")
        self.output_dropout = Dropout(dropout, dtype=dtype, name="output_dropout")
        self.word_softmax = WordSoftmax(
            word_vocabulary_size, num_sampled=num_sampled, seed=seed, dtype=dtype, name="word_softmax"
        )

        self.residual = bool(residual)

        # === Functional model ===
        character_ids = keras.Input(
            shape=(None, max_characters), dtype="int32", name="character_ids"
        )
        outputs = self.representations(character_ids)
        # Used by the loss only, outside the graph: build them now.
        self.word_softmax.build((None, projection_dim))
        self.output_dropout.build((None, 2 * projection_dim))
        # A Functional model ignores `dtype`: the layers carry the policy.
        super().__init__(inputs=character_ids, outputs=outputs, **kwargs)

        # === Config ===
        self.word_vocabulary_size = word_vocabulary_size
        self.num_layers = num_layers
        self.units = self.forward_layers[0].units
        self.projection_dim = projection_dim
        self.cell_clip = self.forward_layers[0].cell_clip
        self.projection_clip = self.forward_layers[0].projection_clip
        self.filters = self.character_cnn.filters
        self.num_highway_layers = num_highway_layers
        self.character_dim = character_dim
        self.max_characters = max_characters
        self.character_vocabulary_size = character_vocabulary_size
        self.dropout = dropout
        self.num_sampled = self.word_softmax.num_sampled
        self.seed = seed
        self.unroll = bool(unroll)
        self.forward_perplexity = Perplexity(name="forward_perplexity")
        self.backward_perplexity = Perplexity(name="backward_perplexity")

    def _checked_inputs(self, inputs):
        return _checked_characters(inputs, self.max_characters)

    @staticmethod
    def padding_mask(character_ids):
        """int32 `(B, T)`: 1 up to each row's last real token, 0 after it.

        A token is real when any of its character ids is non-zero. An empty
        token (all zeros) *inside* a sentence is kept as a token (its vector
        is zero), so that the backward LM still reads the sentence from its
        true end; only trailing empty tokens are padding.
        """
        real = keras.ops.cast(keras.ops.any(keras.ops.not_equal(character_ids, 0), axis=-1), "int32")
        from_the_end = keras.ops.flip(keras.ops.cumsum(keras.ops.flip(real, axis=1), axis=1), axis=1)
        return keras.ops.cast(keras.ops.greater(from_the_end, 0), "int32")

    def representations(self, character_ids, training=None, use_dropout=True):
        """Character ids -> `{"layers", "padding_mask"}`, the model's outputs.

        With `use_dropout=False` the LSTM-input dropout is left out of the
        computation altogether (so no outer `training` flag can turn it on):
        `ELMoEmbedder` builds a frozen biLM's graph this way.
        """
        padding_mask = self.padding_mask(character_ids)
        tokens = self.character_cnn(character_ids)  # (B, T, P)
        layers = self.contextualize(tokens, padding_mask, training=training, use_dropout=use_dropout)
        return {"layers": layers, "padding_mask": padding_mask}

    def contextualize(self, tokens, padding_mask, training=None, use_dropout=True):
        """Token vectors `(B, T, P)` -> the stacked layers `(B, L + 1, T, 2P)`.

        The LSTM part of the call, exposed so that tests and analyses can
        differentiate with respect to the token vectors.
        """

        def dropout(x):
            return self.lstm_dropout(x, training=training) if use_dropout else x

        layers = [keras.ops.concatenate([tokens, tokens], axis=-1)]
        forward, backward = tokens, tokens
        for i, (f_lstm, b_lstm) in enumerate(zip(self.forward_layers, self.backward_layers, strict=True)):
            f = f_lstm(dropout(forward), padding_mask=padding_mask)
            b = b_lstm(dropout(backward), padding_mask=padding_mask)
            if self.residual and i > 0:
                f, b = f + forward, b + backward
            forward, backward = f, b
            layers.append(keras.ops.concatenate([forward, backward], axis=-1))
        return keras.ops.stack(layers, axis=1)

    def word_losses(self, layers, targets, training=False):
        """Per-token NLL of both directions (unweighted), float32 `(B, T)` each."""
        top = self.output_dropout(layers[:, -1], training=training)  # (B, T, 2P)
        forward_nll = self.word_softmax(
            top[..., : self.projection_dim], targets["next_word_ids"], training=training
        )
        backward_nll = self.word_softmax(
            top[..., self.projection_dim :], targets["previous_word_ids"], training=training
        )
        return forward_nll, backward_nll

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        if not isinstance(y, dict) or any(k not in y for k in TARGET_KEYS):
            raise ValueError(
                f"ELMoBiLM trains on (character_ids, targets) with targets a dict of {TARGET_KEYS} "
                "(see tfnlp.models.elmo_batch)."
            )
        forward_nll, backward_nll = self.word_losses(y_pred["layers"], y, training=training)
        forward_weights = tf.cast(y["next_word_weights"], tf.float32)
        backward_weights = tf.cast(y["previous_word_weights"], tf.float32)
        self.forward_perplexity.update_state(forward_nll, sample_weight=forward_weights)
        self.backward_perplexity.update_state(backward_nll, sample_weight=backward_weights)
        # Each replica divides by the token count of all replicas, so that their
        # losses (and gradients) add up to exactly the single-device ones.
        loss = 0.5 * (
            tf.reduce_sum(forward_nll * forward_weights)
            / tf.maximum(global_sum(tf.reduce_sum(forward_weights)), 1.0)
            + tf.reduce_sum(backward_nll * backward_weights)
            / tf.maximum(global_sum(tf.reduce_sum(backward_weights)), 1.0)
        )
        if self.losses:
            replicas = tf.distribute.get_strategy().num_replicas_in_sync
            loss += tf.add_n([tf.cast(l, tf.float32) for l in self.losses]) / replicas
        return loss

    def _compile_defaults(self):
        return {"optimizer": keras.optimizers.Adam(1e-3, global_clipnorm=10.0)}

    def compile(self, optimizer="auto", **kwargs):
        for name in ("loss", "metrics", "weighted_metrics"):
            if kwargs.get(name, "auto") not in (None, "auto"):
                raise ValueError(f"ELMoBiLM computes its own loss and metrics; do not pass `{name}`.")
            kwargs.pop(name, None)
        super().compile(optimizer, **kwargs)  # Task's: "auto", loss scaling under mixed_float16

    @classmethod
    def from_architecture(cls, architecture, word_vocabulary_size, **overrides):
        """A model of a size from `ELMO_ARCHITECTURES` (random weights).

        Args:
            architecture: `"elmo_small"` or `"elmo_original"`.
            word_vocabulary_size: int.
            **overrides: any other constructor argument.
        """
        _checks.one_of("architecture", architecture, sorted(ELMO_ARCHITECTURES))
        return cls(word_vocabulary_size=word_vocabulary_size, **{**ELMO_ARCHITECTURES[architecture], **overrides})

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(self.character_cnn.dtype_policy),
            "word_vocabulary_size": self.word_vocabulary_size,
            "num_layers": self.num_layers,
            "units": self.units,
            "projection_dim": self.projection_dim,
            "cell_clip": self.cell_clip,
            "projection_clip": self.projection_clip,
            "filters": [list(f) for f in self.filters],
            "num_highway_layers": self.num_highway_layers,
            "character_dim": self.character_dim,
            "max_characters": self.max_characters,
            "character_vocabulary_size": self.character_vocabulary_size,
            "residual": self.residual,
            "dropout": self.dropout,
            "num_sampled": self.num_sampled,
            "seed": self.seed,
            "unroll": self.unroll,
        }




@keras.saving.register_keras_serializable(package="tfnlp")
class ELMoEmbedder(Task):
    """ELMo vectors for a downstream task: `γ · Σ_j softmax(w)_j · h_j`.

    Runs an `ELMoBiLM` and mixes its `2L + 1` representations with a
    `ScalarMix` whose weights and scale are learned with the task (Peters
    et al., 2018, eq. 1). With `trainable_bilm=False` (the default, as in
    the paper) the biLM is frozen: its layers run without dropout even
    while the task trains, and only the mix (and what is stacked on top)
    learns. With `trainable_bilm=True` the biLM trains with the task, with
    its dropout.

    The biLM's layers are shared with the `bilm` object passed in, which is
    changed: `bilm.trainable` is set to `trainable_bilm`, and its word
    softmax (unused here) to non-trainable; set them back to pretrain it
    further. Its compile state (optimizer) is not part of the embedder's
    config; pass a biLM loaded with `compile=False` to keep a saved
    embedder free of it.

    Raw text: with `max_tokens`, `predict` also takes texts (a list, NumPy
    array or `tf.string` tensor of them, or a `tf.data.Dataset` of single
    texts or of batches). Each text is read as in training and serving
    (`sentence_character_ids`: cut to `max_input_bytes` bytes, split into
    words, cut to `max_tokens` tokens with `<S>` and `</S>`) and padded to
    `max_tokens` tokens, so every output has `T = max_tokens`; the vectors
    of real tokens are those the SavedModel of `tfnlp.export.export_elmo`
    serves (which pads to the longest text of a request instead). Character
    ids work as before, with or without `max_tokens`.

    Args:
        bilm: an `ELMoBiLM` (or its serialized config).
        layer_norm: bool, normalise each layer before mixing (`ScalarMix`).
        trainable_bilm: bool, fine-tune the biLM with the task.
        dropout: float in [0, 1), on the mixed vectors.
        max_tokens: int (at least 3) or None, tokens per text, `<S>` and
            `</S>` included; needed to read texts, and the default of
            `export_elmo`.
        max_input_bytes: int, each text is cut to this many bytes before it
            is split into words (as `tfnlp.data.elmo_dataset` does).
        **kwargs: base model arguments (`name`, ...).

    Call arguments:
        character_ids: int32 `(B, T, max_characters)`.

    Returns:
        dict: `"elmo"` `(B, T, 2 * projection_dim)` (the mix; zeros at
        padding), `"layers"` `(B, L + 1, T, 2 * projection_dim)`,
        `"padding_mask"` int32 `(B, T)`.

    Example:

    >>> bilm = ELMoBiLM(word_vocabulary_size=100, units=32, projection_dim=8,
    ...                 filters=((1, 4), (2, 4)), num_sampled=20)
    >>> embedder = ELMoEmbedder(bilm, max_tokens=6)
    >>> words = tf.constant([["<S>", "Hello", "world", "</S>", ""]])
    >>> embedder(tfnlp.data.character_ids(words))["elmo"].shape
    TensorShape([1, 5, 16])
    >>> embedder.predict(["Hello world", "Hi!"], verbose=0)["elmo"].shape
    (2, 6, 16)
    """

    def __init__(self, bilm, layer_norm=False, trainable_bilm=False, dropout=0.0, max_tokens=None,
                 max_input_bytes=100_000, **kwargs):
        if isinstance(bilm, dict):
            bilm = keras.saving.deserialize_keras_object(bilm)
        if not isinstance(bilm, ELMoBiLM):
            raise ValueError(f"`bilm` must be an ELMoBiLM, got {type(bilm).__name__}.")
        dropout = _checks.rate("dropout", dropout)
        max_tokens = checked_max_tokens(max_tokens, allow_none=True)
        max_input_bytes = _checks.max_input_bytes(max_input_bytes)
        kwargs.setdefault("name", "elmo_embedder")
        trainable_bilm = bool(trainable_bilm)
        bilm.trainable = trainable_bilm
        bilm.word_softmax.trainable = False  # the embedder never uses it
        dtype = bilm.character_cnn.dtype_policy

        # === Layers ===
        self.bilm = bilm
        self.scalar_mix = ScalarMix(layer_norm=layer_norm, dtype=dtype, name="scalar_mix")
        self.mix_dropout = Dropout(dropout, dtype=dtype, name="mix_dropout")

        # === Functional model ===
        character_ids = keras.Input(
            shape=(None, bilm.max_characters), dtype="int32", name="character_ids"
        )
        if trainable_bilm:
            outputs = bilm(character_ids)
        else:  # the biLM's layers without its dropout: no `training` flag reaches it
            outputs = bilm.representations(character_ids, use_dropout=False)
        layers, padding_mask = outputs["layers"], outputs["padding_mask"]
        mixed = self.mix_dropout(self.scalar_mix(layers, padding_mask=padding_mask))
        mixed = mixed * keras.ops.cast(padding_mask, mixed.dtype)[:, :, None]
        super().__init__(
            inputs=character_ids,
            outputs={"elmo": mixed, "layers": layers, "padding_mask": padding_mask},
            **kwargs,
        )

        # === Config ===
        self.layer_norm = bool(layer_norm)
        self.trainable_bilm = trainable_bilm
        self.dropout = dropout
        self.max_tokens = max_tokens
        self.max_input_bytes = max_input_bytes

    def _checked_inputs(self, inputs):
        return _checked_characters(inputs, self.bilm.max_characters)

    def _compile_defaults(self):
        # Keras' own defaults: the embedder has no loss of its own (a task
        # model stacked on it has).
        return {"optimizer": "rmsprop", "loss": None, "metrics": None}

    # --- Texts to character ids ---

    def _task_preprocessor(self):
        return ELMoPreprocessor(self.max_tokens, self.bilm.max_characters, self.max_input_bytes,
                                task_name=type(self).__name__)

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "bilm": _without_compile_config(keras.saving.serialize_keras_object(self.bilm)),
            "layer_norm": self.layer_norm,
            "trainable_bilm": self.trainable_bilm,
            "dropout": self.dropout,
            "max_tokens": self.max_tokens,
            "max_input_bytes": self.max_input_bytes,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)


# The name before 2026-11-29 (keras-hub's "preset" means released weights).
__getattr__ = _checks.renamed_attributes(__name__, {"ELMO_PRESETS": ("ELMO_ARCHITECTURES", ELMO_ARCHITECTURES)})
