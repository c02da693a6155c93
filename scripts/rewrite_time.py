"""How much of a test run goes into building PyTensor functions: a pytest plugin and its report.

As a plugin it times, with each process's CPU clock, every ``FunctionMaker.__init__`` (the
graph's rewrites and the linker's set-up: what ``pytensor.function``, ``model.compile_logp`` and
the samplers pay per compiled function before any numba compilation) and every
``FunctionMaker.create`` (thunks: where numba compiles or loads the graph), per test, in every
pytest process (pytest-xdist's workers included), and when the process ends writes
``$REWRITE_OUT/<pid>.json`` (default ``outputs/rewrite_time``). Run as a script it sums those
files by test file. numba compilation triggered later, at a function's first call, is not
counted (``scripts/numba_compile_profile.py`` measures it).

Warm test suite, as used for docs/benchmarks.md ("Strict fresh .ci/run"):

    REWRITE_OUT=outputs/rewrite_time PYTHONPATH=scripts bash scripts/test.sh -p rewrite_time
    .venv/bin/python scripts/rewrite_time.py outputs/rewrite_time

Cost: two clock reads per compiled function.
"""

from __future__ import annotations

import atexit
import collections
import json
import sys
import time
from pathlib import Path

from _process_dump import dump_at_exit  # scripts/_process_dump.py

_acc: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0, 0.0])
_current = {"test": "(outside tests)"}


def pytest_runtest_protocol(item, nextitem):
    """Attribute the functions built from here on to this test (pytest hook of the plugin)."""
    _current["test"] = item.nodeid


def _timed(method, slot):
    def wrapper(self, *args, **kwargs):
        start = time.process_time()
        try:
            return method(self, *args, **kwargs)
        finally:
            row = _acc[_current["test"]]
            row[slot] += time.process_time() - start
            if slot == 0:
                row[1] += 1

    return wrapper


def pytest_configure(config):
    """Wrap PyTensor's FunctionMaker once per process (pytest hook of the plugin)."""
    from pytensor.compile import maker

    if not getattr(maker.FunctionMaker, "_rewrite_time_wrapped", False):
        maker.FunctionMaker.__init__ = _timed(maker.FunctionMaker.__init__, 0)
        maker.FunctionMaker.create = _timed(maker.FunctionMaker.create, 2)
        maker.FunctionMaker._rewrite_time_wrapped = True


def _write() -> None:
    if _acc:
        dump_at_exit("rewrite_time", "REWRITE_OUT", dict(_acc))


atexit.register(_write)


def report(folder: Path, top: int = 25) -> None:
    """Print the CPU seconds of function building by test file (the ``top`` files)."""
    by_file = collections.defaultdict(lambda: [0.0, 0, 0.0])
    for f in sorted(folder.glob("*.json")):
        for nodeid, (init, count, create) in json.loads(f.read_text()).items():
            acc = by_file[nodeid.split("::")[0]]
            acc[0] += init
            acc[1] += count
            acc[2] += create
    total = [sum(acc[i] for acc in by_file.values()) for i in range(3)]
    print(f"{total[1]:.0f} functions built: {total[0]:.1f} CPU s in FunctionMaker.__init__ "
          f"(rewrites), {total[2]:.1f} CPU s in FunctionMaker.create")
    print("\n| rewrites CPU s | functions | create CPU s | file |")
    print("|---|---|---|---|")
    for name, acc in sorted(by_file.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"| {acc[0]:.1f} | {acc[1]} | {acc[2]:.1f} | {name} |")


if __name__ == "__main__":
    report(Path(sys.argv[1] if len(sys.argv) > 1 else "outputs/rewrite_time"))
