"""What tfnlp's Functional models share: input checks, and `compile()` restored from `.keras` files."""

import keras


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
    (usually `tfnlp.layers._validation.model_inputs`) to name the argument
    instead.
    """

    def _checked_inputs(self, inputs):
        raise NotImplementedError

    def call(self, inputs, training=None, mask=None, **kwargs):
        return super().call(self._checked_inputs(inputs), training=training, mask=mask, **kwargs)
