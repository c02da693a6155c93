"""``pm-perm preferences --model top-k`` (issue 50): 30 items, top-5 ballots; the flags named
in the messages."""

import json

import numpy as np
import pytest

from pm_perm.cli import main
from pm_perm.cli import preferences as rankings_cli
from pm_perm.kernels.top_k import top_k_loglik
from pm_perm.preferences.preflib import read_preflib, write_preflib
from pm_perm.preferences.synthetic import simulate_rankings

M, K = 30, 5


@pytest.fixture(scope="module")
def top5(tmp_path_factory):
    """150 top-5 ballots over 30 items (Plackett-Luce utilities, cut after 5; a few shorter)."""
    u = np.random.default_rng(0).normal(size=M)
    lengths = np.zeros(M + 1)
    lengths[[3, K]] = [0.2, 0.8]
    data = simulate_rankings(150, utilities=u, length_probs=lengths, rng=1)
    path = tmp_path_factory.mktemp("top5") / "top5.soi"
    write_preflib(data, path)
    return path


def test_top_k_map_on_30_items_writes_the_json(top5, tmp_path, capsys):
    """K from the longest ballot; --compare fits Plackett-Luce and top-k (full and rank-one do
    not apply to 30 items); the reported log-likelihoods are those of the reported logits."""
    out = tmp_path / "tk.json"
    assert main(["preferences", str(top5), "--model", "top-k", "--heldout-fraction", "0.2",
                 "--compare", "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["model"] == "top-k" and res["top_k"] == K and res["n_items"] == M
    L = np.array(res["logits"])
    P = np.array(res["position_marginals"])
    assert L.shape == P.shape == (M, K + 1)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-9)
    assert len(res["consensus"]) == K
    data = read_preflib(top5)
    train, heldout = data.split_ballots(0.2, np.random.default_rng(0))
    for name, d in (("train", train), ("heldout", heldout)):
        want = d.counts @ top_k_loglik(L, d.orders) / d.n_rankings
        assert res[name]["loglik_per_ranking"] == pytest.approx(want, rel=1e-8)
    assert {r["model"] for r in res["comparison"]["models"]} == {"top-k", "plackett-luce"}
    assert "tau" in res["diagnostics"]  # tau chosen by the Laplace evidence
    assert "top-k (K=1, top 5, map)" in capsys.readouterr().out


def test_full_beyond_the_limit_names_the_top_k_flag(top5, tmp_path, capsys):
    assert main(["preferences", str(top5), "--model", "full", "--json",
                 str(tmp_path / "o.json")]) == 2
    err = capsys.readouterr().err
    assert "--model top-k" in err and "--model plackett-luce" in err
    assert "TopKRanking" not in err and "pm_perm.PlackettLuce" not in err


@pytest.mark.parametrize("extra, match", [
    (["--model", "top-k", "--top-k", "3"], "ballots of 5 ranked items, more than --top-k 3: "
                                           "use --top-k 5"),
    (["--model", "full", "--top-k", "5"], "--top-k applies to --model top-k"),
    (["--model", "top-k", "--top-k", "31"], "K = 31 positions for M = 30"),
])
def test_bad_top_k_refused_before_any_fit(top5, tmp_path, capsys, monkeypatch, extra, match):
    def boom(*a, **k):
        raise AssertionError("a fit started")
    monkeypatch.setattr(rankings_cli, "_fit", boom)
    assert main(["preferences", str(top5), *extra, "--json", str(tmp_path / "o.json")]) == 2
    assert match in capsys.readouterr().err


def test_compare_fits_the_models_that_apply(top5):
    data = read_preflib(top5)
    assert [m for m in rankings_cli.MODELS if rankings_cli._applies(m, data, K)] == [
        "plackett-luce", "top-k"]
    small = simulate_rankings(20, utilities=[1.0, 0.0, -1.0], rng=0)
    assert all(rankings_cli._applies(m, small, 3) for m in rankings_cli.MODELS)


@pytest.mark.slow  # 38 s (the type-II grid of a two-component fit); the mixture itself is
# checked fast in tests/preferences/test_top_k_model.py
def test_top_k_mixture_reports_blocs_whose_likelihood_is_the_reported_one(tmp_path):
    """--model top-k --components 2 on two opposite blocs (6 items, top-3 ballots): the JSON's
    blocs (weights, logits) give the reported training log-likelihood exactly (the mixture of
    the top-k kernel's likelihoods), and they are the two blocs."""
    from scipy.special import logsumexp

    from pm_perm.kernels.top_k_sampler import sample_top_k
    from pm_perm.preferences.data import RankingData

    rng = np.random.default_rng(5)
    m = 6
    L1 = np.concatenate([np.outer(np.linspace(2.0, -2.0, m), [3.0, 2.0, 1.0]),
                         np.zeros((m, 1))], 1)
    orders = np.concatenate([sample_top_k(L1, size=(150,), rng=rng),
                             sample_top_k(L1[::-1], size=(150,), rng=rng)])
    path = tmp_path / "blocs.soi"
    write_preflib(RankingData.from_orders(orders), path)
    out = tmp_path / "mix.json"
    assert main(["preferences", str(path), "--model", "top-k", "--components", "2",
                 "--starts", "2", "--quiet", "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["model"] == "top-k" and res["components"] == 2 and res["top_k"] == 3
    w = np.array([b["weight"] for b in res["blocs"]])
    L = np.array([b["logits"] for b in res["blocs"]])  # (2, m, K + 1)
    np.testing.assert_allclose(np.sort(w), [0.5, 0.5], atol=0.08)
    assert sorted(int(np.argmax(L[c, :, 0])) for c in range(2)) == [0, m - 1]
    data = read_preflib(path)
    mix = logsumexp(np.log(w)[:, None] + top_k_loglik(L, data.orders), axis=0)
    assert res["train"]["loglik_per_ranking"] == pytest.approx(
        data.counts @ mix / data.n_rankings, rel=1e-8)
