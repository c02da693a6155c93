"""Compiled sweeps for a Mallows model with a latent consensus: leap-and-shift moves of ``rho``
scored by the change of the summed distance, and slice updates of ``alpha`` on the exact
normaliser table.

The model (Vitelli et al. 2018; BayesMallows' default with ``W = 0``): ``N`` observed rankings
``R_a`` (rank form), ``p(R_a | rho, alpha) = exp(-(alpha / n) d(R_a, rho)) / Z_n(alpha)``, a
permutation-exponential-family prior ``p(rho) ∝ exp(sum_i W[i, rho_i])`` and a prior on alpha
``log p(alpha) = a log(alpha) - b alpha - c alpha^2 + const`` (Exponential, Gamma, HalfNormal).
Given ``S(rho) = sum_a d(R_a, rho)``, the log posterior is ``log p(alpha) - (alpha / n) S(rho) -
N log Z_n(alpha) + sum_i W[i, rho_i]``, so:

* a leap-and-shift of ``rho`` (an item moves by at most ``L`` ranks, the items in between shift
  by one; :mod:`pm_perm.kernels.leap_shift`) changes only the terms of the shifted items: for a
  SEPARABLE distance (footrule, spearman, hamming) ``S = sum_i C[i, rho_i]`` with ``C[i, j] =
  sum_a f(R_a[i], j)`` (:func:`consensus_cost`), for kendall ``S = sum_{rho_i < rho_j} B[i, j]``
  with ``B[i, j] = #{a : R_a[i] > R_a[j]}``: O(L) per proposal instead of a model evaluation;
* ``alpha`` given ``S`` is one-dimensional: slice sampling (Neal 2003, stepping out with at most
  ``m = 32`` steps of width ``w``, then shrinkage) on ``u = log(alpha)`` (the log transform PyMC
  gives these priors, with its Jacobian ``u``), where ``log Z_n(alpha)`` is the log-sum-exp over
  the exact distance distribution (:func:`pm_perm.kernels.mallows.log_distance_counts`).

Used by :class:`pm_perm.inference.mallows_consensus.MallowsConsensusGibbs`.

References
----------
V. Vitelli, O. Sorensen, M. Crispino, A. Frigessi, E. Arjas, "Probabilistic preference learning
with the Mallows rank model", JMLR 18 (2018), section 2.4.
R. M. Neal, "Slice sampling", Annals of Statistics 31 (2003), figures 3 and 5.
"""

from __future__ import annotations

import ctypes
import math

import numpy as np
from numba import types
from numba.extending import intrinsic

from pm_perm._numba import njit
from pm_perm.kernels._bitgen import generator_at

__all__ = ["CONSENSUS_KINDS", "bitgen_fields", "consensus_cost", "consensus_sweeps",
           "summed_distance"]

#: The distances with a compiled consensus update and their kernel codes (0: separable cost
#: matrix ``C``, 1: kendall's pair matrix ``B``).
CONSENSUS_KINDS = {"footrule": 0, "spearman": 0, "hamming": 0, "kendall": 1}

_M_SLICE = 32  # stepping-out limit of the slice sampler (Neal's m)


def consensus_cost(R, distance: str) -> np.ndarray:
    """The matrix that the summed distance ``S(rho) = sum_a d(R_a, rho)`` reads.

    Parameters
    ----------
    R : array_like of int, shape (N, n)
        Observed rankings in rank form (``R[a, i]`` = the 0-based rank of item ``i``).
    distance : {"footrule", "spearman", "hamming", "kendall"}

    Returns
    -------
    ndarray of float64, shape (n, n)
        Separable distances: ``C[i, j] = sum_a f(R[a, i], j)`` (``f`` = ``|x - j|``,
        ``(x - j)^2`` or ``[x != j]``), so ``S = sum_i C[i, rho_i]``; kendall: ``B[i, j] = #{a :
        R[a, i] > R[a, j]}``, so ``S = sum_{i, j : rho_i < rho_j} B[i, j]``.

    Examples
    --------
    >>> consensus_cost([[0, 1, 2], [1, 0, 2]], "footrule").tolist()
    [[1.0, 1.0, 3.0], [1.0, 1.0, 3.0], [4.0, 2.0, 0.0]]
    """
    R = np.asarray(R, dtype=np.int64)
    if R.ndim != 2 or distance not in CONSENSUS_KINDS:
        raise ValueError(f"consensus_cost needs rankings of shape (N, n) and a distance in "
                         f"{sorted(CONSENSUS_KINDS)}; got shape {R.shape}, {distance!r}")
    if distance == "kendall":
        return (R[:, :, None] > R[:, None, :]).sum(axis=0).astype(np.float64)
    diff = R[:, :, None] - np.arange(R.shape[1])
    f = {"footrule": np.abs(diff), "spearman": diff * diff, "hamming": diff != 0}[distance]
    return f.sum(axis=0).astype(np.float64)


def bitgen_fields(rng: np.random.Generator) -> np.ndarray:
    """numpy's ``bitgen_t`` of ``rng`` (state and the next_uint64 / next_uint32 / next_double
    function pointers) as a uint64 array of 4, for :func:`consensus_sweeps`: a compiled function
    draws from ``rng``'s own stream through it, without the ~35 µs that numba takes to unbox a
    ``Generator`` argument at every call. Keep ``rng`` alive while the array is used."""
    c = rng.bit_generator.ctypes
    return np.array([c.state_address] + [ctypes.cast(f, ctypes.c_void_p).value
                                         for f in (c.next_uint64, c.next_uint32, c.next_double)],
                    dtype=np.uint64)


@intrinsic
def _uint64_pointer(typingctx, arr):
    """The data pointer of a contiguous uint64 array as ``CPointer(uint64)``."""
    if not (isinstance(arr, types.Array) and arr.dtype == types.uint64):
        return None
    sig = types.CPointer(types.uint64)(arr)

    def codegen(context, builder, sig, args):
        ary = context.make_array(arr)(context, builder, args[0])
        return builder.bitcast(ary.data, context.get_value_type(sig.return_type))

    return sig, codegen


@njit(cache=True)
def summed_distance(rho, kind, C):
    """``S(rho)`` from :func:`consensus_cost`'s matrix ``C`` (``kind`` as in
    :data:`CONSENSUS_KINDS`)."""
    n = rho.shape[0]
    s = 0.0
    if kind == 0:
        for i in range(n):
            s += C[i, rho[i]]
    else:
        for i in range(n):
            for j in range(n):
                if rho[i] < rho[j]:
                    s += C[i, j]
    return s


@njit(cache=True)
def _log_z(alpha_over_n, d_values, log_counts):
    m = -np.inf
    for k in range(d_values.shape[0]):
        t = log_counts[k] - alpha_over_n * d_values[k]
        if t > m:
            m = t
    s = 0.0
    for k in range(d_values.shape[0]):
        s += math.exp(log_counts[k] - alpha_over_n * d_values[k] - m)
    return m + math.log(s)


@njit(cache=True)
def _alpha_target(u, S, n, n_obs, d_values, log_counts, prior):
    """Log density of ``u = log(alpha)`` given ``S`` (up to a constant): prior, Jacobian ``u``,
    likelihood."""
    alpha = math.exp(u)
    if not math.isfinite(alpha):
        return -np.inf
    lp = prior[0] * u - prior[1] * alpha - prior[2] * alpha * alpha + u
    return lp - alpha / n * S - n_obs * _log_z(alpha / n, d_values, log_counts)


@njit(cache=True)
def _slice_alpha(rng, u, S, n, n_obs, d_values, log_counts, prior, w):
    """One slice-sampling update of ``u`` (stepping out, then shrinkage; Neal 2003)."""
    f0 = _alpha_target(u, S, n, n_obs, d_values, log_counts, prior)
    log_y = f0 + math.log(rng.random())
    left = u - w * rng.random()
    right = left + w
    j = int(_M_SLICE * rng.random())
    k = _M_SLICE - 1 - j
    while j > 0 and _alpha_target(left, S, n, n_obs, d_values, log_counts, prior) > log_y:
        left -= w
        j -= 1
    while k > 0 and _alpha_target(right, S, n, n_obs, d_values, log_counts, prior) > log_y:
        right += w
        k -= 1
    while True:
        x = left + rng.random() * (right - left)
        if _alpha_target(x, S, n, n_obs, d_values, log_counts, prior) > log_y:
            return x
        if x < u:
            left = x
        else:
            right = x


@njit(cache=True)
def _leap_moves(rng, rho, inv, n_moves, L, kind, C, W, coef, S):
    """``n_moves`` leap-and-shift proposals on ``rho`` (and its inverse ``inv``) with target
    ``-coef * S(rho) + sum_i W[i, rho_i]``; returns (new S, accepted count)."""
    n = rho.shape[0]
    acc = 0
    for _ in range(n_moves):
        item = rng.integers(0, n)
        old = rho[item]
        w_old = min(n - 1, old + L) - max(0, old - L)
        new = max(0, old - L) + rng.integers(0, w_old)
        if new >= old:
            new += 1
        dS = 0.0
        dW = W[item, new] - W[item, old]
        if new > old:
            for r in range(old + 1, new + 1):
                k = inv[r]
                dW += W[k, r - 1] - W[k, r]
                dS += C[k, item] - C[item, k] if kind == 1 else C[k, r - 1] - C[k, r]
        else:
            for r in range(new, old):
                k = inv[r]
                dW += W[k, r + 1] - W[k, r]
                dS += C[item, k] - C[k, item] if kind == 1 else C[k, r + 1] - C[k, r]
        if kind == 0:
            dS += C[item, new] - C[item, old]
        log_h = 0.0
        if abs(new - old) != 1:
            w_new = min(n - 1, new + L) - max(0, new - L)
            log_h = math.log(w_old) - math.log(w_new)
        if math.log(rng.random()) < -coef * dS + dW + log_h:
            if new > old:
                for r in range(old + 1, new + 1):
                    k = inv[r]
                    rho[k] = r - 1
                    inv[r - 1] = k
            else:
                for r in range(old - 1, new - 1, -1):
                    k = inv[r]
                    rho[k] = r + 1
                    inv[r + 1] = k
            rho[item] = new
            inv[new] = item
            S += dS
            acc += 1
    return S, acc


@njit(cache=True)
def consensus_sweeps(bitgen, rho, u, n_sweeps, n_moves, L, kind, C, W, d_values, log_counts,
                     n_obs, prior, w, update_alpha, update_rho):
    """``n_sweeps`` rounds of (one slice update of ``u = log(alpha)``, ``n_moves`` leap-and-shift
    proposals of ``rho``), in place on ``rho``, drawing from the numpy generator whose
    :func:`bitgen_fields` are ``bitgen``.

    Returns
    -------
    (u, accepted leaps, status): status 0, or 1 when ``rho`` is not a permutation of
    ``0..n-1`` (nothing was done).
    """
    n = rho.shape[0]
    inv = np.full(n, -1, dtype=np.int64)
    for i in range(n):
        r = rho[i]
        if r < 0 or r >= n or inv[r] >= 0:
            return u, 0, 1
        inv[r] = i
    rng = generator_at(_uint64_pointer(bitgen))
    S = summed_distance(rho, kind, C)
    acc = 0
    for _ in range(n_sweeps):
        if update_alpha:
            u = _slice_alpha(rng, u, S, n, n_obs, d_values, log_counts, prior, w)
        if update_rho and n >= 2:
            S, a = _leap_moves(rng, rho, inv, n_moves, L, kind, C, W, math.exp(u) / n, S)
            acc += a
    return u, acc, 0
