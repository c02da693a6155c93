"""Exact draws from the Mallows model ``p(R) ∝ exp(-theta d(R, rho))`` (``theta = alpha / n``).

Rank form: ``R[i]`` is the 0-based rank of item ``i``; each sampler draws ``sigma`` with
``p(sigma) ∝ exp(-theta d(sigma, id))`` and returns ``R[i] = sigma[rho[i]]`` (every distance is
right-invariant, so ``d(R, rho) = d(sigma, id)``).

* footrule, spearman, hamming (separable): ``R`` is drawn from the permutation exponential
  family with ``W[i, j] = -theta f(j, rho[i])`` (:func:`separable_logits`) by the exact sampler
  of :mod:`pm_perm.kernels.permutation_sampler` (O(n 2^n), n <= 26).
* kendall: the repeated-insertion model, O(n^2): element j is inserted with ``v`` of the ``j``
  smaller ones after it (``v`` inversions), ``p(v) ∝ exp(-theta v)``, ``v = 0..j``.
* cayley: the cycle construction (Feller coupling), O(n): element j opens a new cycle with
  probability ``1 / (1 + j exp(-theta))``, else follows a uniformly chosen earlier element in
  its cycle (one more transposition).
* ulam: the distance ``d`` from its exact distribution (``log N_d - theta d``), then a uniform
  permutation with longest increasing subsequence ``n - d``: a shape ``lambda`` with
  ``lambda_1 = n - d`` with probability ∝ ``(f^lambda)^2`` (over the partitions of n), two
  uniform standard Young tableaux of that shape by the hook walk (Greene, Nijenhuis and Wilf
  1979) and the inverse Robinson-Schensted correspondence. O(p(n) n) per draw for the shape.

The kernels take validated input (``rho`` a permutation, ``theta >= 0`` finite) and a numba or
NumPy ``Generator``.
"""

from __future__ import annotations

import math

import numpy as np

from pm_perm._numba import njit
from pm_perm.kernels.mallows import log_syt_count, next_partition

__all__ = [
    "SEPARABLE",
    "cayley_draw_into",
    "kendall_draw_into",
    "separable_logits",
    "ulam_draw_into",
]

#: Distances drawn through the permutation exponential family, with their code in
#: :func:`separable_logits`.
SEPARABLE = {"footrule": 0, "spearman": 1, "hamming": 2}


@njit(cache=True)
def separable_logits(rho, theta, code):
    """``W[i, j] = -theta f(j, rho[i])`` with ``f`` = ``|j - r|`` (code 0, footrule),
    ``(j - r)^2`` (1, spearman) or ``[j != r]`` (2, hamming)."""
    n = rho.shape[0]
    W = np.empty((n, n))
    for i in range(n):
        r = rho[i]
        for j in range(n):
            diff = j - r
            if code == 0:
                f = abs(diff)
            elif code == 1:
                f = diff * diff
            else:
                f = 1 if diff != 0 else 0
            W[i, j] = -theta * f
    return W


@njit(cache=True)
def _to_ranks(sigma, rho, out):
    for i in range(rho.shape[0]):
        out[i] = sigma[rho[i]]


@njit(cache=True)
def _categorical(rng, logw):
    """An index drawn with probabilities ∝ exp(logw)."""
    m = logw.max()
    total = 0.0
    for v in logw:
        total += math.exp(v - m)
    target = rng.random() * total
    acc = 0.0
    last = 0
    for k in range(logw.shape[0]):
        t = math.exp(logw[k] - m)
        if t > 0.0:
            last = k
            acc += t
            if acc > target:
                return k
    return last  # rounding: the target fell past the float sum


@njit(cache=True)
def kendall_draw_into(rng, rho, theta, out):
    """One draw under the Kendall distance into ``out`` (n,) int64."""
    n = rho.shape[0]
    order = np.empty(n, dtype=np.int64)  # consensus ranks in the drawn order
    for j in range(n):
        logw = -theta * np.arange(j + 1).astype(np.float64)
        v = _categorical(rng, logw)
        pos = j - v
        for p in range(j, pos, -1):
            order[p] = order[p - 1]
        order[pos] = j
    sigma = np.empty(n, dtype=np.int64)
    for p in range(n):
        sigma[order[p]] = p
    _to_ranks(sigma, rho, out)


@njit(cache=True)
def cayley_draw_into(rng, rho, theta, out):
    """One draw under the Cayley distance into ``out`` (n,) int64."""
    n = rho.shape[0]
    sigma = np.empty(n, dtype=np.int64)
    q = math.exp(-theta)
    for j in range(n):
        sigma[j] = j
        if j > 0 and rng.random() * (1.0 + j * q) >= 1.0:
            k = min(int(rng.random() * j), j - 1)
            sigma[j] = sigma[k]
            sigma[k] = j
    _to_ranks(sigma, rho, out)


@njit(cache=True)
def _draw_shape(rng, n, l1, log_total, parts):
    """A partition of ``n`` with first part ``l1``, with probability ``(f^lambda)^2 /
    exp(log_total)``, into ``parts``; returns its length."""
    parts[0] = l1
    rem = n - l1
    length = 1
    while rem > 0:  # the first partition with first part l1 in reverse lexicographic order
        take = min(l1, rem)
        parts[length] = take
        rem -= take
        length += 1
    conj = np.zeros(n + 1, dtype=np.int64)
    lgn = math.lgamma(n + 1)
    target = rng.random()
    acc = 0.0
    best = parts.copy()
    best_len = length
    while True:
        acc += math.exp(2.0 * log_syt_count(parts, length, conj, lgn) - log_total)
        best[:] = parts
        best_len = length
        if acc > target:
            break
        length = next_partition(parts, length)
        if length == 0 or parts[0] != l1:
            break  # rounding: keep the last shape with first part l1
    parts[:] = best
    return best_len


@njit(cache=True)
def _hook_walk(rng, parts, length, n, T):
    """A uniform standard Young tableau of shape ``parts[:length]`` into ``T`` (entries 0..n-1),
    by the hook walk (Greene, Nijenhuis and Wilf 1979)."""
    rows = parts[:length].copy()
    cols = np.zeros(rows[0], dtype=np.int64)
    for i in range(length):
        for j in range(rows[i]):
            cols[j] += 1
    for m in range(n - 1, -1, -1):
        t = min(int(rng.random() * (m + 1)), m)  # a uniform remaining cell
        i = 0
        while t >= rows[i]:
            t -= rows[i]
            i += 1
        j = t
        while True:
            arm = rows[i] - j - 1
            leg = cols[j] - i - 1
            if arm + leg == 0:
                break
            s = min(int(rng.random() * (arm + leg)), arm + leg - 1)
            if s < arm:
                j = j + 1 + s
            else:
                i = i + 1 + (s - arm)
        T[i, j] = m
        rows[i] -= 1
        cols[j] -= 1


@njit(cache=True)
def _inverse_rsk(P, Q, parts, length, n, word):
    """The permutation ``word`` (values 0..n-1) whose insertion and recording tableaux are
    ``P`` and ``Q`` (shape ``parts[:length]``)."""
    rows = parts[:length].copy()
    for m in range(n - 1, -1, -1):
        i = 0
        while True:  # the cell of m in Q: the end of some row
            if rows[i] > 0 and Q[i, rows[i] - 1] == m:
                break
            i += 1
        rows[i] -= 1
        x = P[i, rows[i]]
        for r in range(i - 1, -1, -1):  # reverse bump: the largest entry of row r below x
            k = rows[r] - 1
            while P[r, k] > x:
                k -= 1
            P[r, k], x = x, P[r, k]
        word[m] = x


@njit(cache=True)
def ulam_draw_into(rng, rho, theta, d_values, log_counts, out):
    """One draw under the Ulam distance into ``out`` (n,) int64; ``d_values``, ``log_counts``:
    the exact distribution of the distance (:func:`pm_perm.kernels.mallows.log_distance_counts`
    for ``"ulam"`` and this n)."""
    n = rho.shape[0]
    k = _categorical(rng, log_counts - theta * d_values)
    l1 = n - int(d_values[k])
    parts = np.zeros(n, dtype=np.int64)
    length = _draw_shape(rng, n, l1, log_counts[k], parts)
    P = np.zeros((length, parts[0]), dtype=np.int64)
    Q = np.zeros((length, parts[0]), dtype=np.int64)
    _hook_walk(rng, parts, length, n, P)
    _hook_walk(rng, parts, length, n, Q)
    sigma = np.empty(n, dtype=np.int64)
    _inverse_rsk(P, Q, parts, length, n, sigma)
    _to_ranks(sigma, rho, out)
