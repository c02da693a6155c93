"""``pm-perm rankings`` end to end on a small generated PrefLib file."""

import json

import numpy as np
import pytest

from pm_perm.cli import main
from pm_perm.rankings.data import read_preflib, write_preflib
from pm_perm.rankings.synthetic import rank_one_logits, simulate_rankings
from tests.rankings._brute import mixture_loglik


@pytest.fixture
def ballots(tmp_path):
    data = simulate_rankings(1500, logits=rank_one_logits([3.0, 1.5, 0.0, -1.5]),
                             length_probs=[0, 0.4, 0.3, 0, 0.3], rng=0, item_names="ABCD")
    path = tmp_path / "small.soi"
    write_preflib(data, path)
    return path


def test_map_end_to_end(ballots, tmp_path, capsys):
    out = tmp_path / "out.json"
    assert main(["rankings", str(ballots), "--model", "full", "--fit", "map",
                 "--heldout-fraction", "0.25", "--seed", "3", "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    data = read_preflib(ballots)
    assert res["model"] == "full" and res["n_items"] == 4 and res["n_rankings"] == 1500
    assert res["train"]["n_rankings"] + res["heldout"]["n_rankings"] == 1500
    assert 250 < res["heldout"]["n_rankings"] < 500  # about a quarter of the BALLOTS
    assert res["consensus"] == ["A", "B", "C", "D"]
    W = np.array(res["logits"])
    assert W.shape == (4, 4)
    # the reported per-ballot log-likelihoods are those of the reported logits (brute force)
    train, heldout = data.split_ballots(0.25, np.random.default_rng(3))
    for name, d in (("train", train), ("heldout", heldout)):
        ll, _ = mixture_loglik("full", W[None], np.ones(1), d.orders)
        assert res[name]["loglik_per_ranking"] == pytest.approx(d.counts @ ll / d.n_rankings,
                                                                rel=1e-8)
    assert res["input"]["size"] == ballots.stat().st_size and len(res["input"]["sha256"]) == 64
    assert res["seed"] == 3 and "version" in res and res["diagnostics"]["n_converged"] == 1
    assert "consensus" in capsys.readouterr().out


def test_mixture_and_plots(ballots, tmp_path):
    out, plots = tmp_path / "mix.json", tmp_path / "plots"
    assert main(["rankings", str(ballots), "--model", "plackett-luce", "--components", "2",
                 "--json", str(out), "--plots", str(plots), "--ppc-reps", "20"]) == 0
    res = json.loads(out.read_text())
    assert res["logits"] is None and len(res["utilities"]) == 2 and len(res["blocs"]) == 2
    assert sum(b["weight"] for b in res["blocs"]) == pytest.approx(1.0)
    assert {p.name for p in plots.iterdir()} == {"positions.png", "pairwise.png",
                                                 "consensus.png", "ppc.png", "blocs.png"}
    assert res["heldout"]["loglik_per_ranking"] is None and res["heldout"]["n_rankings"] == 0


@pytest.mark.parametrize("extra, match", [
    (["--json", "{input}"], "refusing to overwrite"),
    (["--json", "{tmp}/missing/out.json"], "does not exist"),
    (["--json", "{tmp}/o.json", "--plots", "{input}"], "not a directory"),
    (["--json", "{tmp}/o.json", "--heldout-fraction", "1.0"], "heldout-fraction"),
    (["--json", "{tmp}/o.json", "--components", "0"], "components"),
])
def test_bad_outputs_fail_before_fitting(ballots, tmp_path, capsys, extra, match):
    before = ballots.read_bytes()
    args = [a.format(input=ballots, tmp=tmp_path) for a in extra]
    assert main(["rankings", str(ballots)] + args) == 2
    assert match in capsys.readouterr().err
    assert ballots.read_bytes() == before and not (tmp_path / "o.json").exists()


def test_missing_input(tmp_path, capsys):
    assert main(["rankings", str(tmp_path / "none.soi"), "--json", str(tmp_path / "o.json")]) == 2
    assert "not found" in capsys.readouterr().err


@pytest.mark.slow
def test_nuts_end_to_end(ballots, tmp_path):
    out = tmp_path / "nuts.json"
    assert main(["rankings", str(ballots), "--model", "rank-one", "--fit", "nuts",
                 "--draws", "300", "--tune", "300", "--chains", "2",
                 "--heldout-fraction", "0.2", "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["diagnostics"]["max_r_hat"] < 1.05 and res["diagnostics"]["divergences"] == 0
    assert res["sampler"]["chains"] == 2 and res["consensus"] == ["A", "B", "C", "D"]
