"""The tilted Poisson-binomial DP shared by the conditional-Bernoulli kernels.

For logits ``theta`` (D,) and weights ``w = exp(theta)``, the conditional Bernoulli
distribution over binary ``y`` with exactly ``k`` ones is ``p(y | k) = exp(theta . y) / Z_k``
with ``Z_k = e_k(w)``, the k-th elementary symmetric polynomial (Swersky et al. 2012, eq. 1).
``-inf`` logits mean "item can never be on".

Tilted probability-scale DP. For any shift ``c``,
``e_k(w) = exp(k c) prod_d (1 + exp(theta_d - c)) P(S = k)`` where ``S`` is Poisson-binomial
with success probabilities ``p_d = sigmoid(theta_d - c)``. ``P(S = j)`` is built item by item
by ``q_j <- q_j (1 - p_d) + q_{j-1} p_d`` (:func:`pb_step`): every step is a convex combination
of non-negative numbers, so there is no cancellation and no overflow. Choosing ``c`` so that
``E[S] = k`` (a 1-D root find, :func:`tilt_into`) puts ``k`` at the mode of ``S``, so
``P(S = k) >= ~1/(D + 1)`` and every term that contributes to it is not tiny either: the
relative error of ``log e_k`` is a few ulps times D for any spread of logits (|theta| = 50
included). Cost O(D k) time, O(k) memory.

Suffix pmfs ``G_{>=d}`` (the same DP run from the last item backwards) are kept whole
(:func:`suffix_full`) or checkpointed every ``B`` items and recomputed block by block
(:func:`suffix_checkpoints_into`, :func:`suffix_block`): both give the same bits. The
marginals (:mod:`pm_perm.kernels.esp`) and the exact sampler
(:mod:`pm_perm.kernels.count_draws`) walk them.

Also the input checks of the public wrappers (:func:`as_logits`, :func:`logits_and_counts`,
:func:`check_max_count`).
"""

from __future__ import annotations

import math

import numpy as np

from pm_perm._numba import njit
from pm_perm.kernels._checks import LOGIT_ABS_MAX, as_float_array, c_array

__all__ = [
    "as_logits",
    "check_max_count",
    "copy_1d",
    "dot_reversed",
    "edge_value",
    "invalid_logits",
    "logits_and_counts",
    "n_finite",
    "pb_step",
    "pb_step_out",
    "scan_logits",
    "suffix_block",
    "suffix_checkpoints",
    "suffix_checkpoints_into",
    "suffix_full",
    "tilt_into",
    "tilted",
]


@njit(cache=True)
def copy_1d(dst, src):
    """``dst[:] = src`` for 1-d arrays of equal length, by a loop: numba compiles a formatted
    shape-mismatch error (seconds on an empty cache) for every array-to-array slice assignment."""
    for j in range(src.shape[0]):
        dst[j] = src[j]


@njit(cache=True)
def n_finite(theta):
    n = 0
    for t in theta:
        if t != -np.inf:
            n += 1
    return n


@njit(cache=True)
def scan_logits(theta):
    """``(invalid, n_fin, lo, hi)`` of one logit vector in one pass: whether a logit is NaN, +inf
    or finite beyond ``LOGIT_ABS_MAX`` (:func:`invalid_logits`; the other results are then not
    meaningful), the number of finite logits (:func:`n_finite`) and their min and max."""
    n = 0
    lo = np.inf
    hi = -np.inf
    for t in theta:
        if t == -np.inf:
            continue
        if not abs(t) <= LOGIT_ABS_MAX:
            return True, 0, lo, hi
        n += 1
        lo = min(lo, t)
        hi = max(hi, t)
    return False, n, lo, hi


@njit(cache=True)
def tilted(theta, target, n_fin, k, lo, hi):
    """:func:`tilt_into` with new arrays: ``(p, r, const, c)``; ``n_fin``, ``lo`` and ``hi``
    as :func:`scan_logits` gives them."""
    D = theta.shape[0]
    p = np.empty(D)
    r = np.empty(D)
    e = np.empty(D)
    const, c = tilt_into(theta, target, n_fin, k, lo, hi, p, r, e)
    return p, r, const, c


@njit(cache=True)
def tilt_into(theta, target, n_fin, k, lo, hi, p, r, e):
    """Tilted ``p_d = sigmoid(theta_d - c)`` and ``r_d = 1 - p_d`` (computed directly), written
    into ``p`` and ``r`` (D,; ``e`` (D,) is scratch), and ``(const, c)``: the constant
    ``k c + sum_d softplus(theta_d - c)`` of ``log e_k`` for a shift ``c`` with ``sum_d p_d``
    within 0.25 of ``target`` (0 < target < n_fin). ``lo`` and ``hi``: the min and max of the
    finite logits.

    ``c``: safeguarded Newton on the decreasing function ``f(c) = sum_d p_d - target`` inside the
    bracket ``[lo, hi] - logit(target / n_fin)``. Any ``c`` gives the exact result
    mathematically; this one keeps the tilted pmf's mode at ``target``. Each Newton iterate
    computes the ``p_d`` it needs for ``f`` as the result (one ``exp`` per item gives ``p_d``,
    ``r_d`` and ``softplus``), so the accepted iterate's are returned as they are.

    The constant is summed as ``sum_{theta_d > c} theta_d + (k - n_+) c + sum softplus(-|x_d|)``
    with compensated (Neumaier) sums: ``k c`` and ``sum softplus`` are each much larger than
    their sum when most ``p_d`` are near 1, and would cancel.
    """
    D = theta.shape[0]
    frac = target / n_fin
    off = math.log(frac) - math.log1p(-frac)
    lo -= off
    hi -= off
    c = 0.5 * (lo + hi)
    for it in range(201):  # 200 Newton steps; the last c is used as it is (exact all the same)
        f = -target
        fp = 0.0
        for d in range(D):
            if theta[d] == -np.inf:
                p[d] = 0.0
                r[d] = 1.0
                continue
            x = theta[d] - c
            ed = math.exp(-abs(x))
            e[d] = ed
            if x >= 0:
                p[d] = 1.0 / (1.0 + ed)
                r[d] = ed / (1.0 + ed)
            else:
                p[d] = ed / (1.0 + ed)
                r[d] = 1.0 / (1.0 + ed)
            f += p[d]
            fp += p[d] * (1.0 - p[d])
        if abs(f) <= 0.25 or it == 200:
            break
        if f > 0:
            lo = c
        else:
            hi = c
        c_new = c + f / fp if fp > 0 else 0.5 * (lo + hi)
        if not (lo < c_new < hi):
            c_new = 0.5 * (lo + hi)
        c = c_new
    s = 0.0
    comp = 0.0
    n_pos = 0
    for d in range(D):
        if theta[d] == -np.inf:
            continue
        x = theta[d] - c
        if x > 0:
            n_pos += 1
            term = theta[d] + math.log1p(e[d])
        else:
            term = math.log1p(e[d])
        t = s + term
        if abs(s) >= abs(term):
            comp += (s - t) + term
        else:
            comp += (term - t) + s
        s = t
    return s + comp + (k - n_pos) * c, c


@njit(cache=True)
def pb_step(q, top, p, r):
    """One item of the Poisson-binomial DP on ``q[0..top]`` in place (``top`` = new max index)."""
    for j in range(top, 0, -1):
        q[j] = q[j] * r + q[j - 1] * p
    q[0] *= r


@njit(cache=True, inline="always")
def pb_step_out(dst, src, top, p, r):
    """:func:`pb_step` out of place, ``dst[0..top]`` from ``src``: one pass with no copy first;
    zeros of ``src`` above its support stay zero in ``dst``."""
    dst[0] = src[0] * r
    for j in range(1, top + 1):
        dst[j] = src[j] * r + src[j - 1] * p


@njit(cache=True)
def invalid_logits(theta):
    """True if a logit is NaN, +inf or finite beyond ``LOGIT_ABS_MAX`` (the cores then return
    NaN instead of dividing by 0 or overflowing)."""
    for t in theta:
        if not (abs(t) <= LOGIT_ABS_MAX or t == -np.inf):
            return True
    return False


@njit(cache=True)
def edge_value(theta, k, n_fin):
    """``log e_k`` for the trivial counts (k <= 0, k >= n_fin); NaN when not trivial."""
    if k < 0 or k > n_fin:
        return -np.inf
    if k == 0:
        return 0.0
    if k == n_fin:
        s = 0.0
        for t in theta:
            if t != -np.inf:
                s += t
        return s
    return np.nan


@njit(cache=True)
def suffix_checkpoints(p, r, k, B):
    """Suffix pmfs ``G_{>=e}`` truncated to 0..k at the block ends ``e = min((b+1)B, D)``."""
    D = p.shape[0]
    ck = np.zeros(((D + B - 1) // B, k + 1))
    g = np.zeros(k + 1)
    suffix_checkpoints_into(p, r, k, B, ck, g)
    return ck, g  # g = G_{>=0}


@njit(cache=True)
def suffix_checkpoints_into(p, r, k, B, ck, g):
    """:func:`suffix_checkpoints` into zeroed ``ck`` (nb, k + 1) and ``g`` (k + 1,), which ends
    as ``G_{>=0}``."""
    D = p.shape[0]
    g[0] = 1.0
    m = 0
    for d in range(D - 1, -1, -1):
        if d + 1 == D or (d + 1) % B == 0:
            copy_1d(ck[d // B], g)
        if p[d] == 0.0:
            continue
        m += 1
        pb_step(g, min(m, k), p[d], r[d])


@njit(cache=True)
def suffix_block(p, r, k, B, b, ck, buf):
    """Fill ``buf[i] = G_{>=b*B + i}`` for i = 1..len(block) from the block's checkpoint."""
    D = p.shape[0]
    start = b * B
    end = min(start + B, D)
    n = end - start
    copy_1d(buf[n], ck[b])
    for i in range(n - 1, 0, -1):
        d = start + i
        src = buf[i + 1]
        dst = buf[i]
        if p[d] == 0.0:
            copy_1d(dst, src)
            continue
        pb_step_out(dst, src, k, p[d], r[d])
    return n


@njit(cache=True)
def suffix_full(p, r, k, buf):
    """Fill the zeroed ``buf`` (D + 1, k + 1) with ``buf[i] = G_{>=i}`` for i = 1..D, each row
    up to its support only (the rest stays zero); returns the number of items 1..D-1 with
    ``p_d > 0``. The same steps, bit for bit, as :func:`suffix_checkpoints_into` followed by
    :func:`suffix_block`."""
    D = p.shape[0]
    buf[D, 0] = 1.0
    m = 0
    for d in range(D - 1, 0, -1):
        src = buf[d + 1]
        dst = buf[d]
        if p[d] == 0.0:
            copy_1d(dst, src)
            continue
        m += 1
        pb_step_out(dst, src, min(m, k), p[d], r[d])
    return m


@njit(cache=True)
def dot_reversed(f, g, n, k):
    """``sum_{j < n} f[j] g[k-1-j]`` with four partial sums: without fastmath the compiler
    keeps a single accumulator's additions in order, a latency-bound chain; four independent
    chains overlap (all terms are non-negative, so the order does not matter)."""
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    j = 0
    while j + 4 <= n:
        s0 += f[j] * g[k - 1 - j]
        s1 += f[j + 1] * g[k - 2 - j]
        s2 += f[j + 2] * g[k - 3 - j]
        s3 += f[j + 3] * g[k - 4 - j]
        j += 4
    while j < n:
        s0 += f[j] * g[k - 1 - j]
        j += 1
    return (s0 + s1) + (s2 + s3)


def as_logits(theta):
    """``theta`` as a float64 array (..., D) with D >= 1 (:func:`as_float_array`'s checks)."""
    theta = as_float_array(theta, "logits", min_ndim=1)
    if theta.shape[-1] == 0:
        raise ValueError(f"logits must have at least one item (D >= 1) in their last axis; got "
                         f"shape {theta.shape}")
    return theta


def logits_and_counts(theta, k, k_name="k"):
    """Validate and broadcast ``theta`` (..., D) and integer ``k`` (...); flatten the batch."""
    theta = as_logits(theta)
    k_arr = np.asarray(k)
    if k_arr.dtype.kind not in "iub":
        integral = np.all(np.isfinite(k_arr)) and np.all(k_arr == np.round(k_arr))
        if k_arr.dtype.kind == "f" and integral:
            k_arr = k_arr.astype(np.int64)
        else:
            raise ValueError(f"{k_name} must be integer counts; got dtype {k_arr.dtype}")
    batch = np.broadcast_shapes(theta.shape[:-1], k_arr.shape)
    D = theta.shape[-1]
    th = c_array(np.broadcast_to(theta, (*batch, D))).reshape(-1, D)
    kk = c_array(np.broadcast_to(k_arr, batch), np.int64).reshape(-1)
    return th, kk, batch


def check_max_count(K, D):
    """``min(K, D)`` for a non-negative integer ``K`` (an integral float is accepted)."""
    if not (np.ndim(K) == 0 and isinstance(K, int | float | np.integer | np.floating)
            and math.isfinite(K) and int(K) == K and K >= 0):
        raise ValueError(f"K must be a non-negative integer (the largest count); got {K!r}")
    return min(int(K), D)
