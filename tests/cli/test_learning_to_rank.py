import json

import numpy as np
import pytest

from pm_perm.cli import main


def _write_letor(path, n_queries, seed, qid=True):
    """A tiny LETOR file whose labels follow a linear score of 3 features."""
    rng = np.random.default_rng(seed)
    lines, sizes = [], []
    for q in range(n_queries):
        n = 6
        X = rng.normal(size=(n, 3))
        s = X @ [1.0, -0.5, 0.2] + rng.normal(scale=0.3, size=n)
        y = np.digitize(s, np.quantile(s, [0.5, 0.8]))
        for label, x in zip(y, X, strict=True):
            feats = " ".join(f"{j + 1}:{v:.5f}" for j, v in enumerate(x))
            lines.append(f"{label} qid:{100 + q} {feats}" if qid else f"{label} {feats}")
        sizes.append(n)
    path.write_text("\n".join(lines) + "\n")
    if not qid:
        (path.parent / (path.name + ".query")).write_text("\n".join(map(str, sizes)) + "\n")
    return str(path)


@pytest.fixture(scope="module")
def letor_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("letor")
    return {k: _write_letor(d / f"{k}.txt", n, seed)
            for k, n, seed in [("train", 12, 0), ("valid", 6, 1), ("test", 8, 2)]}


def test_rank_rankmatch_map_writes_json_and_predictions(letor_files, tmp_path, capsys):
    out, pred = tmp_path / "out.json", tmp_path / "pred.txt"
    code = main(["learn-to-rank", "--train", letor_files["train"], "--valid", letor_files["valid"],
                 "--test", letor_files["test"], "--model", "rankmatch", "--fit", "map",
                 "--subset-size", "4", "--prior-sigma", "3", "--lbfgs-memory", "50",
                 "--json", str(out), "--predictions", str(pred)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "NDCG@k" in printed and "MAP" in printed
    result = json.loads(out.read_text())
    for key in ("ndcg@1", "ndcg@3", "ndcg@5", "ndcg@10", "map", "p@10"):
        assert 0.0 <= result["test"][key] <= 1.0
    assert result["prior_sigma"] == 3.0 and result["subset_size"] == 4
    assert result["lbfgs_memory"] == 50
    assert result["test"]["ndcg@3"] > 0.6  # the labels follow a linear score
    assert np.loadtxt(pred).shape == (8 * 6,)


def test_rank_ordinal_map(letor_files, tmp_path, capsys):
    out, pred = tmp_path / "o.json", tmp_path / "o.txt"
    code = main(["learn-to-rank", "--train", letor_files["train"], "--valid", letor_files["valid"],
                 "--test", letor_files["test"], "--model", "ordinal", "--fit", "map",
                 "--prior-sigma", "1", "--prior-sigma", "10",
                 "--json", str(out), "--predictions", str(pred)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "ordinal, map" in printed and "MAP" in printed
    result = json.loads(out.read_text())
    assert result["model"] == "ordinal" and result["prior_sigma"] in (1.0, 10.0)
    assert result["n_train_queries_used"] == 12 and result["max_query_length"] == 6
    for key in ("ndcg@1", "ndcg@3", "ndcg@5", "ndcg@10", "map"):
        assert 0.0 <= result["test"][key] <= 1.0
    assert result["test"]["ndcg@3"] > 0.6  # the labels follow a linear score
    assert np.loadtxt(pred).shape == (8 * 6,)


def test_rank_ordinal_hinge_basis(letor_files, tmp_path, capsys):
    out, pred = tmp_path / "h.json", tmp_path / "h.txt"
    code = main(["learn-to-rank", "--train", letor_files["train"], "--valid", letor_files["valid"],
                 "--test", letor_files["test"], "--model", "ordinal", "--hinge-knots", "3",
                 "--prior-sigma", "3", "--json", str(out), "--predictions", str(pred)])
    assert code == 0
    assert "3 features -> 12 columns" in capsys.readouterr().err  # 3 distinct knots each
    result = json.loads(out.read_text())
    assert result["hinge_knots"] == 3 and result["n_columns"] == 12
    assert len(result["theta"]) == 12
    assert result["test"]["ndcg@3"] > 0.6
    assert np.loadtxt(pred).shape == (8 * 6,)
    assert main(["learn-to-rank", "--train", letor_files["train"], "--test", letor_files["test"],
                 "--hinge-knots", "-1"]) == 2
    assert "n_knots must be a non-negative integer" in capsys.readouterr().err


def test_rank_ridge_lightgbm_format(tmp_path, capsys):
    train = _write_letor(tmp_path / "rank.train", 10, 0, qid=False)
    test = _write_letor(tmp_path / "rank.test", 4, 1, qid=False)
    out = tmp_path / "r.json"
    code = main(["learn-to-rank", "--format", "lightgbm", "--train", train, "--test", test,
                 "--model", "ridge", "--json", str(out)])
    assert code == 0
    result = json.loads(out.read_text())
    assert result["n_test_queries"] == 4 and result["test"]["ndcg@1"] > 0.5


def test_rank_errors_are_messages_not_tracebacks(letor_files, capsys):
    assert main(["learn-to-rank", "--train", letor_files["train"]]) == 2
    assert "--test are required" in capsys.readouterr().err
    assert main(["learn-to-rank", "--train", letor_files["train"], "--test", letor_files["test"],
                 "--model", "ridge", "--fit", "nuts"]) == 2
    assert "use --fit map" in capsys.readouterr().err
    assert main(["learn-to-rank", "--train", "/nonexistent/file.txt", "--test",
                 letor_files["test"]]) == 2
    assert main(["learn-to-rank", "--train", letor_files["train"], "--test", letor_files["test"],
                 "--plots", "somewhere"]) == 2
    assert "--plots needs" in capsys.readouterr().err
    assert main(["learn-to-rank", "--train", letor_files["train"], "--test", letor_files["test"],
                 "--model", "ridge", "--fit", "nuts", "--plots", "somewhere"]) == 2
    assert "--plots needs" in capsys.readouterr().err
    assert main(["learn-to-rank", "--train", letor_files["train"], "--test", letor_files["test"],
                 "--model", "ordinal", "--lbfgs-memory", "0"]) == 2
    assert "L-BFGS-B memory" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["learn-to-rank", "--model", "nonsense"])


@pytest.mark.numba  # NUTS runs a graph thousands of times: compiled, as a user's
@pytest.mark.slow
def test_rank_nuts_prints_intervals_and_diagnostics(letor_files, tmp_path, capsys):
    out = tmp_path / "n.json"
    code = main(["learn-to-rank", "--train", letor_files["train"], "--test", letor_files["test"],
                 "--fit", "nuts", "--draws", "200", "--tune", "200", "--chains", "2",
                 "--prior-sigma", "3", "--no-progress", "--json", str(out),
                 "--plots", str(tmp_path / "plots")])
    assert code == 0
    printed = capsys.readouterr().out
    assert "90% interval" in printed and "r_hat" in printed
    result = json.loads(out.read_text())
    lo, hi = result["test_interval90"]["ndcg@5"]
    assert lo <= result["test"]["ndcg@5"] <= hi
    assert result["diagnostics"]["max_r_hat"] < 1.1
    for name in ("trace.png", "forest.png", "top5.png"):
        assert (tmp_path / "plots" / name).stat().st_size > 1000


@pytest.mark.numba  # NUTS runs a graph thousands of times: compiled, as a user's
@pytest.mark.slow
def test_rank_hinge_nuts_plots_save_shapes(letor_files, tmp_path, capsys):
    code = main(["learn-to-rank", "--train", letor_files["train"], "--test", letor_files["test"],
                 "--model", "ordinal", "--fit", "nuts", "--hinge-knots", "3", "--draws", "100",
                 "--tune", "100", "--chains", "2", "--plots", str(tmp_path / "plots"),
                 "--no-progress"])
    assert code == 0
    assert "shapes.png" in capsys.readouterr().out
    assert (tmp_path / "plots" / "shapes.png").stat().st_size > 5_000


@pytest.mark.numba  # NUTS runs a graph thousands of times: compiled, as a user's
@pytest.mark.slow
def test_rank_ordinal_nuts_plots_top5(letor_files, tmp_path, capsys):
    out = tmp_path / "on.json"
    code = main(["learn-to-rank", "--train", letor_files["train"], "--test", letor_files["test"],
                 "--model", "ordinal", "--fit", "nuts", "--draws", "200", "--tune", "200",
                 "--chains", "2", "--prior-sigma", "3", "--no-progress", "--json", str(out),
                 "--plots", str(tmp_path / "plots")])
    assert code == 0
    printed = capsys.readouterr().out
    assert "90% interval" in printed and "r_hat" in printed
    result = json.loads(out.read_text())
    assert result["model"] == "ordinal" and result["diagnostics"]["max_r_hat"] < 1.1
    for name in ("trace.png", "forest.png", "top5.png"):
        assert (tmp_path / "plots" / name).stat().st_size > 1000


@pytest.mark.parametrize("extra, option, requirement", [
    (["--prior-sigma", "-1"], "--prior-sigma", "positive finite"),
    (["--prior-sigma", "3", "--prior-sigma", "inf"], "--prior-sigma", "positive finite"),
    (["--fit", "nuts", "--draws", "0"], "--draws", "positive integer"),
    (["--fit", "nuts", "--tune", "-1"], "--tune", "non-negative integer"),
    (["--fit", "nuts", "--chains", "0"], "--chains", "positive integer"),
    (["--seed", "-1"], "--seed", "non-negative integer"),
])
def test_rank_bad_settings_refused_at_parsing(letor_files, capsys, monkeypatch, extra, option,
                                              requirement):
    """Exit 2 naming the option before any work (the old --fit nuts --draws 0 ran the MAP fit
    first); --tune 0 (no tuning) is allowed, as PyMC and nutpie allow it."""
    import argparse

    from pm_perm.cli import learning_to_rank as rank_cli

    def boom(*a, **k):
        raise AssertionError("the data was read before the settings were checked")

    monkeypatch.setattr(rank_cli, "load_splits", boom)
    with pytest.raises(SystemExit) as exc:
        main(["learn-to-rank", "--train", letor_files["train"], "--test", letor_files["test"],
              "--model", "ordinal", *extra])
    assert exc.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"argument {option}: must be a {requirement}" in last and repr(extra[-1]) in last
    parser = argparse.ArgumentParser()
    rank_cli.add_parser(parser.add_subparsers())
    assert parser.parse_args(["learn-to-rank", "--tune", "0", "--seed", "0"]).tune == 0
