"""The top-k model's posterior arrays through posterior_params, the log-likelihoods, position
marginals, consensus, draws and posterior predictive checks, against enumeration (issue 50)."""

import numpy as np
import pytest
from scipy import stats

from pm_perm.preferences import fitting as rfit
from pm_perm.preferences import models as rmod
from pm_perm.preferences.analysis import (
    consensus_posterior,
    position_marginals,
    ppc_summary,
    sample_rankings,
)
from pm_perm.preferences.posterior import pointwise_loglik
from pm_perm.preferences.synthetic import draw_ballots, simulate_rankings
from pm_perm.reference.permutations import all_permutations
from pm_perm.reference.top_k import top_k_lists, top_k_logp_enum, top_k_marginals_enum

M, K = 5, 2


def _params(S=3, seed=0):
    """S draws of top-2 logits over 5 items, as posterior_params returns them."""
    W = np.random.default_rng(seed).normal(size=(S, 1, M, K + 1))
    return {"params": W, "weights": np.ones((S, 1)),
            "length_probs": np.tile([0.1, 0.3, 0.6], (S, 1))}


def test_posterior_params_takes_top_k_logits_and_names_k_plus_one():
    point = {"W": np.zeros((1, M, K + 1)), "length_probs": np.full(K + 1, 1 / (K + 1))}
    post = rfit.posterior_params(point, "top-k")
    assert post["params"].shape == (1, 1, M, K + 1) and post["length_probs"].shape == (1, K + 1)
    with pytest.raises(ValueError, match=r"K = 2 positions; give K \+ 1 = 3 probabilities"):
        rfit.posterior_params({**point, "length_probs": np.full(M + 1, 1 / (M + 1))}, "top-k")


def test_position_marginals_rows_sum_to_one_and_match_enumeration():
    post = _params()
    P = position_marginals(post, "top-k")
    want = np.mean([top_k_marginals_enum(L[0])[1] for L in post["params"]], axis=0)
    assert P.shape == (M, K + 1)
    np.testing.assert_allclose(P, want, atol=1e-12)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(P.sum(axis=0), [1.0] * K + [M - K], atol=1e-12)


def test_pointwise_loglik_is_the_enumerated_ballot_probability():
    post = _params(S=2)
    orders = np.array([[0, 1, -1, -1, -1], [-1, -1, 0, -1, -1], [-1] * M, [0, 0, -1, -1, -1]])
    ll = pointwise_loglik(post, "top-k", orders)
    want = [[top_k_logp_enum(L[0], y) for y in orders] for L in post["params"]]
    np.testing.assert_allclose(ll, want, atol=1e-10)


def test_consensus_is_the_most_probable_top_k_list():
    post = _params(S=4, seed=3)
    lists = top_k_lists(M, K)
    modes = []
    for L in post["params"]:
        best = lists[int(np.argmax([top_k_logp_enum(L[0], y) for y in lists]))]
        modes.append(tuple(int(i) for i in np.argsort(best)[-K:]))  # -1 first, then 0..K-1
    got = consensus_posterior(post, "top-k", top=10)
    assert all(len(order) == K for order, _ in got)
    assert sum(p for _, p in got) == pytest.approx(1.0)
    assert dict(got) == {m: modes.count(m) / 4 for m in set(modes)}


def test_complete_draws_chi_square_against_enumeration():
    """draw_ballots with top-k logits: complete rankings of 4 items (top 2 exact, the other two
    in a uniformly random order, p = p(top-2 list) / 2!). Pearson chi-square over the 24
    rankings, 24,000 draws, seed fixed; fails if p < 1e-4 (false-failure rate 1e-4)."""
    L = np.random.default_rng(4).normal(size=(4, 3))
    perms = all_permutations(4)  # rank form
    p = np.array([np.exp(top_k_logp_enum(L, np.where(y < 2, y, -1))) / 2 for y in perms])
    np.testing.assert_allclose(p.sum(), 1.0, atol=1e-12)
    n = 24_000
    y = draw_ballots(n, logits=L, rng=5)
    index = {tuple(int(v) for v in q): r for r, q in enumerate(perms)}
    counts = np.bincount([index[tuple(int(v) for v in d)] for d in y], minlength=24)
    chi2 = ((counts - n * p) ** 2 / (n * p)).sum()
    assert stats.chi2.sf(chi2, 23) > 1e-4


def test_length_probs_of_k_plus_one_cut_the_draws():
    post = _params(S=1)
    y = sample_rankings(post, "top-k", 3000, rng=0, length_probs=True)
    lengths = np.bincount((y >= 0).sum(axis=1), minlength=M + 1)
    assert lengths[K + 1:].sum() == 0
    np.testing.assert_allclose(lengths[:K + 1] / 3000, [0.1, 0.3, 0.6], atol=0.03)


def test_ppc_summary_keeps_the_patterns_of_top_k_ballots():
    L = np.random.default_rng(6).normal(size=(M, K + 1))
    data = simulate_rankings(200, logits=L, length_probs=[0.0, 0.4, 0.6], rng=7)
    out = ppc_summary(data, _params(S=2), "top-k", n_reps=5, rng=0)
    assert out["lengths"]["observed"].shape == (M + 1,)
    np.testing.assert_allclose(out["lengths"]["mean"], out["lengths"]["observed"])
    assert out["first"]["mean"].shape == (M,) and out["pairwise"]["mean"].shape == (M, M)


def test_type2_map_chooses_tau_of_the_top_k_model():
    L = np.random.default_rng(8).normal(size=(M, K + 1))
    data = simulate_rankings(150, logits=L, length_probs=[0.0, 0.3, 0.7], rng=9)
    point = rfit.fit_map_type2(rmod.top_k_model(data, tau=0.0), grid=(0.0, 0.5))
    assert set(point["_optimizer"]["log_evidence"]) == {0.0, 0.5}
    assert point["_optimizer"]["tau"] in (0.0, 0.5)
    post = rfit.posterior_params(point, "top-k")
    assert post["params"].shape == (1, 1, M, K + 1)


def test_predictive_ballots_of_the_top_k_model():
    """One component through pm.sample_posterior_predictive (each ballot keeps its observed
    pattern), and without patterns through draw_ballots (lengths 0..K from length_probs)."""
    import pymc as pm
    import xarray as xr

    from pm_perm.preferences.posterior import predictive_ballots

    L = np.random.default_rng(10).normal(size=(M, K + 1))
    data = simulate_rankings(40, logits=L, length_probs=[0.0, 0.4, 0.6], rng=11)
    rm = rmod.top_k_model(data)
    prior = pm.sample_prior_predictive(draws=3, model=rm.model, random_seed=0)["prior"]
    draws = xr.DataTree.from_dict({"posterior": prior.to_dataset()})
    y = predictive_ballots(rm, draws, draws=None, seed=0)
    assert y.shape == (3, 40, M)
    want = np.bincount((data.orders >= 0).sum(1), weights=data.counts, minlength=M + 1)
    for rep in y:
        np.testing.assert_array_equal(np.bincount((rep >= 0).sum(1), minlength=M + 1), want)
    free = predictive_ballots(rm, draws, draws=None, seed=0, keep_pattern=False)
    assert free.shape == (3, 40, M) and (free >= 0).sum(axis=2).max() <= K


def test_position_heatmap_labels_the_out_column():
    import matplotlib.pyplot as plt

    from pm_perm.preferences.plots import plot_position_heatmap

    fig, ax = plot_position_heatmap(position_marginals(_params(S=1), "top-k"),
                                    [f"i{i}" for i in range(M)])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "out"]
    plt.close(fig)
