"""PermutationExpFamily beyond the exact limit: method="bethe" (approximate logp, exact
Huber-Law draws) and the automatic swap step method for latent permutations."""

import numpy as np
import pymc as pm
import pytest
from pymc.sampling.mcmc import assign_step_methods
from scipy import stats

from pm_perm import PermutationExpFamily, edge_logits
from pm_perm.inference.step_methods import PermutationLeapShift
from pm_perm.kernels.bethe import bethe_log_permanent_and_marginals
from pm_perm.reference.permutations import all_permutations, log_permanent_enum


@pytest.mark.parametrize("M", [6, 40])
def test_bethe_logp_is_score_minus_bethe_log_permanent(M):
    rng = np.random.default_rng(M)
    W = 0.5 * rng.normal(size=(2, M, M))
    y = PermutationExpFamily.dist(logits=W, method="bethe")
    d = pm.draw(y, random_seed=1)
    assert d.shape == (2, M) and np.all(np.sort(d, -1) == np.arange(M))
    lp = pm.logp(y, d).eval()
    ref = [W[b][np.arange(M), d[b]].sum() - bethe_log_permanent_and_marginals(W[b])[0]
           for b in range(2)]
    np.testing.assert_allclose(lp, ref, atol=1e-10)
    bad = d.copy()
    bad[:, 0] = bad[:, 1]
    assert np.all(pm.logp(y, bad).eval() == -np.inf)


def test_bethe_logp_overestimates_exact_logp():
    """perm_B <= perm (Gurvits), so the Bethe logp is an upper bound of the exact logp."""
    W = np.random.default_rng(3).normal(size=(6, 6))
    perms = all_permutations(6)[::37]
    exact = pm.logp(PermutationExpFamily.dist(logits=W), perms).eval()
    bethe = pm.logp(PermutationExpFamily.dist(logits=W, method="bethe"), perms).eval()
    gap = bethe - exact
    assert np.all(gap >= -1e-9) and np.all(gap <= 3 * np.log(2))
    np.testing.assert_allclose(gap, gap[0], atol=1e-9)  # the same constant for every y


@pytest.mark.parametrize("mode", ["NUMBA", "FAST_COMPILE"])
def test_huber_law_draws_chi_square_at_m4(mode):
    """The Huber-Law draws of method="bethe" are exact: chi-square over all 24 permutations,
    8,000 draws, fixed seed; fails if p < 1e-4 (false-failure rate 1e-4 per mode)."""
    W = np.random.default_rng(5).normal(size=(4, 4))
    draws = pm.draw(PermutationExpFamily.dist(logits=W, method="bethe", size=(8000,)),
                    random_seed=6, mode=mode)
    perms = all_permutations(4)
    p = np.exp(W[np.arange(4), perms].sum(-1) - log_permanent_enum(W))
    counts = np.array([(draws == q).all(-1).sum() for q in perms])
    chi2 = ((counts - 8000 * p) ** 2 / (8000 * p)).sum()
    assert stats.chi2.sf(chi2, 23) > 1e-4


def test_method_choice_and_limits():
    with pytest.raises(ValueError, match="EXACT_MAX_M.*bethe"):
        PermutationExpFamily.dist(logits=np.zeros((30, 30)))
    PermutationExpFamily.dist(logits=np.zeros((30, 30)), method="bethe")  # accepted
    with pytest.raises(ValueError, match="method"):
        PermutationExpFamily.dist(logits=np.zeros((3, 3)), method="huber")


def test_find_map_with_bethe_recovers_theta_m100():
    """find_MAP with method="bethe" on a generated M = 100 matching problem (4 graphs).

    Observed permutations come from long swap-MCMC chains (2,000 sweeps from the mode; the
    Huber-Law sampler's acceptance is too low at this size and spread). The MLE's standard error
    here is about 0.03; the 0.15 tolerance allows for the Bethe bias.
    """
    from pm_perm.kernels.swap_mcmc import swap_mcmc_sample

    rng = np.random.default_rng(0)
    N, M = 4, 100
    theta = np.array([1.0, -0.5])
    x = rng.normal(size=(N, M, M, 2))
    W = x @ theta
    y = np.stack([swap_mcmc_sample(W[n], 1, rng=n, burn_in_sweeps=2000)[0][0] for n in range(N)])
    with pm.Model():
        th = pm.Normal("theta", 0, 5, shape=2)
        PermutationExpFamily("y", logits=edge_logits(x, th), method="bethe", observed=y)
        fit = pm.find_MAP(progressbar=False, return_inferencedata=True, jitter=False)
    est = fit.posterior["theta"].values.ravel()
    assert np.all(np.abs(est - theta) < 0.15), est


def test_latent_permutation_gets_the_swap_step():
    W = np.random.default_rng(9).normal(size=(5, 5))
    with pm.Model() as model:
        PermutationExpFamily("y", logits=W)
        _, selected = assign_step_methods(model, None)
    assert [v.name for v in selected[PermutationLeapShift]] == ["y"]  # swaps and leaps


# ----------------------------------------------------------------------------- method="glynn"


def test_glynn_logp_and_gradient_equal_the_exact_method():
    rng = np.random.default_rng(11)
    W = rng.normal(size=(2, 7, 7))
    perms = all_permutations(7)[::97]
    exact = pm.logp(PermutationExpFamily.dist(logits=W[:, None]), perms).eval()
    glynn = pm.logp(PermutationExpFamily.dist(logits=W[:, None], method="glynn"), perms).eval()
    np.testing.assert_allclose(glynn, exact, atol=1e-12)
    import pytensor.tensor as pt

    Wt = pt.tensor3("W")
    grads = []
    for method in ("exact", "glynn"):
        lp = pm.logp(PermutationExpFamily.dist(logits=Wt, method=method), perms[:2]).sum()
        grads.append(pt.grad(lp, Wt).eval({Wt: W}))
    np.testing.assert_allclose(grads[1], grads[0], atol=1e-12)


@pytest.mark.parametrize("mode", ["NUMBA", "FAST_COMPILE"])
def test_glynn_draws_past_the_dp_budget_chi_square_at_m4(mode, monkeypatch):
    """With a memory budget of 64 bytes the DP stops at M = 3, so M = 4 draws come from the Glynn
    sampler (row by row from Glynn marginals): chi-square over all 24 permutations, 4,000 draws,
    fixed seed; fails if p < 1e-4 (false-failure rate 1e-4 per mode)."""
    monkeypatch.setenv("PM_PERM_MEMORY_BUDGET", "64")
    W = np.random.default_rng(12).normal(size=(4, 4))
    y = PermutationExpFamily.dist(logits=W, method="glynn", size=(4000,))
    draws = pm.draw(y, random_seed=13, mode=mode)
    perms = all_permutations(4)
    p = np.exp(W[np.arange(4), perms].sum(-1) - log_permanent_enum(W))
    counts = np.array([(draws == q).all(-1).sum() for q in perms])
    chi2 = ((counts - 4000 * p) ** 2 / (4000 * p)).sum()
    assert stats.chi2.sf(chi2, 23) > 1e-4


@pytest.mark.numba  # the messages a user of the default backend reads
def test_glynn_method_limits():
    PermutationExpFamily.dist(logits=np.zeros((30, 30)), method="glynn")  # accepted
    with pytest.raises(ValueError, match="GLYNN_MAX_M = 32"):
        PermutationExpFamily.dist(logits=np.zeros((33, 33)), method="glynn")
    with pytest.raises(ValueError, match=r"EXACT_MAX_M.*method='glynn'.*about \d+ s"):
        PermutationExpFamily.dist(logits=np.zeros((28, 28)))
    with pytest.raises(ValueError, match="logits contain NaN"):
        pm.draw(PermutationExpFamily.dist(logits=np.full((3, 3), np.nan), method="glynn"))
