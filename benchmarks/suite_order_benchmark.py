"""Replays a pytest session's test durations through pytest-xdist's file scheduling.

How long would a session of `make test` take on two workers if its files were
handed out in another order? Measuring each order costs a whole session and
the machine's noise (10-20% between runs) hides differences of a minute. This
replays the durations of one measured run instead, through the rule of
`--dist loadfile` (pytest-xdist's LoadScopeScheduling): each worker gets one
file, and its next file as soon as it has two tests or fewer left; files go
out in the order given. It compares xdist's own order (the files with the most
tests first), the order before (two example files first, then xdist's) and
the order of `tests/file_order.py` (`LONGEST_FILES` first).

    pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=0 tests/export tests/data > run.log
    pytest -q --collect-only tests/export tests/data | grep :: > ids.txt
    python benchmarks/suite_order_benchmark.py ids.txt run.log

Worker start-up and collection are not in the durations: the measured
session is longer by them (about 20 s).
"""

import argparse
import collections
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests import file_order  # noqa: E402  (no TensorFlow)

# What tests/conftest.py put first before LONGEST_FILES (2026-11-27).
PREVIOUS_FIRST = ("tests/examples/test_bert_examples.py", "tests/examples/test_seq2seq_examples.py")


def durations_by_file(ids_path, log_path):
    """`{file: [seconds of each test, in collection order]}` from the two files."""
    seconds = collections.Counter()
    for line in pathlib.Path(log_path).read_text(encoding="utf-8").splitlines():
        found = re.match(r"^([0-9.]+)s (?:call|setup|teardown)\s+(\S.*)$", line)
        if found:
            seconds[found.group(2)] += float(found.group(1))
    files = {}
    for test in pathlib.Path(ids_path).read_text(encoding="utf-8").splitlines():
        files.setdefault(test.split("::")[0], []).append(seconds.get(test, 0.0))
    return files


def replay(files, order, workers=2):
    """The seconds each worker is busy when the files go out in `order`."""
    queue = list(order)
    pending = [[] for _ in range(workers)]
    clock = [0.0] * workers
    for worker in range(workers):
        if queue:
            pending[worker].extend(files[queue.pop(0)])
    while any(pending):
        worker = min((w for w in range(workers) if pending[w]), key=clock.__getitem__)
        clock[worker] += pending[worker].pop(0)
        if len(pending[worker]) <= 2 and queue:
            pending[worker].extend(files[queue.pop(0)])
    return clock


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ids", help="the session's test ids, in collection order")
    parser.add_argument("log", help="the session's output with --durations=0")
    args = parser.parse_args(argv)
    files = durations_by_file(args.ids, args.log)
    counts = {name: len(tests) for name, tests in files.items()}
    orders = {
        "xdist's (most tests first)": sorted(files, key=lambda f: -counts[f]),
        "the one before (the two example files first)": sorted(
            files, key=lambda f: (f not in PREVIOUS_FIRST, -counts[f])),
        "tests/file_order.py's": sorted(files, key=file_order.order_key(counts)),
    }
    total = sum(map(sum, files.values()))
    print(f"{len(files)} files, {total:.0f} s of tests: {total / 2:.0f} s on 2 workers at best")
    for name, order in orders.items():
        clock = replay(files, order)
        print(f"{name} order: {max(clock):.0f} s (workers busy {', '.join(f'{c:.0f}' for c in clock)} s)")


if __name__ == "__main__":
    main()
