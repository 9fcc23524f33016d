"""A job killed with SIGKILL and restarted ends exactly like an uninterrupted one."""

import os
import pathlib
import signal
import subprocess
import sys
import threading

import numpy as np
import pytest
import tensorflow as tf

from tests.training.families import FAMILIES

ROOT = pathlib.Path(__file__).resolve().parents[2]
STEPS = 10


def _command(family, checkpoint_dir, result):
    return [sys.executable, "-m", "tests.training.resume_job", family, str(STEPS),
            str(checkpoint_dir), str(result)]


def _run(family, checkpoint_dir, result):
    done = subprocess.run(_command(family, checkpoint_dir, result), cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _kill_after(family, checkpoint_dir, result, step):
    """Starts the job and SIGKILLs it as soon as it reports `step` (mid-run, between checkpoints)."""
    process = subprocess.Popen(_command(family, checkpoint_dir, result), cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    # A watchdog bounds a hung job; reaching EOF without the step fails below.
    watchdog = threading.Timer(300, process.kill)
    watchdog.start()
    reached = False
    try:
        for line in process.stdout:
            if line.strip() == f"step {step}":
                os.kill(process.pid, signal.SIGKILL)
                reached = True
                break
    finally:
        watchdog.cancel()
        process.kill()
        process.wait(timeout=60)
    assert reached, "the job ended without reporting the step"
    assert process.returncode == -signal.SIGKILL
    assert not result.exists()


def _load(path):
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


@pytest.mark.parametrize("family", FAMILIES)
def test_killed_and_restarted_training_ends_with_the_same_steps_and_weights(family, tmp_path):
    _run(family, tmp_path / "straight", tmp_path / "straight.npz")
    expected = _load(tmp_path / "straight.npz")

    # Killed right after step 5 (checkpoints every 2 steps: the last is
    # ckpt-4, or ckpt-6 should step 6 slip in before the signal lands).
    _kill_after(family, tmp_path / "crashed", tmp_path / "crashed.npz", step=5)
    last = int(tf.train.latest_checkpoint(str(tmp_path / "crashed")).rsplit("-", 1)[1])
    assert last in (4, 6)
    output = _run(family, tmp_path / "crashed", tmp_path / "crashed.npz")
    assert output.split()[:2] == ["step", str(last + 1)]  # resumed after the last checkpoint
    resumed = _load(tmp_path / "crashed.npz")

    assert int(resumed["steps"]) == int(expected["steps"]) == STEPS
    np.testing.assert_allclose(resumed["loss"], expected["loss"][last:], rtol=1e-6)
    weights = sorted(k for k in expected if k.startswith("w"))
    for key in weights:
        np.testing.assert_array_equal(resumed[key], expected[key], err_msg=key)


def test_a_checkpoint_cut_short_while_written_leaves_the_last_good_one(tmp_path):
    """A crash while saving leaves partial files that nothing points to."""
    directory = tmp_path / "job"
    _kill_after("transformer_classifier", directory, tmp_path / "job.npz", step=5)
    last = int(tf.train.latest_checkpoint(str(directory)).rsplit("-", 1)[1])
    # What a crash in the middle of writing the next checkpoint leaves: its
    # data and index files, truncated. `checkpoint`, which TensorFlow
    # replaces atomically only once both are complete, still names the last.
    (directory / f"ckpt-{last + 2}.data-00000-of-00001").write_bytes(b"\x00" * 17)
    (directory / f"ckpt-{last + 2}.index").write_bytes(b"partial")
    assert tf.train.latest_checkpoint(str(directory)).endswith(f"ckpt-{last}")
    output = _run("transformer_classifier", directory, tmp_path / "job.npz")
    assert output.split()[:2] == ["step", str(last + 1)]
    _run("transformer_classifier", tmp_path / "straight", tmp_path / "straight.npz")
    resumed, expected = _load(tmp_path / "job.npz"), _load(tmp_path / "straight.npz")
    for key in (k for k in expected if k.startswith("w")):
        np.testing.assert_array_equal(resumed[key], expected[key], err_msg=key)
