"""The exact latent-consensus footrule Mallows posterior (pm_perm.reference.mallows_posterior)
against brute force: a loop over permutations and adaptive quadrature over alpha."""

import itertools
import math

import numpy as np
import pytest
from scipy.integrate import quad

from pm_perm.reference.mallows_posterior import (
    footrule_log_normaliser_enum,
    footrule_mallows_posterior,
)

RATE = 0.2  # alpha ~ Exponential(RATE)


def _brute(R):
    N, n = R.shape
    perms = list(itertools.permutations(range(n)))

    d_id = np.array([sum(abs(s[i] - i) for i in range(n)) for s in perms])

    def z(alpha):
        return np.exp(-(alpha / n) * d_id).sum()

    def unnorm(alpha, rho):
        d = sum(abs(int(r[i]) - rho[i]) for r in R for i in range(n))
        return RATE * math.exp(-RATE * alpha) * math.exp(-(alpha / n) * d) / z(alpha) ** N

    # quad over [0, inf) misjudges these peaked integrands; the mass beyond 30 is negligible here
    mass = np.array([quad(unnorm, 0, 30, args=(rho,), epsabs=0, epsrel=1e-10, limit=200)[0]
                     for rho in perms])
    total = mass.sum()
    m1 = sum(quad(lambda a, rho=rho: a * unnorm(a, rho), 0, 30, epsrel=1e-10, limit=200)[0]
             for rho in perms) / total
    m2 = sum(quad(lambda a, rho=rho: a * a * unnorm(a, rho), 0, 30, epsrel=1e-10, limit=200)[0]
             for rho in perms) / total
    return np.array(perms), mass / total, m1, math.sqrt(m2 - m1 * m1)


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_normaliser_against_a_loop(n):
    perms = list(itertools.permutations(range(n)))
    for alpha in (0.0, 0.7, 3.0):
        z = sum(math.exp(-(alpha / n) * sum(abs(s[i] - i) for i in range(n))) for s in perms)
        assert footrule_log_normaliser_enum(alpha, n) == pytest.approx(math.log(z), rel=1e-13)


@pytest.mark.parametrize("n, N, seed", [(3, 4, 0), (5, 6, 1)])
def test_posterior_against_brute_force(n, N, seed):
    rng = np.random.default_rng(seed)
    base = rng.permutation(n)
    R = np.array([base if rng.random() < 0.5 else rng.permutation(n) for _ in range(N)])
    grid = np.linspace(0.0, 120.0, 24001)
    post = footrule_mallows_posterior(R, grid, np.log(RATE) - RATE * grid)
    assert post.alpha_density[grid > 30].sum() * (grid[1] - grid[0]) < 1e-10  # see _brute
    perms, prob, mean, sd = _brute(R)
    np.testing.assert_array_equal(post.perms, perms)
    np.testing.assert_allclose(post.prob, prob, rtol=1e-4)  # trapezoid error O(h^2)
    heat = np.zeros((n, n))
    for s, p in zip(perms, prob, strict=True):
        heat[np.arange(n), s] += p
    np.testing.assert_allclose(post.heat, heat, atol=1e-5)  # trapezoid error O(h^2)
    np.testing.assert_allclose(post.heat.sum(0), 1.0, atol=1e-12)
    assert post.map_prob == pytest.approx(prob.max(), rel=1e-5)
    np.testing.assert_array_equal(post.map_rank, perms[np.argmax(prob)])
    assert post.alpha_mean == pytest.approx(mean, rel=1e-5)
    assert post.alpha_sd == pytest.approx(sd, rel=1e-4)


def test_bad_input():
    grid = np.linspace(0, 10, 11)
    with pytest.raises(ValueError, match="complete ranking"):
        footrule_mallows_posterior([[0, 0, 1]], grid, np.zeros(11))
    with pytest.raises(ValueError, match="increasing"):
        footrule_mallows_posterior([[0, 2, 1]], grid[::-1], np.zeros(11))
