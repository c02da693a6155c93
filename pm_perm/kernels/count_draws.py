"""Exact draws of count-structured labels: conditional Bernoulli, NChooseK and ordinal labels.

Exact sampling of ``y | k`` (binary, ``sum y = k``) walks the checkpointed suffix pmfs of the
tilted Poisson-binomial DP (:mod:`pm_perm.kernels._tilted_dp`):
``p(y_d = 1 | r ones left) = p_d G_{>d}[r-1] / G_{>=d}[r]``, O(D k) per draw and
O(sqrt(D) k) memory. ``NChooseK`` draws ``k`` from its count prior first; ordinal labels draw
the per-level counts backwards through the prefix convolutions of the per-level count pmfs
(:func:`constrained_count_table`, O(R D^2)), then each level's items by the conditional
Bernoulli.

The ``draw_*_into`` kernels validate their parameters as the distributions' logp does and
return a status (an index in ``DRAW_ERRORS``) instead of raising: they are the bodies of the C
kernel of :func:`make_count_draw_kernel`.
"""

from __future__ import annotations

import math

import numpy as np
from numba import carray

from pm_perm._numba import njit
from pm_perm.kernels._bitgen import generator_at
from pm_perm.kernels._checks import as_size
from pm_perm.kernels._tilted_dp import (
    as_logits,
    invalid_logits,
    logits_and_counts,
    n_finite,
    scan_logits,
    suffix_block,
    suffix_checkpoints,
    tilted,
)

__all__ = [
    "COUNT_PROBS_TOL",
    "DRAW_CONDITIONAL_BERNOULLI",
    "DRAW_ERRORS",
    "DRAW_NCHOOSEK",
    "DRAW_ORDINAL",
    "K_OUT_OF_RANGE",
    "constrained_count_table",
    "draw_conditional_bernoulli_into",
    "draw_nchoosek_into",
    "draw_ordinal_into",
    "make_count_draw_kernel",
    "sample_conditional_bernoulli",
    "sample_conditional_bernoulli_core",
    "sample_nchoosek_core",
    "sample_ordinal_core",
]


#: Messages of the samplers' input errors, indexed by the status of their ``draw_*_into``.
DRAW_ERRORS = (
    "",
    "logits contain NaN, +inf or a finite value beyond 1e300",
    "logits must be -inf or finite with |logits| <= 1e300 (no NaN or +inf)",
    "count_probs must have D + 1 entries per row (k = 0..D)",
    "count_probs must be non-negative and finite (no NaN)",
    "count_probs rows must sum to 1 (within 1e-6): a simplex over k",
    "NChooseK: count_probs puts no mass on a feasible count, k <= the number of finite logits "
    "(items with logit -inf are never on)",
    "count prior puts zero mass on counts that sum to D",
    "OrdinalNChooseK: the counts need more items at levels >= 1 than have finite logits (items "
    "with logit -inf always get label 0)",
    "ConditionalBernoulli: k must be in 0..number of finite logits (items with logit -inf are "
    "never on)",
)
K_OUT_OF_RANGE = 9


@njit(cache=True)
def draw_conditional_bernoulli_into(rng, theta, k, y):
    """One exact draw of binary ``y`` (D,) int64 (overwritten) with ``sum y = k`` from
    ``p(y | k)``; returns 0, or 1 (``DRAW_ERRORS``) for NaN, ``+inf`` or finite logits beyond
    1e300.

    Walks the checkpointed suffix table: ``p(y_d = 1 | r left) = p_d G_{>d}[r-1] / G_{>=d}[r]``.
    ``k`` must be feasible (0 <= k <= number of finite logits); the caller checks.
    """
    D = theta.shape[0]
    invalid, n_fin, lo, hi = scan_logits(theta)
    if invalid:
        return 1
    y[:] = 0
    if k <= 0:
        return 0
    if k >= n_fin:
        for d in range(D):
            if theta[d] != -np.inf:
                y[d] = 1
        return 0
    p, r, _, _ = tilted(theta, float(k), n_fin, k, lo, hi)
    B = max(1, int(math.ceil(math.sqrt(D))))
    ck, _ = suffix_checkpoints(p, r, k, B)
    buf = np.zeros((B + 1, k + 1))
    left = k
    for b in range(ck.shape[0]):
        if left == 0:
            break
        n = suffix_block(p, r, k, B, b, ck, buf)
        for i in range(n):
            if left == 0:
                break
            d = b * B + i
            if p[d] == 0.0:
                continue
            gs = buf[i + 1]
            a = p[d] * gs[left - 1]
            z = a + r[d] * gs[left]
            if z > 0.0:
                on = rng.random() * z < a
            else:  # unreachable on a path drawn from the model; keep the draw feasible
                on = a >= r[d] * gs[left]
            if on:
                y[d] = 1
                left -= 1
    return 0


@njit(cache=True)
def _raise_draw_error(status):
    if status != 0:
        raise ValueError(DRAW_ERRORS[status])


@njit(cache=True)
def sample_conditional_bernoulli_core(rng, theta, k):
    """One exact draw of binary ``y`` (D,) int64 with ``sum y = k`` from ``p(y | k)``
    (:func:`draw_conditional_bernoulli_into`); raises ``ValueError`` for invalid logits."""
    y = np.empty(theta.shape[0], dtype=np.int64)
    _raise_draw_error(draw_conditional_bernoulli_into(rng, theta, k, y))
    return y


@njit(cache=True)
def _draw_categorical(rng, probs):
    u = rng.random() * probs.sum()
    acc = 0.0
    last = 0
    for i in range(probs.shape[0]):
        if probs[i] > 0:
            last = i
            acc += probs[i]
            if u < acc:
                return i
    return last


#: ``count_probs`` rows must sum to 1 within this (the distributions' logp uses the same value).
COUNT_PROBS_TOL = 1e-6


@njit(cache=True)
def _count_probs_status(theta, count_probs):
    """The parameter checks of ``NChooseK`` / ``OrdinalNChooseK``'s logp, for their samplers:
    logits -inf or finite within ``LOGIT_ABS_MAX``; every row of ``count_probs`` (R, D + 1) has
    D + 1 entries, all >= 0 (no NaN), summing to 1 within ``COUNT_PROBS_TOL``. Returns 0 or the
    index in ``DRAW_ERRORS`` of the first failed check."""
    if invalid_logits(theta):
        return 2
    if count_probs.shape[1] != theta.shape[0] + 1:
        return 3
    for r in range(count_probs.shape[0]):
        total = 0.0
        for j in range(count_probs.shape[1]):
            p = count_probs[r, j]
            if not (p >= 0.0) or p == np.inf:
                return 4
            total += p
        if not (abs(total - 1.0) < COUNT_PROBS_TOL):
            return 5
    return 0


@njit(cache=True)
def draw_nchoosek_into(rng, theta, count_probs, y):
    """One draw of ``NChooseK`` into ``y`` (D,) int64: ``k ~ count_probs`` (D + 1,) restricted
    to the feasible counts (at most the number of finite logits) and renormalised, then ``y | k``
    exactly. Validates its parameters exactly as ``NChooseK``'s logp does (also: some feasible
    count has mass); returns 0 or the index in ``DRAW_ERRORS`` of the error."""
    status = _count_probs_status(theta, count_probs.reshape(1, -1))
    if status != 0:
        return status
    feasible = count_probs[:n_finite(theta) + 1]
    if not (feasible.sum() > 0.0):
        return 6
    k = _draw_categorical(rng, feasible)
    return draw_conditional_bernoulli_into(rng, theta, k, y)


@njit(cache=True)
def sample_nchoosek_core(rng, theta, count_probs):
    """One draw of ``NChooseK`` (:func:`draw_nchoosek_into`); raises ``ValueError`` for
    parameters its logp refuses."""
    y = np.empty(theta.shape[0], dtype=np.int64)
    _raise_draw_error(draw_nchoosek_into(rng, theta, count_probs, y))
    return y


@njit(cache=True)
def constrained_count_table(count_probs):
    """Prefix convolutions of per-level count pmfs: ``T[r, m] = P(k_0 + ... + k_r = m)``.

    ``count_probs`` (R, D+1): row r is an (unnormalised) pmf of ``k_r`` on 0..D. The
    sum-to-D constraint's normaliser is ``T[R-1, D]``. O(R D^2).
    """
    R, M = count_probs.shape
    T = np.zeros((R, M))
    T[0] = count_probs[0]
    for lev in range(1, R):
        for m in range(M):
            s = 0.0
            for j in range(m + 1):
                s += T[lev - 1, m - j] * count_probs[lev, j]
            T[lev, m] = s
    return T


@njit(cache=True)
def draw_ordinal_into(rng, theta, count_probs, y):
    """One draw of ordinal labels into ``y`` (D,) int64 in 0..R-1 (0 = least relevant).

    Draws ``k`` from ``prod_r count_probs[r, k_r]`` restricted to ``sum k = D`` and to the
    feasible counts, ``k_0 >=`` the number of ``-inf`` logits (backwards through
    :func:`constrained_count_table`), then for r = R-1 down to 1 picks ``k_r`` of the still
    unlabelled items from the conditional Bernoulli; the rest get label 0. Items with a
    ``-inf`` logit are never picked at a level >= 1. Validates the parameters exactly as
    ``OrdinalNChooseK``'s logp does (each row a simplex, some feasible count vector with mass);
    returns 0, or the index in ``DRAW_ERRORS`` of the error.
    """
    D = theta.shape[0]
    R = count_probs.shape[0]
    status = _count_probs_status(theta, count_probs)
    if status != 0:
        return status
    T = constrained_count_table(count_probs)
    if not (T[R - 1, D] > 0.0):
        return 7
    n_inf = D - n_finite(theta)
    if n_inf > 0:  # condition on k_0 >= n_inf: every item with a -inf logit keeps label 0
        masked = count_probs.copy()
        masked[0, :n_inf] = 0.0
        T = constrained_count_table(masked)
        if not (T[R - 1, D] > 0.0):
            return 8
    y[:] = 0
    left = D
    avail = np.ones(D, dtype=np.bool_)
    w = np.empty(D + 1)
    for lev in range(R - 1, 0, -1):
        for j in range(D + 1):
            w[j] = count_probs[lev, j] * T[lev - 1, left - j] if j <= left else 0.0
        kr = _draw_categorical(rng, w)
        left -= kr
        if kr == 0:
            continue
        sub = np.full(D, -np.inf)
        for d in range(D):
            if avail[d]:
                sub[d] = theta[d]
        if kr > n_finite(sub):  # unreachable: T excludes such counts
            return 8
        pick = np.empty(D, dtype=np.int64)
        draw_conditional_bernoulli_into(rng, sub, kr, pick)  # 0: sub holds theta or -inf
        for d in range(D):
            if pick[d] == 1:
                y[d] = lev
                avail[d] = False
    return 0


@njit(cache=True)
def sample_ordinal_core(rng, theta, count_probs):
    """One draw of ordinal labels ``y`` (D,) (:func:`draw_ordinal_into`); raises
    ``ValueError`` for parameters its logp refuses or when no count vector is feasible."""
    y = np.empty(theta.shape[0], dtype=np.int64)
    _raise_draw_error(draw_ordinal_into(rng, theta, count_probs, y))
    return y


#: ``which`` of the C kernel of :func:`make_count_draw_kernel`.
DRAW_CONDITIONAL_BERNOULLI, DRAW_NCHOOSEK, DRAW_ORDINAL = 0, 1, 2


def make_count_draw_kernel(version):
    """Body of the C callable that PyTensor's draws of ``ConditionalBernoulli``, ``NChooseK``
    and ``OrdinalNChooseK`` call (``numba.cfunc``, see :mod:`pm_perm.ops.extern`):
    ``draw_kernel(bitgen, theta, d, k, count_probs, r, out, which)`` draws with the caller's
    random stream (numpy's ``bitgen_t`` at ``bitgen``, :mod:`pm_perm.kernels._bitgen`) into the
    (d,) int64 array at ``out``, for the C-contiguous (d,) float64 logits at ``theta``: with
    ``which == DRAW_CONDITIONAL_BERNOULLI`` given the count ``k`` (checked to lie in
    0..number of finite logits), ``DRAW_NCHOOSEK`` with the (d + 1,) count probabilities at
    ``count_probs`` (``r`` = 1), ``DRAW_ORDINAL`` with the (r, d + 1) ones. Returns 0 or the index
    in ``DRAW_ERRORS`` of the error. ``version`` keys numba's cache as in
    :func:`pm_perm.kernels.permanent.make_log_permanent_kernel`.
    """

    def draw_kernel(bitgen, theta, d, k, count_probs, r, out, which):
        if version < 0:  # never true; referencing version puts it into numba's cache key
            return -1
        rng = generator_at(bitgen)
        th, y = carray(theta, d), carray(out, d)
        if which == DRAW_CONDITIONAL_BERNOULLI:
            if k < 0 or k > n_finite(th):
                return K_OUT_OF_RANGE
            return draw_conditional_bernoulli_into(rng, th, k, y)
        if which == DRAW_NCHOOSEK:
            return draw_nchoosek_into(rng, th, carray(count_probs, d + 1), y)
        return draw_ordinal_into(rng, th, carray(count_probs, (r, d + 1)), y)

    return draw_kernel


@njit(cache=True)
def _sample_batch(rng, theta, k):
    out = np.empty(theta.shape, dtype=np.int64)
    for i in range(theta.shape[0]):
        out[i] = sample_conditional_bernoulli_core(rng, theta[i], k[i])
    return out


def _as_rng(rng):
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def sample_conditional_bernoulli(theta, k, size=None, rng=None):
    """Exact draws of binary ``y`` with ``sum y = k`` from ``exp(theta . y) / e_k(exp theta)``.

    Parameters
    ----------
    theta : array_like of float, shape (..., D)
    k : array_like of int, broadcastable with the batch shape
        Must satisfy ``0 <= k <=`` number of finite logits (``ValueError`` otherwise).
    size : int or tuple of int, optional
        Full batch shape of the output (as in NumPy / PyMC); default: the broadcast batch shape.
    rng : numpy Generator or seed, optional

    Returns
    -------
    ndarray of int64, shape ``(*size, D)``. Cost O(D k) per draw.

    Raises
    ------
    ValueError
        For invalid logits (NaN, ``+inf``, none in the last axis), ``k`` out of range, or a
        ``size`` that is not a non-negative integer or a tuple of them.
    """
    theta = as_logits(theta)
    D = theta.shape[-1]
    if size is not None:
        size = as_size(size)
        theta = np.broadcast_to(theta, (*size, D))
        k = np.broadcast_to(k, size)
    th, kk, batch = logits_and_counts(theta, k)
    n_fin = np.isfinite(th).sum(-1)
    if np.any(kk < 0) or np.any(kk > n_fin):
        raise ValueError(
            "k must satisfy 0 <= k <= number of finite logits (items with logit -inf can never "
            f"be on); got k in [{kk.min()}, {kk.max()}] with at most {n_fin.max()} finite logits"
        )
    return _sample_batch(_as_rng(rng), th, kk).reshape(*batch, D)
