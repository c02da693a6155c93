"""pm-perm learn-to-rank never loses data: outputs are checked before any work, inputs are never
overwritten, existing files need --overwrite, and one failing output does not stop the others.
Every JSON records what is needed to reproduce the run."""

import hashlib
import json
import os
import stat
import subprocess
import threading

import numpy as np
import pytest

from pm_perm.cli import learning_to_rank as rank_cli
from pm_perm.cli import main
from tests.cli.test_learning_to_rank import _write_letor


@pytest.fixture
def files(tmp_path):
    return {k: _write_letor(tmp_path / f"{k}.txt", n, seed)
            for k, n, seed in [("train", 8, 0), ("test", 4, 2)]}


def _digest(path):
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def _ridge(files, *extra):
    return main(["learn-to-rank", "--train", files["train"], "--test", files["test"], "--model",
                 "ridge",
                 *extra])


@pytest.fixture
def no_fit(monkeypatch):
    """Fail the test if a fit starts (the error must come before any work)."""
    def boom(*a, **k):
        raise AssertionError("the fit started before the outputs were checked")
    monkeypatch.setattr(rank_cli, "fit_and_evaluate", boom)


@pytest.mark.parametrize("extra", [
    ["--json", "{train}"],                                    # the reproducer: both inputs
    ["--json", "{train}", "--predictions", "{test}"],
    ["--predictions", "{test}", "--overwrite"],               # refused even with --overwrite
    ["--json", "{dir}/./train.txt", "--overwrite"],
    ["--json", "{dir}/link.txt", "--overwrite"],              # a symlink to an input
])
def test_output_that_is_an_input_is_refused(files, tmp_path, capsys, no_fit, extra):
    (tmp_path / "link.txt").symlink_to(files["train"])
    before = {k: _digest(v) for k, v in files.items()}
    args = [a.format(dir=tmp_path, **files) for a in extra]
    assert _ridge(files, *args) == 2
    assert "input file" in capsys.readouterr().err
    assert {k: _digest(v) for k, v in files.items()} == before


def test_existing_output_needs_overwrite(files, tmp_path, capsys):
    out = tmp_path / "out.json"
    out.write_text("precious")
    assert _ridge(files, "--json", str(out)) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert out.read_text() == "precious"
    assert _ridge(files, "--json", str(out), "--overwrite") == 0
    assert "test" in json.loads(out.read_text())


@pytest.mark.parametrize("extra, message", [
    (["--json", "/nonexistent-folder/x.json"], "does not exist"),
    (["--predictions", "{dir}"], "is a directory"),
    (["--json", "{train}/x.json"], "does not exist"),
    (["--json", "{dir}/a.txt", "--predictions", "{dir}/a.txt"], "same file"),
])
def test_bad_output_paths_fail_before_any_work(files, tmp_path, capsys, no_fit, extra, message):
    args = [a.format(dir=tmp_path, **files) for a in extra]
    assert _ridge(files, *args) == 2
    assert message in capsys.readouterr().err


def test_plots_folder_checked_before_work(files, tmp_path, capsys, no_fit):
    plots = tmp_path / "plots"
    plots.mkdir()
    (plots / "trace.png").write_text("old")
    assert main(["learn-to-rank", "--train", files["train"], "--test", files["test"], "--fit",
                 "nuts",
                 "--plots", str(plots)]) == 2
    assert "trace.png already exists" in capsys.readouterr().err
    assert main(["learn-to-rank", "--train", files["train"], "--test", files["test"], "--fit",
                 "nuts",
                 "--plots", files["train"]]) == 2
    assert "input" in capsys.readouterr().err


def test_one_failing_output_does_not_stop_the_others(files, tmp_path, capsys, monkeypatch):
    out, pred = tmp_path / "out.json", tmp_path / "pred.txt"

    def disk_full(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savetxt", disk_full)
    assert _ridge(files, "--json", str(out), "--predictions", str(pred)) == 1
    assert "could not write --predictions" in capsys.readouterr().err
    result = json.loads(out.read_text())
    assert "No space left" in result["output_errors"][0]
    assert not pred.exists() and sorted(p.name for p in tmp_path.iterdir()) == [
        "out.json", "test.txt", "train.txt"]  # no temporary file left behind


def test_json_records_how_to_reproduce_the_run(files, tmp_path):
    import pm_perm

    out = tmp_path / "out.json"
    assert _ridge(files, "--json", str(out), "--seed", "7") == 0
    run = json.loads(out.read_text())["run"]
    assert run["pm_perm_version"] == pm_perm.__version__ and run["seed"] == 7
    assert run["settings"]["model"] == "ridge" and run["settings"]["train"] == [files["train"]]
    recorded = {r["path"]: r for r in run["inputs"]}
    for f in files.values():
        from pathlib import Path

        rec = recorded[str(Path(f).resolve())]
        assert rec["sha256"] == _digest(f) and rec["size"] == Path(f).stat().st_size
    assert set(run["versions"]) >= {"pymc", "pytensor", "numba", "numpy", "scipy"}


@pytest.mark.parametrize("extra", [
    ["--test", "{train}"],                                     # the reproducer
    ["--test", "{test}", "--valid", "{train}"],
    ["--test", "{dir}/../{name}/train.txt"],                   # another spelling
    ["--test", "{dir}/link.txt"],                              # a symlink to the train file
])
def test_test_or_valid_file_that_is_the_train_file_is_refused(files, tmp_path, capsys,
                                                             monkeypatch, no_fit, extra):
    from pm_perm.learning_to_rank import data as rank_data

    def boom(*a, **k):
        raise AssertionError("the data was read before the files were checked")

    monkeypatch.setattr(rank_data, "read_letor", boom)
    (tmp_path / "link.txt").symlink_to(files["train"])
    args = [a.format(dir=tmp_path, name=tmp_path.name, **files) for a in extra]
    assert main(["learn-to-rank", "--train", files["train"], *args, "--model", "ridge"]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    option = extra[-2]
    assert f"{option} {args[-1]} is the --train file {files['train']}" in line


def test_test_file_that_is_the_valid_file_is_refused(files, capsys, no_fit):
    """Settings chosen on the test queries: refused before reading, as for the train file."""
    assert main(["learn-to-rank", "--train", files["train"], "--valid", files["test"], "--test",
                 files["test"], "--model", "ridge"]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert f"--test {files['test']} is the --valid file {files['test']}" in line


def test_queries_sharing_a_training_qid_are_a_recorded_warning(files, tmp_path, capsys):
    """A copy of the training file as --test: not the same file, but the same qids."""
    import shutil
    from pathlib import Path

    copy = shutil.copy(files["train"], tmp_path / "copy.txt")
    out = tmp_path / "out.json"
    assert main(["learn-to-rank", "--train", files["train"], "--test", str(copy), "--model",
                 "ridge",
                 "--json", str(out)]) == 0
    [warning] = json.loads(out.read_text())["warnings"]
    assert warning.startswith("8 of the 8 --test queries are --train queries (the same qid and "
                              "the same documents: qids 100, 101, 102, 103, 104, ...)")
    assert warning in capsys.readouterr().err
    # distinct qids: no warning
    other = tmp_path / "other.txt"
    other.write_text(Path(files["test"]).read_text().replace("qid:1", "qid:9"))
    assert main(["learn-to-rank", "--train", files["train"], "--test", str(other), "--model",
                 "ridge",
                 "--json", str(out), "--overwrite"]) == 0
    assert json.loads(out.read_text())["warnings"] == []
    # the training qids 100-103 on other documents (files numbered independently, as these
    # two are): no warning either (it warned before)
    assert main(["learn-to-rank", "--train", files["train"], "--test", files["test"], "--model",
                 "ridge",
                 "--json", str(out), "--overwrite"]) == 0
    assert json.loads(out.read_text())["warnings"] == []


needs_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                                reason="creating a device node needs root")


def _device(folder, name, minor):
    """A character device of our own, never the system's: 3 = null, 7 = full (ENOSPC)."""
    path = folder / name
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
    return path


@needs_root
@pytest.mark.parametrize("overwrite", [[], ["--overwrite"]])
def test_json_to_a_device_writes_it_and_never_replaces_it(files, tmp_path, capsys, overwrite):
    """Issue 53: ``--json /dev/full --overwrite`` exited 0 and replaced the device node by a
    regular file (``/dev/null`` the same). Reproduced on device nodes of our own."""
    null, full = _device(tmp_path, "null", 3), _device(tmp_path, "full", 7)
    assert _ridge(files, "--json", str(null), *overwrite) == 0
    assert stat.S_ISCHR(os.lstat(null).st_mode) and os.stat(null).st_rdev == os.makedev(1, 3)
    capsys.readouterr()
    assert _ridge(files, "--json", str(full), "--predictions", str(null), *overwrite) == 1
    err = capsys.readouterr().err
    assert f"could not write --json {full}" in err and "No space left on device" in err
    assert stat.S_ISCHR(os.lstat(full).st_mode) and os.stat(full).st_rdev == os.makedev(1, 7)
    assert stat.S_ISCHR(os.lstat(null).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full", "null", "test.txt",
                                                          "train.txt"]


def test_json_to_a_fifo_reaches_its_reader(files, tmp_path):
    """A FIFO given as --json was replaced by a regular file and its reader got nothing."""
    fifo = tmp_path / "results.fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    try:
        assert _ridge(files, "--json", str(fifo), "--overwrite") == 0
        text = reader.communicate(timeout=30)[0]
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.communicate()
    assert "ndcg@1" in json.loads(text)["test"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_json_dash_is_the_standard_output_and_the_table_goes_to_stderr(files, tmp_path, capsys):
    assert _ridge(files, "--json", "-", "--predictions", str(tmp_path / "p.txt")) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)  # standard output is the JSON document alone
    assert "ndcg@1" in result["test"] and "test metrics (ridge" in err
    assert not (tmp_path / "-").exists()
    assert _ridge(files, "--predictions", "-") == 0
    out, err = capsys.readouterr()
    assert len(np.loadtxt(out.splitlines())) == 24 and "test metrics" in err
    assert _ridge(files, "--json", "-", "--predictions", "-") == 2
    assert "only one output can be the standard output" in capsys.readouterr().err


def test_two_runs_writing_the_same_new_json_one_is_refused(files, tmp_path, capsys,
                                                           monkeypatch):
    """Issue 53: two runs writing the same new --json without --overwrite both exited 0, the
    later silently replacing the earlier. Both runs pass the up-front check and fit before
    either writes (a barrier): exactly one succeeds, the other exits 1 naming the file, and
    the file is the winner's, complete."""
    out = tmp_path / "out.json"
    barrier = threading.Barrier(2, timeout=60)
    fit = rank_cli.fit_and_evaluate

    def fit_then_wait(*a, **k):
        result = fit(*a, **k)
        barrier.wait()  # both runs have checked --json (it did not exist) and fitted
        return result

    monkeypatch.setattr(rank_cli, "fit_and_evaluate", fit_then_wait)
    codes = {}

    def run(seed):
        codes[seed] = _ridge(files, "--json", str(out), "--seed", str(seed))

    threads = [threading.Thread(target=run, args=(seed,)) for seed in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert sorted(codes.values()) == [0, 1], codes
    [winner] = [seed for seed, code in codes.items() if code == 0]
    err = capsys.readouterr().err
    assert f"could not write --json {out}" in err and "already exists" in err
    assert json.loads(out.read_text())["run"]["seed"] == winner
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json", "test.txt", "train.txt"]
