"""`training.ValidationEvaluation`: held-out figures during `training.fit`, best weights, early stopping."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfnlp import training


def _model():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile(keras.optimizers.SGD(0.5),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    return model


def _batches(seed, count=8):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(count * 8, 4)).astype("float32")
    y = (x[:, 0] > 0).astype("int32")
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(8)


def test_the_best_evaluation_is_kept_restored_and_survives_a_restart(tmp_path, capsys):
    model = _model()
    # Labels the training data contradicts: validation gets worse as training goes on,
    # so the best weights are the first evaluation's.
    flipped = _batches(1).map(lambda x, y: (x, 1 - y))
    callback = training.ValidationEvaluation(
        flipped, every_n_steps=4, monitor="accuracy", mode="max", patience=2,
        directory=str(tmp_path / "best"), restore_best=True, log_dir=str(tmp_path / "logs"),
    )
    history = training.fit(model, _batches(0).repeat(), steps=40, callbacks=[callback], verbose=0)
    steps = [entry["step"] for entry in callback.history]
    assert steps[0] == 4 and callback.best["step"] == 4
    assert history["steps"] == steps[-1] < 40  # stopped after 2 evaluations without improvement
    assert len(steps) == 3
    best = model.evaluate(flipped, verbose=0, return_dict=True)["accuracy"]
    assert best == pytest.approx(callback.best["accuracy"])  # the best weights are back
    record = json.loads((tmp_path / "best" / "best.json").read_text())
    assert record["best"]["step"] == 4 and record["waited"] == 2
    out = capsys.readouterr().out
    assert "step 4: validation accuracy" in out and "stopping early" in out
    assert list((tmp_path / "logs").glob("events.out.tfevents.*"))

    # A run resumed from a checkpoint keeps the evaluations up to its step
    # (the later ones run again); a new run (step 0) starts afresh.
    again = training.ValidationEvaluation(flipped, 4, monitor="accuracy", mode="max",
                                          directory=str(tmp_path / "best"), verbose=0)
    again.set_model(model)
    again.on_train_begin(logs={"step": 12})
    assert again.best == callback.best and again.waited == 2 and len(again.history) == 3
    again.on_train_begin(logs={"step": 5})
    assert again.best == callback.best and again.waited == 0 and len(again.history) == 1
    again.on_train_begin(logs={"step": 0})
    assert again.best is None and again.history == []


def test_it_evaluates_at_the_last_step_and_checks_its_arguments():
    model = _model()
    callback = training.ValidationEvaluation(_batches(2), every_n_steps=4, verbose=0)
    training.fit(model, _batches(0).repeat(), steps=6, callbacks=[callback], verbose=0)
    assert [entry["step"] for entry in callback.history] == [4, 6]
    with pytest.raises(ValueError, match="`monitor` 'f1' is not among the validation figures"):
        training.fit(_model(), _batches(0).repeat(), steps=4, verbose=0, callbacks=[
            training.ValidationEvaluation(_batches(2), 2, monitor="f1", verbose=0)])
    with pytest.raises(ValueError, match="`restore_best` needs `directory`"):
        training.ValidationEvaluation(_batches(2), 2, restore_best=True)
    with pytest.raises(ValueError, match="`mode` must be one of"):
        training.ValidationEvaluation(_batches(2), 2, mode="up")
    with pytest.raises(ValueError, match="`validation_data` must be a tf.data.Dataset"):
        training.ValidationEvaluation([1, 2], 2)
    with pytest.raises(ValueError, match="every_n_steps"):
        training.ValidationEvaluation(_batches(2), 0)
