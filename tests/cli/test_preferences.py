"""``pm-perm preferences`` end to end on a small generated PrefLib file."""

import hashlib
import json
import os

import numpy as np
import pytest
from scipy.special import logsumexp

from pm_perm.cli import main
from pm_perm.cli import preferences as rankings_cli
from pm_perm.preferences import anchored
from pm_perm.preferences import fitting as rfit
from pm_perm.preferences import models as rmod
from pm_perm.preferences.preflib import read_preflib, write_preflib
from pm_perm.preferences.synthetic import rank_one_logits, simulate_rankings
from pm_perm.reference.permutations import all_permutations
from pm_perm.reference.rankings import consistent_mask, pl_tilted_complete_logp


@pytest.fixture
def ballots(tmp_path):
    data = simulate_rankings(1500, logits=rank_one_logits([3.0, 1.5, 0.0, -1.5]),
                             length_probs=[0, 0.4, 0.3, 0, 0.3], rng=0, item_names="ABCD")
    path = tmp_path / "small.soi"
    write_preflib(data, path)
    return path


def test_map_end_to_end(ballots, tmp_path, capsys):
    out = tmp_path / "out.json"
    assert main(["preferences", str(ballots), "--model", "full", "--fit", "map",
                 "--heldout-fraction", "0.25", "--seed", "3", "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    data = read_preflib(ballots)
    assert res["model"] == "full" and res["n_items"] == 4 and res["n_rankings"] == 1500
    # one population, top-k ballots: the PL-anchored full model ran (issue 53, finding 8)
    assert res["family"] == "pl-anchored" and res["variant"].startswith("PL-anchored full")
    assert res["notes"] == [] and res["logits"] is None
    assert res["train"]["n_rankings"] + res["heldout"]["n_rankings"] == 1500
    assert 250 < res["heldout"]["n_rankings"] < 500  # about a quarter of the BALLOTS
    assert res["consensus"] == ["A", "B", "C", "D"]
    u, D = np.array(res["utilities"])[0], np.array(res["deviations"])
    assert u.shape == (4,) and D.shape == (4, 4)
    assert res["diagnostics"]["tau"] > 0  # rank-one logits are not Plackett-Luce: D departs
    # the reported per-ballot log-likelihoods are those of the reported u and D (brute force:
    # the log-sum of the enumerated tilted probabilities of the consistent complete rankings)
    perms = all_permutations(4)
    full = pl_tilted_complete_logp(u, D, perms)
    train, heldout = data.split_ballots(0.25, np.random.default_rng(3))
    for name, d in (("train", train), ("heldout", heldout)):
        ll = np.array([logsumexp(full[consistent_mask(y, perms)]) for y in d.orders])
        assert res[name]["loglik_per_ranking"] == pytest.approx(d.counts @ ll / d.n_rankings,
                                                                rel=1e-8)
    assert res["run"]["seed"] == 3 and res["diagnostics"]["n_converged"] == 1
    assert "consensus" in capsys.readouterr().out


def test_json_dash_is_the_standard_output_and_the_summary_goes_to_stderr(ballots, capsys):
    """``--json -``: the standard output is the JSON document alone (issue 53)."""
    assert main(["preferences", str(ballots), "--model", "plackett-luce", "--json", "-"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["consensus"] == ["A", "B", "C", "D"]
    assert "consensus" in err and "plackett-luce (K=1, map)" in err


def test_mixture_and_plots(ballots, tmp_path):
    out, plots = tmp_path / "mix.json", tmp_path / "plots"
    assert main(["preferences", str(ballots), "--model", "plackett-luce", "--components", "2",
                 "--json", str(out), "--plots", str(plots), "--ppc-reps", "20"]) == 0
    res = json.loads(out.read_text())
    assert res["logits"] is None and len(res["utilities"]) == 2 and len(res["blocs"]) == 2
    assert sum(b["weight"] for b in res["blocs"]) == pytest.approx(1.0)
    assert {p.name for p in plots.iterdir()} == {"positions.png", "pairwise.png",
                                                 "consensus.png", "ppc.png", "blocs.png"}
    assert res["heldout"]["loglik_per_ranking"] is None and res["heldout"]["n_rankings"] == 0


@pytest.fixture
def no_fit(monkeypatch):
    """Fail the test if the data is read or a fit starts (errors must come before any work)."""
    def boom(*a, **k):
        raise AssertionError("work started before the outputs were checked")
    monkeypatch.setattr(rfit, "fit_map", boom)
    monkeypatch.setattr(rfit, "fit_nuts", boom)
    monkeypatch.setattr(rankings_cli, "_fit", boom)


@pytest.mark.parametrize("extra, match", [
    (["--json", "{input}"], "refusing to overwrite"),
    (["--json", "{tmp}/missing/out.json"], "does not exist"),
    (["--json", "{tmp}/o.json", "--plots", "{input}"], "input file"),
    (["--json", "{tmp}/o.json", "--plots", "{tmp}/no/such/plots"], "does not exist"),
    (["--json", "{tmp}"], "is a directory"),
    (["--json", "{tmp}/o.json", "--model", "full", "--learn-positions"], "rank-one only"),
])
def test_bad_outputs_fail_before_fitting(ballots, tmp_path, capsys, no_fit, extra, match):
    before = ballots.read_bytes()
    args = [a.format(input=ballots, tmp=tmp_path) for a in extra]
    assert main(["preferences", str(ballots)] + args) == 2
    assert match in capsys.readouterr().err
    assert ballots.read_bytes() == before and not (tmp_path / "o.json").exists()


def test_missing_input(tmp_path, capsys):
    assert main(["preferences", str(tmp_path / "none.soi"), "--json",
                 str(tmp_path / "o.json")]) == 2
    assert "not found" in capsys.readouterr().err
    assert main(["preferences", str(tmp_path), "--json", str(tmp_path / "o.json")]) == 2
    assert "is a directory" in capsys.readouterr().err


HEADER = ("# DATA TYPE: soc\n# NUMBER ALTERNATIVES: {M}\n# ALTERNATIVE NAME 1: A\n"
          "# ALTERNATIVE NAME 2: B\n# ALTERNATIVE NAME 3: {C}\n")


@pytest.mark.parametrize("M, C, body, match", [
    (10**9, "C", "2: 1,2,3\n", "line 2: header declares NUMBER ALTERNATIVES: 1000000000 but "
                               "names 3"),
    (3, "C", "99999999999999999999999: 1,2,3\n", "line 6: count 99999999999999999999999 is "
                                                 "too large"),
    (3, "C", "9223372036854775807: 1,2,3\n1: 3,2,1\n", "line 7: the counts up to this line"),
    (3, "Café", "2: 1,2,3\n", "line 5: byte 0xe9 is not UTF-8"),
])
def test_bad_preflib_files_exit_2(tmp_path, capsys, no_fit, M, C, body, match):
    path = tmp_path / "bad.soc"
    path.write_bytes((HEADER.format(M=M, C=C) + body).encode("latin-1"))
    assert main(["preferences", str(path), "--json", str(tmp_path / "o.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"pm-perm preferences: error: {path}, {match}") and err.count("\n") == 1
    assert not (tmp_path / "o.json").exists()


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("spelling", ["{dir}/./small.soi", "{dir}/../{name}/small.soi",
                                      "{dir}/link.soi", "relative"])
@pytest.mark.parametrize("where", ["--json", "--plots"])
def test_input_as_output_refused_even_with_overwrite(ballots, tmp_path, capsys, monkeypatch,
                                                     no_fit, spelling, where):
    (tmp_path / "link.soi").symlink_to(ballots)
    before = _digest(ballots)
    path = spelling.format(dir=tmp_path, name=tmp_path.name)
    if spelling == "relative":
        monkeypatch.chdir(tmp_path)
        path = "./small.soi"
    args = (["--json", path] if where == "--json"
            else ["--json", str(tmp_path / "o.json"), "--plots", path])
    assert main(["preferences", str(ballots), *args, "--overwrite"]) == 2
    assert "input file" in capsys.readouterr().err
    assert _digest(ballots) == before and not (tmp_path / "o.json").exists()


def test_existing_json_needs_overwrite(ballots, tmp_path, capsys):
    out = tmp_path / "out.json"
    out.write_text("precious")
    assert main(["preferences", str(ballots), "--json", str(out)]) == 2
    assert "--overwrite" in capsys.readouterr().err and out.read_text() == "precious"
    assert main(["preferences", str(ballots), "--json", str(out), "--overwrite"]) == 0
    assert json.loads(out.read_text())["model"] == "full"


def test_existing_plot_needs_overwrite(ballots, tmp_path, capsys, no_fit):
    plots = tmp_path / "plots"
    plots.mkdir()
    (plots / "ppc.png").write_text("old")
    assert main(["preferences", str(ballots), "--json", str(tmp_path / "o.json"),
                 "--plots", str(plots)]) == 2
    assert "ppc.png already exists" in capsys.readouterr().err
    assert (plots / "ppc.png").read_text() == "old"


def test_unwritable_folder_refused_before_fitting(ballots, tmp_path, capsys, monkeypatch,
                                                  no_fit):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    if os.geteuid() == 0:  # root may write anywhere: make the folder refuse new files
        import tempfile

        real = tempfile.mkstemp

        def mkstemp(*args, dir=None, **kwargs):
            if dir is not None and os.path.abspath(dir) == str(locked):
                raise PermissionError(13, "Permission denied")
            return real(*args, dir=dir, **kwargs)

        monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    try:
        assert main(["preferences", str(ballots), "--json", str(locked / "o.json")]) == 2
        assert "not writable" in capsys.readouterr().err
        # a plots folder to be created inside the read-only folder
        assert main(["preferences", str(ballots), "--json", str(tmp_path / "o.json"),
                     "--plots", str(locked / "plots")]) == 2
        assert "not writable" in capsys.readouterr().err
    finally:
        locked.chmod(0o700)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["locked", "small.soi"]
    assert list(locked.iterdir()) == []


def _strict_load(path):
    def refuse(token):
        raise ValueError(f"non-strict JSON token {token}")
    return json.loads(path.read_text(), parse_constant=refuse)


def test_json_is_strict_and_records_the_run(ballots, tmp_path, monkeypatch):
    import pm_perm

    out = tmp_path / "out.json"
    real = rankings_cli._report

    def with_nan(*a, **k):  # a non-finite number somewhere in the result
        result, figures = real(*a, **k)
        result["diagnostics"]["log_posterior"] = float("nan")
        return result, figures

    monkeypatch.setattr(rankings_cli, "_report", with_nan)
    assert main(["preferences", str(ballots), "--json", str(out), "--seed", "5"]) == 0
    res = _strict_load(out)
    assert res["diagnostics"]["log_posterior"] is None
    assert any("log_posterior" in w and "null" in w for w in res["warnings"])
    run = res["run"]
    assert run["pm_perm_version"] == pm_perm.__version__ and run["seed"] == 5
    assert run["settings"]["model"] == "full" and run["settings"]["overwrite"] is False
    assert run["draws"] is None and run["chains"] is None and isinstance(run["argv"], list)
    [rec] = run["inputs"]
    assert rec == {"path": str(ballots.resolve()), "size": ballots.stat().st_size,
                   "sha256": _digest(ballots)}
    assert set(run["versions"]) >= {"pymc", "pytensor", "numba", "numpy", "scipy"}
    for key in ("model", "n_items", "n_rankings", "logits", "consensus"):
        assert key in res
    assert set(res["train"]) >= {"loglik_per_ranking"}
    assert set(res["heldout"]) >= {"loglik_per_ranking", "n_rankings"}


def test_failing_plots_do_not_lose_the_json(ballots, tmp_path, capsys, monkeypatch):
    from pm_perm.preferences import plots as rplots

    def disk_full(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(rplots, "save_all", disk_full)
    out = tmp_path / "out.json"
    assert main(["preferences", str(ballots), "--json", str(out), "--plots",
                 str(tmp_path / "plots"), "--ppc-reps", "5"]) == 1
    assert "could not write --plots" in capsys.readouterr().err
    res = _strict_load(out)
    assert "No space left" in res["output_errors"][0] and res["consensus"][0] == "A"


def test_map_failure_exits_3(ballots, tmp_path, capsys, monkeypatch):
    from pm_perm.inference import MapFitError

    def fails(*a, **k):
        raise MapFitError("MAP fit of the full model (K=1) failed: did not converge")

    monkeypatch.setattr(rfit, "fit_map", fails)
    monkeypatch.setattr(rfit, "fit_map_type2", fails)  # the full model's MAP (issue 53)
    out = tmp_path / "out.json"
    assert main(["preferences", str(ballots), "--json", str(out)]) == 3
    err = capsys.readouterr().err
    assert "the fit failed, nothing was written" in err and "did not converge" in err
    assert not out.exists()


@pytest.mark.parametrize("fit", ["map", "nuts"])
def test_interrupt_exits_130_and_writes_nothing(ballots, tmp_path, capsys, monkeypatch, fit):
    from pm_perm.inference import SamplingInterrupted

    def interrupted(*a, **k):
        raise (KeyboardInterrupt() if fit == "map" else SamplingInterrupted("Ctrl-C"))

    monkeypatch.setattr(rfit, f"fit_{fit}", interrupted)
    monkeypatch.setattr(rfit, "fit_map_type2", interrupted)  # the full model's MAP (issue 53)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["preferences", str(ballots), "--fit", fit, "--json", str(tmp_path / "o.json"),
                 "--plots", str(tmp_path / "plots")]) == 130
    assert "interrupted" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_nuts_nan_draws_are_a_fit_failure(ballots, tmp_path, capsys, monkeypatch):
    """checked_sample refuses non-finite draws: exit 3, nothing written."""
    import pymc as pm

    def nan_sample(*a, **k):
        import arviz as az

        shape = (k["chains"], k["draws"])  # the default full model: PL-anchored (u, D)
        nan = {"u": np.full(shape + (1, 4), np.nan), "D": np.full(shape + (1, 4, 4), np.nan)}
        return az.from_dict({"posterior": nan, "sample_stats": {
            "diverging": np.zeros((k["chains"], k["draws"]), bool)}})

    monkeypatch.setattr(pm, "sample", nan_sample)
    out = tmp_path / "o.json"
    assert main(["preferences", str(ballots), "--fit", "nuts", "--draws", "5", "--tune", "5",
                 "--chains", "1", "--json", str(out)]) == 3
    assert "non-finite draws" in capsys.readouterr().err and not out.exists()


@pytest.mark.numba  # NUTS runs a graph thousands of times: compiled, as a user's
@pytest.mark.slow
@pytest.mark.parametrize("model, family", [("rank-one", "rank-one"), ("full", "pl-anchored")])
def test_nuts_end_to_end(ballots, tmp_path, model, family):
    """NUTS: rank-one runs the older rank-one model (the PL-anchored rank-one tilt did not mix,
    max r_hat 1.14), full the PL-anchored model at its type-II tau."""
    out = tmp_path / "nuts.json"
    assert main(["preferences", str(ballots), "--model", model, "--fit", "nuts",
                 "--draws", "300", "--tune", "300", "--chains", "2",
                 "--heldout-fraction", "0.2", "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["family"] == family
    if family == "pl-anchored":
        assert res["sampler"]["tau"] > 0 and res["logits"] is None
    assert res["diagnostics"]["max_r_hat"] < 1.05 and res["diagnostics"]["divergences"] == 0
    assert res["sampler"]["chains"] == 2 and res["consensus"] == ["A", "B", "C", "D"]
    assert res["sampler"]["sampler"] == "nutpie"


@pytest.mark.parametrize("extra, option, requirement", [
    (["--prior-sigma", "-1"], "--prior-sigma", "positive finite"),
    (["--prior-sigma", "inf"], "--prior-sigma", "positive finite"),
    (["--prior-sigma", "0"], "--prior-sigma", "positive finite"),
    (["--prior-sigma", "nan"], "--prior-sigma", "positive finite"),
    (["--fit", "nuts", "--target-accept", "1.5"], "--target-accept",
     "number strictly between 0 and 1"),
    (["--fit", "nuts", "--target-accept", "0"], "--target-accept",
     "number strictly between 0 and 1"),
    (["--seed", "-1"], "--seed", "non-negative integer"),
    (["--fit", "nuts", "--draws", "0"], "--draws", "positive integer"),
    (["--fit", "nuts", "--tune", "-1"], "--tune", "non-negative integer"),
    (["--fit", "nuts", "--chains", "0"], "--chains", "positive integer"),
    (["--heldout-fraction", "1.0"], "--heldout-fraction", "number in [0, 1)"),
    (["--heldout-fraction", "nan"], "--heldout-fraction", "number in [0, 1)"),
    (["--components", "0"], "--components", "positive integer"),
    (["--starts", "0"], "--starts", "positive integer"),
    (["--fit", "nuts", "--max-loglik-draws", "0"], "--max-loglik-draws", "positive integer"),
    (["--ppc-reps", "2.5"], "--ppc-reps", "positive integer"),
])
def test_bad_settings_refused_at_parsing(ballots, tmp_path, capsys, monkeypatch, no_fit, extra,
                                         option, requirement):
    """Exit 2 with one line naming the option, before the data is read or anything fitted."""
    from pm_perm.preferences import preflib as rdata

    def boom(*a, **k):
        raise AssertionError("the data was read before the settings were checked")

    monkeypatch.setattr(rdata, "read_preflib", boom)
    with pytest.raises(SystemExit) as exc:
        main(["preferences", str(ballots), "--json", str(tmp_path / "o.json"), *extra])
    assert exc.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"argument {option}: must be a {requirement}" in last and repr(extra[-1]) in last
    assert not (tmp_path / "o.json").exists()


# ------------------------------------------------ issue 53, section 7: the CLI as a new user


def _soi(path, M, body):
    head = [f"# NUMBER ALTERNATIVES: {M}"] + [f"# ALTERNATIVE NAME {i}: I{i}"
                                              for i in range(1, M + 1)]
    path.write_text("\n".join(head + body) + "\n")
    return path


def test_header_only_file_names_the_file_before_any_model(tmp_path, capsys, no_fit,
                                                          monkeypatch):
    def no_model(*a, **k):
        raise AssertionError("a model was built for a file without ballots")
    for name in rankings_cli.MODELS.values():
        monkeypatch.setattr(rmod, name, no_model)
    monkeypatch.setattr(anchored, "pl_anchored_model", no_model)
    path = _soi(tmp_path / "empty.soi", 4, [])
    assert main(["preferences", str(path), "--json", str(tmp_path / "o.json")]) == 2
    err = capsys.readouterr().err
    assert f"{path}: the file has no ballots" in err and err.count("\n") == 1


def test_too_many_items_names_the_flag(tmp_path, capsys, no_fit):
    path = _soi(tmp_path / "wide.soi", 40, ["3: 1,2,3", "1: 5,4,3,2,1"])
    assert main(["preferences", str(path), "--json", str(tmp_path / "o.json")]) == 2
    err = capsys.readouterr().err
    assert "--model plackett-luce" in err and "pm_perm.PlackettLuce" not in err
    assert str(path) in err


def test_repeated_item_named_as_in_the_file(tmp_path, capsys, no_fit):
    path = _soi(tmp_path / "rep.soi", 4, ["2: 1,2,3", "1: 1,3,1"])
    assert main(["preferences", str(path), "--json", str(tmp_path / "o.json")]) == 2
    err = capsys.readouterr().err
    assert f"{path}, line 7: item 1 ('I1') appears more than once" in err


@pytest.mark.parametrize("K", [3, 1000])
def test_more_components_than_distinct_orders_refused(tmp_path, capsys, no_fit, K):
    path = _soi(tmp_path / "few.soi", 4, ["5: 1,2,3", "5: 2,1"])
    assert main(["preferences", str(path), "--components", str(K),
                 "--json", str(tmp_path / "o.json")]) == 2
    err = capsys.readouterr().err
    assert f"--components {K} is more than the 2 distinct order(s)" in err
    assert "use --components 2 or fewer" in err and not (tmp_path / "o.json").exists()


def test_map_summary_claims_no_posterior_probability():
    result = {"model": "full", "components": 1, "fit": "map", "n_rankings": 10, "n_items": 3,
              "train": {"loglik_per_ranking": -1.0}, "heldout": {"loglik_per_ranking": None},
              "consensus": ["A", "B", "C"],
              "consensus_posterior": [{"order": ["A", "B", "C"], "probability": 1.0}]}
    text = rankings_cli.format_summary(result)
    assert "posterior" not in text and "A > B > C" in text and "MAP estimate" in text
    nuts = rankings_cli.format_summary({**result, "fit": "nuts"})
    assert "consensus (posterior probability 1.00): A > B > C" in nuts
