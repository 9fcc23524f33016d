import collections
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# tfnlp before TensorFlow, as the README asks of users: the tests run with
# the CPU settings tfnlp chooses (oneDNN on x86-64 Linux, tfnlp/_cpu_defaults.py).
import tfnlp  # noqa: E402, F401

# isort: split
import keras  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

from tests import file_order  # noqa: E402

pytest_plugins = ["pytester"]  # tests/test_oracles.py runs pytest on test files it writes

# Two logical CPU devices, so that MirroredStrategy has two replicas to split
# batches over (tests/training/test_distribute.py). Must happen before
# TensorFlow initialises its devices; ops still default to /cpu:0.
tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * 2
)
# One intra-op thread per test process: the Makefile runs two workers on two
# cores, and tiny models gain nothing from splitting an op while the two
# workers' thread pools oversubscribe the cores (a group of model, layer and
# generation test files took 235 s instead of 262 s, measured). Subprocesses
# the tests start (the CLI, the examples, the C++ loader) keep TensorFlow's
# default. TFNLP_TEST_INTRA_OP_THREADS=0 keeps the default here too.
_INTRA_OP_THREADS = int(os.environ.get("TFNLP_TEST_INTRA_OP_THREADS", "1"))
if _INTRA_OP_THREADS:
    tf.config.threading.set_intra_op_parallelism_threads(_INTRA_OP_THREADS)


def _in_ci():
    """`CI` set to a true value, as `.ci/run` is run (`CI=true`)."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes", "on")


def _importorskip_module(excinfo):
    """The module a `pytest.importorskip` call failed to import (or found too old),
    if that call raised `excinfo`'s skip; None for any other outcome or skip."""
    if excinfo is None or not isinstance(excinfo.value, pytest.skip.Exception):
        return None
    tb = excinfo.tb
    while tb.tb_next is not None:
        tb = tb.tb_next
    if tb.tb_frame.f_code is not pytest.importorskip.__code__:
        return None
    return tb.tb_frame.f_locals["modname"]


def _fail_in_ci(report, excinfo):
    """In CI, a skip for a missing oracle (torch, transformers, sklearn, ...)
    fails instead: a broken install step must not drop the parity proofs."""
    module = _importorskip_module(excinfo) if _in_ci() and report.skipped else None
    if module is not None:
        reason = excinfo.value.msg
        report.outcome = "failed"
        report.longrepr = (f"CI is set: pytest.importorskip({module!r}) fails instead of skipping: {reason}. "
                           f"The tests' oracles come with the test extra: pip install -e '.[test]'")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A `pytest.importorskip` in a test or a fixture."""
    report = yield
    _fail_in_ci(report, call.excinfo)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    """A module-level `pytest.importorskip` (tests/models/test_unilm_checkpoints.py)."""
    report = yield
    call = report.__dict__.get("call")  # pytest's own report carries it (runner.collect_one_node)
    _fail_in_ci(report, call.excinfo if call else None)
    return report


def pytest_collection_modifyitems(config, items):
    """Orders the files as pytest-xdist hands them out (the Makefile passes
    --no-loadscope-reorder): `tests/file_order.py`. Tests keep their order
    within a file."""
    def path(item):
        return item.nodeid.split("::")[0]  # what --dist loadfile groups by

    key = file_order.order_key(collections.Counter(path(item) for item in items))
    items.sort(key=lambda item: key(path(item)))


@pytest.fixture(autouse=True)
def _seed_and_policy():
    """Every test starts seeded, in float32, and leaves the policy as it was."""
    keras.utils.set_random_seed(1234)
    policy = keras.config.dtype_policy()
    yield
    keras.config.set_dtype_policy(policy)


def _sources_digest(*folders):
    """A digest of every file under `folders` (relative to the tfnlp package)."""
    import hashlib
    import pathlib

    root = pathlib.Path(tfnlp.__file__).parent
    digest = hashlib.sha256()
    for folder in folders:
        for path in sorted((root / folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


@pytest.fixture(scope="session")
def corpus_vocabulary(request):
    """A WordPiece vocabulary learned from the bundled training texts (mixed scripts).

    Learned once for the three pytest sessions of `make test` and their
    workers (about 8 s each time otherwise), through pytest's cache, keyed by
    the code and corpora it depends on: a change to either learns it again.
    The learner itself is tested in tests/data/test_wordpiece_learner.py.
    """
    from tfnlp import data, datasets

    key = f"tfnlp/corpus_vocabulary/{_sources_digest('data', 'datasets')}"
    cached = request.config.cache.get(key, None)
    if cached is not None:
        return cached
    texts = [s for d in datasets.read_documents("en_novels", "train")[:120] for s in d]
    texts += [s for d in datasets.read_documents("zh_poems", "train")[:800] for s in d]
    texts += [t for t, _ in datasets.read_fine_food_reviews("train")[:500]]
    texts += [t for _, t in datasets.read_text_pairs("bible_en_es", "train")[:2000]]
    vocabulary = data.learn_wordpiece_vocabulary(texts, 4000, progress=False)
    request.config.cache.set(key, vocabulary)
    return vocabulary


@pytest.fixture(scope="session")
def mirrored_strategy():
    """One MirroredStrategy over the two logical CPUs for the whole session.

    Several MirroredStrategy objects using collective all-reduce in one
    process can collide on collective keys: tests share this one.
    """
    return tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """Between test files: restart a shared serving process that holds over 1 GB.

    A serving process (tests/export/fresh_process.py) keeps every function
    library it loaded. The test processes grow too (about 25 MB for each small
    model built and fit, kept by TensorFlow's runtime; clearing Keras' session
    and collecting cycles here did not lower it, measured): the Makefile runs
    the suite as three pytest sessions so that workers start afresh. With
    TFNLP_TEST_RSS_LOG=<file>, each file's memory and the servers' is logged.
    """
    yield
    if nextitem is not None and nextitem.module is item.module:
        return
    from tests.export import fresh_process
    from tests.export.serving.harness import rss_bytes

    servers = fresh_process.recycle_servers(max_rss_bytes=1 << 30)
    log = os.environ.get("TFNLP_TEST_RSS_LOG")
    if log:
        import time

        with open(log, "a") as out:
            out.write(f"{time.time():.0f} {os.getpid()} {item.module.__name__} "
                      f"{rss_bytes() / 2**20:.0f} {servers / 2**20:.0f}\n")
