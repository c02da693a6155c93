"""Swap (transposition) Metropolis kernel over permutations.

Target: ``p(y) proportional to exp(sum_i W[i, y[i]])``. Proposal: pick a pair of rows ``i != j``
uniformly and swap their columns; the proposal is symmetric, so the Metropolis acceptance
probability is ``min(1, exp(W[i, y[j]] + W[j, y[i]] - W[i, y[i]] - W[j, y[j]]))``. Each step costs
O(1); a "sweep" is M steps. Transpositions generate the symmetric group, so the chain is
irreducible when every edge is allowed; with ``-inf`` (forbidden) edges it may be REDUCIBLE (a
swap can need to pass through a forbidden state), so results then depend on the start and are
not guaranteed to target ``p(y)``: prefer the exact samplers there. This is an approximate
(MCMC, correlated draws) method for any M; mixing slows down as the weights get more spread.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import linear_sum_assignment

from pm_perm._numba import njit
from pm_perm.kernels._checks import as_square_logits

__all__ = ["swap_mcmc_core", "swap_mcmc_sample", "swap_mcmc_chains"]


@njit(cache=True)
def swap_mcmc_core(rng, W2, y, n_samples, steps_per_sample):
    """Run the chain in place from ``y`` (modified) and return ``(samples, n_accepted)``.

    ``W2`` is a validated C-contiguous (M, M) float64 array, ``y`` an int64 permutation with
    finite weight. Records the state every ``steps_per_sample`` steps.
    """
    M = W2.shape[0]
    out = np.empty((n_samples, M), dtype=np.int64)
    acc = 0
    for s in range(n_samples):
        if M >= 2:
            for _ in range(steps_per_sample):
                i = rng.integers(0, M)
                j = rng.integers(0, M - 1)
                if j >= i:
                    j += 1
                yi = y[i]
                yj = y[j]
                d = W2[i, yj] + W2[j, yi] - W2[i, yi] - W2[j, yj]
                if d >= 0.0 or rng.random() < math.exp(d):
                    y[i] = yj
                    y[j] = yi
                    acc += 1
        for k in range(M):
            out[s, k] = y[k]
    return out, acc


@njit(cache=True)
def swap_mcmc_chains(rng, W2, Y, n_steps):
    """Advance many independent chains (rows of ``Y``, in place) by ``n_steps`` steps each."""
    n = Y.shape[0]
    acc = 0
    for c in range(n):
        _, a = swap_mcmc_core(rng, W2, Y[c], 1, n_steps)
        acc += a
    return acc


def _init_state(W2, init):
    M = W2.shape[0]
    if init is None:
        # Start at the mode (maximum-weight matching); finite whenever any permutation is.
        cost = np.where(np.isfinite(W2), W2, -1e300)
        rows, cols = linear_sum_assignment(cost, maximize=True)
        y = np.empty(M, dtype=np.int64)
        y[rows] = cols
    else:
        y = np.asarray(init)
        if y.shape != (M,) or not np.issubdtype(y.dtype, np.integer):
            raise ValueError(f"init must be an integer permutation of shape ({M},); got {y.shape}")
        y = y.astype(np.int64).copy()
        if not (np.sort(y) == np.arange(M)).all():
            raise ValueError("init must be a permutation of 0..M-1")
    if not np.isfinite(W2[np.arange(M), y].sum()):
        raise ValueError("no permutation with finite weight (or init uses a forbidden -inf edge)")
    return y


def swap_mcmc_sample(W, n_samples, rng=None, init=None, sweeps_per_sample=1, burn_in_sweeps=100):
    """Correlated MCMC draws of ``p(y) = exp(sum_i W[i, y[i]]) / perm(exp W)`` for ONE matrix.

    Parameters
    ----------
    W : array_like of float, shape (M, M)
    n_samples : int
    rng : numpy Generator, int or None
    init : None or int array (M,)
        Starting permutation; default the maximum-weight matching.
    sweeps_per_sample : int
        Thinning: M * sweeps_per_sample swap proposals between recorded draws.
    burn_in_sweeps : int
        Discarded sweeps before the first recorded draw.

    Returns
    -------
    samples : int64 ndarray (n_samples, M)
    acceptance_rate : float

    Notes
    -----
    Approximate (MCMC): draws are correlated and only asymptotically distributed as ``p(y)``.
    Cost O(1) per proposal, any M. With forbidden edges the chain may be reducible (see the
    module docstring).
    """
    arr = as_square_logits(W)
    if arr.ndim != 2:
        raise ValueError(f"one (M, M) matrix expected; got shape {arr.shape}")
    n_samples = int(n_samples)
    if n_samples < 1 or sweeps_per_sample < 1 or burn_in_sweeps < 0:
        raise ValueError("n_samples, sweeps_per_sample must be >= 1 and burn_in_sweeps >= 0")
    rng = np.random.default_rng(rng)
    M = arr.shape[0]
    y = _init_state(arr, init)
    if burn_in_sweeps:
        swap_mcmc_core(rng, arr, y, 1, M * int(burn_in_sweeps))
    out, acc = swap_mcmc_core(rng, arr, y, n_samples, M * int(sweeps_per_sample))
    return out, acc / max(1, n_samples * M * int(sweeps_per_sample))
