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
from pm_perm.kernels._checks import (
    as_count,
    as_square_logits,
    check_admits_permutation,
    first_non_permutation,
)

__all__ = ["initial_state", "swap_mcmc_core", "swap_mcmc_sample", "swap_mcmc_chains"]


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


def initial_state(W2, init):
    """The chain's start for the validated weights ``W2`` (M, M): ``init`` checked to be a
    permutation of finite weight, or the mode (a maximum-weight matching) when None."""
    M = W2.shape[0]
    if init is None:
        check_admits_permutation(W2)
        # Start at the mode (maximum-weight matching); finite whenever any permutation is.
        cost = np.where(np.isfinite(W2), W2, -1e300)
        rows, cols = linear_sum_assignment(cost, maximize=True)
        y = np.empty(M, dtype=np.int64)
        y[rows] = cols
    else:
        y = np.asarray(init)
        if y.shape != (M,):
            raise ValueError(f"init must be a permutation of 0..{M - 1} (shape ({M},)); got "
                             f"shape {y.shape}")
        if not np.issubdtype(y.dtype, np.integer):
            raise ValueError(f"init must be a permutation of the integers 0..{M - 1}; got dtype "
                             f"{y.dtype} ({init!r}): pass integers, e.g. np.arange({M})")
        y = y.astype(np.int64).copy()
        if first_non_permutation(y) is not None:
            raise ValueError(f"init must be a permutation of 0..{M - 1} (each once); got {y}")
    bad = np.isneginf(W2[np.arange(M), y])
    if bad.any():
        rows = np.flatnonzero(bad)
        raise ValueError(f"init uses forbidden (-inf) entries of the logits, in rows "
                         f"{rows[:8].tolist()}: start from a permutation of finite weight, or "
                         "init=None (the max-weight matching)")
    return y


def swap_mcmc_sample(W, n_samples, rng=None, init=None, sweeps_per_sample=1, burn_in_sweeps=100):
    """Correlated MCMC draws of ``p(y) = exp(sum_i W[i, y[i]]) / perm(exp W)`` for ONE matrix.

    Parameters
    ----------
    W : array_like of float, shape (M, M)
    n_samples : int
    rng : numpy Generator, int or None
    init : None or int array (M,)
        Starting permutation of the integers ``0..M-1``; default the maximum-weight matching.
    sweeps_per_sample : int
        Thinning: M * sweeps_per_sample swap proposals between recorded draws (>= 1).
    burn_in_sweeps : int
        Discarded sweeps before the first recorded draw (>= 0).

    Returns
    -------
    samples : int64 ndarray (n_samples, M)
    acceptance_rate : float

    Raises
    ------
    ValueError
        For invalid logits, counts that are not integers in range (also NaN), an ``init`` that
        is not a permutation of ``0..M-1`` (named with what is wrong), and logits or an
        ``init`` under which the chain has no state of finite weight.

    Notes
    -----
    Approximate (MCMC): draws are correlated and only asymptotically distributed as ``p(y)``.
    Cost O(1) per proposal, any M. With forbidden edges the chain may be reducible (see the
    module docstring).
    """
    arr = as_square_logits(W)
    if arr.ndim != 2:
        raise ValueError(f"one (M, M) matrix expected; got shape {arr.shape}")
    n_samples = as_count(n_samples, "n_samples", 1)
    sweeps_per_sample = as_count(sweeps_per_sample, "sweeps_per_sample", 1)
    burn_in_sweeps = as_count(burn_in_sweeps, "burn_in_sweeps", 0)
    rng = np.random.default_rng(rng)
    M = arr.shape[0]
    y = initial_state(arr, init)
    if burn_in_sweeps:
        swap_mcmc_core(rng, arr, y, 1, M * burn_in_sweeps)
    out, acc = swap_mcmc_core(rng, arr, y, n_samples, M * sweeps_per_sample)
    return out, acc / max(1, n_samples * M * sweeps_per_sample)
