"""The test suite's units of work under pytest-xdist (a plugin; tests/conftest.py imports its hook).

``--dist loadfile`` (scripts/test.sh) with this plugin: every test file is one unit of work, run by
one worker, so the functions a file compiles once serve all its tests; the files in
``SPLIT_PER_TEST`` are split per test instead, because their tests are long and share nothing (each
docs page compiles its own models). Units are handed out in the order of the collection (the
conftest sorts it longest first), not in xdist's default order by number of tests.

Why not ``--dist loadgroup`` with ``xdist_group`` marks (what the suite used before): pytest-xdist
3.8 groups by a suffix it appends to ``item._nodeid``, which pytest 9.2 no longer reads, so under
pytest 9.2 every test became its own unit and both workers compiled what a file shares. This plugin
needs only the test ids the controller sees. It imports nothing heavy, so a test can load it into a
small pytest run of its own (tests/test_xdist_units.py).
"""

from __future__ import annotations

import pytest

SPLIT_PER_TEST = {"test_docs_examples.py"}


def unit_of_work(nodeid: str) -> str:
    """The unit a test runs in: its file, or the test itself in a ``SPLIT_PER_TEST`` file."""
    path = nodeid.split("::", 1)[0]
    return nodeid if path.rsplit("/", 1)[-1] in SPLIT_PER_TEST else path


@pytest.hookimpl(optionalhook=True)  # pytest also runs without xdist (-p no:xdist)
def pytest_xdist_make_scheduler(config, log):
    """With ``--dist loadfile``: one unit per ``unit_of_work``, in collection order."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FileUnits(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of_work(nodeid)

    config.option.loadscopereorder = False  # keep the collection's longest-first order
    return FileUnits(config, log)
