"""pm_perm._io: output checks before any work, atomic writes, strict JSON."""

import json
import os
from pathlib import Path

import numpy as np
import pytest

from pm_perm._io import (
    OutputPathError,
    atomic_path,
    check_outputs,
    file_record,
    to_strict_json,
    write_json,
    write_text,
)


def test_output_equal_to_an_input_is_refused_in_every_spelling(tmp_path):
    data = tmp_path / "train.txt"
    data.write_text("1 qid:1 1:0.5\n")
    link = tmp_path / "link.txt"
    link.symlink_to(data)
    hard = tmp_path / "hard.txt"
    os.link(data, hard)
    for spelling in (data, tmp_path / "." / "train.txt", tmp_path / "sub" / ".." / "train.txt",
                     link, hard):
        (tmp_path / "sub").mkdir(exist_ok=True)
        for overwrite in (False, True):
            with pytest.raises(OutputPathError, match="input"):
                check_outputs({"--json": spelling}, [data], overwrite=overwrite)
    assert data.read_text() == "1 qid:1 1:0.5\n"


def test_existing_output_needs_overwrite_and_outputs_must_differ(tmp_path):
    out = tmp_path / "out.json"
    out.write_text("old")
    with pytest.raises(OutputPathError, match="already exists.*--overwrite"):
        check_outputs({"--json": out})
    check_outputs({"--json": out}, overwrite=True)
    with pytest.raises(OutputPathError, match="same file"):
        check_outputs({"--json": tmp_path / "a", "--predictions": tmp_path / "." / "a"})


def test_unusable_output_paths_are_refused_up_front(tmp_path):
    with pytest.raises(OutputPathError, match="is a directory"):
        check_outputs({"--json": tmp_path})
    afile = tmp_path / "f"
    afile.write_text("x")
    with pytest.raises(OutputPathError, match="does not exist"):
        check_outputs({"--json": afile / "out.json"})
    with pytest.raises(OutputPathError, match="not a directory"):
        check_outputs({}, directories={"--plots": (afile, ["trace.png"])})
    (tmp_path / "plots").mkdir()
    (tmp_path / "plots" / "trace.png").write_text("old plot")
    with pytest.raises(OutputPathError, match="already exists"):
        check_outputs({}, directories={"--plots": (tmp_path / "plots", ["trace.png"])})
    if os.geteuid() != 0:  # root can write anywhere
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        try:
            with pytest.raises(OutputPathError, match="not writable"):
                check_outputs({"--json": ro / "out.json"})
        finally:
            ro.chmod(0o755)


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_a_folder_that_refuses_files_is_found_before_work():
    """/proc passes a permission test for the superuser but refuses new files: the check tries
    to create one (a fit would otherwise run and fail when writing its results)."""
    with pytest.raises(OutputPathError, match="/proc is not writable"):
        check_outputs({"--json": "/proc/pm_perm_result.json"})
    with pytest.raises(OutputPathError, match="not writable"):
        check_outputs({}, directories={"--plots": ("/proc/pm_perm_plots", ["trace.png"])})


def test_atomic_write_keeps_the_old_file_on_error_or_interrupt(tmp_path):
    out = tmp_path / "out.txt"
    out.write_text("old")
    for exc in (RuntimeError, KeyboardInterrupt):
        with pytest.raises(exc), atomic_path(out) as tmp:
            tmp.write_text("half of the new con")
            raise exc()
        assert out.read_text() == "old"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]  # no temp file left
    write_text(out, "new")
    assert out.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_atomic_write_gives_the_permissions_of_a_plain_write(tmp_path, umask):
    """A new file gets 0o666 less the umask (not the temporary file's 0o600), as with
    ``open(path, "w")``; an existing file keeps its mode."""
    old = os.umask(umask)
    try:
        plain = tmp_path / "plain.txt"
        plain.write_text("x")
        new = tmp_path / "new.txt"
        write_text(new, "x")
        assert new.stat().st_mode & 0o777 == plain.stat().st_mode & 0o777 == 0o666 & ~umask
    finally:
        os.umask(old)
    kept = tmp_path / "kept.txt"
    kept.write_text("old")
    kept.chmod(0o640)
    write_text(kept, "new")
    assert kept.stat().st_mode & 0o777 == 0o640 and kept.read_text() == "new"


def test_strict_json_maps_non_finite_to_null_with_warnings(tmp_path):
    obj = {"a": float("nan"), "b": [1.0, np.inf, np.float64(-np.inf)], "c": np.arange(2),
           "d": {"e": np.float32(0.5)}}
    clean, notes = to_strict_json(obj)
    assert clean == {"a": None, "b": [1.0, None, None], "c": [0, 1], "d": {"e": 0.5}}
    assert len(notes) == 3 and "$.a" in notes[0] and "$.b[1]" in notes[1]
    out = tmp_path / "x.json"
    assert len(write_json(out, obj)) == 3
    assert json.loads(out.read_text(), parse_constant=lambda c: pytest.fail(c))["a"] is None


def test_file_record_size_and_hash(tmp_path):
    f = tmp_path / "d.txt"
    f.write_bytes(b"abc")
    rec = file_record(f)
    assert rec["size"] == 3
    assert rec["sha256"] == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
