"""tests/_xdist_units.py: under ``--dist loadfile`` a test file's tests run in one worker and the
docs pages' tests one unit each (checked by a small pytest run of its own, with two workers)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests._xdist_units import unit_of_work

ROOT = Path(__file__).resolve().parents[1]


def test_unit_of_work_is_the_file_except_for_split_files():
    assert unit_of_work("tests/ops/test_a.py::test_x[1-2]") == "tests/ops/test_a.py"
    assert unit_of_work("tests/ops/test_a.py::TestC::test_y") == "tests/ops/test_a.py"
    page = "tests/test_docs_examples.py::test_page_code_blocks_run[guide/learning_to_rank.md]"
    assert unit_of_work(page) == page


def test_a_files_tests_share_one_worker_and_split_files_are_spread(tmp_path):
    """Two workers, a file split per test and then a file of 8 tests: each test writes its
    worker's name. The first two units go one to each worker, so the split file's tests run on
    both; per-test units (what `--dist loadgroup` had become under pytest 9.2) would spread the
    other file over both workers too."""
    record = textwrap.dedent("""
        import os, pytest

        @pytest.mark.parametrize("i", range(8))
        def test_t(i, request):
            out = os.environ["UNITS_OUT"] + "/" + request.node.nodeid.replace("/", "_")
            with open(out, "w") as f:
                f.write(os.environ["PYTEST_XDIST_WORKER"])
    """)
    (tmp_path / "test_a.py").write_text(record)
    (tmp_path / "test_docs_examples.py").write_text(record)
    out = tmp_path / "out"
    out.mkdir()
    # an empty ini file of its own: with `-c /dev/null` the workers took "/" as their root and
    # walked the whole file system (240,000 stat calls, 4 s of CPU per worker)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    # no plugins but xdist and ours (the installed ones, e.g. hypothesis's, only cost start-up)
    env = dict(os.environ, UNITS_OUT=str(out), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "xdist.plugin",
         "-p", "tests._xdist_units", "-c", str(tmp_path / "pytest.ini"),
         "--rootdir", str(tmp_path), "-n", "2", "--dist", "loadfile",
         "test_docs_examples.py", "test_a.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    workers = {p.name: p.read_text() for p in out.iterdir()}
    first = {w for name, w in workers.items() if name.startswith("test_a.py")}
    split = {w for name, w in workers.items() if name.startswith("test_docs_examples.py")}
    assert len(workers) == 16
    assert len(first) == 1, workers
    assert len(split) == 2, workers
