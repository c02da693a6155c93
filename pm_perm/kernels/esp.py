"""Conditional-Bernoulli normaliser ``log e_k``, its marginals and covariance, for one count k.

``log e_k(exp theta)`` (the normaliser ``log Z_k`` of ``p(y | sum y = k)``) by the tilted
Poisson-binomial DP of :mod:`pm_perm.kernels._tilted_dp`, tilted so that ``E[S] = k``. Cost
O(D k) time, O(k) memory.

Marginals ``p(y_d = 1 | k) = p_d P(S_{-d} = k - 1) / P(S = k)`` (the gradient of
``log e_k``) come from the prefix pmf ``F`` and suffix pmf ``G`` of the same tilted DP:
``P(S_{-d} = k - 1) = sum_j F_{<d}[j] G_{>d}[k - 1 - j]``, again a sum of positive terms. The
suffix table is kept whole while it is small (``FULL_SUFFIX_MAX`` doubles); beyond that it is
checkpointed every ``B = ceil(sqrt(D))`` items and recomputed block by block, so memory is
O(sqrt(D) k) and time a small constant times the value's.

The covariance ``Cov(y | k) @ v`` (the Hessian of ``log e_k`` times ``v``) carries forward-mode
tangents through the same prefix and checkpointed suffix DPs.
"""

from __future__ import annotations

import math

import numpy as np
from numba import carray

from pm_perm._numba import njit
from pm_perm.kernels._checks import as_float_array, c_array
from pm_perm.kernels._tilted_dp import (
    as_logits,
    copy_1d,
    dot_reversed,
    edge_value,
    logits_and_counts,
    pb_step,
    scan_logits,
    suffix_block,
    suffix_checkpoints_into,
    suffix_full,
    tilt_into,
    tilted,
)

__all__ = [
    "ESP_COVARIANCE_DOT",
    "ESP_MARGINALS",
    "ESP_VALUE",
    "FULL_SUFFIX_MAX",
    "conditional_covariance_dot_core",
    "conditional_marginals",
    "log_esp",
    "log_esp_and_marginals",
    "log_esp_and_marginals_core",
    "log_esp_core",
    "make_esp_kernel",
    "nchoosek_marginals",
]


@njit(cache=True)
def log_esp_core(theta, k):
    """``log e_k(exp theta)`` for one logit vector ``theta`` (D,) and count ``k``. O(D k).

    NaN or ``+inf`` logits give NaN (the public wrappers reject them before).
    """
    D = theta.shape[0]
    invalid, n_fin, lo, hi = scan_logits(theta)
    if invalid:
        return np.nan
    edge = edge_value(theta, k, n_fin)
    if not np.isnan(edge):
        return edge
    w = np.zeros(3 * D + k + 1)  # one allocation: p, r, e, q
    p = w[:D]
    r = w[D:2 * D]
    const, _ = tilt_into(theta, float(k), n_fin, k, lo, hi, p, r, w[2 * D:3 * D])
    q = w[3 * D:]
    q[0] = 1.0
    m = 0
    for d in range(D):
        if p[d] == 0.0:
            continue
        m += 1
        pb_step(q, min(m, k), p[d], r[d])
    return const + math.log(q[k])


#: Largest suffix table ``(D + 1) (k + 1)`` (doubles) that :func:`log_esp_and_marginals_core`
#: keeps whole; beyond it, checkpoints every ``ceil(sqrt(D))`` items and recomputes each block.
FULL_SUFFIX_MAX = 4096


@njit(cache=True)
def log_esp_and_marginals_core(theta, k):
    """``(log e_k(exp theta), p(y_d = 1 | sum y = k))`` for one vector. O(D k) time (a small
    constant times the value's). The marginals are the gradient of ``log e_k`` and sum to k.
    When ``e_k = 0`` (k < 0 or more than the finite logits) they are all 0.

    Memory: the suffix pmfs ``G_{>d}`` (D + 1 rows of k + 1) when they fit ``FULL_SUFFIX_MAX``,
    else O(sqrt(D) k): checkpoints every ``B = ceil(sqrt(D))`` items, each block's rows
    recomputed from its checkpoint by the same steps (so both give the same bits). One
    allocation per call (the marginals returned are a view of it).
    """
    D = theta.shape[0]
    invalid, n_fin, lo, hi = scan_logits(theta)
    if invalid:
        return np.nan, np.full(D, np.nan)
    edge = edge_value(theta, k, n_fin)
    if not np.isnan(edge):
        marg = np.zeros(D)
        if k == n_fin and k > 0:
            for d in range(D):
                if theta[d] != -np.inf:
                    marg[d] = 1.0
        return edge, marg
    K1 = k + 1
    full = (D + 1) * K1 <= FULL_SUFFIX_MAX
    B = D if full else max(1, int(math.ceil(math.sqrt(D))))
    nb = (D + B - 1) // B
    # one allocation: marg, p, r, e (D each), f, g (k + 1 each), ck (nb rows), buf (B + 1 rows)
    w = np.zeros(4 * D + (2 + nb + B + 1) * K1)
    marg = w[:D]
    p = w[D:2 * D]
    r = w[2 * D:3 * D]
    const, _ = tilt_into(theta, float(k), n_fin, k, lo, hi, p, r, w[3 * D:4 * D])
    o = 4 * D
    f = w[o:o + K1]
    g = w[o + K1:o + 2 * K1]
    o += 2 * K1
    ck = w[o:o + nb * K1].reshape((nb, K1))
    buf = w[o + nb * K1:].reshape((B + 1, K1))
    if full:  # one backward pass: buf[i] = G_{>=i} for i = 1..D, then item 0 into g
        m = suffix_full(p, r, k, buf)
        copy_1d(g, buf[1])
        if p[0] != 0.0:
            pb_step(g, min(m + 1, k), p[0], r[0])
    else:
        suffix_checkpoints_into(p, r, k, B, ck, g)
    qk = g[k]
    f[0] = 1.0
    m = 0
    for b in range(nb):
        n = D if full else suffix_block(p, r, k, B, b, ck, buf)
        for i in range(n):
            d = b * B + i
            if p[d] == 0.0:
                continue
            s = dot_reversed(f, buf[i + 1], min(m, k - 1) + 1, k)
            marg[d] = p[d] * s / qk
            m += 1
            pb_step(f, min(m, k), p[d], r[d])
    return const + math.log(qk), marg


@njit(cache=True)
def _pb_step_tangent(q, dq, top, p, r, dp):
    """``pb_step`` with its forward-mode tangent (``dr = -dp``), in place, descending."""
    for j in range(top, 0, -1):
        dq[j] = dq[j] * r + dq[j - 1] * p + (q[j - 1] - q[j]) * dp
        q[j] = q[j] * r + q[j - 1] * p
    dq[0] = dq[0] * r - q[0] * dp
    q[0] *= r


@njit(cache=True)
def conditional_covariance_dot_core(theta, k, v):
    """``Cov(y | sum y = k) @ v``, the Hessian of ``log e_k`` times ``v`` (D,). O(D k).

    The forward-mode derivative of the marginals along ``v`` (the Hessian is symmetric, so this
    is also the pullback of the marginals): tangents are carried through the same tilted prefix
    and checkpointed suffix DPs, with the tilt held fixed (the result does not depend on it).
    Entries for ``-inf`` logits and infeasible ``k`` are 0; NaN / ``+inf`` logits give NaN.
    """
    D = theta.shape[0]
    out = np.zeros(D)
    invalid, n_fin, lo, hi = scan_logits(theta)
    if invalid:
        return np.full(D, np.nan)
    if k <= 0 or k >= n_fin:
        return out  # y is deterministic given k: zero covariance
    p, r, _, _ = tilted(theta, float(k), n_fin, k, lo, hi)
    dp = np.zeros(D)
    for d in range(D):
        if p[d] != 0.0:
            dp[d] = p[d] * r[d] * v[d]
    B = max(1, int(math.ceil(math.sqrt(D))))
    nb = (D + B - 1) // B
    ck = np.zeros((nb, k + 1))
    dck = np.zeros((nb, k + 1))
    g = np.zeros(k + 1)
    dg = np.zeros(k + 1)
    g[0] = 1.0
    m = 0
    for d in range(D - 1, -1, -1):
        if d + 1 == D or (d + 1) % B == 0:
            copy_1d(ck[d // B], g)
            copy_1d(dck[d // B], dg)
        if p[d] == 0.0:
            continue
        m += 1
        _pb_step_tangent(g, dg, min(m, k), p[d], r[d], dp[d])
    qk, dqk = g[k], dg[k]
    buf = np.zeros((B + 1, k + 1))
    dbuf = np.zeros((B + 1, k + 1))
    f = np.zeros(k + 1)
    df = np.zeros(k + 1)
    f[0] = 1.0
    m = 0
    for b in range(nb):
        start = b * B
        n = min(start + B, D) - start
        copy_1d(buf[n], ck[b])
        copy_1d(dbuf[n], dck[b])
        for i in range(n - 1, 0, -1):
            buf[i] = buf[i + 1]
            dbuf[i] = dbuf[i + 1]
            d = start + i
            if p[d] != 0.0:
                _pb_step_tangent(buf[i], dbuf[i], k, p[d], r[d], dp[d])
        for i in range(n):
            d = start + i
            if p[d] == 0.0:
                continue
            top = min(m, k - 1) + 1
            a = dot_reversed(f, buf[i + 1], top, k)
            da = dot_reversed(df, buf[i + 1], top, k) + dot_reversed(f, dbuf[i + 1], top, k)
            marg = p[d] * a / qk
            out[d] = (dp[d] * a + p[d] * da) / qk - marg * dqk / qk
            m += 1
            _pb_step_tangent(f, df, min(m, k), p[d], r[d], dp[d])
    return out


#: ``mode`` of the C kernel of :func:`make_esp_kernel`.
ESP_VALUE, ESP_MARGINALS, ESP_COVARIANCE_DOT = 0, 1, 2


def make_esp_kernel(version):
    """Body of the C callable that the conditional-Bernoulli Ops call (``numba.cfunc``, see
    :mod:`pm_perm.ops.extern`): ``op_kernel(theta, d, k, v, out, mode)`` for the C-contiguous
    (d,) float64 logits at ``theta`` and the count ``k`` returns ``log e_k(exp theta)``
    (:func:`log_esp_core`, ``mode == ESP_VALUE``) or writes to the (d,) array at ``out`` the
    marginals (``ESP_MARGINALS``, returning the value as :func:`log_esp_and_marginals_core`)
    or ``Cov(y | k) @ v`` for the (d,) array at ``v`` (``ESP_COVARIANCE_DOT``, returning 0;
    :func:`conditional_covariance_dot_core`). Pointers a mode does not use are not touched.
    ``version`` keys numba's cache as in
    :func:`pm_perm.kernels.permanent.make_log_permanent_kernel`.
    """

    def op_kernel(theta, d, k, v, out, mode):
        if version < 0:  # never true; referencing version puts it into numba's cache key
            return np.nan
        th = carray(theta, d)
        if mode == ESP_VALUE:
            return log_esp_core(th, k)
        if mode == ESP_MARGINALS:
            value, marginals = log_esp_and_marginals_core(th, k)
            carray(out, d)[:] = marginals
            return value
        carray(out, d)[:] = conditional_covariance_dot_core(th, k, carray(v, d))
        return 0.0

    return op_kernel


@njit(cache=True)
def _log_esp_batch(theta, k):
    out = np.empty(theta.shape[0])
    for i in range(theta.shape[0]):
        out[i] = log_esp_core(theta[i], k[i])
    return out


@njit(cache=True)
def _log_esp_and_marginals_batch(theta, k):
    out = np.empty(theta.shape[0])
    marg = np.empty_like(theta)
    for i in range(theta.shape[0]):
        out[i], marg[i] = log_esp_and_marginals_core(theta[i], k[i])
    return out, marg


@njit(cache=True)
def _nchoosek_marginals_batch(theta, count_probs):
    out = np.zeros_like(theta)
    for i in range(theta.shape[0]):
        tot = count_probs[i].sum()
        for kk in range(count_probs.shape[1]):
            pk = count_probs[i, kk]
            if pk > 0:
                lz, m = log_esp_and_marginals_core(theta[i], kk)
                if lz == -np.inf:
                    continue
                out[i] += (pk / tot) * m
    return out


def log_esp(theta, k):
    """Log elementary symmetric polynomial ``log e_k(exp theta)`` (the normaliser ``log Z_k``).

    Parameters
    ----------
    theta : array_like of float, shape (..., D)
        Logits; ``-inf`` = item never on. NaN, ``+inf`` and D = 0 are rejected (``ValueError``).
    k : array_like of int, shape broadcastable with ``theta.shape[:-1]``
        Number of ones. ``k < 0`` or ``k >`` (number of finite logits) gives ``-inf``.

    Returns
    -------
    ndarray, shape = broadcast batch shape
        ``log sum_{|c| = k} exp(sum_{d in c} theta_d)``. Cost O(D k) per vector (tilted DP).
    """
    th, kk, batch = logits_and_counts(theta, k)
    return _log_esp_batch(th, kk).reshape(batch)


def log_esp_and_marginals(theta, k):
    """``(log e_k(exp theta), p(y_d = 1 | sum y = k))``; shapes ``batch`` and ``(*batch, D)``.

    The marginals are the gradient of the first output with respect to ``theta``.
    Cost O(D k) per vector (a small constant times :func:`log_esp`), memory O(sqrt(D) k).
    """
    th, kk, batch = logits_and_counts(theta, k)
    v, m = _log_esp_and_marginals_batch(th, kk)
    return v.reshape(batch), m.reshape(*batch, th.shape[-1])


def conditional_marginals(theta, k):
    """``p(y_d = 1 | sum y = k)`` of the conditional Bernoulli, shape ``(*batch, D)``."""
    return log_esp_and_marginals(theta, k)[1]


def nchoosek_marginals(theta, count_probs):
    """Test-time marginals of ``NChooseK``: ``p(y_d = 1) = sum_k p(k) p(y_d = 1 | k)``.

    Parameters
    ----------
    theta : array_like of float, shape (..., D)
    count_probs : array_like of float, shape (..., D + 1)
        Count prior ``p(k)``, k = 0..D (normalised here; mass on infeasible counts, above the
        number of finite logits, is dropped).

    Returns
    -------
    ndarray, shape ``(*batch, D)``. Cost O(D^3) in the worst case (one marginal pass per k
    with ``p(k) > 0``).
    """
    theta = as_logits(theta)
    pk = as_float_array(count_probs, "count_probs", min_ndim=1)
    D = theta.shape[-1]
    if pk.shape[-1] != D + 1:
        raise ValueError(f"count_probs must have D + 1 = {D + 1} entries; got shape {pk.shape}")
    if np.any(pk < 0):
        raise ValueError("count_probs must be non-negative")
    batch = np.broadcast_shapes(theta.shape[:-1], pk.shape[:-1])
    th = c_array(np.broadcast_to(theta, (*batch, D))).reshape(-1, D)
    pk = np.ascontiguousarray(np.broadcast_to(pk, (*batch, D + 1))).reshape(-1, D + 1).copy()
    n_fin = np.isfinite(th).sum(-1)
    pk[np.arange(D + 1)[None, :] > n_fin[:, None]] = 0.0
    if np.any(pk.sum(-1) <= 0):
        raise ValueError("count_probs puts no mass on a feasible count")
    return _nchoosek_marginals_batch(th, pk).reshape(*batch, D)
