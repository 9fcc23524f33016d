"""A job killed with SIGKILL and restarted ends exactly like an uninterrupted one."""

import os
import pathlib
import shutil
import signal
import subprocess
import threading

import numpy as np
import pytest
import tensorflow as tf

from tests.families import FAMILIES
from tests.training.resume_job import command, load

ROOT = pathlib.Path(__file__).resolve().parents[2]
STEPS = 10


def _run(*jobs):
    """Runs the jobs, (family, checkpoint_dir, result) triples, in one process; returns each one's output."""
    done = subprocess.run(command(STEPS, jobs), cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    outputs = []
    for line in done.stdout.splitlines():
        if line.startswith("job "):
            assert line == f"job {len(outputs)}", line
            outputs.append("")
        else:
            assert outputs, f"output before the first job: {line}"
            outputs[-1] += line + "\n"
    assert len(outputs) == len(jobs)
    return outputs


def _kill_after(family, checkpoint_dir, result, step):
    """Starts the job and SIGKILLs it as soon as it reports `step` (mid-run, between checkpoints)."""
    process = subprocess.Popen(command(STEPS, [(family, checkpoint_dir, result)]), cwd=ROOT,
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
    return int(tf.train.latest_checkpoint(str(checkpoint_dir)).rsplit("-", 1)[1])


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every family straight through; every family killed after step 5, then restarted.

    Also a copy of the killed transformer classifier's checkpoints whose next
    checkpoint is then cut short. The straight runs share one process, the
    restarts another (each job starts from the same seeds and a cleared Keras
    session); each killed run is a process of its own.
    """
    root = tmp_path_factory.mktemp("resume")
    straight = {f: (f, root / "straight" / f, root / "straight" / f"{f}.npz") for f in FAMILIES}
    _run(*straight.values())
    crashed = {f: (f, root / "crashed" / f, root / "crashed" / f"{f}.npz") for f in FAMILIES}
    # Killed right after step 5 (checkpoints every 2 steps: the last is
    # ckpt-4, or ckpt-6 should step 6 slip in before the signal lands).
    last = {name: _kill_after(*job, step=5) for name, job in crashed.items()}

    # What a crash in the middle of writing the next checkpoint leaves: its
    # data and index files, truncated. `checkpoint`, which TensorFlow
    # replaces atomically only once both are complete, still names the last.
    # (A copy of the killed transformer classifier's directory, rather than
    # one more killed process.)
    directory = root / "cut_short"
    shutil.copytree(crashed["transformer_classifier"][1], directory)
    crashed["cut_short"] = ("transformer_classifier", directory, root / "cut_short.npz")
    last["cut_short"] = last["transformer_classifier"]
    (directory / f"ckpt-{last['cut_short'] + 2}.data-00000-of-00001").write_bytes(b"\x00" * 17)
    (directory / f"ckpt-{last['cut_short'] + 2}.index").write_bytes(b"partial")
    assert tf.train.latest_checkpoint(str(directory)).endswith(f"ckpt-{last['cut_short']}")

    outputs = dict(zip(crashed, _run(*crashed.values()), strict=True))
    return {
        name: {
            "last": last[name], "output": outputs[name], "resumed": load(crashed[name][2]),
            "expected": load(straight[crashed[name][0]][2]),
        }
        for name in crashed
    }


def _assert_same_weights(resumed, expected):
    weights = sorted(k for k in expected if k.startswith("w"))
    assert weights
    for key in weights:
        np.testing.assert_array_equal(resumed[key], expected[key], err_msg=key)


@pytest.mark.parametrize("family", FAMILIES)
def test_killed_and_restarted_training_ends_with_the_same_steps_and_weights(family, runs):
    last, output, resumed, expected = (runs[family][k] for k in ("last", "output", "resumed", "expected"))
    assert last in (4, 6)
    assert output.split()[:2] == ["step", str(last + 1)]  # resumed after the last checkpoint
    assert int(resumed["steps"]) == int(expected["steps"]) == STEPS
    np.testing.assert_allclose(resumed["loss"], expected["loss"][last:], rtol=1e-6)
    _assert_same_weights(resumed, expected)


def test_a_checkpoint_cut_short_while_written_leaves_the_last_good_one(runs):
    """A crash while saving leaves partial files that nothing points to."""
    run = runs["cut_short"]
    assert run["output"].split()[:2] == ["step", str(run["last"] + 1)]
    _assert_same_weights(run["resumed"], run["expected"])
