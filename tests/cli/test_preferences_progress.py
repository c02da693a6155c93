"""``pm-perm preferences`` under a terminal: progress of the fit on the standard error, none with
``--quiet`` and none when the standard error is piped (issue 50, item 4)."""

from __future__ import annotations

import json

import pytest

from pm_perm.cli import main
from pm_perm.preferences.preflib import write_preflib
from pm_perm.preferences.synthetic import simulate_rankings
from tests.inference.test_progress import stderr_on


@pytest.fixture
def ballots(tmp_path):
    data = simulate_rankings(300, utilities=[1.0, 0.5, 0.0, -0.5], rng=0, item_names="ABCD",
                             length_probs=[0, 0.3, 0.3, 0, 0.4])
    path = tmp_path / "small.soi"
    write_preflib(data, path)
    return path


@pytest.mark.parametrize(("kind", "quiet", "shown"),
                         [("tty", False, True), ("tty", True, False), ("pipe", False, False)])
def test_progress_on_a_terminal_unless_quiet(ballots, tmp_path, monkeypatch, capsys, kind,
                                             quiet, shown):
    out = tmp_path / "out.json"
    argv = ["preferences", str(ballots), "--model", "plackett-luce", "--json", str(out)]
    with stderr_on(kind, monkeypatch) as written:
        assert main(argv + (["--quiet"] if quiet else [])) == 0
    text = written[0]
    assert json.loads(out.read_text())["consensus"] == ["A", "B", "C", "D"]
    assert ("MAP (L-BFGS-B) | iteration" in text) == shown, text
    assert ("ballots (" in text) == (not quiet), text  # the status line
    assert "consensus" in capsys.readouterr().out  # the summary: printed even with --quiet
