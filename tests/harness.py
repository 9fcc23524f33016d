"""The one harness every tfnlp layer test calls (after keras-hub's TestCase).

`run_layer_test` checks, for one layer configuration: config JSON round trip,
eager call, symbolic (Functional) call, XLA-compiled call, `.keras` save/load
with `safe_mode=True`, one `fit` step (compiled with XLA) that moves every
trainable weight, and the `mixed_bfloat16` policy. `run_model_test` does the
same for the tiny model of each family in `tests/families.py` (its training
step under the model's own compile settings; every family's whole step
under XLA is `tests/training/test_tpu_readiness.py`'s), and checks that a
float id input is refused naming it. `assert_close_to_float32` is the one
comparison of a mixed-precision result with float32, at each output's own scale.
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


# bfloat16 keeps 8 significant bits: one rounding is off by at most 2^-8 of its value. A tiny
# model's output has been rounded a dozen times or so, and the errors, added in quadrature,
# came to 0.4% to 0.6% of the output's RMS (1 to 1.5 times 2^-8) in every family, in
# bert_tiny and in the mixed-precision exports. The bounds leave about 2.5 times that;
# embeddings cast to float8 (2 significant bits) where bfloat16 was meant exceed them in
# every output of every family (tests/models/test_model_harness.py).
BFLOAT16_RMS_ERROR = 2**-6
BFLOAT16_PEAK_ERROR = 2**-5


def assert_close_to_float32(mixed, reference, rms=BFLOAT16_RMS_ERROR, peak=BFLOAT16_PEAK_ERROR):
    """Asserts that a mixed-precision result is the float32 one within bfloat16's error.

    Output by output, at the output's own scale, so that logits of 0.006
    are held as tightly as logits of 3: the RMS of the error at most
    `rms` times the float32 output's RMS, and no element off by more than
    `peak` times its largest magnitude (an error in one position only). Integer
    outputs must be equal. `mixed` and `reference` are tensors or (nested) dicts.
    """
    mixed, reference = _named(mixed), _named(reference)
    assert mixed.keys() == reference.keys(), (sorted(mixed), sorted(reference))
    for name, r in reference.items():
        if r.dtype.kind in "iub":
            np.testing.assert_array_equal(mixed[name], r, err_msg=name)
            continue
        r = r.astype(np.float32)
        error = np.abs(mixed[name].astype(np.float32) - r)
        scale, largest = np.sqrt(np.mean(np.square(r))), np.abs(r).max()
        off, worst = np.sqrt(np.mean(np.square(error))), error.max()
        assert off <= rms * scale and worst <= peak * largest, (
            f"`{name}` is off by {off / scale:.2%} of its RMS {scale:.3g} (bound {rms:.2%}), "
            f"at worst by {worst / largest:.2%} of its largest magnitude {largest:.3g} (bound {peak:.2%})"
        )


def _named(outputs):
    return {"/".join(map(str, path)) or "output": np.asarray(value)
            for path, value in keras.tree.flatten_with_path(outputs)}


def assert_finite(outputs):
    for x in tf.nest.flatten(outputs):
        assert np.all(np.isfinite(np.asarray(x, np.float32))), "non-finite output"


def _config_round_trip(layer, package="tfnlp"):
    config = layer.get_config()
    assert config == type(layer).from_config(config).get_config()
    serialized = json.loads(json.dumps(keras.saving.serialize_keras_object(layer)))
    assert serialized["registered_name"].startswith(f"{package}>"), serialized["registered_name"]
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


def compared_outputs(model, x):
    """A family model's outputs on `x`, with the features its head reads, by name.

    A backbone's outputs (`backbone/sequence_output`, ...), or
    `TransformerClassifier`'s encoder output before it is pooled: a head's
    few numbers, averaged over the tokens, hide part of an error of the
    layers below.
    """
    outputs = model(x, training=False)
    named = dict(outputs) if isinstance(outputs, dict) else {"output": outputs}
    if hasattr(model, "backbone"):
        named["backbone"] = model.backbone({k: x[k] for k in model.backbone.input}, training=False)
    elif hasattr(model, "transformer_layers"):
        encoder = keras.Model(model.inputs, model.transformer_layers[-1].output)
        named["encoder_output"] = encoder(x, training=False)
    return named


def _wrong_dtype(family, inputs):
    """The inputs with the family's id input as float32, and that input's name."""
    from tests import families

    name, ids, replaced = families.id_input(family, inputs)
    return replaced(ids.astype("float32")), name


def run_model_test(family):
    """Runs the standard checks on the tiny model of one registered family (`tests/families.py`).

    Config JSON round trip (a registered name in the family's `package`), eager call, XLA
    call, `.keras` save/load with `safe_mode=True` (same outputs, same
    compile and optimizer state, after one training step that moves every
    trainable weight), `mixed_bfloat16` (bfloat16 compute, float32 variables,
    `compared_outputs` within bfloat16's error of float32's), and a float id
    input refused with an error that names it, without Keras' dump of the inputs.
    """
    from tests import families

    keras.utils.set_random_seed(0)
    # A constant learning rate: the families' default schedules start at 0.
    model = families.model(family, optimizer=keras.optimizers.Adam(1e-3))
    x, y, weights = families.first_batch(family)
    _config_round_trip(model, families.get(family).package)
    eager = model(x, training=False)
    assert_finite(eager)

    compiled = tf.function(lambda inputs: model(inputs, training=False), jit_compile=True)
    assert_allclose(compiled(x), eager, atol=1e-5)

    before = [w.numpy().copy() for w in model.trainable_weights]
    logs = model.train_on_batch(x, y, sample_weight=weights, return_dict=True)
    assert all(np.isfinite(v) for v in logs.values()), logs
    unchanged = [w.path for old, w in zip(before, model.trainable_weights, strict=True)
                 if np.array_equal(old, w.numpy())]
    assert unchanged == [], f"{family}: {unchanged} did not train"
    trained = model(x, training=False)

    # After the step, so that the optimizer's state is saved too.
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.keras")
        model.save(path)
        restored = keras.saving.load_model(path, safe_mode=True)
    assert type(restored) is type(model)
    assert_allclose(restored(x, training=False), trained, atol=0.0)
    assert restored.get_compile_config() == model.get_compile_config()
    assert_allclose([v.numpy() for v in restored.optimizer.variables],
                    [v.numpy() for v in model.optimizer.variables], atol=0.0)

    mixed = families.model(family, dtype="mixed_bfloat16")
    mixed.set_weights(restored.get_weights())
    output = compared_outputs(mixed, x)
    assert all(w.dtype == "float32" for w in mixed.trainable_weights)
    assert_finite(output)
    assert_close_to_float32(output, compared_outputs(restored, x))
    assert any(layer.dtype_policy.compute_dtype == "bfloat16" for layer in mixed._flatten_layers())

    bad, name = _wrong_dtype(family, x)
    try:
        model(bad)
    except TypeError as error:
        message = str(error)
    else:
        raise AssertionError(f"{family}: a float `{name}` was accepted")
    assert message.startswith(f"`{name}` must be an integer tensor"), message
    return eager
