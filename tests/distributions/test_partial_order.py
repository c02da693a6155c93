"""PartialOrder: per-assessor pairwise preferences with the exact linear-extension likelihood."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest

from pm_perm import PartialOrder, PartialRanking, PlackettLuce
from pm_perm.reference.pairwise import (
    extension_mask,
    linear_extensions_logp_enum,
    random_partial_order,
)
from pm_perm.reference.permutations import all_permutations
from pm_perm.reference.rankings import plackett_luce_complete_logp
from pm_perm.testing.conformance import chi_square_pvalue

RNG = np.random.default_rng(5)
M = 5
PREFS = np.stack([random_partial_order(RNG, M, k, pad=6 - k) for k in (2, 4, 6)])


def test_logp_matches_enumeration_both_families():
    u = RNG.normal(size=M)
    W = RNG.normal(size=(M, M))
    lp = pm.logp(PartialOrder.dist(utilities=u, pairs=PREFS), PREFS).eval()
    np.testing.assert_allclose(lp, [linear_extensions_logp_enum(u, p) for p in PREFS],
                               atol=1e-10)
    lp = pm.logp(PartialOrder.dist(logits=W, pairs=PREFS), PREFS).eval()
    np.testing.assert_allclose(lp, [linear_extensions_logp_enum(W, p, "exp") for p in PREFS],
                               atol=1e-10)


def test_top_k_equals_plackett_luce_and_partial_ranking():
    """The top-2 order (item 3, then item 0) as pairs: 3 before all, 0 before all but 3."""
    u = RNG.normal(size=M)
    W = RNG.normal(size=(M, M))
    y = np.array([1, -1, -1, 0, -1])
    pairs = np.array([(3, j) for j in range(M) if j != 3] + [(0, j) for j in (1, 2, 4)])
    ours = pm.logp(PartialOrder.dist(utilities=u, pairs=pairs), pairs).eval()
    assert ours == pytest.approx(pm.logp(PlackettLuce.dist(u), y).eval(), abs=1e-10)
    ours = pm.logp(PartialOrder.dist(logits=W, pairs=pairs), pairs).eval()
    assert ours == pytest.approx(pm.logp(PartialRanking.dist(W), y).eval(), abs=1e-10)


def test_draws_chi_square():
    """The orientations of 3 pairs over 4 items (8 cells, some impossible: cycles) from 4,000
    numba draws, against the exact probabilities by enumeration. False-failure rate 1e-3
    (p < 1e-3 fails)."""
    u = np.array([0.8, -0.2, 0.3, 0.0])
    pairs = np.array([[0, 1], [1, 2], [2, 0]])
    draws = pm.draw(PartialOrder.dist(utilities=u, pairs=pairs), draws=4000, random_seed=7)
    perms = all_permutations(4)
    lp = np.exp(plackett_luce_complete_logp(u, perms))
    support, probs = [], []
    for bits in range(8):
        cell = np.array([p if (bits >> k) & 1 else p[::-1] for k, p in enumerate(pairs)])
        prob = lp[extension_mask(cell, perms)].sum()
        if prob > 0:
            support.append(cell)
            probs.append(prob)
    assert chi_square_pvalue(draws, np.array(support), np.array(probs)) > 1e-3


def test_model_map_gradient_and_posterior_predictive():
    with pm.Model() as model:
        u = pm.ZeroSumNormal("u", shape=M)
        PartialOrder("prefs", utilities=u, observed=PREFS)
    point = model.initial_point()
    assert np.isfinite(model.compile_logp()(point))
    assert np.all(np.isfinite(model.compile_dlogp()(point)))
    with model:
        pp = pm.sample_prior_predictive(draws=3, random_seed=1)
    draws = pp.prior_predictive["prefs"].values[0]
    assert draws.shape == (3, *PREFS.shape)
    same_pairs = np.sort(draws, axis=-1) == np.sort(PREFS, axis=-1)
    assert same_pairs.all()  # the observed pairs, oriented by each draw


def test_bad_input():
    with pytest.raises(ValueError, match=r"cyclic preferences 0 > 1 > 2 > 0"):
        with pm.Model():
            PartialOrder("p", utilities=np.zeros(3), observed=[[0, 1], [1, 2], [2, 0]])
    with pytest.raises(ValueError, match=r"item id 4 out of range"):
        with pm.Model():
            PartialOrder("p", utilities=np.zeros(3), observed=[[0, 4]])
    with pytest.raises(ValueError, match="exactly one of utilities"):
        PartialOrder.dist(utilities=np.zeros(3), logits=np.zeros((3, 3)))
    with pytest.raises(ValueError, match="utilities must have shape"):
        PartialOrder.dist(utilities=np.zeros((2, 3)))
    with pytest.raises(ValueError, match="draws need the compared pairs"):
        pm.draw(PartialOrder.dist(utilities=np.zeros(3)))
    with pytest.raises(ValueError, match=r"PartialOrder\(logits=...\): M = 30 items is beyond "
                                         r"the exact limit EXACT_MAX_M = 26.*utilities=.*"
                                         "BradleyTerry"):
        PartialOrder.dist(logits=np.zeros((30, 30)), pairs=[[0, 1]])


def test_beyond_the_down_set_budget_names_the_alternatives():
    """Plackett-Luce is exact at any M, but 15 disjoint pairs of 30 items have 3^15 down-sets:
    beyond the DP's budget, the message names the assessor and the alternatives."""
    pairs = [[2 * k, 2 * k + 1] for k in range(15)]
    with pytest.raises(ValueError, match=r"assessor 0: .*budget of 16777216 cells.*"
                                         r"Alternatives: .*BradleyTerry.*fewer items"):
        with pm.Model():
            PartialOrder("p", utilities=np.zeros(30), observed=pairs)


def test_bad_pairs_for_draws():
    with pytest.raises(ValueError, match=r"item id out of range 0\.\.2 in the pair \(0, 5\)"):
        PartialOrder.dist(utilities=np.zeros(3), pairs=[[0, 5]])
    with pytest.raises(ValueError, match=r"\(1, 1\) compares an item with itself"):
        PartialOrder.dist(utilities=np.zeros(3), pairs=[[1, 1]])


@pytest.mark.slow
def test_map_recovers_a_plackett_luce_consensus():
    """60 assessors x 15 items, 20-30 preferences each from Plackett-Luce rankings around the
    consensus 0, 1, ..., 14 (utilities linspace(1.5, -1.5)): the MAP ranking is within Kendall
    distance 10 of the consensus (of 105 pairs; a random ranking is at 52.5 on average).
    benchmarks/bench_pairwise.py measures 5 at this seed."""
    from scipy.optimize import minimize

    from pm_perm.kernels.plackett_luce import sample_plackett_luce

    rng = np.random.default_rng(0)
    n, m = 60, 15
    u_true = np.linspace(1.5, -1.5, m)
    rankings = sample_plackett_luce(u_true, size=(n,), rng=rng)
    all_pairs = np.array([(i, j) for i in range(m) for j in range(i + 1, m)])
    prefs = np.full((n, 30, 2), -1, dtype=np.int64)
    for a in range(n):
        k = int(rng.integers(20, 31))
        pick = all_pairs[rng.choice(len(all_pairs), k, replace=False)]
        first = rankings[a, pick[:, 0]] < rankings[a, pick[:, 1]]
        prefs[a, :k] = np.where(first[:, None], pick, pick[:, ::-1])
    with pm.Model() as model:
        u = pm.Normal("u", 0, 2, shape=m)
        PartialOrder("prefs", utilities=u, observed=prefs)
    logp, dlogp = model.compile_logp(), model.compile_dlogp()
    res = minimize(lambda x: -logp({"u": x}), np.zeros(m), jac=lambda x: -dlogp({"u": x}),
                   method="BFGS")
    i, j = np.triu_indices(m, 1)
    kendall = int(np.sum(np.sign(res.x[i] - res.x[j]) != np.sign(u_true[i] - u_true[j])))
    assert kendall <= 10
