"""pm_perm._io: output checks before any work, atomic writes, strict JSON."""

import errno
import json
import os
import socket
import stat
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest

from pm_perm._io import (
    OutputPathError,
    atomic_path,
    check_outputs,
    file_record,
    reserve_stdout,
    to_strict_json,
    write_json,
    write_text,
)

needs_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                                reason="creating a device node needs root")


def _device(folder, name, minor):
    """A character device of our own (never the system's /dev/null): Linux's memory devices,
    minor 3 = null (accepts everything), 7 = full (every write fails with ENOSPC)."""
    path = folder / name
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
    return path


def _is_char_device(path):
    return stat.S_ISCHR(os.lstat(path).st_mode)


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


@needs_root
def test_a_device_is_written_directly_never_replaced(tmp_path):
    """The reproducer of issue 53: ``--json /dev/null --overwrite`` replaced the device node by a
    regular file (as root), and /dev/full 'succeeded'. Here on device nodes of our own."""
    null, full = _device(tmp_path, "null", 3), _device(tmp_path, "full", 7)
    for overwrite in (False, True):  # a stream loses nothing: no --overwrite needed
        check_outputs({"--json": null, "--predictions": full}, overwrite=overwrite)
        write_json(null, {"a": 1}, overwrite=overwrite)
        assert _is_char_device(null) and os.stat(null).st_rdev == os.makedev(1, 3)
        with pytest.raises(OSError) as err:
            write_text(full, "x" * 10, overwrite=overwrite)
        assert err.value.errno == errno.ENOSPC
        assert _is_char_device(full) and os.stat(full).st_rdev == os.makedev(1, 7)
    # a symbolic link to a device is followed, the link is kept
    link = tmp_path / "link"
    link.symlink_to(null)
    write_text(link, "x")
    assert link.is_symlink() and _is_char_device(null)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full", "link", "null"]  # no temp


def _reader(fifo):
    return subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)


def _read_all(proc):
    try:
        return proc.communicate(timeout=30)[0]
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail("the FIFO's reader got no end of file: the FIFO was not written")


def test_a_fifo_is_written_directly_and_its_reader_gets_everything(tmp_path):
    """A FIFO given as output was replaced by a regular file, its reader got nothing."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from pm_perm._io import save_figure

    fifo = tmp_path / "results.fifo"
    os.mkfifo(fifo)
    check_outputs({"--json": fifo})  # no --overwrite needed
    reader = _reader(fifo)
    write_json(fifo, {"ndcg": 0.5, "bad": float("nan")})
    assert json.loads(_read_all(reader).decode()) == {"ndcg": 0.5, "bad": None}
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    reader = _reader(fifo)  # a binary writer through atomic_path gets the same
    fig = plt.figure()
    save_figure(fig, fifo, format="png")
    plt.close(fig)
    png = _read_all(reader)
    assert png.startswith(b"\x89PNG") and len(png) > 100
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.fifo"]  # no temporary file


def test_dash_is_the_standard_output_and_reserve_stdout_keeps_it_clean(tmp_path, capsys):
    check_outputs({"--json": "-"}, [tmp_path / "in.txt"])
    with pytest.raises(OutputPathError, match="only one output can be the standard output"):
        check_outputs({"--json": "-", "--predictions": "-"})
    with reserve_stdout():
        print("a summary line")
        write_json("-", {"a": [1, 2]})
    out, err = capsys.readouterr()
    assert json.loads(out) == {"a": [1, 2]} and err == "a summary line\n"
    assert not (tmp_path / "-").exists() and not Path("-").exists()


def test_a_socket_is_refused_before_any_work(tmp_path):
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tmp_path / "s"))
        with pytest.raises(OutputPathError, match="is a socket"):
            check_outputs({"--json": tmp_path / "s"}, overwrite=True)


def test_a_symlink_to_a_file_is_followed_not_replaced(tmp_path):
    target = tmp_path / "real.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    with pytest.raises(OutputPathError, match="already exists"):
        check_outputs({"--json": link})
    write_text(link, "new")
    assert link.is_symlink() and target.read_text() == "new"


def _race(path, n=2, **kwargs):
    """``n`` threads write their own content to ``path``, all of them past every check and
    with the whole file ready before any publishes it; returns ``{i: error or None}``."""
    barrier, outcome = threading.Barrier(n, timeout=30), {}

    def write(i):
        try:
            with atomic_path(path, **kwargs) as tmp:
                tmp.write_text(f"writer {i} " + "x" * 100_000)
                barrier.wait()
        except Exception as err:  # noqa: BLE001 - recorded, asserted below
            outcome[i] = err
        else:
            outcome[i] = None

    threads = [threading.Thread(target=write, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return outcome


@pytest.mark.parametrize("hard_links", [True, False])
def test_two_writers_of_a_new_file_one_wins_the_other_is_refused(tmp_path, monkeypatch,
                                                                  hard_links):
    """Issue 53: the 'exists' check and the write are one step, so two runs writing the same
    new output never both succeed (the later silently replacing the earlier). Without hard
    links (some file systems) the name is claimed with O_EXCL, then renamed over."""
    if not hard_links:
        def no_link(*a, **k):
            raise OSError(errno.EPERM, "Operation not permitted")

        monkeypatch.setattr(os, "link", no_link)
    out = tmp_path / "out.json"
    outcome = _race(out, n=4, overwrite=False)
    winners = [i for i, err in outcome.items() if err is None]
    assert len(outcome) == 4 and len(winners) == 1, outcome
    for i, err in outcome.items():
        if i != winners[0]:
            assert isinstance(err, OutputPathError) and "already exists" in str(err)
    assert out.read_text() == f"writer {winners[0]} " + "x" * 100_000  # complete, the winner's
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]  # no temporary file
    # with overwrite, every writer succeeds and the file is one of them, complete
    outcome = _race(out, n=2, overwrite=True)
    assert list(outcome.values()) == [None, None]
    assert out.read_text() in {f"writer {i} " + "x" * 100_000 for i in range(2)}
