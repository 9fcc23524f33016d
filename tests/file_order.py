"""The order `make test` hands test files to its pytest-xdist workers in.

Imports no TensorFlow: `tests/conftest.py` sorts the collected tests by it,
and `benchmarks/suite_order_benchmark.py` replays measured durations with it.
"""

# The longest test files of the last two pytest sessions of `make test`,
# longest first, with their seconds in one worker (--durations=0, 2-core
# Xeon). pytest-xdist hands whole files to the two workers in the order given
# (--no-loadscope-reorder), each worker's next file as soon as it has two
# tests left. Its own order, the files with the most tests first, left files
# of one or two long tests (the docs, the CLI, the resume and multi-worker
# jobs) to the end, where one worker ran them while the other sat idle.
# Replaying one run's test durations through that rule: the last session
# 650 s in xdist's order, 606 s in this one (export and data: 353 s, 345 s).
# The first session keeps xdist's order. A file not listed goes after those
# listed.
LONGEST_FILES = (
    # The last session: tests/ but the folders of the first two.
    "tests/examples/test_bert_examples.py",  # 223
    "tests/test_cli.py",  # 144
    "tests/test_cli_tagging.py",  # 60
    "tests/examples/test_seq2seq_examples.py",  # 97
    "tests/test_own_data.py",  # 87
    "tests/test_docs.py",  # 85
    "tests/training/test_resume.py",  # 85
    "tests/training/test_distribute.py",  # 78
    "tests/test_package.py",  # 77
    "tests/examples/test_elmo_examples.py",  # 72
    "tests/training/test_multi_worker.py",  # 69
    "tests/training/test_training.py",  # 48
    "tests/training/test_tpu_readiness.py",  # 46
    # tests/export, tests/data
    "tests/export/test_tf_serving.py",  # 142
    "tests/export/test_seq2seq_export.py",  # 140
    "tests/data/test_bert_pretraining.py",  # 97
    "tests/export/test_classifier_export.py",  # 55
    "tests/data/test_pipelines.py",  # 45
    "tests/export/test_bert_export.py",  # 34
)


def order_key(counts):
    """A sort key for test files: `LONGEST_FILES` in their order, then the
    others as xdist orders them, the files with the most tests first.

    Args:
        counts: `{file: number of its tests}` for every file to sort.
    """
    rank = {name: i for i, name in enumerate(LONGEST_FILES)}
    return lambda path: (rank.get(path, len(rank)), -counts[path])
