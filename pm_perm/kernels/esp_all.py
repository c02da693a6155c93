"""``log e_j(exp theta)`` for every count j = 0..K at once, by one guarded tilted DP.

One tilted Poisson-binomial DP (:mod:`pm_perm.kernels._tilted_dp`, tilted to ``E[S] = K/2``)
gives every ``q_j = P(S = j)``; as all terms are positive, the only way to lose accuracy is
underflow, so the guard checks that every requested ``q_j`` is at least ``ALL_K_GUARD``;
otherwise (tails beyond the double range, as for large D or extreme logits) it falls back to
the log-space DP (``logaddexp`` recursion, O(D K) transcendental operations, always accurate).
Both are O(D K). For all k at large D see the FFT product tree of
:mod:`pm_perm.kernels.esp_fft`.
"""

from __future__ import annotations

import math

import numpy as np

from pm_perm._numba import njit
from pm_perm.kernels._tilted_dp import (
    as_logits,
    check_max_count,
    invalid_logits,
    pb_step,
    scan_logits,
    tilted,
)

__all__ = [
    "ALL_K_GUARD",
    "log_esp_all",
    "log_esp_all_core",
    "log_esp_all_logspace",
    "log_esp_all_logspace_core",
]

#: Smallest tilted probability the all-k DP trusts (below it the log-space DP is used).
ALL_K_GUARD = 1e-250


@njit(cache=True)
def _logaddexp(a, b):
    if a < b:
        a, b = b, a
    if b == -np.inf:
        return a
    return a + math.log1p(math.exp(b - a))


@njit(cache=True)
def log_esp_all_logspace_core(theta, K):
    """Reference log-space DP: ``log e_j(exp theta)`` for j = 0..K. O(D K) logaddexp."""
    if invalid_logits(theta):
        return np.full(K + 1, np.nan)
    f = np.full(K + 1, -np.inf)
    f[0] = 0.0
    m = 0
    for t in theta:
        if t == -np.inf:
            continue
        m += 1
        for j in range(min(m, K), 0, -1):
            f[j] = _logaddexp(f[j], f[j - 1] + t)
    return f


@njit(cache=True)
def _log_esp_all_tilted(theta, K):
    """Tilted all-k DP: ``(log e_j for j = 0..K, ok)``; ``ok`` is False when the guard fails."""
    invalid, n_fin, lo, hi = scan_logits(theta)
    if invalid:
        return np.full(K + 1, np.nan), True
    top = min(K, n_fin)
    out = np.full(K + 1, -np.inf)
    out[0] = 0.0
    if top < 2:
        return out, False
    p, r, const0, c = tilted(theta, 0.5 * top, n_fin, np.int64(0), lo, hi)
    q = np.zeros(top + 1)
    q[0] = 1.0
    m = 0
    for d in range(theta.shape[0]):
        if p[d] == 0.0:
            continue
        m += 1
        pb_step(q, min(m, top), p[d], r[d])
    for j in range(1, top + 1):
        if not (q[j] >= ALL_K_GUARD and q[0] >= ALL_K_GUARD):
            return out, False
        out[j] = const0 + j * c + math.log(q[j])
    return out, True


@njit(cache=True)
def log_esp_all_core(theta, K):
    """``log e_j(exp theta)`` for j = 0..K: guarded tilted DP, log-space fallback. O(D K)."""
    out, ok = _log_esp_all_tilted(theta, K)
    if ok:
        return out
    return log_esp_all_logspace_core(theta, K)


@njit(cache=True)
def _log_esp_all_batch(theta, K, logspace):
    out = np.empty((theta.shape[0], K + 1))
    for i in range(theta.shape[0]):
        if logspace:
            out[i] = log_esp_all_logspace_core(theta[i], K)
        else:
            out[i] = log_esp_all_core(theta[i], K)
    return out


def log_esp_all(theta, K=None):
    """``log e_j(exp theta)`` for j = 0..K (default K = D), shape ``(*batch, K + 1)``.

    Guarded tilted DP (accurate whenever every tilted ``P(S = j) >= 1e-250``), falling back
    to the log-space DP otherwise; both O(D K). Entries with j above the number of finite
    logits are ``-inf``. ``ValueError`` for invalid logits (NaN, ``+inf``, none in the last
    axis) or a ``K`` that is not a non-negative integer.
    """
    theta = as_logits(theta)
    D = theta.shape[-1]
    K = D if K is None else check_max_count(K, D)
    th = theta.reshape(-1, D)
    return _log_esp_all_batch(th, K, False).reshape(*theta.shape[:-1], K + 1)


def log_esp_all_logspace(theta, K=None):
    """Same as :func:`log_esp_all` by the plain log-space DP (the reference; O(D K) logaddexp)."""
    theta = as_logits(theta)
    D = theta.shape[-1]
    K = D if K is None else check_max_count(K, D)
    th = theta.reshape(-1, D)
    return _log_esp_all_batch(th, K, True).reshape(*theta.shape[:-1], K + 1)
