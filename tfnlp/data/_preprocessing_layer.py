"""Base class of tfnlp's preprocessing layers (strings and ragged tensors in)."""

import keras


class PreprocessingLayer(keras.layers.Layer):
    """A weightless Keras layer that runs TensorFlow text ops.

    Keras 3 would convert call arguments to dense tensors; preprocessing
    layers take strings and ragged tensors, so that conversion is turned off.
    They run eagerly, inside `tf.data`, inside `tf.function` and in exported
    SavedModels.
    """

    def __init__(self, **kwargs):
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        self.built = True
