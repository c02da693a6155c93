"""Shared pytest configuration: the backend tests compile on, the ``slow`` mark, the shared data.

The backend. A user's model compiles with PyTensor's default backend, numba: every new graph costs
numba type inference and LLVM code generation, about 0.3 s per node (a ranking model's gradient
graph 15-20 s), once per machine and graph (later runs load it from the cache). A fresh test run
compiles about a thousand distinct graphs, and that was two thirds of its CPU time. So tests run
their PyTensor graphs on PyTensor's Python linker (``PY_MODE``: the same ``fast_run`` rewrites
but fusion, each Op's ``perform``, which calls the same compiled pm_perm kernels), which compiles
nothing, unless they are marked ``numba``:

- tests whose subject is the compiled path: the numba implementation of each Op and random
  variable (tests/ops/* and the draws of tests/distributions/test_conformance.py pass
  ``mode="NUMBA"`` themselves or are marked), the messages a user of the default backend reads,
  the failure catalogue of docs/guide/failures.md;
- tests that run a graph many times (NUTS, nutpie, several processes), where compiled code wins;
- the documentation's code blocks (tests/test_docs_examples.py), which run as a user runs them.

``--all-numba`` runs every test on the default backend instead (what the suite did before; it
passes too; on empty caches the suite took 607 s that way against 387 s, docs/benchmarks.md).
"""

from __future__ import annotations

import gc
import os
from pathlib import Path

import pytensor
import pytest

from tests._xdist_units import pytest_xdist_make_scheduler  # noqa: F401  (the hook)

# Full garbage collections (generation 2) 100 times rarer than Python's default in the pytest
# processes: a test worker holds 1.3-1.6 GB of long-lived objects (compiled graphs, numba
# dispatchers, JAX executables), so each full collection took 0.6-0.9 s, and the default
# (700, 10, 10) ran 26-28 of them per worker: 53 s of the 2 workers' 458 s of CPU in a warm suite
# measured with gc.callbacks; with (700, 10, 1000), 3 per worker and 18 s of collection in all, for
# 0.1 GB more peak memory per worker. Young generations are collected as before, and the code under
# test (its subprocesses, a user's process) keeps Python's defaults.
gc.set_threshold(700, 10, 1000)

# XLA's CPU backend at LLVM optimisation level 0 (unless XLA_FLAGS is set): tests/jax took 146
# instead of 170 s of CPU on empty caches (mostly XLA compilation), with the same tolerances
# (LLVM's optimisation level does not change floating-point semantics).
os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0 "
                      "--xla_llvm_disable_expensive_passes=true")

# The Python linker with the default rewrites less fusion, the mode pm_perm's MAP fits compile with
# (pm_perm/_modes.py; FAST_COMPILE would also drop rewrites a user's graph gets). Imported after
# XLA_FLAGS is set.
from pm_perm._modes import PYTHON_MODE as PY_MODE  # noqa: E402
from pm_perm.datasets import DATA_ENV, data_home  # noqa: E402

# the shared data folder: $PM_PERM_DATA, else ../shared/data beside the repository
SHARED_DATA = data_home()

# Under pytest-xdist (scripts/test.sh runs `--dist loadfile`) each test file is one unit of work,
# run by one worker (the docs pages one unit each): tests/_xdist_units.py.
TESTS = Path(__file__).resolve().parent
# The files whose units take longest on a fresh machine (the docs pages' code on numba, XLA
# compilation: 25-60 s of CPU each, the pages 5-75 s), started first, in this order, so that the
# short files even out the workers' ends; the rest follow in file order.
_START_FIRST = {name: i for i, name in enumerate([
    "test_docs_examples.py", "backends/jax/test_jax_rankings.py", "backends/jax/test_jax_ops.py",
    "preferences/test_models.py", "distributions/test_conformance.py",
    "distributions/test_ordinal_n_choose_k.py", "ops/test_extern.py", "test_processes.py",
    "test_docs_build.py"])}


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False, help="run tests marked slow")
    parser.addoption("--packaging", action="store_true", default=False,
                     help="run the tests marked packaging (empty-venv install; .ci/run's 2nd step)")
    parser.addoption("--all-numba", action="store_true", default=False,
                     help="compile every test's graphs with PyTensor's default numba backend, not "
                     "only the tests marked numba (the others use the Python linker)")


def pytest_collection_modifyitems(config, items):
    skips = {}
    if not config.getoption("--runslow"):
        skips["slow"] = pytest.mark.skip(reason="slow test: run with --runslow")
    if not config.getoption("--packaging"):
        skips["packaging"] = pytest.mark.skip(reason="packaging test: run with --packaging")
    if config.pluginmanager.hasplugin("xdist"):
        # longest units first, so that the workers end together (longest-processing-time-first)
        items.sort(key=lambda item: _START_FIRST.get(
            item.path.relative_to(TESTS).as_posix() if item.path.is_relative_to(TESTS) else "", 99))
    for item in items:
        for mark, skip in skips.items():
            if mark in item.keywords:
                item.add_marker(skip)


@pytest.hookimpl(tryfirst=True)
def pytest_unconfigure(config):
    """One full garbage collection at the end of the session, then the survivors frozen.

    pytest then collects twice more (its unraisable-exception check, at unconfigure and at
    cleanup), each pass over a test worker's whole heap of 1.5-2.5 GB: 3-4 s per worker at the
    very end of the run, after its last test. The one collection here still runs under pytest's
    unraisable-exception hook (pytest reports what it caught right after), and pytest's own
    passes, over a frozen heap, cost nothing.
    """
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def _pytensor_backend(request):
    """PyTensor's Python linker for the test, unless it is marked ``numba`` (module docstring)."""
    if request.config.getoption("--all-numba") or request.node.get_closest_marker("numba"):
        yield
        return
    with pytensor.config.change_flags(mode=PY_MODE):
        yield


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Path to the shared data folder (``$PM_PERM_DATA``, else ``../shared/data``); skips the
    test with a clear message when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data folder not found at {SHARED_DATA} (set {DATA_ENV} or put it "
                    "at ../shared/data)")
    return SHARED_DATA
