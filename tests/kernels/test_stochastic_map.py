"""Stochastic MAP with Monte Carlo gradients vs the exact MLE (enumeration, M = 5)."""

import itertools

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import logsumexp, softmax

from pm_perm.kernels.huber_law import huber_law_sample
from pm_perm.kernels.stochastic_map import stochastic_map


def _problem(seed=0, N=40, M=5, D=2):
    rng = np.random.default_rng(seed)
    theta = np.array([1.0, -0.5])
    X = rng.normal(size=(N, M, M, D))
    Y = np.stack([huber_law_sample(X[n] @ theta, rng=seed + n) for n in range(N)])
    return X, Y


def _exact_mle(X, Y):
    N, M, _, D = X.shape
    P = np.array(list(itertools.permutations(range(M))))
    rows = np.arange(M)
    F = np.stack([X[n][rows, P].sum(1) for n in range(N)])  # (N, n_perm, D)
    phi = np.stack([X[n][rows, Y[n]].sum(0) for n in range(N)]).sum(0)

    def nll(th):
        s = F @ th
        return -(phi @ th - logsumexp(s, axis=1).sum()), -(
            phi - np.einsum("np,npd->d", softmax(s, axis=1), F)
        )

    return minimize(nll, np.zeros(D), jac=True, method="BFGS").x


@pytest.mark.parametrize("sampler", ["huber_law", "swap"])
def test_matches_exact_mle(sampler):
    # With tol = 1e-3 on the windowed mean gradient the run stops after ~150 iterations; the
    # Polyak average then sits within ~0.01 of the exact MLE (measured); we allow 0.04.
    X, Y = _problem()
    mle = _exact_mle(X, Y)
    res = stochastic_map(X, Y, sampler=sampler, rng=1, max_iter=600, tol=1e-3)
    assert res.converged and res.history.shape == (res.n_iter, 2)
    np.testing.assert_allclose(res.theta, mle, atol=0.04)


def test_convergence_flag_and_errors():
    X, Y = _problem(N=10)
    res = stochastic_map(X, Y, rng=0, max_iter=5, window=50)
    assert not res.converged and res.n_iter == 5
    with pytest.raises(ValueError, match="shape"):
        stochastic_map(X[0], Y)
    bad = Y.copy()
    bad[3, :2] = bad[3, 0]
    with pytest.raises(ValueError, match=r"permutation of 0\.\.\d+; row 3 is \["):
        stochastic_map(X, bad)
    with pytest.raises(ValueError, match="sampler"):
        stochastic_map(X, Y, sampler="gibbs")
