"""Shared pytest configuration: the ``slow`` mark and the location of the shared data."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

# Under pytest-xdist (scripts/test.sh runs `--dist loadgroup`) every test file is one group, run by
# one worker, so the functions a file compiles once serve all its tests; the files named here are
# split per test instead, because their tests are long and share nothing (each docs page compiles
# its own models).
SPLIT_PER_TEST = {"test_docs_examples.py"}


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False, help="run tests marked slow")
    parser.addoption("--packaging", action="store_true", default=False,
                     help="run the tests marked packaging (empty-venv install; .ci/run's 2nd step)")


def pytest_collection_modifyitems(config, items):
    skips = {}
    if not config.getoption("--runslow"):
        skips["slow"] = pytest.mark.skip(reason="slow test: run with --runslow")
    if not config.getoption("--packaging"):
        skips["packaging"] = pytest.mark.skip(reason="packaging test: run with --packaging")
    group = config.pluginmanager.hasplugin("xdist")
    for item in items:
        for mark, skip in skips.items():
            if mark in item.keywords:
                item.add_marker(skip)
        if group and item.get_closest_marker("xdist_group") is None:
            name = item.nodeid if item.path.name in SPLIT_PER_TEST else str(item.path)
            item.add_marker(pytest.mark.xdist_group(name))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Path to ``../shared/data``; skips the test with a clear message when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data folder not found at {SHARED_DATA} (needs ../shared/data)")
    return SHARED_DATA
