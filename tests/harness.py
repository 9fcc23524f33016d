"""The one harness every tfnlp layer test calls (after keras-hub's TestCase).

`run_layer_test` checks, for one layer configuration: config JSON round trip,
eager call, symbolic (Functional) call, XLA-compiled call, `.keras` save/load
with `safe_mode=True`, one `fit` step (compiled with XLA) that moves every
trainable weight, and the `mixed_bfloat16` policy.
"""

import json
import os
import tempfile

import keras
import numpy as np
import tensorflow as tf


def _first(outputs):
    return tf.nest.flatten(outputs)[0]


def assert_allclose(actual, desired, atol=1e-5, rtol=0.0):
    for a, d in zip(tf.nest.flatten(actual), tf.nest.flatten(desired), strict=True):
        np.testing.assert_allclose(np.asarray(a, np.float32), np.asarray(d, np.float32), atol=atol, rtol=rtol)


def assert_finite(outputs):
    for x in tf.nest.flatten(outputs):
        assert np.all(np.isfinite(np.asarray(x, np.float32))), "non-finite output"


def _config_round_trip(layer):
    config = layer.get_config()
    assert config == type(layer).from_config(config).get_config()
    serialized = json.loads(json.dumps(keras.saving.serialize_keras_object(layer)))
    assert serialized["registered_name"].startswith("tfnlp>"), serialized["registered_name"]
    restored = keras.saving.deserialize_keras_object(serialized)
    assert type(restored) is type(layer)
    assert restored.get_config() == config


def _functional_model(layer, input_data, call_kwargs):
    inputs = {
        name: keras.Input(shape=value.shape[1:], dtype=value.dtype.name, name=name)
        for name, value in input_data.items()
    }
    return keras.Model(inputs, layer(**inputs, **call_kwargs))


def run_layer_test(
    layer_cls,
    init_kwargs,
    input_data,
    call_kwargs=None,
    expected_output_shape=None,
    expected_num_trainable_weights=None,
    run_training=True,
    run_mixed_precision=True,
    mixed_precision_atol=0.05,
):
    """Runs the standard checks and returns the eager output.

    Args:
        layer_cls: the layer class.
        init_kwargs: constructor arguments.
        input_data: dict of call argument name -> numpy array (tensors only;
            the first entry is the first positional argument).
        call_kwargs: non-tensor call arguments (ints, bools).
        expected_output_shape: shape of the (first) output.
        expected_num_trainable_weights: number of trainable variables.
        run_training: whether to run the `fit` step.
        run_mixed_precision: whether to check `mixed_bfloat16`.
        mixed_precision_atol: tolerance of bfloat16 against float32.
    """
    call_kwargs = call_kwargs or {}
    input_data = {k: np.asarray(v) for k, v in input_data.items()}
    tensors = {k: tf.constant(v) for k, v in input_data.items()}

    layer = layer_cls(**init_kwargs)
    _config_round_trip(layer)
    eager = layer(**tensors, **call_kwargs)
    assert_finite(eager)
    if expected_output_shape is not None:
        assert tuple(_first(eager).shape) == tuple(expected_output_shape)
    if expected_num_trainable_weights is not None:
        assert len(layer.trainable_weights) == expected_num_trainable_weights
    _config_round_trip(layer)  # also after build

    # Symbolic call: a Functional model around the same (built) layer.
    model = _functional_model(layer, input_data, call_kwargs)
    assert_allclose(model(tensors), eager, atol=1e-6)

    # XLA.
    compiled = tf.function(lambda kw: layer(**kw, **call_kwargs), jit_compile=True)
    assert_allclose(compiled(tensors), eager, atol=1e-5)

    # .keras save/load, safe mode.
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.keras")
        model.save(path)
        restored = keras.saving.load_model(path, safe_mode=True)
    assert_allclose(restored(tensors), eager, atol=0.0)

    if run_training:
        train_model = keras.Model(model.inputs, _first(model.outputs))
        before = [w.numpy().copy() for w in layer.trainable_weights]
        train_model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse", jit_compile=True)
        target = np.ones(_first(eager).shape, np.float32)
        history = train_model.fit(input_data, target, batch_size=len(target), epochs=1, verbose=0)
        assert np.isfinite(history.history["loss"][0])
        for old, new in zip(before, layer.trainable_weights, strict=True):
            assert not np.array_equal(old, new.numpy()), f"{new.path} did not train"

    if run_mixed_precision:
        mixed = layer_cls(**init_kwargs, dtype="mixed_bfloat16")
        mixed(**tensors, **call_kwargs)
        mixed.set_weights(layer.get_weights())
        output = mixed(**tensors, **call_kwargs)
        assert _first(output).dtype == tf.bfloat16, _first(output).dtype
        assert_finite(output)
        expected = layer(**tensors, **call_kwargs)
        assert_allclose(_first(output), _first(expected), atol=mixed_precision_atol, rtol=0.02)
    return eager
