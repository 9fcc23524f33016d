"""Two MultiWorkerMirroredStrategy processes on 127.0.0.1 == one process."""

import json
import os
import pathlib
import socket
import subprocess

import numpy as np
import pytest

from tests.training.families import FAMILIES
from tests.training.resume_job import command, load

ROOT = pathlib.Path(__file__).resolve().parents[2]
STEPS = 4


def _free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def _job(jobs, env, steps=STEPS):
    """`jobs`: (family, checkpoint_dir, result) triples, run one after the other in one process."""
    return subprocess.Popen(
        command(steps, jobs, "--per-replica", "--no-dropout"),
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    """Every family trained by one process without a cluster (all in one process)."""
    root = tmp_path_factory.mktemp("single")
    job = _job([(f, root / f, root / f"{f}.npz") for f in FAMILIES],
               {k: v for k, v in os.environ.items() if k != "TF_CONFIG"})
    _, errors = job.communicate(timeout=600)
    assert job.returncode == 0, errors[-3000:]
    return {f: load(root / f"{f}.npz") for f in FAMILIES}


@pytest.mark.parametrize("family", FAMILIES)
def test_two_workers_train_like_one_process_and_only_the_chief_writes(family, single, tmp_path):
    workers = [f"127.0.0.1:{port}" for port in _free_ports(2)]
    jobs = []
    for index in range(2):
        config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        env = dict(os.environ, TF_CONFIG=json.dumps(config))
        jobs.append(_job([(family, tmp_path / f"worker{index}", tmp_path / f"worker{index}.npz")], env))
    try:
        for job in jobs:
            _, errors = job.communicate(timeout=300)
            assert job.returncode == 0, errors[-3000:]
    finally:
        for job in jobs:
            job.kill()

    expected, chief = single[family], load(tmp_path / "worker0.npz")
    assert int(chief["steps"]) == int(expected["steps"]) == STEPS
    np.testing.assert_allclose(chief["loss"], expected["loss"], rtol=1e-5, atol=1e-6)
    weights = [k for k in expected if k.startswith("w")]
    assert weights
    for key in weights:
        np.testing.assert_allclose(chief[key], expected[key], atol=1e-5, err_msg=key)
    # Worker 0 is the chief: it alone keeps checkpoints, summaries and results.
    assert list((tmp_path / "worker0").glob("ckpt-*.index"))
    assert list((tmp_path / "worker0" / "logs").glob("events.out.tfevents.*"))
    assert not (tmp_path / "worker1.npz").exists()
    assert not list((tmp_path / "worker1").glob("**/events.out.tfevents.*"))
    assert not list((tmp_path / "worker1").glob("**/ckpt-*"))  # its scratch copies are gone

    if family != "transformer_classifier":
        return
    # Resuming without a shared checkpoint directory: worker 1 finds nothing
    # to restore while the chief finds step 4. Both refuse, naming the cause.
    jobs = []
    for index in range(2):
        config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        env = dict(os.environ, TF_CONFIG=json.dumps(config))
        jobs.append(_job([(family, tmp_path / f"worker{index}", tmp_path / f"again{index}.npz")], env,
                         steps=STEPS + 2))
    try:
        for job in jobs:
            _, errors = job.communicate(timeout=300)
            assert job.returncode != 0 and "shared file system" in errors, errors[-2000:]
    finally:
        for job in jobs:
            job.kill()
