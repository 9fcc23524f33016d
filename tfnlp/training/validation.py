"""Held-out figures during `training.fit`: evaluation every N steps, the best weights kept."""

import contextlib
import json
import math
import os
import warnings

import keras
import tensorflow as tf

from tfnlp import _checks
from tfnlp.training import loop

MODES = ("max", "min")
# Keras' warning when a dataset of unknown length ends its epoch: how Keras
# finds that end, not a problem, unless a number of steps was asked for.
_EPOCH_END = "Your input ran out of data"


@contextlib.contextmanager
def quiet_epoch_end(steps=None):
    """Hides Keras' "Your input ran out of data" warning while a finite dataset is read to its end.

    Keras 3 finds the end of a dataset of unknown length (length buckets,
    `filter`) by running out of it, and warns each time. With `steps` (the
    caller asked for a number of batches) the warning is real and is kept.
    """
    with warnings.catch_warnings():
        if steps is None:
            warnings.filterwarnings("ignore", message=_EPOCH_END)
        yield


class ValidationEvaluation(keras.callbacks.Callback):
    """Evaluates on held-out data every `every_n_steps` steps; keeps the best weights; stops early.

    For `tfnlp.training.fit` (whose callbacks get the global step): every
    `every_n_steps` steps and at the end, `model.evaluate(validation_data)`
    runs; its figures are printed (one line each time), kept in
    `self.history` and, with `log_dir`, written to TensorBoard as
    `validation/<name>`. With `directory`, the weights that gave the best
    `monitor` so far are saved to `directory/best.weights.h5`, and every
    evaluation to `directory/best.json` (each file written whole, then
    renamed into place); with `restore_best`, the best weights are loaded
    into the model when training ends. With `patience`, training stops after
    that many evaluations in a row without improvement (early stopping).

    Resumption: a run that `fit` resumes from a checkpoint at step `s` reads
    `best.json` and keeps the evaluations of steps up to `s` (the later ones
    are run again), so the best so far and the count towards `patience` are
    those of the restored step; a run from step 0 starts afresh, ignoring
    what an earlier run left in `directory`. Under a multi-worker strategy,
    give `directory` on a file system every worker reads (only the chief
    writes it).

    Args:
        validation_data: a finite `tf.data.Dataset` of `(x, y[, weights])`
            batches.
        every_n_steps: int, steps between evaluations (an epoch, say).
        monitor: the `evaluate` figure compared (e.g. `"accuracy"`,
            `"loss"`, `"mlm_accuracy"`).
        mode: `"max"` (higher is better) or `"min"`.
        patience: None (never stop early) or int, evaluations without
            improvement before training stops.
        directory: None or a directory for `best.weights.h5` and
            `best.json` (written by the chief only).
        restore_best: bool, load the best weights at the end of training
            (needs `directory`).
        log_dir: None or a TensorBoard directory.
        verbose: 0 (silent) or 1 (a line per evaluation on stdout).

    Example:

    >>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    >>> model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    ...               metrics=["accuracy"])
    >>> batches = tf.data.Dataset.from_tensors((tf.ones((4, 3)), tf.zeros((4,), tf.int32)))
    >>> validation = ValidationEvaluation(batches, every_n_steps=2, monitor="accuracy", verbose=0)
    >>> history = loop.fit(model, batches.repeat(), steps=4, callbacks=[validation], verbose=0)
    >>> [entry["step"] for entry in validation.history]
    [2, 4]
    """

    def __init__(self, validation_data, every_n_steps, monitor="loss", mode="min", patience=None,
                 directory=None, restore_best=False, log_dir=None, verbose=1):
        super().__init__()
        if not isinstance(validation_data, tf.data.Dataset):
            raise ValueError(
                f"`validation_data` must be a tf.data.Dataset, got {type(validation_data).__name__}."
            )
        _checks.one_of("mode", mode, MODES)
        if restore_best and not directory:
            raise ValueError("`restore_best` needs `directory` (where the best weights are kept).")
        self.validation_data = validation_data
        self.every_n_steps = _checks.positive_int("every_n_steps", every_n_steps)
        self.monitor = monitor
        self.mode = mode
        self.patience = _checks.positive_int("patience", patience, allow_none=True)
        self.directory = directory
        self.restore_best = restore_best
        self.log_dir = log_dir
        self.verbose = verbose
        self.history = []
        self.best = None  # {"step": ..., monitor: ..., ...}
        self.waited = 0
        self._step = 0
        self._evaluated = 0
        self._writer = None

    def _paths(self):
        return (os.path.join(self.directory, "best.weights.h5"),
                os.path.join(self.directory, "best.json"))

    def _chief(self):
        return loop.is_chief(self.model.distribute_strategy)

    def on_train_begin(self, logs=None):
        self.history, self.best, self.waited, self._evaluated = [], None, 0, 0
        start = (logs or {}).get("step", 0)
        if self.directory and start:
            record = self._paths()[1]
            if os.path.exists(record):  # a resumed run: the evaluations up to its step
                with open(record, encoding="utf-8") as f:
                    saved = json.load(f)
                # A best after `start` stays in the weights file: the replayed
                # steps reach it again (deterministic runs) and rewrite it.
                for entry in saved.get("history", []):
                    if entry["step"] <= start:
                        self._record(entry)
        if self.log_dir and self._chief():
            self._writer = tf.summary.create_file_writer(self.log_dir)

    def _record(self, entry):
        """Adds one evaluation; returns whether it is the best so far."""
        value = entry[self.monitor]
        improved = math.isfinite(value) and (
            self.best is None
            or (value > self.best[self.monitor] if self.mode == "max" else value < self.best[self.monitor])
        )
        self.waited = 0 if improved else self.waited + 1
        if improved:
            self.best = dict(entry)
        self.history.append(dict(entry))
        return improved

    def on_train_batch_end(self, batch, logs=None):
        self._step = batch
        if batch % self.every_n_steps == 0:
            self._evaluate(batch)

    def on_train_end(self, logs=None):
        if self._step and self._evaluated != self._step:
            self._evaluate(self._step)
        if self.restore_best and self.best is not None and os.path.exists(self._paths()[0]):
            self.model.load_weights(self._paths()[0])
            if self.verbose:
                print(f"restored the weights of step {self.best['step']} "
                      f"(validation {self.monitor} {self.best[self.monitor]:.4f})", flush=True)
        if self._writer is not None:
            self._writer.close()

    def _evaluate(self, step):
        self._evaluated = step
        with quiet_epoch_end():
            figures = self.model.evaluate(self.validation_data, verbose=0, return_dict=True)
        figures = {name: float(value) for name, value in figures.items()}
        if self.monitor not in figures:
            raise ValueError(
                f"`monitor` {self.monitor!r} is not among the validation figures {sorted(figures)}."
            )
        improved = self._record({"step": step, **figures})
        if self._writer is not None:
            with self._writer.as_default(step=step):
                for name, figure in figures.items():
                    tf.summary.scalar(f"validation/{name}", figure)
            self._writer.flush()
        if self.directory and self._chief():
            os.makedirs(self.directory, exist_ok=True)
            weights, record = self._paths()
            if improved:  # whole or not at all: written aside, then renamed
                self.model.save_weights(weights + ".partial.weights.h5")
                os.replace(weights + ".partial.weights.h5", weights)
            with open(record + ".partial", "w", encoding="utf-8") as f:
                json.dump({"monitor": self.monitor, "mode": self.mode, "best": self.best,
                           "waited": self.waited, "history": self.history}, f, indent=2)
            os.replace(record + ".partial", record)
        if self.verbose:
            shown = ", ".join(f"{name} {figure:.4f}" for name, figure in sorted(figures.items()))
            mark = " (best so far)" if improved else ""
            print(f"step {step}: validation {shown}{mark}", flush=True)
        if self.patience is not None and self.waited >= self.patience:
            if self.verbose:
                print(f"no better validation {self.monitor} in {self.waited} evaluations: "
                      "stopping early", flush=True)
            self.model.stop_training = True
