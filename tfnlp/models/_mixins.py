"""What tfnlp's Functional models share: input checks, `compile()` restored from `.keras` files,
`from_config`, an optimizer built before tracing, training/evaluation steps whose state
updates wait for their batch, and task models that run their backbone's layers."""

import contextlib
import warnings

import keras
import tensorflow as tf

from tfnlp import _checks


class RestoresCompile:
    """Mixin: a `.keras` file restores the model's `compile()`, optimizer state included.

    Keras re-compiles a loaded model only through `compile_from_config`
    and skips a model whose `compile()` is overridden (with a warning),
    which left tfnlp's models without optimizer, loss or metrics after
    `keras.saving.load_model`. The saved configuration holds the objects
    `compile()` resolved (optimizer, losses, metrics), so compiling with them
    again is exact; building the optimizer lets Keras load its variables
    (step counter, moments) from the file.
    """

    def compile_from_config(self, config):
        # Every argument as saved: an explicit `None` (no metrics, say) stays
        # `None` rather than becoming the model's "auto" default.
        self.compile(**keras.saving.deserialize_keras_object(config))
        if self.built:
            self.optimizer.build(self.trainable_variables)


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
        with _checks.errors_without_input_dump():
            inputs = self._checked_inputs(inputs)
        return super().call(inputs, training=training, mask=mask, **kwargs)


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


class BuildsOptimizerFirst:
    """Mixin: the optimizer's variables exist before the training step is traced.

    Without a `tf.distribute` strategy, Keras 3.15 defers building the
    optimizer to the first trace of the training step: every slot variable
    (Adam's two per weight) is then created inside the `tf.function`, each
    with its own lifted-initializer `tf.cond`, and the function is traced
    twice. On a 2-core CPU that made the first `fit` of a tiny
    `TransformerSeq2Seq` several times slower
    (`benchmarks/first_fit_benchmark.py`, figures in benchmarks/README.md). The
    optimizer is built here, in the model's strategy scope, when the
    training function is made; Keras skips its own build then.
    """

    def make_train_function(self, force=False):
        if self.built and self.optimizer is not None and not self.optimizer.built:
            with self.distribute_strategy.scope():
                self.optimizer.build(self.trainable_variables)
        return super().make_train_function(force=force)


class StepsWaitForData:
    """Mixin: `train_step` and `test_step` change no state unless their batch arrived.

    Keras 3.15 (TensorFlow backend, `steps_per_execution=1`) finds the end
    of a dataset of unknown length (`cardinality() == -2`: after `filter`,
    `flat_map`, `unbatch`, ...) by running the step once more and catching
    the end-of-sequence error. Every update that does not read the batch
    runs in that step anyway, as TensorFlow orders stateful ops only by the
    data they use: the optimizer's `iterations` (so learning-rate schedules
    and Adam's bias correction), and the counts of the loss trackers and of
    metrics whose weights are static (batch size or value count known when
    traced: any static-shaped pipeline, as tfnlp's are). So each pass
    over such a dataset added one optimizer step, and `fit`/`evaluate`
    reported losses and metrics multiplied by n / (n + 1) for n batches.
    Making every op of the step wait for the batch's tensors (one `NoOp`
    they all depend on) removes the phantom step; a step that receives its
    batch runs exactly as before. A step compiled with XLA (`jit_compile`)
    runs as one op that waits for all its inputs, so it needs no help (and
    its first call must create the optimizer's variables outside any
    control dependency); an eager step runs in order anyway.
    """

    def train_step(self, data):
        with self._after_arrival(data):
            return super().train_step(data)

    def test_step(self, data):
        with self._after_arrival(data):
            return super().test_step(data)

    def _after_arrival(self, data):
        if self.jit_compile or tf.executing_eagerly():
            return contextlib.nullcontext()
        return tf.control_dependencies([_arrived(data)])


def _arrived(data):
    """One op that runs only once every tensor of `data` exists."""
    tensors = [t for t in tf.nest.flatten(data, expand_composites=True) if t is not None]
    return tf.group(*tensors, name="batch_arrived")


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
