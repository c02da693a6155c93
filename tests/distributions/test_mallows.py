"""``Mallows``: log-likelihood and normaliser against enumeration, gradient in alpha, draws of
both backends by chi-square, sampling a latent consensus against the exact posterior, and the
bad-input errors.

Goodness-of-fit tests (``check_draws_match_logp``): fixed seeds, 20,000 draws, threshold
p > 1e-3, so a correct sampler and logp fail each with probability 0.1% (were the seed random).
"""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from pymc.logprob.utils import ParameterValueError
from scipy.special import logsumexp

import pm_perm
from pm_perm._modes import PYTHON_MODE
from pm_perm.distributions.mallows import (
    Mallows,
    MallowsRV,
    mallows_distance,
    mallows_log_normaliser,
)
from pm_perm.kernels.mallows import DISTANCES, log_normaliser
from pm_perm.reference.mallows import distance_ref, mallows_logp_enum
from pm_perm.reference.permutations import all_permutations
from pm_perm.testing import check_draws_match_logp, chi_square_pvalue

P_MIN = 1e-3


def _logp(dist, values, mode=PYTHON_MODE):
    v = pt.lmatrix("v")
    return pytensor.function([v], pm.logp(dist, v), mode=mode)(values)


@pytest.mark.parametrize("distance", DISTANCES)
def test_logp_equals_enumeration(distance):
    """Every ranking of n = 1, 2, 5 items, 200 of n = 8 (two alphas), random consensus."""
    rng = np.random.default_rng(1)
    for n, alpha in [(1, 2.0), (2, 0.0), (5, 3.0), (8, 0.5), (8, 9.0)]:
        rho = rng.permutation(n)
        perms = all_permutations(n)
        if n == 8:  # 200 of the 8! rankings (the normaliser: all of them, in tests/kernels)
            perms = perms[rng.choice(len(perms), 200, replace=False)]
        got = _logp(Mallows.dist(rho=rho, alpha=alpha, distance=distance), perms)
        expected = [mallows_logp_enum(distance, R, rho, alpha) for R in perms]
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10)
        if n < 8:
            assert logsumexp(got) == pytest.approx(0.0, abs=1e-10)


@pytest.mark.parametrize("distance", DISTANCES)
def test_distances_equal_their_definitions(distance):
    """The PyTensor distances (batched) on every pair of rankings of 4 items."""
    perms = all_permutations(4)
    R = np.repeat(perms, len(perms), axis=0)
    rho = np.tile(perms, (len(perms), 1))
    got = mallows_distance(pt.as_tensor(R), pt.as_tensor(rho), distance).eval(mode=PYTHON_MODE)
    expected = [distance_ref(distance, a, b) for a, b in zip(R, rho, strict=True)]
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("distance", DISTANCES)
def test_normaliser_gradient_in_alpha(distance):
    for n, alpha in [(6, 1.3), (12, 7.0)]:
        pytensor.gradient.verify_grad(lambda a, n=n: mallows_log_normaliser(a, n, distance),
                                      [np.array([alpha, 0.2])], rng=np.random.default_rng(0),
                                      mode=PYTHON_MODE)
        value = mallows_log_normaliser(pt.as_tensor(alpha), n, distance).eval(mode=PYTHON_MODE)
        assert value == pytest.approx(log_normaliser(distance, n, alpha), rel=1e-12)


def test_spearman_beyond_its_table_uses_the_exact_permanent():
    """n = 16 > SPEARMAN_TABLE_MAX_N: the normaliser is the exact log-permanent per alpha."""
    n, alpha = 16, 5.0
    i = np.arange(n)
    W = -(alpha / n) * np.subtract.outer(i, i).astype(float) ** 2
    value = mallows_log_normaliser(pt.as_tensor(alpha), n, "spearman").eval(mode=PYTHON_MODE)
    assert value == pytest.approx(float(pm_perm.kernels.permanent.log_permanent(W)), rel=1e-12)
    pytensor.gradient.verify_grad(lambda a: mallows_log_normaliser(a, n, "spearman"),
                                  [np.array(alpha)], rng=np.random.default_rng(0),
                                  mode=PYTHON_MODE)


@pytest.mark.numba
@pytest.mark.parametrize("distance", DISTANCES)
def test_compiled_draws_match_logp(distance):
    """Compiled (numba) draws, n = 4, against exp(logp)."""
    dist = Mallows.dist(rho=np.array([2, 0, 3, 1]), alpha=3.0, distance=distance)
    assert check_draws_match_logp(dist, all_permutations(4), seed=2, mode="NUMBA") > P_MIN


@pytest.mark.parametrize("distance", DISTANCES)
def test_python_draws_match_logp(distance):
    """``MallowsRV.rng_fn`` (the Python path, which the JAX backend calls), n = 4, 20,000
    draws in one call, against exp(logp)."""
    rho, alpha = np.array([2, 0, 3, 1]), 3.0
    draws = MallowsRV(distance=distance).rng_fn(np.random.default_rng(2), rho, alpha,
                                                 (20_000,))
    perms = all_permutations(4)
    probs = np.exp(_logp(Mallows.dist(rho=rho, alpha=alpha, distance=distance), perms))
    assert chi_square_pvalue(draws, perms, probs) > P_MIN


def test_batched_draws_and_support_point():
    rho = np.array([[0, 1, 2], [2, 1, 0]])
    R = Mallows.dist(rho=rho, alpha=[1e3, 1e3], distance="kendall", size=(5, 2))
    draws = pm.draw(R, random_seed=0)
    assert draws.shape == (5, 2, 3)
    assert np.array_equal(draws, np.broadcast_to(rho, (5, 2, 3)))  # alpha large: the mode
    with pm.Model() as model:
        Mallows("R", rho=np.array([1, 2, 0]), alpha=1.0, size=2)
    assert np.array_equal(model.initial_point()["R"], [[1, 2, 0], [1, 2, 0]])


@pytest.mark.slow
def test_jax_draws():
    pytest.importorskip("jax")
    dist = Mallows.dist(rho=np.array([1, 0, 2]), alpha=2.0, distance="cayley")
    with warnings.catch_warnings():  # PyTensor: the shared RNG is copied into the JAX graph
        warnings.filterwarnings("ignore", "The RandomType SharedVariables", UserWarning)
        assert check_draws_match_logp(dist, all_permutations(3), seed=4, mode="JAX") > P_MIN


@pytest.mark.parametrize("distance", ["cayley", "ulam"])
def test_logp_and_gradient_compile_on_jax(distance):
    """The distances that gather (cycles, longest increasing subsequence) on the JAX backend,
    against the Python linker."""
    pytest.importorskip("jax")
    alpha, value = pt.dscalar("alpha"), pt.lmatrix("value")
    lp = pm.logp(Mallows.dist(rho=np.array([1, 3, 0, 4, 2]), alpha=alpha, distance=distance),
                 value).sum()
    outputs = [lp, pytensor.grad(lp, alpha)]
    perms = all_permutations(5)
    with warnings.catch_warnings():  # JAX drops the parameter checks (PyTensor warns)
        warnings.filterwarnings("ignore", "Skipping Check", UserWarning)
        got = pytensor.function([alpha, value], outputs, mode="JAX")(2.0, perms)
    expected = pytensor.function([alpha, value], outputs, mode=PYTHON_MODE)(2.0, perms)
    np.testing.assert_allclose(np.asarray(got, dtype=float), expected, rtol=1e-10)


def _exact_posterior(data, distance, rate, grid):
    """p(rho, alpha | data) on all rho and an alpha grid: rho uniform, alpha ~ Exp(rate)."""
    n = data.shape[1]
    perms = all_permutations(n)
    D = np.array([[distance_ref(distance, r, p) for r in data] for p in perms]).sum(axis=1)
    lp = (-rate * grid[None] - grid[None] / n * D[:, None]
          - len(data) * log_normaliser(distance, n, grid)[None])
    post = np.exp(lp - logsumexp(lp))
    return perms, post.sum(axis=1), float((post.sum(axis=0) * grid).sum())


@pytest.mark.numba
def test_latent_consensus_posterior_equals_enumeration():
    """rho latent (uniform PermutationExpFamily, swap step) and alpha (NUTS), default sampler,
    n = 5, 6 rankings: P(rho = exact MAP) within 0.06 and E[alpha] within 0.25 of the exact
    posterior (all 120 consensus rankings on an alpha grid). Measured on this run (fixed
    seed): Monte Carlo standard errors 0.021 for P(MAP) (ESS about 400) and 0.054 for E[alpha]
    (ESS about 200), so the tolerances are about 3 and 4.6 of them."""
    n = 5
    data = pm.draw(Mallows.dist(np.array([3, 0, 4, 2, 1]), 3.0, size=6), random_seed=5)
    with pm.Model():
        alpha = pm.Exponential("alpha", 0.1)
        rho = pm_perm.PermutationExpFamily("rho", logits=np.zeros((n, n)))
        Mallows("R", rho=rho, alpha=alpha, observed=data)
        idata = pm.sample(800, tune=400, chains=2, cores=1, random_seed=3, progressbar=False,
                          compute_convergence_checks=False)
    perms, p_rho, alpha_mean = _exact_posterior(data, "footrule", 0.1,
                                                np.linspace(1e-4, 40, 4001))
    best = perms[p_rho.argmax()]
    rhos = idata.posterior["rho"].values.reshape(-1, n)
    assert np.mean(np.all(rhos == best, axis=1)) == pytest.approx(p_rho.max(), abs=0.06)
    assert float(idata.posterior["alpha"].mean()) == pytest.approx(alpha_mean, abs=0.25)


# ----------------------------------------------------------------------------- bad input


def test_bad_parameters_fail_the_parameter_check():
    perms = all_permutations(3)
    with pytest.raises(ParameterValueError, match="rho must be a permutation"):
        _logp(Mallows.dist(rho=np.array([0, 0, 2]), alpha=1.0), perms)
    with pytest.raises(ParameterValueError, match="alpha must be finite and >= 0"):
        _logp(Mallows.dist(rho=np.arange(3), alpha=-0.5), perms)
    with pytest.raises(ValueError, match="Mallows draws: rho must be a permutation"):
        pm.draw(Mallows.dist(rho=np.array([0, 3, 1]), alpha=1.0, distance="ulam"))
    with pytest.raises(ValueError, match="Mallows draws: alpha must be finite"):
        pm.draw(Mallows.dist(rho=np.arange(3), alpha=-1.0), mode=PYTHON_MODE)


def test_values_that_are_not_permutations_get_minus_inf():
    got = _logp(Mallows.dist(rho=np.arange(3), alpha=1.0, distance="cayley"),
                np.array([[0, 0, 1], [0, 1, 2], [3, 1, 0]]))
    assert got[0] == -np.inf and np.isfinite(got[1]) and got[2] == -np.inf


def test_bad_arguments_are_refused_at_build():
    with pytest.raises(ValueError, match="unknown Mallows distance 'euclid'; use one of"):
        Mallows.dist(rho=np.arange(3), alpha=1.0, distance="euclid")
    with pytest.raises(ValueError, match="n = 61 .* exact limit.*use distance='footrule'"):
        Mallows.dist(rho=np.arange(61), alpha=1.0, distance="ulam")
    with pytest.raises(ValueError, match="n = 27 .*use distance='footrule'"):
        Mallows.dist(rho=np.arange(27), alpha=1.0, distance="spearman")
    with pytest.raises(ValueError, match="n = 201 .*MAX_N.*= 200.*use distance='cayley' or "
                                         "'hamming'.*method='bethe'"):
        Mallows.dist(rho=np.arange(201), alpha=1.0, distance="footrule")
    with pytest.raises(ValueError, match="n = 171 .*use distance='cayley' or 'hamming'"):
        Mallows.dist(rho=np.arange(171), alpha=1.0, distance="kendall")
    with pytest.raises(ValueError, match="integer ranks"):
        Mallows.dist(rho=np.arange(3.0), alpha=1.0)
    with pytest.raises(ValueError, match="M >= 1"):
        Mallows.dist(rho=np.zeros(0, dtype=int), alpha=1.0)
    with pytest.raises(ValueError, match="must be known when the model is built"):
        Mallows.dist(rho=pt.lvector("rho"), alpha=1.0)
    with pm.Model(), pytest.raises(ValueError, match=r"observed\[1\] = \[0 0 1\] is not a "
                                                     "permutation"):
        Mallows("R", rho=np.arange(3), alpha=1.0, observed=[[0, 1, 2], [0, 0, 1]])


def test_a_latent_mallows_consensus_is_a_guarded_permutation_variable():
    """A Mallows-centred prior for rho: the swap step applies to it, and a log-density without
    Jacobian terms (find_MAP's) warns as for any latent permutation."""
    from pm_perm.inference.step_methods import is_permutation_rv
    from pm_perm.ops.latent import LatentPermutationWarning

    with pm.Model() as model:
        rho = Mallows("rho", rho=np.arange(4), alpha=2.0, distance="kendall")
        Mallows("R", rho=rho, alpha=1.0, observed=[[0, 1, 3, 2], [1, 0, 2, 3]])
    assert is_permutation_rv(rho)
    with pytest.warns(LatentPermutationWarning):
        model.logp(jacobian=False)
