"""RankingMixture of Mallows components: logp and memberships against enumeration for every
distance and n = 1..5, exact draws (chi-square), bad components."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest
from scipy.special import logsumexp

import pm_perm
from pm_perm.distributions import RankingMixture, mixture_memberships
from pm_perm.reference.mallows import mallows_logp_enum
from pm_perm.reference.permutations import all_permutations
from pm_perm.testing import chi_square_pvalue

DISTANCES = ["footrule", "spearman", "hamming", "kendall", "cayley", "ulam"]


def _parameters(n, K, seed):
    rng = np.random.default_rng(seed)
    rhos = np.array([rng.permutation(n) for _ in range(K)])
    alphas = rng.uniform(0.5, 6.0, size=K)
    w = rng.dirichlet(np.ones(K))
    return rhos, alphas, w


def _mixture(rhos, alphas, w, distance, **kwargs):
    comps = [pm_perm.Mallows.dist(r, a, distance=distance) for r, a in zip(rhos, alphas,
                                                                             strict=True)]
    return RankingMixture.dist(w=w, comp_dists=comps, **kwargs)


def _enum_parts(rhos, alphas, w, distance, rankings):
    """(N, K) ``log w_k + log p_k(R)`` by enumeration of each component's normaliser."""
    return np.array([[np.log(wk) + mallows_logp_enum(distance, R, r, a)
                      for r, a, wk in zip(rhos, alphas, w, strict=True)] for R in rankings])


@pytest.mark.parametrize("distance, n", [("footrule", n) for n in range(1, 6)]
                         + [(d, 5) for d in DISTANCES[1:]])
def test_logp_and_memberships_match_enumeration(distance, n):
    """Every ranking of n items: the mixture's logp, its total probability 1, and the exact
    membership probabilities ``w_k p_k(R) / p(R)`` (n = 1..5 for footrule, n = 5 for the other
    distances; each component's logp against enumeration for every n <= 8: test_mallows.py)."""
    rhos, alphas, w = _parameters(n, 3, seed=n)
    y = _mixture(rhos, alphas, w, distance)
    perms = all_permutations(n)
    joint = _enum_parts(rhos, alphas, w, distance, perms)
    ll = logsumexp(joint, axis=1)
    lp = pm.logp(y, perms).eval()
    np.testing.assert_allclose(lp, ll, rtol=1e-10, atol=1e-12)
    assert np.exp(lp).sum() == pytest.approx(1.0, rel=1e-12)
    np.testing.assert_allclose(mixture_memberships(y, perms).eval(),
                               np.exp(joint - ll[:, None]), rtol=1e-9, atol=1e-14)


def test_a_value_that_is_not_a_permutation_has_probability_zero():
    rhos, alphas, w = _parameters(4, 2, seed=0)
    y = _mixture(rhos, alphas, w, "footrule")
    assert pm.logp(y, [[0, 0, 1, 2]]).eval()[0] == -np.inf


@pytest.mark.parametrize("distance", ["footrule", "kendall"])
def test_draws_match_the_exact_mixture_probabilities(distance):
    """Component from w, then its exact Mallows draw: chi-square over the 24 rankings of 4 items
    against the enumerated mixture probabilities. Level 1e-3: a false failure once in 1,000
    seeds; the seed is fixed."""
    rhos, alphas, w = _parameters(4, 2, seed=3)
    N = 20_000
    draws = np.asarray(pm.draw(_mixture(rhos, alphas, w, distance, size=N), random_seed=11))
    assert draws.shape == (N, 4)
    perms = all_permutations(4)
    probs = np.exp(logsumexp(_enum_parts(rhos, alphas, w, distance, perms), axis=1))
    assert chi_square_pvalue(draws, perms, probs) > 1e-3


def test_mixes_with_other_ranking_components():
    """A Mallows and a Plackett-Luce component in one mixture: the logp is the weighted sum of
    the two components' probabilities."""
    perms = all_permutations(3)
    mal = pm_perm.Mallows.dist(np.array([2, 0, 1]), 3.0)
    pl = pm_perm.PlackettLuce.dist([1.0, 0.0, -1.0])
    y = RankingMixture.dist(w=[0.3, 0.7], comp_dists=[mal, pl])
    expected = np.log(0.3 * np.exp(pm.logp(mal, perms).eval())
                      + 0.7 * np.exp(pm.logp(pl, perms).eval()))
    np.testing.assert_allclose(pm.logp(y, perms).eval(), expected, rtol=1e-12)


def test_refuses_a_component_that_is_not_a_ranking_distribution():
    with pytest.raises(ValueError, match=r"or Mallows.dist, complete rankings\)"):
        RankingMixture.dist(w=[0.5, 0.5], comp_dists=[pm_perm.Mallows.dist(np.arange(3), 1.0),
                                                      pm.Normal.dist()])
