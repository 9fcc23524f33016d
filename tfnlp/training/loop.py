"""A resumable training loop that works under every `tf.distribute` strategy."""

import shutil
import sys
import tempfile
import time

import keras
import tensorflow as tf

from tfnlp import _checks


def is_chief(strategy):
    """Whether this process writes checkpoints, exports and summaries.

    True except for the non-chief workers of a multi-worker strategy: the
    task of type `chief`, or worker 0 when the cluster has no chief, is the
    chief.
    """
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not getattr(resolver, "task_type", None):
        return True
    cluster = resolver.cluster_spec().as_dict()
    if "chief" in cluster:
        return resolver.task_type == "chief"
    return resolver.task_type == "worker" and int(resolver.task_id or 0) == 0


class _Progress:
    """A progress bar on stderr: redrawn in place on a terminal; otherwise
    (logs, CI) one line per 5% of the run."""

    def __init__(self, total, start, enabled):
        self.total, self.start, self.enabled = total, start, enabled
        self.begin = time.time()
        self.terminal = sys.stderr.isatty()
        self.every = max(1, (total - start) // 20)

    def update(self, step, logs):
        if not self.enabled:
            return
        if not self.terminal and step != self.total and (step - self.start) % self.every:
            return
        done = step - self.start
        rate = done / max(time.time() - self.begin, 1e-9)
        width = 30
        filled = int(width * step / self.total)
        metrics = " - ".join(f"{k}: {float(v):.4f}" for k, v in sorted(logs.items()))
        end = "\n" if (step == self.total or not self.terminal) else "\r"
        sys.stderr.write(
            f"step {step}/{self.total} [{'=' * filled}{'.' * (width - filled)}] "
            f"{rate:.2f} steps/s - {metrics}{end}"
        )
        sys.stderr.flush()


def fit(
    model,
    dataset,
    steps,
    checkpoint_dir=None,
    checkpoint_every=100,
    max_checkpoints=3,
    log_dir=None,
    log_every=10,
    callbacks=None,
    verbose=1,
    histogram_every=None,
    profile_steps=None,
):
    """Trains `model` for `steps` optimizer steps; resumes exactly after a crash.

    Works under the default strategy, `MirroredStrategy`,
    `MultiWorkerMirroredStrategy` (where Keras 3.15's `model.fit` fails,
    keras-team/keras#20585) and `TPUStrategy`: the model's own
    `train_step` (its loss, metrics, optimizer, loss scaling and
    `jit_compile` setting from `compile`) runs per replica under
    `strategy.run`, on a distributed iterator over `dataset`.

    Nothing is lost on a crash. Every `checkpoint_every` steps (and at the
    end) a checkpoint keeps the model's variables (random-seed states
    included) and the optimizer's (its step counter included). Running the
    same call again restores the latest checkpoint, skips the batches those
    steps consumed (so the input position is restored too; skipping reads
    but does not train on them) and trains the remaining steps: with
    deterministic ops (`tf.config.experimental.enable_op_determinism()`)
    and a deterministic pipeline (seeded shuffles, as every tfnlp pipeline
    has), a run killed at any step ends with the same number of optimizer
    steps and the same weights as an uninterrupted one
    (`tests/training/test_resume.py` kills a process with SIGKILL to show it).
    TensorFlow writes a checkpoint's files first and then replaces the
    `checkpoint` index file atomically, so a crash while writing leaves the
    previous checkpoint intact and in use. Before restoring, the latest
    checkpoint is checked against the model and its optimizer (every
    variable's shape and dtype, every tensor readable): a checkpoint of
    another configuration, dtype policy or optimizer, or a corrupt one,
    raises a `ValueError` listing every mismatch, and nothing is restored.
    Only the chief (see `is_chief`)
    keeps checkpoints and writes summaries; other workers write theirs to a
    temporary directory that is deleted.

    Args:
        model: a compiled Keras model, created inside the strategy's
            `scope()` (the strategy is taken from the model).
        dataset: a `tf.data.Dataset` of `(x, y[, sample_weight])` batches of
            the *global* batch size (the strategy splits them), or a
            function `input_context -> tf.data.Dataset` of per-replica
            batches (`strategy.distribute_datasets_from_function`). It must
            yield at least `steps` batches (use `.repeat()`).
        steps: int, the total number of optimizer steps (counting those of
            a restored checkpoint).
        checkpoint_dir: str or None (no checkpoints, no resumption).
        checkpoint_every: int, steps between checkpoints.
        max_checkpoints: int, how many recent checkpoints to keep.
        log_dir: str or None, TensorBoard directory for the per-step
            scalars (`train/...`).
        log_every: int, steps between summaries (and at the last step).
        callbacks: optional list of `keras.callbacks.Callback`; they get
            `on_train_begin(logs={"step": restored step, 0 for a new run})`,
            `on_train_batch_end(step, logs)` (the global optimizer step,
            from 1) and `on_train_end`; `AttentionImages`
            writes at the end, or every `every_n_steps` steps.
        verbose: 0 (silent) or 1 (progress bar on stderr).
        histogram_every: None (no histograms) or int: every that many steps
            (and at the last step) a `tf.summary.histogram` of every
            trainable weight goes to `log_dir`, tagged with the variable's
            path (e.g. `bert_backbone/token_embedding/embeddings`). Needs
            `log_dir`.
        profile_steps: None or a `(start, stop)` pair of global optimizer
            steps, `1 <= start <= stop`: the TensorFlow profiler
            (`tf.profiler.experimental`) traces steps `start` to `stop`
            (both included; a resumed run traces the part of the range it
            runs) and writes the trace under `log_dir/plugins/profile/`
            for TensorBoard's Profile tab. Step 1 also traces the
            compilation of the step function: start later to see the
            steady state. Needs `log_dir`.

    Returns:
        dict: `"loss"` (and each metric) -> list of per-step values of the
        steps run by this call; `"steps"` -> the training steps (batches)
        done in all. (Under `mixed_float16` the optimizer's own `iterations`
        can be lower: a `LossScaleOptimizer` skips steps whose gradients
        overflow.)

    Example:

    >>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> data = tf.data.Dataset.from_tensors((tf.ones((4, 3)), tf.ones((4, 1)))).repeat()
    >>> history = fit(model, data, steps=5, verbose=0)
    >>> history["steps"], len(history["loss"])
    (5, 5)
    """
    if not isinstance(model, keras.Model):
        raise ValueError(f"`model` must be a keras.Model, got {type(model).__name__}.")
    if getattr(model, "optimizer", None) is None:
        raise ValueError("`model` must be compiled (with an optimizer) before `fit`.")
    steps = _checks.positive_int("steps", steps)
    checkpoint_every = _checks.positive_int("checkpoint_every", checkpoint_every)
    max_checkpoints = _checks.positive_int("max_checkpoints", max_checkpoints)
    log_every = _checks.positive_int("log_every", log_every)
    if verbose not in (0, 1):
        raise ValueError(f"`verbose` must be 0 or 1, got {verbose!r}.")
    histogram_every = _checks.positive_int("histogram_every", histogram_every, allow_none=True)
    profile_steps = _profile_range(profile_steps)
    for name, value in (("histogram_every", histogram_every), ("profile_steps", profile_steps)):
        if value is not None and not log_dir:
            raise ValueError(f"`{name}` needs `log_dir` (where the summaries and traces go).")
    # The strategy the model was created under (Keras records it; None when
    # created outside any strategy's scope).
    created = getattr(model, "_distribute_strategy", None)
    strategy = created or tf.distribute.get_strategy()
    if tf.distribute.has_strategy() and tf.distribute.get_strategy() is not created:
        raise ValueError(
            "`model` was created outside the active strategy's scope(); create it (and "
            "compile it) inside `strategy.scope()`."
        )
    if not (isinstance(dataset, tf.data.Dataset) or callable(dataset)):
        raise ValueError(
            "`dataset` must be a tf.data.Dataset or a function input_context -> "
            f"tf.data.Dataset, got {type(dataset).__name__}."
        )

    # Create every variable (layers, metrics, loss trackers, optimizer slots)
    # now, from the shapes of one batch, as `model.fit` does: none may be
    # created inside the compiled step.
    example = dataset if isinstance(dataset, tf.data.Dataset) else dataset(tf.distribute.InputContext())
    with strategy.scope():
        model._symbolic_build(data_batch=next(iter(example.take(1))))
        if not model.optimizer.built:
            model.optimizer.build(model.trainable_variables)
        # Batches trained so far: the loop's own counter, not the optimizer's
        # `iterations`, which a LossScaleOptimizer does not advance on the
        # steps it skips for non-finite gradients.
        done = tf.Variable(0, dtype=tf.int64, trainable=False, name="tfnlp_fit_step",
                           aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        checkpoint = tf.train.Checkpoint(
            variables=list(model.variables), optimizer=list(model.optimizer.variables), step=done
        )
    chief = is_chief(strategy)
    manager, scratch = None, None
    if checkpoint_dir:
        directory = checkpoint_dir
        if not chief:  # every worker must save (collectives); only the chief's is kept
            scratch = tempfile.mkdtemp(prefix="tfnlp_worker_checkpoint_")
            directory = scratch
        manager = tf.train.CheckpointManager(checkpoint, directory, max_to_keep=max_checkpoints)
        latest = tf.train.latest_checkpoint(checkpoint_dir)
        if latest:
            _check_resumable(latest, {"variables": model.variables,
                                      "optimizer": model.optimizer.variables})
            checkpoint.restore(latest).assert_existing_objects_matched()
    writer = tf.summary.create_file_writer(log_dir) if (log_dir and chief) else None

    start = int(done.numpy())
    _check_workers_agree(strategy, start)
    if start > steps:
        raise ValueError(
            f"The checkpoint in {checkpoint_dir!r} is at step {start}, beyond `steps` ({steps})."
        )
    # The input position: the batches already consumed are skipped, so a
    # deterministic pipeline resumes exactly where the checkpoint left it.
    if isinstance(dataset, tf.data.Dataset):  # global batches
        distributed = strategy.experimental_distribute_dataset(dataset.skip(start))
    else:  # each pipeline feeds its replicas one batch each per step

        def per_pipeline(context):
            per_step = context.num_replicas_in_sync // context.num_input_pipelines
            return dataset(context).skip(start * per_step)

        distributed = strategy.distribute_datasets_from_function(per_pipeline)
    iterator = iter(distributed)
    train_function = _train_function(model, strategy)
    callbacks = list(callbacks or [])
    for callback in callbacks:
        if not isinstance(callback, keras.callbacks.Callback):
            raise ValueError(f"`callbacks` must hold keras.callbacks.Callback objects, got {callback!r}.")
        callback.set_model(model)
        callback.on_train_begin(logs={"step": start})  # the step a checkpoint restored
    history = {}
    model.stop_training = False
    progress = _Progress(steps, start, verbose == 1 and chief)
    profile_from, profile_to = profile_steps if (profile_steps and chief) else (0, -1)
    profiling = False
    try:
        for step in range(start + 1, steps + 1):
            if not profiling and profile_from <= step <= profile_to:
                tf.profiler.experimental.start(log_dir)
                profiling = True
            model.reset_metrics()
            logging = writer is not None and (step % log_every == 0 or step == steps)
            # The rate this step uses: read before the step advances the schedule.
            rate = _learning_rate(model.optimizer) if logging else None
            try:
                train_function(iterator)
            except (StopIteration, tf.errors.OutOfRangeError):
                raise ValueError(
                    f"`dataset` ran out of batches after {step - 1} of {steps} steps; "
                    "give it at least `steps` batches (e.g. `.repeat()`)."
                ) from None
            # Read in cross-replica context: the replicas' metric states are summed.
            logs = {k: float(v) for k, v in model.get_metrics_result().items()}
            for name, value in logs.items():
                history.setdefault(name, []).append(value)
            if logging:
                with writer.as_default(step=step):
                    for name, value in logs.items():
                        tf.summary.scalar(f"train/{name}", value)
                    tf.summary.scalar("train/learning_rate", rate)
            if writer is not None and histogram_every and (step % histogram_every == 0 or step == steps):
                with writer.as_default(step=step):
                    for variable in model.trainable_variables:
                        tf.summary.histogram(variable.path, tf.convert_to_tensor(variable))
            done.assign(step)
            if manager is not None and (step % checkpoint_every == 0 or step == steps):
                manager.save(checkpoint_number=step)
            for callback in callbacks:
                callback.on_train_batch_end(step, logs)
            progress.update(step, logs)
            if model.stop_training:  # e.g. keras.callbacks.TerminateOnNaN
                break
            if profiling and step >= profile_to:
                profiling = False
                tf.profiler.experimental.stop()
    finally:
        if profiling:
            tf.profiler.experimental.stop()
        if writer is not None:
            writer.flush()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    for callback in callbacks:
        callback.on_train_end(logs=None)
    history["steps"] = int(done.numpy())
    return history


def _check_resumable(path, parts):
    """Refuses a checkpoint that is unreadable or was not written by this model.

    `fit` matches variables by position, so a checkpoint of another
    configuration (a different size, policy or optimizer) must be refused
    before anything is restored; every mismatch is reported at once. Every
    tensor is read once first (one at a time), so a file cut short or
    corrupted is found before the model is half restored.
    """
    try:
        reader = tf.train.load_checkpoint(path)
        shapes, dtypes = reader.get_variable_to_shape_map(), reader.get_variable_to_dtype_map()
    except Exception as error:  # the reader raises OpError, DataLossError, ... on bad files
        raise ValueError(f"The checkpoint {path} is corrupt or truncated: {error}") from error
    problems = []
    for part, variables in parts.items():
        for index, variable in enumerate(variables):
            key = f"{part}/{index}/.ATTRIBUTES/VARIABLE_VALUE"
            expected = ([int(d) for d in variable.shape], tf.as_dtype(variable.dtype).name)
            if key not in shapes:
                problems.append(f"{part} {index} ({variable.path} {expected[0]} {expected[1]}): missing")
            elif (shapes[key], dtypes[key].name) != tuple(expected):
                problems.append(
                    f"{part} {index} ({variable.path}): the checkpoint has {shapes[key]} "
                    f"{dtypes[key].name}, the model {expected[0]} {expected[1]}"
                )
        extra = sum(key.startswith(f"{part}/") for key in shapes) - len(variables)
        if extra > 0:
            problems.append(f"{part}: the checkpoint has {extra} more than the model's {len(variables)}")
    if problems:
        raise ValueError(
            f"The checkpoint {path} was not written by this model (another configuration, dtype "
            f"policy or optimizer?); use a new `checkpoint_dir` or the original settings. "
            f"{len(problems)} mismatch(es): " + "; ".join(problems)
        )
    try:  # every tensor, checksums included, so that a bad file restores nothing
        for key in shapes:
            reader.get_tensor(key)
    except Exception as error:
        raise ValueError(f"The checkpoint {path} is corrupt or truncated: {error}") from error


def _check_workers_agree(strategy, step):
    """Multi-worker: every worker must have restored the same checkpoint."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not getattr(resolver, "task_type", None):
        return
    local = tf.constant(float(step))
    total = strategy.reduce(
        tf.distribute.ReduceOp.SUM, strategy.run(lambda: tf.identity(local)), axis=None
    )
    if float(total) != float(step) * strategy.num_replicas_in_sync:
        raise ValueError(
            f"This worker restored step {step} but the others did not: every worker must read "
            "the same `checkpoint_dir` (a shared file system)."
        )


def _train_function(model, strategy):
    """One optimizer step on the next batch: `model.train_step` on every replica."""
    # Keras' step is plain Python meant to be traced as is: no autograph
    # (converting its `if`s into `tf.cond`s breaks the optimizer update).
    replica_step = model.train_step
    if model.jit_compile:
        replica_step = tf.function(replica_step, jit_compile=True, autograph=False)

    @tf.function(autograph=False)
    def train_function(iterator):
        strategy.run(replica_step, args=(next(iterator),))

    return train_function


def _profile_range(profile_steps):
    """Checks `profile_steps`: None or a `(start, stop)` pair, `1 <= start <= stop`."""
    if profile_steps is None:
        return None
    message = f"`profile_steps` must be None or a (start, stop) pair of steps, 1 <= start <= stop, got {profile_steps!r}."
    try:
        first, last = profile_steps
        first = _checks.positive_int("profile_steps", first)
        last = _checks.positive_int("profile_steps", last)
    except (TypeError, ValueError):
        raise ValueError(message) from None
    if last < first:
        raise ValueError(message)
    return first, last


def _learning_rate(optimizer):
    # Keras evaluates a schedule at the current step; the value may be a
    # distributed variable, hence the conversion.
    rate = optimizer.learning_rate
    if callable(rate):
        rate = rate(optimizer.iterations)
    return float(tf.convert_to_tensor(rate))


