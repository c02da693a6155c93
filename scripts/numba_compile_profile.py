"""Where a process's numba compilation time goes: a pytest plugin and its report.

As a plugin it listens to numba's ``numba:compile`` events and, when the process ends, writes the
EXCLUSIVE compile time of every function (its own typing, lowering and code generation, less that
of the functions it compiles on the way) to ``$NCP_OUT/<pid>.json`` (default
``outputs/numba_compile_profile``), one file per process (pytest-xdist's workers included).
Run as a script it sums those files by origin (PyTensor's graph functions, pm_perm's kernels,
numba's own implementations) and lists the costliest functions, then the test files and tests
during which the compilations ran (a kernel's first compilation counts against the first test
that needs it in that process).

Cold test suite, as used for docs/benchmarks.md ("Strict fresh .ci/run"):

    d=$(mktemp -d); NUMBA_CACHE_DIR=$d/numba PYTENSOR_FLAGS=base_compiledir=$d/pt \\
      NCP_OUT=$d/ncp PYTHONPATH=scripts bash scripts/test.sh -p numba_compile_profile
    .venv/bin/python scripts/numba_compile_profile.py $d/ncp

Cost: a dictionary update per compilation; nothing per call of compiled code.
"""

from __future__ import annotations

import atexit
import collections
import json
import sys
import time
from pathlib import Path

from _process_dump import dump_at_exit  # scripts/_process_dump.py

_stack: list[list[float]] = []
_exclusive: collections.Counter = collections.Counter()
_count: collections.Counter = collections.Counter()
_by_test: collections.Counter = collections.Counter()  # test node id -> compile seconds
_current = {"test": "(outside tests)"}


def pytest_runtest_protocol(item, nextitem):
    """Attribute the compilations that follow to this test (pytest hook of the plugin)."""
    _current["test"] = item.nodeid


def _name(dispatcher) -> str:
    func = getattr(dispatcher, "py_func", None)
    return f"{func.__module__}.{func.__qualname__}" if func is not None else str(dispatcher)


def _install() -> None:
    from numba.core import event

    class _Listener(event.Listener):
        def on_start(self, ev):
            _stack.append([time.perf_counter(), 0.0])

        def on_end(self, ev):
            start, children = _stack.pop()
            spent = time.perf_counter() - start
            if _stack:
                _stack[-1][1] += spent
            else:
                _by_test[_current["test"]] += spent
            name = _name(ev.data.get("dispatcher"))
            _exclusive[name] += spent - children
            _count[name] += 1

    event.register("numba:compile", _Listener())

    @atexit.register
    def _dump():
        data = {k: [_exclusive[k], _count[k]] for k in _exclusive}
        data["__tests__"] = dict(_by_test)
        dump_at_exit("numba_compile_profile", "NCP_OUT", data)


def _origin(name: str) -> str:
    if name.startswith("pm_perm."):
        return ".".join(name.split(".")[:2])
    if "pytensor" in name:
        return "pytensor (graph functions and PyTensor's Op implementations)"
    return name.split(".")[0]


def report(folder: str, top: int = 30) -> None:
    exclusive: collections.Counter = collections.Counter()
    count: collections.Counter = collections.Counter()
    files = sorted(Path(folder).glob("*.json"))
    if not files:
        sys.exit(f"no profiles (*.json) in {folder}")
    by_test: collections.Counter = collections.Counter()
    for path in files:
        data = json.loads(path.read_text())
        by_test.update(data.pop("__tests__", {}))
        for name, (seconds, n) in data.items():
            exclusive[name] += seconds
            count[name] += n
    by_origin: collections.Counter = collections.Counter()
    for name, seconds in exclusive.items():
        by_origin[_origin(name)] += seconds
    print(f"{len(files)} processes, numba compilation {sum(exclusive.values()):.1f} CPU s")
    for origin, seconds in by_origin.most_common():
        print(f"{seconds:8.1f}  {origin}")
    print(f"\ncostliest {top} functions (seconds, compilations, function):")
    for name, seconds in exclusive.most_common(top):
        print(f"{seconds:8.1f} {count[name]:5d}  {name}")
    by_file: collections.Counter = collections.Counter()
    for test, seconds in by_test.items():
        by_file[test.split("::")[0]] += seconds
    print(f"\ncompilation by test file (top {top}):")
    for name, seconds in by_file.most_common(top):
        print(f"{seconds:8.1f}  {name}")
    print(f"\ncompilation by test (top {top}):")
    for name, seconds in by_test.most_common(top):
        print(f"{seconds:8.1f}  {name}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    report(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 30)
else:
    _install()
