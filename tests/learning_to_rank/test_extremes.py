"""Numerically extreme but legal inputs get a clear error naming the file and line, or a
correct result (issue 19, class 7); unclear messages are clear (class 9)."""

import json
from pathlib import Path

import numpy as np
import pytest

from pm_perm.cli import main
from pm_perm.learning_to_rank.data import MAX_LABEL, read_letor, read_lightgbm
from tests.cli.test_learning_to_rank import _write_letor


def _variant(tmp_path, name, edit):
    src = Path(_write_letor(tmp_path / "base.txt", 8, 0))
    lines = src.read_text().splitlines()
    lines[4] = edit(lines[4])
    out = tmp_path / f"{name}.txt"
    out.write_text("\n".join(lines) + "\n")
    return out


def _with_token(i, token):
    return lambda line: " ".join(line.split()[:i] + [token] + line.split()[i + 1:])


@pytest.mark.parametrize("name, edit, message", [
    ("label", _with_token(0, "1000000"), r"huge.txt:5: relevance label 1e\+06 .*MAX_LABEL"),
    ("label101", _with_token(0, str(MAX_LABEL + 1)), r"huge.txt:5: relevance label 101"),
    ("value", _with_token(2, "1:1e300"), r"huge.txt:5: a feature value of magnitude 1e\+300"),
    ("value-", _with_token(3, "2:-1e200"), r"huge.txt:5: a feature value"),
    ("fid", lambda line: line + " 2000000000:1.0", r"huge.txt:5: feature id 2000000000 .*GiB"),
])
def test_reader_names_file_and_line(tmp_path, name, edit, message):
    f = _variant(tmp_path, "huge", edit)
    with pytest.raises(ValueError, match=message):
        read_letor(f)


def test_largest_label_allowed_gives_finite_metrics(tmp_path, capsys):
    f = _variant(tmp_path, "top", _with_token(0, str(MAX_LABEL)))
    test = tmp_path / "top_test.txt"  # the same queries (the train file itself is refused)
    test.write_text(Path(f).read_text())
    out = tmp_path / "o.json"
    assert main(["learn-to-rank", "--train", str(f), "--test", str(test), "--model", "ridge",
                 "--json", str(out)]) == 0
    result = json.loads(out.read_text())  # strict JSON: NaN would not parse back as a number
    assert all(np.isfinite(v) and 0 <= v <= 1 for v in result["test"].values())


@pytest.mark.parametrize("model", ["ordinal", "rankmatch"])
def test_degenerate_labels_are_a_clear_error(tmp_path, capsys, model):
    src = Path(_write_letor(tmp_path / "base.txt", 8, 0))
    flat = tmp_path / "flat.txt"
    flat.write_text("\n".join("0 " + " ".join(line.split()[1:])
                              for line in src.read_text().splitlines()) + "\n")
    assert main(["learn-to-rank", "--train", str(flat), "--test", str(src), "--model", model]) == 2
    assert "nothing to train on" in capsys.readouterr().err


def test_directory_as_data_file(tmp_path, capsys):
    with pytest.raises(IsADirectoryError, match="is a directory, not a file"):
        read_letor(tmp_path)
    f = Path(_write_letor(tmp_path / "d.txt", 2, 0, qid=False))
    (tmp_path / "d.txt.query").unlink()
    (tmp_path / "d.txt.query").mkdir()
    with pytest.raises(IsADirectoryError, match="group file .* is a directory"):
        read_lightgbm(f)
    assert main(["learn-to-rank", "--train", str(tmp_path), "--test", str(f)]) == 2
    assert "is a directory" in capsys.readouterr().err
