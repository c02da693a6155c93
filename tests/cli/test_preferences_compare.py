"""``pm-perm preferences`` compares the chosen model with Plackett-Luce on ballots it was not
fitted to, warns when it loses by more than noise, and ``--compare`` ranks the candidate models
(issue 53, finding 8)."""

import json

import numpy as np
import pytest

from pm_perm.cli import main
from pm_perm.cli import preferences as rankings_cli
from pm_perm.preferences import fitting as rfit
from pm_perm.preferences import models as rmod
from pm_perm.preferences.preflib import write_preflib
from pm_perm.preferences.synthetic import simulate_rankings


def _pl_file(tmp_path, M, n, sd, seed):
    rng = np.random.default_rng(seed)
    data = simulate_rankings(n, utilities=rng.normal(0.0, sd, M), rng=rng)
    path = tmp_path / "pl.soc"
    write_preflib(data, path)
    return path


def test_warns_when_the_chosen_model_loses_to_plackett_luce(tmp_path, capsys, monkeypatch):
    """The rank-one model with the old linear profile loses to Plackett-Luce on PL data (about
    0.4 nats per held-out ballot here, over 5 standard errors): the run says so. (The old
    rank-one model is forced: by default one population on complete ballots runs the
    PL-anchored one.)"""
    build = rmod.rank_one_model
    monkeypatch.setattr(rmod, "rank_one_model",
                        lambda data, **kw: build(data, **{**kw, "positions": "linear"}))
    monkeypatch.setattr(rankings_cli, "_family", lambda args, data: args.model)
    out = tmp_path / "o.json"
    assert main(["preferences", str(_pl_file(tmp_path, 10, 150, 1.5, 1)), "--model", "rank-one",
                 "--heldout-fraction", "0.25", "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    comp = res["comparison"]
    assert comp["method"] == "held-out ballots" and comp["chosen_loses_to_plackett_luce"]
    assert comp["n_ballots"] == res["heldout"]["n_rankings"]
    chosen, pl = comp["models"]
    assert chosen["model"] == "rank-one" and pl["model"] == "plackett-luce"
    # the chosen model's score is the reported held-out figure; the difference is beyond 2 SE
    assert chosen["loglik_per_ballot"] == pytest.approx(res["heldout"]["loglik_per_ranking"])
    mean, se = pl["difference_to_chosen"]
    assert mean > 2 * se > 0
    assert any("loses to Plackett-Luce" in w for w in res["warnings"])
    assert "warning: the chosen model (rank-one (K=1)) loses to Plackett-Luce" in \
        capsys.readouterr().err


def test_default_full_model_does_not_lose_on_small_plackett_luce_data(tmp_path):
    """``--model full`` with one population on complete ballots runs the PL-anchored model
    (issue 53, finding 8): on 150 Plackett-Luce ballots over 10 items its held-out
    log-likelihood is within noise of Plackett-Luce's (no warning)."""
    model = "full"
    out = tmp_path / "o.json"
    assert main(["preferences", str(_pl_file(tmp_path, 10, 150, 1.0, 2)), "--model", model,
                 "--heldout-fraction", "0.25", "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["model"] == model and res["family"] == "pl-anchored" and res["notes"] == []
    assert res["variant"].startswith(f"PL-anchored {model}")
    assert res["comparison"]["chosen_loses_to_plackett_luce"] is False
    chosen, pl = res["comparison"]["models"]
    assert chosen["loglik_per_ballot"] == pytest.approx(res["heldout"]["loglik_per_ranking"])
    mean, se = pl["difference_to_chosen"]
    assert abs(mean) <= 2 * se + 1e-3  # within noise either way
    assert not any("loses to Plackett-Luce" in w for w in res["warnings"])
    ev = res["diagnostics"]["log_evidence"]  # the deviation scale chosen by the evidence
    assert 1 <= len(ev) <= len(rfit.TAU_GRID) and {float(t) for t in ev} <= set(rfit.TAU_GRID)
    assert res["diagnostics"]["tau"] == float(max(ev, key=ev.get))


# five folds, each fitting the four candidate models, rank-one itself cross-validated (V6):
# 203 s of wall time at load 10: --runslow
@pytest.mark.slow
def test_compare_without_heldout_ballots_cross_validates(tmp_path, capsys):
    path = _pl_file(tmp_path, 4, 40, 1.0, 3)
    out = tmp_path / "o.json"
    assert main(["preferences", str(path), "--model", "rank-one", "--compare",
                 "--json", str(out)]) == 0
    comp = json.loads(out.read_text())["comparison"]
    assert comp["method"].startswith(f"{rankings_cli.CV_FOLDS}-fold cross-validation")
    assert comp["n_ballots"] == 40  # every ballot scored once
    models = {r["model"]: r for r in comp["models"]}
    assert set(models) == {"plackett-luce", "rank-one", "full", "top-k"}
    best = max(models.values(), key=lambda r: r["loglik_per_ballot"])
    assert comp["best"] == f"{best['model']} (K=1)"
    assert f"best: {comp['best']}" in capsys.readouterr().out
    # one-population Plackett-Luce without --compare: nothing to compare with
    assert main(["preferences", str(path), "--model", "plackett-luce", "--json", str(out),
                 "--overwrite"]) == 0
    assert json.loads(out.read_text())["comparison"] is None


def test_check_skipped_on_large_data_without_heldout_ballots_says_so(tmp_path, capsys,
                                                                     monkeypatch):
    monkeypatch.setattr(rankings_cli, "CHECK_MAX_BALLOTS", 10)
    out = tmp_path / "o.json"
    assert main(["preferences", str(_pl_file(tmp_path, 4, 40, 1.0, 4)), "--model", "rank-one",
                 "--json", str(out)]) == 0
    comp = json.loads(out.read_text())["comparison"]
    assert comp["models"] == [] and "not compared with Plackett-Luce" in comp["skipped"]
    assert "--heldout-fraction or --compare" in capsys.readouterr().err


def test_differences_are_per_ballot_without_expanding_the_counts():
    """The comparison weighs each distinct order by its count: the same mean and standard
    error as on the ballots expanded one per row, and counts of any size cost nothing more."""
    rng = np.random.default_rng(7)
    a, b = rng.normal(size=6), rng.normal(size=6)
    counts = np.array([1.0, 3.0, 2.0, 5.0, 1.0, 4.0])
    d = np.repeat(a - b, counts.astype(int))
    mean, se = rankings_cli._difference((a, counts), (b, counts))
    assert mean == pytest.approx(d.mean()) and se == pytest.approx(d.std(ddof=1) / np.sqrt(d.size))
    assert rankings_cli._mean((a, counts)) == pytest.approx(np.repeat(a, counts.astype(int)).mean())
    mean, se = rankings_cli._difference((a, counts * 1e12), (b, counts * 1e12))
    assert mean == pytest.approx(d.mean()) and 0 < se < 1e-5


@pytest.mark.parametrize("extra, tie, why", [
    # a two-component type-II fit: 78 s of wall time on empty compile caches at load 10 (the
    # mixture fits are tested in tests/preferences/test_mixture_models.py): --runslow
    pytest.param(["--components", "2"], False, "--components > 1 was given",
                 marks=pytest.mark.slow),
    ([], True, "some ballots have tied items before their end"),
])
def test_the_older_full_model_runs_where_the_anchored_one_does_not_apply(tmp_path, extra, tie,
                                                                         why):
    """A mixture, or a tie before a ballot's end: the full model shrunk toward rank one runs,
    and the JSON says which model ran and why."""
    from pm_perm.preferences.data import RankingData

    orders = [[0, 1, 2, 3]] * 3 + [[1, 0, 2, 3]] * 2 + [[3, 2, 1, 0]] * 2 + [[2, 3, 0, 1]]
    if tie:
        orders[-1] = [0, 1, 1, 3]  # items 2 and 3 tied second, item 4 fourth
    path = tmp_path / ("t.toc" if tie else "t.soc")
    write_preflib(RankingData.from_orders(np.array(orders)), path)
    out = tmp_path / "o.json"
    assert main(["preferences", str(path), "--model", "full", *extra, "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["model"] == "full" and res["family"] == "full"
    assert res["variant"].startswith("full (full item x position logits shrunk toward rank one")
    assert len(res["notes"]) == 1 and why in res["notes"][0]


def test_default_rank_one_is_the_cross_validated_anchored_tilt(tmp_path):
    """``--model rank-one`` (one population, complete ballots, MAP) runs the PL-anchored rank-one
    tilt with tau by 5-fold cross-validation and the one-SE rule, the final fit from the
    Plackett-Luce MAP (V6 met the pre-registered small-data criterion); with
    ``--learn-positions`` the older rank-one model runs and the notes say why."""
    path = _pl_file(tmp_path, 4, 40, 1.0, 5)
    out = tmp_path / "o.json"
    assert main(["preferences", str(path), "--model", "rank-one", "--heldout-fraction", "0.25",
                 "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["family"] == "pl-anchored" and res["notes"] == [] and res["logits"] is None
    assert res["variant"] == ("PL-anchored rank-one (Plackett-Luce tilted, cross-validated "
                              "tau, final fit from the Plackett-Luce MAP)")
    diag = res["diagnostics"]
    cv, se = diag["cv_loglik"], diag["cv_se"]
    assert diag["folds"] == 5 and {float(t) for t in cv} <= set(rfit.TAU_GRID)
    best = max(cv, key=cv.get)
    assert diag["tau"] == min(float(t) for t in cv if cv[t] - cv[best] >= -se[t])
    assert res["comparison"]["chosen_loses_to_plackett_luce"] is False
    assert main(["preferences", str(path), "--model", "rank-one", "--learn-positions",
                 "--json", str(out), "--overwrite"]) == 0
    res = json.loads(out.read_text())
    assert res["family"] == "rank-one" and res["logits"] is not None
    assert len(res["notes"]) == 1 and "--learn-positions was given" in res["notes"][0]
