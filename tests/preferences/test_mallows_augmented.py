"""Top-k and tied ballots under every Mallows distance by data augmentation
(pm_perm.preferences.mallows_augmented): the consistent sets against brute force, the pm.sample
posterior of (rho, alpha) against the exact one by enumeration, bad input."""

import math

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from scipy.special import logsumexp

import pm_perm
from pm_perm.preferences.mallows_augmented import (
    augmented_mallows,
    ballot_completion,
    ballot_rank_bounds,
)
from pm_perm.reference.mallows import distance_ref
from pm_perm.reference.mallows_partial import mallows_partial_logp_enum
from pm_perm.reference.permutations import all_permutations
from pm_perm.reference.rankings import consistent_mask, every_top_k_order, random_tie_orders

# n = 4: top-2, top-1, top-3, ties, a tie then unranked, a complete ranking
BALLOTS = np.array([[0, 1, -1, -1], [-1, 0, -1, -1], [2, 0, 1, -1], [0, 0, 2, 2],
                    [0, 1, 1, -1], [1, 0, 2, 3]])
RATE = 0.2  # alpha ~ Exponential(RATE)
GRID = np.linspace(0.0, 40.0, 321)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_bounds_and_completion_match_the_consistent_sets(n):
    """lo <= R <= hi item by item is exactly the brute-force consistent set, for every top-k
    order and random tied orders; the completion is in it."""
    orders = np.concatenate([every_top_k_order(n),
                             random_tie_orders(np.random.default_rng(n), n, 30)])
    perms = all_permutations(n)
    lo, hi = ballot_rank_bounds(orders)
    inside = ((perms[None] >= lo[:, None]) & (perms[None] <= hi[:, None])).all(axis=-1)
    for k, y in enumerate(orders):
        np.testing.assert_array_equal(inside[k], consistent_mask(y, perms), err_msg=str(y))
    completion = ballot_completion(orders)
    assert ((completion >= lo) & (completion <= hi)).all()
    assert (np.sort(completion, axis=1) == np.arange(n)).all()


def _posterior(loglik):
    """P(rho) (24,) and alpha's mean, exact: rho uniform, alpha ~ Exponential(RATE) on GRID
    (trapezoid rule), ``loglik(rho)`` the data log-likelihood on GRID."""
    perms = all_permutations(4)
    w = np.full(GRID.size, GRID[1] - GRID[0])
    w[[0, -1]] /= 2
    log_joint = np.array([loglik(rho) for rho in perms]) - RATE * GRID  # (24, G)
    joint = np.exp(log_joint - log_joint.max()) * w
    joint /= joint.sum()
    return perms, joint.sum(axis=1), float((joint.sum(axis=0) * GRID).sum())


def _enumerated_loglik(distance):
    """By enumeration of every complete ranking: each ballot's log-likelihood is the log-sum of
    the Mallows probabilities of its consistent completions (as ``mallows_partial_logp_enum``,
    vectorised over GRID)."""
    perms = all_permutations(4)
    masks = [consistent_mask(y, perms) for y in BALLOTS]
    scale = -GRID[:, None] / 4

    def loglik(rho):
        d = np.array([distance_ref(distance, R, rho) for R in perms], dtype=float)
        log_z = logsumexp(scale * d, axis=1)
        return sum(logsumexp(scale * d[m], axis=1) - log_z for m in masks)
    return loglik


def _enumerated(distance):
    return _posterior(_enumerated_loglik(distance))


def _with_mallows_partial(distance):
    rho, alpha = pt.tensor("rho", dtype="int64", shape=(4,)), pt.dscalar("alpha")
    d = pm_perm.MallowsPartial.dist(rho=rho, alpha=alpha, distance=distance)
    f = pytensor.function([rho, alpha], pm.logp(d, BALLOTS).sum())
    return _posterior(lambda r: [f(r, a) for a in GRID])


def _sample(distance, seed):
    with pm.Model():
        rho = pm_perm.PermutationExpFamily("rho", logits=np.zeros((4, 4)))
        alpha = pm.Exponential("alpha", RATE)
        augmented_mallows("R", rho, alpha, distance, BALLOTS)
        idata = pm.sample(draws=1500, tune=200, chains=1, random_seed=seed, progressbar=False,
                          compute_convergence_checks=False)
    return idata.posterior["rho"].values[0], idata.posterior["alpha"].values[0]


@pytest.mark.numba  # NUTS and a permutation step: compiled code wins (tests/conftest.py)
@pytest.mark.parametrize("distance, exact", [
    # NUTS + a permutation step on latent rankings: 126 s of wall time on empty compile caches
    # at load 10 (the route's logp and consistency are tested below): --runslow
    pytest.param("cayley", _enumerated, marks=pytest.mark.slow),
    # the same recipe, other distances: slow (5-17 s each), run with --runslow
    pytest.param("ulam", _enumerated, marks=pytest.mark.slow),
    pytest.param("footrule", _with_mallows_partial, marks=pytest.mark.slow)])
def test_pm_sample_posterior_matches_the_exact_one(distance, exact):
    """pm.sample of the augmented model (NUTS for alpha, leap-and-shift for rho and the latent
    rankings) against the exact posterior (cayley, ulam: enumeration of every completion;
    footrule: MallowsPartial's exact likelihood): P(rho) for each of the 24 rankings of exact
    probability >= 0.01 (7 of them here) and alpha's mean, MC errors from the effective sample
    size; |z| < 4.5 for each (two-sided 7e-6 each under the normal approximation, so a
    false-failure rate below 2e-4 at a random seed). Power: observing the fixed completions as
    if complete instead gives max |z| 36 (cayley) and 16 (ulam) at this seed."""
    import arviz as az

    perms, p_rho, mean = exact(distance)
    rho, alpha = _sample(distance, seed=11)
    z = []
    for perm, p in zip(perms, p_rho, strict=True):
        if p >= 0.01:
            hit = (rho == perm).all(axis=-1).astype(float)
            z.append((hit.mean() - p) / math.sqrt(p * (1 - p) / float(az.ess(hit[None]))))
    z.append((alpha.mean() - mean) / float(az.mcse(alpha[None], method="mean")))
    assert max(map(abs, z)) < 4.5, np.round(z, 2)


@pytest.mark.parametrize("distance", ["cayley", "ulam", "footrule"])
def test_enumerated_likelihood_is_the_reference_one(distance):
    """The vectorised enumeration of the test below equals mallows_partial_logp_enum."""
    rng = np.random.default_rng(3)
    for rho in all_permutations(4)[rng.choice(24, 3, replace=False)]:
        for k in (0, 77, 320):
            ref = mallows_partial_logp_enum(distance, BALLOTS, rho, GRID[k]).sum()
            got = _enumerated_loglik(distance)(rho)[k]
            assert math.isclose(got, ref, rel_tol=1e-10, abs_tol=1e-10)


def test_footrule_enumeration_equals_mallows_partial():
    """The two exact posteriors of the test below agree (footrule): the oracles agree."""
    perms_a, p_a, mean_a = _enumerated("footrule")
    perms_b, p_b, mean_b = _with_mallows_partial("footrule")
    np.testing.assert_allclose(p_a, p_b, rtol=1e-9)
    assert math.isclose(mean_a, mean_b, rel_tol=1e-9)


def test_latent_rankings_start_consistent_and_stay_so():
    """The initial point is the fixed completion; a proposal leaving the set has density 0."""
    with pm.Model() as model:
        augmented_mallows("R", np.arange(4), 2.0, "ulam", BALLOTS)
    point = model.initial_point()
    np.testing.assert_array_equal(point["R"], ballot_completion(BALLOTS))
    logp = model.compile_logp()
    assert np.isfinite(logp(point))
    bad = point["R"].copy()
    bad[0] = [1, 0, 2, 3]  # ballot 0 ranks item 0 first
    assert logp({"R": bad}) == -np.inf


@pytest.mark.parametrize("kwargs, match", [
    ({"distance": "manhattan"}, "distance"),
    ({"ballots": [[0, 2, -1, -1]]}, r"ballots\[0\]"),
    ({"ballots": [[0, 1, -1]]}, "3 items per row but rho has n = 4"),
    ({"rho": pt.lvector("rho")}, "n .* must be known when the model is built"),
])
def test_bad_input(kwargs, match):
    args = {"rho": np.arange(4), "distance": "cayley", "ballots": BALLOTS} | kwargs
    with pm.Model(), pytest.raises(ValueError, match=match):
        augmented_mallows("R", alpha=1.0, **args)


@pytest.mark.parametrize("distance", ["cayley", "ulam"])
def test_mallows_partial_refusal_names_the_recipe(distance):
    with pytest.raises(ValueError, match=f"augmented_mallows\\(name, rho, alpha, '{distance}'"):
        pm_perm.MallowsPartial.dist(rho=np.arange(4), alpha=1.0, distance=distance)
