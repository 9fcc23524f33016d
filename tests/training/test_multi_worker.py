"""Two MultiWorkerMirroredStrategy processes on 127.0.0.1 == one process."""

import json
import os
import pathlib
import socket
import subprocess

import numpy as np
import pytest

from tests.families import FAMILIES
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


def _workers(jobs_of, steps=STEPS, timeout=600):
    """Runs two workers of one cluster to their end; `jobs_of(index)` gives worker `index`'s jobs.

    Returns each worker's (return code, stderr).
    """
    workers = [f"127.0.0.1:{port}" for port in _free_ports(2)]
    processes = []
    for index in range(2):
        config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        processes.append(_job(jobs_of(index), dict(os.environ, TF_CONFIG=json.dumps(config)), steps))
    results = []
    try:
        for process in processes:
            _, errors = process.communicate(timeout=timeout)
            results.append((process.returncode, errors))
    finally:
        for process in processes:
            process.kill()
    return results


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Every family trained by a cluster of two workers: each worker process runs them in turn.

    One strategy per process (a second MultiWorkerMirroredStrategy cannot
    join the cluster), as in a user's job that trains several models.
    """
    root = tmp_path_factory.mktemp("cluster")
    for code, errors in _workers(lambda i: [(f, root / f / f"worker{i}", root / f / f"worker{i}.npz")
                                            for f in FAMILIES]):
        assert code == 0, errors[-3000:]
    return root


@pytest.mark.parametrize("family", FAMILIES)
def test_two_workers_train_like_one_process_and_only_the_chief_writes(family, single, cluster):
    directory = cluster / family
    expected, chief = single[family], load(directory / "worker0.npz")
    assert int(chief["steps"]) == int(expected["steps"]) == STEPS
    np.testing.assert_allclose(chief["loss"], expected["loss"], rtol=1e-5, atol=1e-6)
    weights = [k for k in expected if k.startswith("w")]
    assert weights
    for key in weights:
        np.testing.assert_allclose(chief[key], expected[key], atol=1e-5, err_msg=key)
    # Worker 0 is the chief: it alone keeps checkpoints, summaries and results.
    assert list((directory / "worker0").glob("ckpt-*.index"))
    assert list((directory / "worker0" / "logs").glob("events.out.tfevents.*"))
    assert not (directory / "worker1.npz").exists()
    assert not list((directory / "worker1").glob("**/events.out.tfevents.*"))
    assert not list((directory / "worker1").glob("**/ckpt-*"))  # its scratch copies are gone


def test_resuming_without_a_shared_checkpoint_directory_is_refused_by_both_workers(cluster, tmp_path):
    """Worker 1 finds nothing to restore while the chief finds step 4: both refuse, naming the cause."""
    family = "transformer_classifier"
    for code, errors in _workers(lambda i: [(family, cluster / family / f"worker{i}", tmp_path / f"again{i}.npz")],
                                 steps=STEPS + 2, timeout=300):
        assert code != 0 and "shared file system" in errors, errors[-2000:]
    assert not list(tmp_path.glob("again*.npz"))
