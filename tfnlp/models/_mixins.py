"""What several of tfnlp's Functional models share: input checks (backbones), `from_config`,
the deprecated `from_preset`, and task models that run their backbone's layers. What only
task models share is in `Task` itself (`tfnlp.models.task`)."""

import warnings

import keras

from tfnlp import _checks


class ChecksInputs:
    """Mixin: `call` checks the model's inputs (`_checked_inputs`) before Keras casts them.

    Keras' Functional `call` casts every input to the dtype of its
    `keras.Input` (float token ids silently become ints) and fails deep in
    TensorFlow on wrong shapes; a model defines `_checked_inputs(inputs)`
    (usually `tfnlp._checks.model_inputs`) to name the argument
    instead. The error reaches the user as raised, without the Keras dump
    of every argument's value that `call` would add.
    """

    def _checked_inputs(self, inputs):
        raise NotImplementedError

    def call(self, inputs, training=None, mask=None, **kwargs):
        return super().call(checked(self, inputs), training=training, mask=mask, **kwargs)


def checked(model, inputs):
    """`model._checked_inputs(inputs)`, its errors raised without Keras' dump of the inputs."""
    with _checks.errors_without_input_dump():
        return model._checked_inputs(inputs)


class CallsBackboneLayers:
    """Mixin: a task model whose graph runs its backbone's layers, kept as "backbone + heads".

    BERT's task models read the last block's output at a few positions only
    (`[CLS]`, the masked positions), so they build their graph from
    `backbone.encode(inputs, output_positions)`, calling the backbone's
    layers one by one, rather than calling the backbone as one layer (which
    computes every position of its last block). Keras' Functional `layers`
    would then list the backbone's inner layers, changing the `.keras`
    weight paths and the order of the variables (and so of the optimizer's
    slots). `layers` here lists the model's inputs, the backbone, then
    `_head_layers()`: the layers with weights come in the order they had
    when the model called the backbone (the `InputLayer`s, which have none,
    may come in another order, so index by name), so files saved either way
    load either way and `backbone.trainable = False` still freezes the whole
    backbone. `summary()` reads the graph itself, so it lists the backbone's
    layers (and a few slicing ops) one by one; the parameter counts are the
    same.
    """

    def _head_layers(self):
        raise NotImplementedError

    def _unread_backbone_layers(self):
        """Backbone layers no output of this model reads (BERT's pooler under mean pooling, say)."""
        return []

    @property
    def layers(self):
        inputs = [op for op in self._operations if isinstance(op, keras.layers.InputLayer)]
        return inputs + [self.backbone, *self._head_layers()]

    @property
    def trainable_weights(self):
        # Weights no loss reaches are left out: the optimizer would warn, on
        # every fit, that they have no gradient (and keep slots for them).
        unread = {id(w) for layer in self._unread_backbone_layers() for w in layer.weights}
        return [w for w in super().trainable_weights if id(w) not in unread]

    @property
    def trainable_variables(self):
        return self.trainable_weights

    @property
    def non_trainable_weights(self):
        # ... and counted here instead, so that summary() adds up to count_params().
        kept = {id(w) for w in self.trainable_weights}
        unread = [w for layer in self._unread_backbone_layers() for w in layer.trainable_weights
                  if id(w) not in kept]
        return super().non_trainable_weights + unread


class FromConfig:
    """Mixin: `from_config` for models whose config is their constructor's arguments.

    A serialized dtype policy (a dict, e.g. `mixed_bfloat16`) becomes a
    policy object again.
    """

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        return cls(**config)


class FromPresetAlias:
    """Mixin: `from_preset`, the deprecated name of `from_architecture`.

    In keras-hub a preset means released weights (and a tokenizer); tfnlp's
    builds a published size with random weights, so the method was renamed.
    The old name works, with a `DeprecationWarning`, for one release.
    """

    @classmethod
    def from_preset(cls, preset, *args, **kwargs):
        """Deprecated: `from_architecture(preset, ...)` (random weights of a published size)."""
        warnings.warn(
            f"`{cls.__name__}.from_preset` is deprecated and will be removed in the next release: "
            f"use `{cls.__name__}.from_architecture`, which it calls (random weights of a "
            "published size; released weights load with the importers of tfnlp.models).",
            DeprecationWarning, stacklevel=2,
        )
        return cls.from_architecture(preset, *args, **kwargs)
