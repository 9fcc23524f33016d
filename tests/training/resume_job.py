"""Training jobs for the crash/resume and multi-worker tests (run as a script).

    python -m tests.training.resume_job STEPS FAMILY CHECKPOINT_DIR RESULT.npz \
        [FAMILY CHECKPOINT_DIR RESULT.npz ...] [--per-replica] [--no-dropout]

Deterministic ops, fixed seeds and a shuffling input pipeline whose position
`training.fit` must restore. Dropout is on, so the random-seed states must be
restored too. Each job writes its final weights and history to its RESULT.npz;
the process prints `job I` before job I and `step N` lines as it goes (the
tests kill it mid-run). Several jobs run one after the other in one process,
each from the same seeds, so that tests pay TensorFlow's start-up (seconds)
once rather than once per job.
"""

import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tests import families  # noqa: E402
from tfnlp import training  # noqa: E402

FLAGS = ("--per-replica", "--no-dropout")


def command(steps, jobs, *flags):
    """The command line running `jobs`, (family, checkpoint_dir, result) triples, in one process."""
    return [sys.executable, "-m", "tests.training.resume_job", str(steps),
            *(str(part) for job in jobs for part in job), *flags]


def load(path):
    """A job's RESULT.npz as a dict of arrays."""
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


def main(family, checkpoint_dir, result_path, steps, strategy, per_replica=False, dropout=0.1):
    keras.backend.clear_session()  # each job as in a process of its own
    keras.utils.set_random_seed(11)
    with strategy.scope():
        model = families.model(family, dropout=dropout)
    # A shuffled, repeating pipeline: resuming must find the same position.
    dataset = families.batches(family, count=6).shuffle(6, seed=5)
    if per_replica:  # each worker reads its half of every global batch

        def dataset_fn(context):
            half = families.BATCH // context.num_input_pipelines
            start = context.input_pipeline_id * half
            return dataset.map(lambda *batch: tf.nest.map_structure(lambda t: t[start : start + half], batch))

        source = dataset_fn
    else:
        source = dataset

    class Report(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            print(f"step {batch}", flush=True)

    history = training.fit(model, source, steps=steps, checkpoint_dir=checkpoint_dir,
                           checkpoint_every=2, log_dir=os.path.join(checkpoint_dir, "logs"),
                           log_every=1, verbose=0, callbacks=[Report()])
    if training.is_chief(strategy):
        np.savez(result_path, steps=history["steps"], loss=np.array(history.get("loss", [])),
                 **{f"w{i}": w.numpy() for i, w in enumerate(model.weights)})


if __name__ == "__main__":
    arguments = [a for a in sys.argv[1:] if a not in FLAGS]
    if len(arguments) < 4 or (len(arguments) - 1) % 3:
        sys.exit(__doc__)
    steps, *jobs = arguments
    per_replica, dropout = "--per-replica" in sys.argv, 0.0 if "--no-dropout" in sys.argv else 0.1
    tf.config.experimental.enable_op_determinism()
    strategy = training.strategy()  # one per process: a second MultiWorkerMirroredStrategy cannot join the cluster
    for index in range(0, len(jobs), 3):
        print(f"job {index // 3}", flush=True)
        main(*jobs[index : index + 3], steps=int(steps), strategy=strategy, per_replica=per_replica, dropout=dropout)
