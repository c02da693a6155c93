"""Stochastic MAP for the linear permutation model with Monte Carlo gradients.

Model (Petterson et al. 2009): ``W_n = features_n @ theta`` (``features`` (N, M, M, D)), observed
permutations ``y_n`` with ``p(y_n) = exp(sum_i W_n[i, y_n[i]]) / perm(exp W_n)``. The gradient of
the log-likelihood is ``sum_n phi(y_n) - E_theta[phi(y)]`` with ``phi(y) = sum_i features[i, y[i]]``
(the paper's eq. 15); the expectation is replaced by an average over ``n_samples`` draws per
instance, from the exact Huber-Law sampler (unbiased gradient) or from a persistent swap-MCMC
chain per instance (biased for short chains; "persistent contrastive divergence" style).

Optimiser: Robbins-Monro ascent with step ``step0 / (1 + t)**0.6`` on the per-instance-averaged
gradient, plus a Gaussian prior ``N(0, prior_sd^2)`` (MAP) if ``prior_sd`` is given, and Polyak
averaging of the iterates over the second half of the run. Convergence criterion: the norm of the
mean gradient over the last ``window`` iterations is below ``tol`` (the Monte Carlo noise of that
mean shrinks as 1/sqrt(window * n_samples * N)); otherwise ``converged=False`` after
``max_iter`` iterations (reported, not raised). Cost per iteration: ``N * n_samples`` draws.
Use it where exact (M <= 26) and Bethe (approximate normaliser) are not wanted.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pm_perm.kernels._checks import as_float_array, first_non_permutation
from pm_perm.kernels.huber_law import huber_law_sample
from pm_perm.kernels.swap_mcmc import initial_state, swap_mcmc_core

__all__ = ["StochasticMapResult", "stochastic_map"]


@dataclass
class StochasticMapResult:
    """Result of :func:`stochastic_map`."""

    theta: np.ndarray  #: Polyak-averaged estimate (second half of the iterates)
    converged: bool  #: whether the windowed mean-gradient criterion was met
    n_iter: int
    grad_norm: float  #: norm of the mean gradient over the last window
    history: np.ndarray  #: (n_iter, D) iterates


def stochastic_map(
    features,
    observed,
    theta0=None,
    *,
    sampler="huber_law",
    n_samples=20,
    max_iter=1000,
    step0=0.5,
    tol=0.02,
    window=50,
    prior_sd=None,
    sweeps_per_sample=2,
    max_trials=100_000,
    rng=None,
):
    """Fit ``theta`` by stochastic gradient ascent with Monte Carlo expectations.

    Parameters
    ----------
    features : array_like of float, shape (N, M, M, D)
    observed : array_like of int, shape (N, M)
        Observed permutations, ``observed[n, i]`` = column matched to row ``i``.
    theta0 : array_like (D,), optional (default zeros)
    sampler : {"huber_law", "swap"}
        Exact Huber-Law draws (unbiased gradients; fails with ``HuberLawTrialsExceeded`` when the
        weights are too spread) or persistent swap-MCMC chains (any M; biased for short chains).
    n_samples, max_iter, step0, tol, window, prior_sd, sweeps_per_sample, max_trials, rng
        See the module docstring.

    Returns
    -------
    StochasticMapResult
    """
    X = as_float_array(features, "features", min_ndim=4)
    if X.ndim != 4 or X.shape[1] != X.shape[2]:
        raise ValueError(f"features must have shape (N, M, M, D); got {X.shape}")
    if not np.isfinite(X).all():
        raise ValueError("features must be finite")
    N, M, _, D = X.shape
    Y = np.asarray(observed)
    if Y.shape != (N, M) or not np.issubdtype(Y.dtype, np.integer):
        raise ValueError(f"observed must be an integer array of shape ({N}, {M}); got {Y.shape}")
    row = first_non_permutation(Y)
    if row is not None:
        raise ValueError(f"each observed row must be a permutation of 0..{M - 1}; row {row[0]} "
                         f"is {Y[row].tolist()}")
    if sampler not in ("huber_law", "swap"):
        raise ValueError(f"sampler must be 'huber_law' or 'swap'; got {sampler!r}")
    if n_samples < 1 or max_iter < 1 or window < 1 or not step0 > 0 or not tol > 0:
        raise ValueError("n_samples, max_iter, window >= 1 and step0, tol > 0 are required")
    rng = np.random.default_rng(rng)
    theta = np.zeros(D) if theta0 is None else np.array(theta0, dtype=float).reshape(D)
    rows = np.arange(M)
    phi_obs = X[np.arange(N)[:, None], rows, Y].sum(axis=(0, 1)) / N  # (D,)
    chains = None
    if sampler == "swap":
        chains = [initial_state(np.ascontiguousarray(X[n] @ theta), None) for n in range(N)]
    hist = np.empty((max_iter, D))
    grads = np.empty((max_iter, D))
    converged = False
    t = 0
    for t in range(max_iter):
        W = X @ theta  # (N, M, M)
        e_phi = np.zeros(D)
        for n in range(N):
            if sampler == "huber_law":
                s = huber_law_sample(W[n], size=(n_samples,), rng=rng, max_trials=max_trials)
            else:
                s, _ = swap_mcmc_core(
                    rng, np.ascontiguousarray(W[n]), chains[n], n_samples, M * sweeps_per_sample
                )
            e_phi += X[n][rows, s].sum(axis=1).mean(axis=0)
        g = phi_obs - e_phi / N
        if prior_sd is not None:
            g = g - theta / (prior_sd**2 * N)
        grads[t] = g
        theta = theta + step0 / (1.0 + t) ** 0.6 * g
        hist[t] = theta
        if t + 1 >= window:
            gn = float(np.linalg.norm(grads[t + 1 - window : t + 1].mean(axis=0)))
            if gn < tol:
                converged = True
                break
    n_iter = t + 1
    gn = float(np.linalg.norm(grads[max(0, n_iter - window) : n_iter].mean(axis=0)))
    est = hist[n_iter // 2 : n_iter].mean(axis=0)
    return StochasticMapResult(est, converged, n_iter, gn, hist[:n_iter].copy())
