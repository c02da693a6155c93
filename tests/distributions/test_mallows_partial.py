"""``MallowsPartial``: the likelihood of top-k and tied ballots against enumeration (every
consistent complete ranking, n = 1..7), the gradient in alpha, draws cut to a pattern by
chi-square, one pointwise log-likelihood row per ballot, and the bad-input errors.

Goodness-of-fit tests: fixed seeds, 20,000 draws, threshold p > 1e-3, so a correct sampler and
logp fail each with probability 0.1% (were the seed random).
"""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from pymc.logprob.utils import ParameterValueError

import pm_perm
from pm_perm._modes import PYTHON_MODE
from pm_perm.distributions.mallows_partial import (
    MallowsPartial,
    MallowsPartialRV,
    mallows_logits,
)
from pm_perm.kernels.patterns import coarsen_to_patterns
from pm_perm.reference.mallows import mallows_logp_enum
from pm_perm.reference.mallows_partial import mallows_partial_logp_enum
from pm_perm.reference.pairwise import extension_mask, random_partial_order
from pm_perm.reference.permutations import all_permutations
from pm_perm.reference.rankings import every_top_k_order, random_tie_orders
from pm_perm.testing import check_draws_match_logp, chi_square_pvalue

P_MIN = 1e-3
EXACT = ("footrule", "spearman", "hamming", "kendall")


def _logp(dist, values, mode=PYTHON_MODE):
    v = pt.lmatrix("v")
    return pytensor.function([v], pm.logp(dist, v), mode=mode)(np.asarray(values))


def _ballots(rng, n):
    """Random top-k ballots (every k = 0..n) and random tied ballots of n items."""
    tops = every_top_k_order(n)
    tops = tops[rng.choice(len(tops), min(len(tops), 12), replace=False)]
    return np.concatenate([tops, random_tie_orders(rng, n, 12)])


def _pattern_support(pattern):
    """Every ballot with the blocks of ``pattern``: all rankings coarsened to it."""
    perms = all_permutations(len(pattern))
    return np.unique(coarsen_to_patterns(perms, np.broadcast_to(pattern, perms.shape)), axis=0)


@pytest.mark.parametrize("distance", EXACT)
def test_partial_loglik_equals_enumeration(distance):
    """Random top-k and tied ballots, n = 1..7, random consensus and alpha (0 included)."""
    rng = np.random.default_rng(11)
    for n in range(1, 8):
        rho = rng.permutation(n)
        alpha = 0.0 if n == 3 else float(rng.uniform(0.5, 12.0))
        ballots = _ballots(rng, n)
        got = _logp(MallowsPartial.dist(rho=rho, alpha=alpha, distance=distance), ballots)
        expected = mallows_partial_logp_enum(distance, ballots, rho, alpha)
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10, err_msg=f"n = {n}")


@pytest.mark.parametrize("distance", EXACT)
def test_complete_rankings_equal_mallows_and_patterns_sum_to_one(distance):
    """A complete ranking has the Mallows logp; the ballots of one pattern (top-2, and two tie
    blocks of 2 and 3 with the rest unranked) are a partition of the rankings: sum to 1."""
    rho, alpha = np.array([3, 0, 5, 1, 4, 2]), 7.0
    d = MallowsPartial.dist(rho=rho, alpha=alpha, distance=distance)
    perms = all_permutations(6)[::37]
    np.testing.assert_allclose(_logp(d, perms),
                               [mallows_logp_enum(distance, R, rho, alpha) for R in perms],
                               rtol=1e-10, atol=1e-10)
    for pattern in ([0, 1, -1, -1, -1, -1], [0, 0, 2, 2, 2, -1]):
        support = _pattern_support(np.array(pattern))
        assert np.exp(_logp(d, support)).sum() == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("distance", EXACT)
def test_gradient_in_alpha(distance):
    ballots = np.array([[2, 0, -1, 1, -1, -1], [0, 0, 2, 2, 2, -1], [1, 5, 0, 3, 2, 4],
                        [0, 0, 0, 3, 3, 3]])
    rho = np.array([1, 0, 4, 2, 3, 5])

    def f(a):
        return pm.logp(MallowsPartial.dist(rho=rho, alpha=a, distance=distance),
                       ballots).sum()

    for alpha in (0.3, 6.0):
        pytensor.gradient.verify_grad(f, [np.array(alpha)], rng=np.random.default_rng(0),
                                      mode=PYTHON_MODE)


@pytest.mark.parametrize("distance", EXACT)
def test_python_draws_with_a_pattern_match_logp(distance):
    """``MallowsPartialRV.rng_fn`` (the Python path, which the JAX backend calls): 20,000 draws
    coarsened to a top-2 pattern of 4 items, against exp(logp) of its 12 ballots."""
    rho, alpha = np.array([2, 0, 3, 1]), 5.0
    pattern = np.array([-1, 1, 0, -1])
    draws = MallowsPartialRV(distance=distance).rng_fn(np.random.default_rng(3), rho, alpha,
                                                       1.0, pattern, (20_000,))
    support = _pattern_support(pattern)
    probs = np.exp(_logp(MallowsPartial.dist(rho=rho, alpha=alpha, distance=distance), support))
    assert chi_square_pvalue(draws, support, probs) > P_MIN


@pytest.mark.numba
@pytest.mark.parametrize("distance", ["footrule", "kendall"])
def test_compiled_draws_with_a_tie_pattern_match_logp(distance):
    """Compiled (numba) draws with a tie pattern (blocks of 2 and 3 of 5 items)."""
    pattern = np.array([0, 2, 0, 2, 2])
    dist = MallowsPartial.dist(rho=np.array([4, 1, 0, 3, 2]), alpha=6.0, distance=distance,
                               pattern=pattern)
    assert check_draws_match_logp(dist, _pattern_support(pattern), seed=5,
                                  mode="NUMBA") > P_MIN


def test_one_pointwise_row_per_ballot_and_replicated_patterns():
    """weights=counts: one log-likelihood row per ballot, the model's logp sum(counts * log p);
    the prior predictive keeps each ballot's pattern (top-k length and ties)."""
    orders = np.array([[0, 1, -1, -1], [1, 0, 2, -1], [0, 0, 2, 2]])
    counts = np.array([3, 0, 2])
    rho, alpha = np.array([0, 2, 1, 3]), 2.5
    per_order = mallows_partial_logp_enum("footrule", orders, rho, alpha)
    with pm.Model() as model:
        a = pm.Exponential("alpha", 1.0)
        MallowsPartial("y", rho=rho, alpha=a, weights=counts, observed=orders)
    point = {"alpha_log__": np.log(alpha)}
    pointwise = model.compile_fn(model.logp(vars=model.observed_RVs, sum=False)[0],
                                 mode=PYTHON_MODE)(point)
    np.testing.assert_allclose(pointwise, np.repeat(per_order, counts), rtol=1e-10)
    total = model.compile_fn(model.observedlogp, mode=PYTHON_MODE)(point)
    assert total == pytest.approx(float(counts @ per_order), rel=1e-10)
    draws = pm.draw(model["y"], draws=3, random_seed=1)
    assert draws.shape == (3, 5, 4)
    assert np.array_equal((draws < 0).sum(-1), np.broadcast_to([2, 2, 2, 0, 0], (3, 5)))
    assert np.all(np.sort(draws[:, 3:], axis=-1) == [0, 0, 2, 2])


def test_latent_consensus_and_alpha_compile():
    """A latent rho (the swap step's permutation variable) and alpha with partial data: the
    model's logp equals enumeration at a point, and its gradient in alpha is finite."""
    data = np.array([[0, 1, -1, -1, -1], [1, 1, 0, 3, 3]])
    with pm.Model() as model:
        alpha = pm.Exponential("alpha", 0.1)
        rho = pm_perm.PermutationExpFamily("rho", logits=np.zeros((5, 5)))
        MallowsPartial("y", rho=rho, alpha=alpha, distance="kendall", observed=data)
    point = {"alpha_log__": np.log(3.0), "rho": np.array([1, 0, 2, 4, 3])}
    got = model.compile_fn(model.observedlogp, mode=PYTHON_MODE)(point)
    expected = mallows_partial_logp_enum("kendall", data, point["rho"], 3.0).sum()
    assert got == pytest.approx(expected, rel=1e-10)
    dlogp = model.compile_dlogp(vars=[model["alpha"]])(point)
    assert np.all(np.isfinite(dlogp))


@pytest.mark.parametrize("distance", [pytest.param("footrule", marks=pytest.mark.slow),
                                      "kendall"])
def test_logp_and_gradient_compile_on_jax(distance):
    """The partial-order DP (its JAX implementation; slow: its first compilation took 128 s on
    the shared machine) and the closed form on the JAX backend, against the Python linker."""
    pytest.importorskip("jax")
    alpha, value = pt.dscalar("alpha"), pt.lmatrix("value")
    lp = pm.logp(MallowsPartial.dist(rho=np.array([1, 3, 0, 4, 2]), alpha=alpha,
                                     distance=distance), value).sum()
    outputs = [lp, pytensor.grad(lp, alpha)]
    ballots = np.array([[0, 1, -1, -1, -1], [2, 0, 0, 4, 2], [1, 0, 2, 3, 4]])
    with warnings.catch_warnings():  # JAX drops the parameter checks (PyTensor warns)
        warnings.filterwarnings("ignore", "Skipping Check", UserWarning)
        got = pytensor.function([alpha, value], outputs, mode="JAX")(2.0, ballots)
    expected = pytensor.function([alpha, value], outputs, mode=PYTHON_MODE)(2.0, ballots)
    np.testing.assert_allclose(np.asarray(got, dtype=float), expected, rtol=1e-10)


@pytest.mark.parametrize("distance", ["footrule", "spearman", "hamming"])
def test_pairwise_preferences_under_a_separable_mallows_model(distance):
    """The recipe of ``mallows_logits``: PartialOrder with the Mallows logits, random partial
    orders (2 to 6 pairs, padded) of n = 3..6 items, against the Mallows probabilities of
    their linear extensions; and its gradient in alpha."""
    rng = np.random.default_rng(4)
    alpha = pt.dscalar("alpha")
    for n in range(3, 7):
        rho = rng.permutation(n)
        most = min(6, n * (n - 1) // 2)
        sizes = rng.integers(2, most + 1, size=4)
        prefs = np.stack([random_partial_order(rng, n, k, pad=most - k) for k in sizes])
        y = pm_perm.PartialOrder.dist(logits=mallows_logits(rho, alpha, distance), pairs=prefs)
        got = pytensor.function([alpha], pm.logp(y, prefs), mode=PYTHON_MODE)(3.5)
        perms = all_permutations(n)
        lp = np.array([mallows_logp_enum(distance, R, rho, 3.5) for R in perms])
        expected = [np.log(np.exp(lp[extension_mask(p, perms)]).sum()) for p in prefs]
        np.testing.assert_allclose(got, expected, rtol=1e-10, err_msg=f"n = {n}")
    pytensor.gradient.verify_grad(
        lambda a: pm.logp(pm_perm.PartialOrder.dist(logits=mallows_logits(rho, a, distance)),
                          prefs).sum(),
        [np.array(2.0)], rng=np.random.default_rng(0), mode=PYTHON_MODE)


def _exact_partial_posterior(data, distance, rate, grid):
    """p(rho, alpha | ballots) on all rho and an alpha grid by enumeration: rho uniform,
    alpha ~ Exponential(rate). Returns the rankings, P(rho) and E[alpha]."""
    from scipy.special import logsumexp

    from pm_perm.reference.mallows import distance_ref, mallows_log_normaliser_enum
    from pm_perm.reference.rankings import consistent_mask

    n = data.shape[1]
    perms = all_permutations(n)
    masks = np.array([consistent_mask(y, perms) for y in data])
    log_z = np.array([mallows_log_normaliser_enum(distance, n, a) for a in grid])
    ll = np.empty((len(perms), len(grid)))
    for k, r in enumerate(perms):
        d = np.array([distance_ref(distance, R, r) for R in perms], dtype=float)
        terms = -(grid[:, None] / n) * d[None]
        ll[k] = sum(logsumexp(np.where(m[None], terms, -np.inf), axis=1) for m in masks)
        ll[k] -= len(data) * log_z
    lp = ll - rate * grid[None]
    post = np.exp(lp - logsumexp(lp))
    return perms, post.sum(axis=1), float((post.sum(axis=0) * grid).sum())


@pytest.mark.slow
@pytest.mark.numba
@pytest.mark.parametrize("distance", ["footrule", "kendall"])
def test_latent_consensus_posterior_from_top_k_ballots_equals_enumeration(distance):
    """rho latent (uniform, pm.sample's permutation step) and alpha (NUTS), n = 5, 4 top-2 and
    4 top-3 ballots: P(rho = exact MAP) within 0.07 and E[alpha] within 0.4 of the exact
    posterior (all 120 consensus rankings on an alpha grid). Measured on this seed: footrule
    P(MAP) 0.757 vs 0.731 exact, E[alpha] 3.97 vs 3.98; kendall 0.710 vs 0.706, 6.24 vs 6.35
    (1,600 draws; slow: about 25 s with the enumeration)."""
    n = 5
    full = pm.draw(pm_perm.Mallows.dist(np.array([3, 0, 4, 2, 1]), 4.0, size=8), random_seed=5)
    data = np.where(full < np.array([2] * 4 + [3] * 4)[:, None], full, -1)
    with pm.Model():
        alpha = pm.Exponential("alpha", 0.1)
        rho = pm_perm.PermutationExpFamily("rho", logits=np.zeros((n, n)))
        MallowsPartial("y", rho=rho, alpha=alpha, distance=distance, observed=data)
        idata = pm.sample(800, tune=400, chains=2, cores=1, random_seed=3, progressbar=False,
                          compute_convergence_checks=False)
    perms, p_rho, alpha_mean = _exact_partial_posterior(data, distance, 0.1,
                                                        np.linspace(1e-4, 40, 801))
    rhos = idata.posterior["rho"].values.reshape(-1, n)
    assert np.mean(np.all(rhos == perms[p_rho.argmax()], axis=1)) == pytest.approx(
        p_rho.max(), abs=0.07)
    assert float(idata.posterior["alpha"].mean()) == pytest.approx(alpha_mean, abs=0.4)


# ----------------------------------------------------------------------------- bad input


def test_invalid_ballots_get_minus_inf_and_are_refused_as_data():
    bad = np.array([[0, 2, -1, -1], [1, 1, 2, -1], [0, 1, 4, 2], [-2, 0, 1, 2], [0, 1, 2, 3]])
    for distance in ("footrule", "kendall"):
        got = _logp(MallowsPartial.dist(rho=np.arange(4), alpha=1.0, distance=distance), bad)
        assert np.all(got[:4] == -np.inf) and np.isfinite(got[4]), distance
    with pm.Model(), pytest.raises(ValueError, match=r"observed\[1\] = \[1, 1, 2, -1\] is not "
                                                     "a valid rank-form order"):
        MallowsPartial("y", rho=np.arange(4), alpha=1.0, observed=bad[[4, 1]])
    with pm.Model(), pytest.raises(ValueError, match="rho has n = 4 items"):
        MallowsPartial("y", rho=np.arange(4), alpha=1.0, observed=[[0, 1, 2]])


def test_distances_without_an_exact_partial_likelihood_are_refused():
    for distance in ("cayley", "ulam"):
        with pytest.raises(ValueError, match=f"no exact likelihood of top-k or tied rankings "
                                             f"under the {distance} distance.*'kendall'"):
            MallowsPartial.dist(rho=np.arange(4), alpha=1.0, distance=distance)
    with pytest.raises(ValueError, match="unknown Mallows distance 'euclid'"):
        MallowsPartial.dist(rho=np.arange(4), alpha=1.0, distance="euclid")
    with pytest.raises(ValueError, match="mallows_logits: distance must be one of .*separable"):
        mallows_logits(np.arange(4), 1.0, "kendall")


def test_beyond_the_exact_limit_the_message_names_the_alternatives():
    with pytest.raises(ValueError, match="n = 27 items is beyond the exact limit 26 of the "
                                         "partial-order DP.*distance='kendall'.*PlackettLuce"):
        MallowsPartial.dist(rho=np.arange(27), alpha=1.0, distance="footrule")
    with pytest.raises(ValueError, match="n = 171 .*exact limit"):
        MallowsPartial.dist(rho=np.arange(171), alpha=1.0, distance="kendall")
    MallowsPartial.dist(rho=np.arange(60), alpha=1.0, distance="kendall")  # closed form: fine


def test_bad_parameters():
    ballots = np.array([[0, 1, -1, -1]])
    for distance in ("spearman", "kendall"):
        with pytest.raises(ParameterValueError, match="rho must be a permutation"):
            _logp(MallowsPartial.dist(rho=np.array([0, 0, 2, 3]), alpha=1.0,
                                      distance=distance), ballots)
        with pytest.raises(ParameterValueError, match="alpha must be finite and >= 0"):
            _logp(MallowsPartial.dist(rho=np.arange(4), alpha=-1.0, distance=distance),
                  ballots)
    with pytest.raises(ValueError, match="weights must be non-negative integers"):
        MallowsPartial.dist(rho=np.arange(4), alpha=1.0, weights=0.5)
    with pytest.raises(ValueError, match="integer ranks"):
        MallowsPartial.dist(rho=np.arange(4.0), alpha=1.0)
    with pytest.raises(ValueError, match="Mallows draws: rho must be a permutation"):
        pm.draw(MallowsPartial.dist(rho=np.array([0, 0, 2]), alpha=1.0), mode=PYTHON_MODE)
    with pytest.raises(ValueError, match="pattern"):
        MallowsPartial.dist(rho=np.arange(4), alpha=1.0, pattern=[0, 2, -1, -1])
