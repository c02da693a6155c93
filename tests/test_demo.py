"""The README's demo (examples/demo.py) checks its output folder before any work."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from pm_perm._io import OutputPathError

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def demo():
    spec = importlib.util.spec_from_file_location("pm_perm_demo", ROOT / "examples" / "demo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("bad", ["a_file", "a_file/below_it", "out_with_a_folder_as_json"])
def test_bad_output_folders_are_refused_before_any_work(demo, tmp_path, monkeypatch, bad):
    def no_work(*args, **kwargs):
        raise AssertionError("the demo started its work before checking its output folder")

    monkeypatch.setattr(demo, "simulate", no_work)
    out = tmp_path / bad
    if bad.startswith("a_file"):
        (tmp_path / "a_file").write_text("a user's file")
    elif bad == "out_with_a_folder_as_json":
        (out / "results.json").mkdir(parents=True)
    with pytest.raises(OutputPathError):
        demo.main(["--out", str(out)])
    if bad.startswith("a_file"):
        assert (tmp_path / "a_file").read_text() == "a user's file"


def test_a_new_folder_is_created_with_its_parents(demo, tmp_path, monkeypatch):
    """As on a fresh clone, where ``outputs/`` does not exist yet."""
    class Started(Exception):
        pass

    def started(*args, **kwargs):
        raise Started

    monkeypatch.setattr(demo, "simulate", started)
    with pytest.raises(Started):
        demo.main(["--out", str(tmp_path / "outputs" / "demo")])
    assert (tmp_path / "outputs" / "demo").is_dir()
