"""Tests of the leap-and-shift step method (PermutationLeapShift) for latent permutations.

Exactness is checked deterministically: the transition matrix of the leap-and-shift proposal
with its Metropolis-Hastings acceptance is built on all 5! states from the step's own move
(``leap_shift``) and correction (``leap_shift_log_hastings``) of pm_perm.kernels.leap_shift,
and its stationary vector must be the exact target (and it must fail without the correction).
The step itself is then run and its draws compared with the exact probabilities.
"""

import time

import arviz as az
import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from pymc.sampling.mcmc import assign_step_methods
from pymc.step_methods.hmc import NUTS

import pm_perm
from pm_perm.inference.step_methods import PermutationLeapShift, PermutationSwapMetropolis
from pm_perm.kernels.leap_shift import default_leap_size, leap_shift, leap_shift_log_hastings
from pm_perm.reference.permutations import all_permutations, permutation_probabilities_enum
from tests.inference._footrule import (
    footrule_counts,
    footrule_mallows_draws,
    footrule_mallows_model,
)

pytestmark = pytest.mark.numba  # sampling: compiled code wins (tests/conftest.py)


def _transition_matrix(log_target, M, L, hastings=True):
    """Exact transition matrix of one leap-and-shift proposal + MH acceptance over all M!
    states (lexicographic order), the proposal enumerated from its definition: item uniform,
    new rank uniform among the ranks within L of its rank (excluding it)."""
    perms = all_permutations(M)
    index = {tuple(p): k for k, p in enumerate(perms)}
    T = np.zeros((len(perms), len(perms)))
    for k, y in enumerate(perms):
        for item in range(M):
            old = int(y[item])
            targets = [r for r in range(max(0, old - L), min(M - 1, old + L) + 1) if r != old]
            for new in targets:
                z = leap_shift(y, item, new)
                assert sorted(z) == list(range(M))
                q = 1.0 / (M * len(targets))
                log_a = log_target[index[tuple(z)]] - log_target[k]
                if hastings:
                    log_a += leap_shift_log_hastings(old, new, M, L)
                T[k, index[tuple(z)]] += q * min(1.0, np.exp(log_a))
        T[k, k] += 1.0 - T[k].sum()
    return T


def _footrule_log_target(M, alpha, R):
    """Log posterior of rho (up to a constant) in a footrule Mallows model at fixed alpha."""
    perms = all_permutations(M)
    return -(alpha / M) * np.abs(np.asarray(R)[None] - perms[:, None]).sum(axis=(1, 2))


def _targets():
    rng = np.random.default_rng(0)
    W = rng.normal(size=(5, 5))
    yield "exp_family", permutation_probabilities_enum(W)[1]
    R = [[0, 1, 2, 3, 4], [1, 0, 2, 4, 3], [0, 2, 1, 3, 4]]
    lt = _footrule_log_target(5, 4.0, R)
    yield "mallows", np.exp(lt - np.logaddexp.reduce(lt))


@pytest.mark.parametrize("L", [1, 2, 3, 4])
@pytest.mark.parametrize("name, p", list(_targets()))
def test_exact_stationary_distribution_m5(name, p, L):
    T = _transition_matrix(np.log(p), 5, L)
    np.testing.assert_allclose(T.sum(1), 1.0, atol=1e-12)
    assert (T >= -1e-15).all()
    flow = p[:, None] * T
    np.testing.assert_allclose(flow, flow.T, atol=1e-15)  # detailed balance
    np.testing.assert_allclose(p @ T, p, atol=1e-14)
    # irreducible (so p is THE stationary vector): every state reached within M(M-1)/2 = 10
    # steps (a leap of one rank is an adjacent transposition; Kendall's distance is <= 10)
    reach = np.linalg.matrix_power(np.eye(len(p)) + (T > 0), 10) > 0
    assert reach.all()


@pytest.mark.parametrize("name, p", list(_targets()))
def test_without_the_hastings_correction_the_target_is_wrong(name, p):
    # the proposal is asymmetric near the ends of the rank range when 1 <= L < M - 1: plain
    # Metropolis acceptance would converge to another distribution (the exact test can fail)
    T = _transition_matrix(np.log(p), 5, 2, hastings=False)
    assert np.abs(p @ T - p).max() > 1e-4


def test_hastings_ratio_values():
    # M = 5, L = 2: windows w = 2, 3, 4, 3, 2 at ranks 0..4
    assert leap_shift_log_hastings(0, 2, 5, 2) == pytest.approx(np.log(2 / 4))
    assert leap_shift_log_hastings(2, 0, 5, 2) == pytest.approx(np.log(4 / 2))
    assert leap_shift_log_hastings(1, 2, 5, 2) == 0.0  # adjacent: symmetric
    assert leap_shift_log_hastings(1, 3, 5, 2) == 0.0  # equal windows
    assert leap_shift([3, 0, 1, 2], 0, 0).tolist() == [0, 1, 2, 3]
    assert [default_leap_size(m) for m in (1, 5, 9, 10, 20)] == [1, 1, 1, 2, 4]


@pytest.mark.parametrize("swap_prob", [0.0, 0.5])
def test_step_draws_match_exact_probabilities_m5(swap_prob):
    # 6,000 steps of 5 proposals from the step itself (leaps only with L = 2, or the default
    # mixture with swaps, L = 1): each of the 25 rank marginals must lie within 4.5 standard
    # errors of the exact one, the s.e. by batch means (60 batches of 100 steps, much longer
    # than the chain's autocorrelation). Under the normal approximation one |z| > 4.5 has
    # probability 7e-6, so the false-failure rate is below 1e-3 even allowing for the error of
    # the batch-means s.e.; the exact stationary test above is the sharp check of the ratio.
    rng = np.random.default_rng(5)
    M, n = 5, 6000
    W = rng.normal(size=(M, M)) * 0.7
    with pm.Model() as model:
        y = pm_perm.PermutationExpFamily("y", logits=W)
        step = PermutationLeapShift([y], leap_size=2 if swap_prob == 0 else None,
                                    swap_prob=swap_prob, rng=np.random.default_rng(1))
    point = model.initial_point()
    draws = np.empty((n, M), dtype=np.int64)
    rates = np.empty(n)
    for t in range(n):
        point, stats = step.step(point)
        draws[t] = point["y"]
        rates[t] = stats[0]["leap_accept_rate"]
    assert 0.05 < np.nanmean(rates) < 1
    P, p = permutation_probabilities_enum(W)
    exact = np.zeros((M, M))
    np.add.at(exact, (np.broadcast_to(np.arange(M), P.shape), P), p[:, None])
    onehot = (draws[:, :, None] == np.arange(M)).reshape(n, M * M).astype(float)
    batches = onehot.reshape(60, n // 60, M * M).mean(axis=1)
    se = batches.std(axis=0, ddof=1) / np.sqrt(60)
    z = (onehot.mean(axis=0) - exact.ravel()) / np.maximum(se, 1e-3)
    assert np.abs(z).max() < 4.5, z.reshape(M, M)


def test_pm_sample_assigns_leap_shift_next_to_nuts():
    with pm.Model() as model:
        rho = pm_perm.PermutationExpFamily("rho", logits=np.zeros((4, 4)))
        alpha = pm.Exponential("alpha", 1.0)
        pm.Potential("lik", -alpha * pt.abs(rho - np.arange(4)).sum())
    _, selected = assign_step_methods(model)
    assert [v.name for v in selected[PermutationLeapShift]] == ["rho"]
    assert [v.name for v in selected[NUTS]] == ["alpha_log__"]
    assert PermutationSwapMetropolis not in selected
    with model:
        idata = pm.sample(draws=50, tune=50, chains=1, random_seed=3, progressbar=False,
                          compute_convergence_checks=False)
        assert "leap_accept_rate" in idata.sample_stats
        # the swap step alone, passed explicitly
        idata = pm.sample(draws=20, tune=10, chains=1, random_seed=3, progressbar=False,
                          step=[PermutationSwapMetropolis([rho])],
                          compute_convergence_checks=False)
        assert "leap_accept_rate" not in idata.sample_stats


def test_batched_permutations():
    # each row of a batched permutation variable gets its own moves, and stays a permutation
    with pm.Model() as model:
        y = pm_perm.PermutationExpFamily("y", logits=np.zeros((3, 6, 6)))
        step = PermutationLeapShift([y], rng=np.random.default_rng(0))
    point = model.initial_point()
    for _ in range(20):
        point, _stats = step.step(point)
    assert (np.sort(point["y"], axis=1) == np.arange(6)).all()
    assert len({tuple(r) for r in point["y"]}) > 1


@pytest.mark.parametrize("kwargs, match", [
    ({"leap_size": 0}, "leap_size must be an integer >= 1"),
    ({"leap_size": 1.5}, "leap_size must be an integer >= 1"),
    ({"n_moves": 0}, "n_moves must be an integer >= 1"),
    ({"swap_prob": 1.5}, r"swap_prob must be a probability in \[0, 1\]"),
    ({"swap_prob": "half"}, r"swap_prob must be a probability in \[0, 1\]"),
    ({"swap_prob": np.nan}, r"swap_prob must be a probability in \[0, 1\]"),
])
def test_rejects_bad_parameters(kwargs, match):
    with pm.Model():
        y = pm_perm.PermutationExpFamily("y", logits=np.zeros((3, 3)))
        with pytest.raises(ValueError, match=match):
            PermutationLeapShift([y], **kwargs)


def test_rejects_bad_variables_and_starts():
    with pm.Model():
        z = pm.Normal("z", 0, 1)
        k = pm.Poisson("k", 3.0, shape=3)
        y = pm_perm.PermutationExpFamily("y", logits=np.zeros((3, 3)))
        with pytest.raises(ValueError, match="PermutationLeapShift needs integer"):
            PermutationLeapShift([z])
        with pytest.raises(ValueError, match="PermutationLeapShift applies only to permutation"):
            PermutationLeapShift([k])
        msg = r"PermutationLeapShift: the value of y is \[0, 0, 1\], which is not a permutation"
        with pytest.raises(ValueError, match=msg):
            PermutationLeapShift([y], initial_point={"y": np.array([0, 0, 1])})
        step = PermutationLeapShift([y])
        with pytest.raises(ValueError, match=msg):
            step.step({"y": np.array([0, 0, 1])})


@pytest.mark.parametrize("n", range(1, 8))
def test_footrule_counts_of_the_hand_model(n):
    d = np.abs(all_permutations(n) - np.arange(n)).sum(axis=1)
    values, counts = np.unique(d, return_counts=True)
    assert footrule_counts(n) == dict(zip(values.tolist(), counts.tolist(), strict=True))
    if n == 7:  # and the counts at n = 20 (the mixing test's) add up to 20!
        assert sum(footrule_counts(20).values()) == np.prod(np.arange(1, 21, dtype=object))


@pytest.mark.slow
def test_latent_consensus_mixes_at_n20():
    # footrule Mallows, n = 20 items, 12 assessors drawn exactly at alpha = 10 (about
    # BayesMallows' potato posterior); pm.sample's own assignment: NUTS for alpha, the
    # leap-and-shift step for rho. Measured here (2 shared cores): about 3 ms per iteration of
    # one chain, 30 s in all; max r_hat 1.007 over the items' ranks. Swaps alone (swap_prob=1)
    # gave 1.018 in the same run: r_hat <= 1.01 for alpha and every item's rank fails there.
    n = 20
    rho0 = np.random.default_rng(0).permutation(n)
    R = footrule_mallows_draws(rho0, 10.0, 12, seed=1)
    with footrule_mallows_model(R):
        start = time.perf_counter()
        idata = pm.sample(draws=2000, tune=500, chains=4, cores=1, random_seed=3,
                          progressbar=False, compute_convergence_checks=False)
        per_iteration = (time.perf_counter() - start) / (4 * 2500)
    assert per_iteration < 0.02
    assert float(az.rhat(idata, var_names=["alpha"])["alpha"]) <= 1.01
    rhat = az.rhat(idata, var_names=["rho"])["rho"].values
    ranks = idata.posterior["rho"].values
    constant = (ranks == ranks[:1, :1]).all(axis=(0, 1))  # no r_hat: one rank in every draw
    assert np.all(rhat[~constant] <= 1.01), rhat
    post_mean = idata.posterior["alpha"].values.mean()
    assert 5 < post_mean < 20
