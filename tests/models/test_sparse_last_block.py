"""BERT's task models run their last block at the read positions only: same outputs and gradients.

`BertPretrainer`, `BertClassifier` and `UniLM` call their backbone's layers one by one
(`BertBackbone.encode`) so that the last block computes `[CLS]` and the masked positions only.
Each is compared here with the same heads on the backbone's full pass, as they were built
before, on weights and inputs where every position matters.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.harness import assert_allclose
from tfnlp import models
from tfnlp.layers import masks

RNG = np.random.default_rng(3)
SIZE = {"vocabulary_size": 50, "num_layers": 3, "num_heads": 2, "hidden_dim": 16,
        "intermediate_dim": 32, "max_sequence_length": 16, "dropout": 0.0}


def _inputs():
    token_ids = RNG.integers(5, 50, (3, 10)).astype("int32")
    padding = np.ones((3, 10), "int32")
    padding[1, 7:] = padding[2, 3:] = 0
    segments = np.zeros((3, 10), "int32")
    segments[:, 5:] = 1
    return {"token_ids": token_ids * padding, "segment_ids": segments * padding,
            "padding_mask": padding}


# Repeated, unsorted, on padding and at [CLS].
MASKED_POSITIONS = np.array([[4, 1, 9, 4], [0, 8, 2, 6], [1, 2, 0, 5]], "int32")


def _full_pass(name, model):
    """The model's outputs through `backbone(...)` (every position of the last block)."""
    backbone = model.backbone

    def run(x, training):
        features = {k: x[k] for k in backbone.input}
        outputs = backbone(features, training=training)
        if name == "classifier":
            return model.output_dense(model.output_dropout(outputs["pooled_output"]))
        mlm = model.masked_lm_head(outputs["sequence_output"], masked_positions=x["masked_positions"])
        if name == "unilm":
            return mlm
        return {"mlm": mlm, "nsp": model.next_sentence_head(outputs["pooled_output"])}

    return run


def _model(name):
    keras.utils.set_random_seed(11)
    if name == "pretrainer":
        model = models.BertPretrainer(models.BertBackbone(**SIZE))
        x = {**_inputs(), "masked_positions": MASKED_POSITIONS}
    elif name == "classifier":
        model = models.BertClassifier(models.BertBackbone(**SIZE), num_classes=3)
        x = _inputs()
    else:
        model = models.UniLM(models.UniLMBackbone(**SIZE))
        x = {**_inputs(), "masked_positions": MASKED_POSITIONS,
             "objective": np.array([masks.SEQ2SEQ, masks.LEFT_TO_RIGHT, masks.RIGHT_TO_LEFT], "int32")}
    # Non-zero biases and LayerNorm offsets: every parameter changes the outputs.
    for variable in model.trainable_variables:
        variable.assign(variable + RNG.normal(scale=0.05, size=variable.shape).astype("float32"))
    return model, x


@pytest.mark.parametrize("name", ["pretrainer", "classifier", "unilm"])
def test_outputs_and_gradients_equal_the_full_pass(name):
    model, x = _model(name)
    full = _full_pass(name, model)
    x = {k: tf.constant(v) for k, v in x.items()}
    with tf.GradientTape(persistent=True) as tape:
        ours, theirs = model(x, training=False), full(x, training=False)
        projection = [tf.constant(RNG.normal(size=t.shape).astype("float32"))
                      for t in tf.nest.flatten(ours)]
        losses = [
            sum(tf.reduce_sum(t * p) for t, p in zip(tf.nest.flatten(out), projection, strict=True))
            for out in (ours, theirs)
        ]
    assert_allclose(ours, theirs, atol=2e-6)
    variables = model.trainable_variables
    for mine, reference in zip(tape.gradient(losses[0], variables),
                               tape.gradient(losses[1], variables), strict=True):
        assert_allclose(tf.convert_to_tensor(mine), tf.convert_to_tensor(reference), atol=2e-5)


@pytest.mark.parametrize("name", ["pretrainer", "classifier", "unilm"])
def test_layers_and_variables_are_the_backbones_then_the_heads(name):
    model, _ = _model(name)
    tops = [layer for layer in model.layers if not isinstance(layer, keras.layers.InputLayer)]
    assert tops[0] is model.backbone and model.backbone not in tops[1:]
    heads = tops[1:]
    # Less the backbone layers no output reads (UniLM's pooler), kept from the optimizer.
    unread = {id(v) for layer in model._unread_backbone_layers() for v in layer.weights}
    expected = [v for v in model.backbone.trainable_variables if id(v) not in unread]
    for head in heads:  # a tied head's embedding is the backbone's
        expected += [v for v in head.trainable_variables if id(v) not in map(id, expected)]
    assert [id(v) for v in model.trainable_variables] == [id(v) for v in expected]
    model.backbone.trainable = False
    frozen = {id(v) for v in model.backbone.weights}
    assert model.trainable_variables
    assert not frozen & {id(v) for v in model.trainable_variables}


def test_the_pretrainer_trains_the_same_steps_as_the_full_pass():
    model, x = _model("pretrainer")
    y = {"mlm": RNG.integers(0, 50, (3, 4)).astype("int32"), "nsp": np.array([0, 1, 1], "int32")}
    weights = {"mlm": np.array([[1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 0, 0]], "float32"),
               "nsp": np.ones(3, "float32")}
    start = [v.numpy() for v in model.trainable_variables]
    reference = keras.Model(model.input, _full_pass("pretrainer", model)(model.input, None))
    losses = {}
    for label, which in (("full", reference), ("ours", model)):
        for variable, value in zip(model.trainable_variables, start, strict=True):
            variable.assign(value)
        which.compile(optimizer=keras.optimizers.SGD(0.1),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        losses[label] = which.fit(x, y, sample_weight=weights, epochs=3, verbose=0,
                                  shuffle=False).history["loss"]
    np.testing.assert_allclose(losses["ours"], losses["full"], rtol=1e-5)
