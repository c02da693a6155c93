"""Where a test run's CPU time goes, by test file and by test: a pytest plugin and its report.

As a plugin it takes ``getrusage`` before and after each test (setup, call and teardown) in every
pytest process (pytest-xdist's workers included) and, when the process ends, writes one row per
test (user and system CPU of the process, CPU of the subprocesses it waited for, wall) to
``$CPU_OUT/<pid>.json`` (default ``outputs/cpu_by_test``). Run as a script it sums those files by
test file and lists the tests with the most CPU. The threads a test starts (nutpie's chains,
XLA's compiler) count in its process's CPU; what a test leaves running in the background after
it returns counts against the next one.

Cold test suite, as used for docs/benchmarks.md ("Strict fresh .ci/run"):

    d=$(mktemp -d); NUMBA_CACHE_DIR=$d/numba PYTENSOR_FLAGS=base_compiledir=$d/pt \\
      CPU_OUT=$d/cpu PYTHONPATH=scripts bash scripts/test.sh -p cpu_by_test
    .venv/bin/python scripts/cpu_by_test.py $d/cpu

Cost: two ``getrusage`` calls per test.
"""

from __future__ import annotations

import atexit
import collections
import json
import resource
import sys
import time
from pathlib import Path

import pytest
from _process_dump import dump_at_exit  # scripts/_process_dump.py

_rows: list[tuple[str, float, float, float, float]] = []


def _usage():
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (own.ru_utime, own.ru_stime, children.ru_utime + children.ru_stime,
            time.perf_counter())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Time one test's protocol (setup, call, teardown; pytest hook of the plugin)."""
    before = _usage()
    yield
    after = _usage()
    _rows.append((item.nodeid, *(b - a for a, b in zip(before, after, strict=True))))


def _write() -> None:
    if _rows:
        dump_at_exit("cpu_by_test", "CPU_OUT", _rows)


atexit.register(_write)


def report(folder: Path, top: int = 25) -> None:
    """Print the CPU seconds by test file and the ``top`` tests with the most CPU."""
    rows = [row for f in sorted(folder.glob("*.json")) for row in json.loads(f.read_text())]
    by_file = collections.defaultdict(lambda: [0.0, 0.0, 0.0, 0.0, 0])
    for nodeid, user, system, children, wall in rows:
        acc = by_file[nodeid.split("::")[0]]
        for i, value in enumerate((user, system, children, wall, 1)):
            acc[i] += value
    total = [sum(acc[i] for acc in by_file.values()) for i in range(4)]
    print(f"{len(rows)} tests: {sum(total[:3]):.0f} CPU s (user {total[0]:.0f}, system "
          f"{total[1]:.0f}, subprocesses {total[2]:.0f}) in {total[3]:.0f} s of test wall time")
    print("\n| CPU s | user | system | subprocesses | wall s | tests | file |")
    print("|---|---|---|---|---|---|---|")
    for name, acc in sorted(by_file.items(), key=lambda kv: -sum(kv[1][:3]))[:top]:
        print(f"| {sum(acc[:3]):.1f} | {acc[0]:.1f} | {acc[1]:.1f} | {acc[2]:.1f} | {acc[3]:.1f} "
              f"| {acc[4]} | {name} |")
    print(f"\ncostliest {top} tests (CPU s incl. subprocesses, wall s, test):")
    for nodeid, user, system, children, wall in sorted(rows, key=lambda r: -sum(r[1:4]))[:top]:
        print(f"  {user + system + children:6.1f} {wall:6.1f}  {nodeid}")


if __name__ == "__main__":
    report(Path(sys.argv[1] if len(sys.argv) > 1 else "outputs/cpu_by_test"))
