"""Elementary symmetric polynomials, conditional-Bernoulli marginals and exact sampling.

For logits ``theta`` (D,) and weights ``w = exp(theta)``, the conditional Bernoulli
distribution over binary ``y`` with exactly ``k`` ones is ``p(y | k) = exp(theta . y) / Z_k``
with ``Z_k = e_k(w)``, the k-th elementary symmetric polynomial (Swersky et al. 2012, eq. 1).
``-inf`` logits mean "item can never be on".

Tilted probability-scale DP (the workhorse). For any shift ``c``,
``e_k(w) = exp(k c) prod_d (1 + exp(theta_d - c)) P(S = k)`` where ``S`` is Poisson-binomial
with success probabilities ``p_d = sigmoid(theta_d - c)``. ``P(S = j)`` is built item by item
by ``q_j <- q_j (1 - p_d) + q_{j-1} p_d``: every step is a convex combination of non-negative
numbers, so there is no cancellation and no overflow. Choosing ``c`` so that ``E[S] = k``
(a 1-D root find) puts ``k`` at the mode of ``S``, so ``P(S = k) >= ~1/(D + 1)`` and every
term that contributes to it is not tiny either: the relative error of ``log e_k`` is a few
ulps times D for any spread of logits (|theta| = 50 included). Cost O(D k) time, O(k) memory.

Marginals ``p(y_d = 1 | k) = p_d P(S_{-d} = k - 1) / P(S = k)`` (the gradient of
``log e_k``) come from the prefix pmf ``F`` and suffix pmf ``G`` of the same tilted DP:
``P(S_{-d} = k - 1) = sum_j F_{<d}[j] G_{>d}[k - 1 - j]``, again a sum of positive terms. The
suffix table is kept whole while it is small (``FULL_SUFFIX_MAX`` doubles); beyond that it is
checkpointed every ``B = ceil(sqrt(D))`` items and recomputed block by block, so memory is
O(sqrt(D) k) and time 3-7 x the value. Exact sampling of ``y | k`` walks the
same suffix table: ``p(y_d = 1 | r ones left) = p_d G_{>d}[r-1] / G_{>=d}[r]``.

All k at once (``log_esp_all``): one tilted DP (``E[S] = K/2``) gives every ``q_j``; as all
terms are positive, the only way to lose accuracy is underflow, so the guard checks that every
requested ``q_j`` is at least ``1e-250``; otherwise (tails beyond the double range, as for
large D or extreme logits) it falls back to the log-space DP (``logaddexp`` recursion, O(D K)
transcendental operations, about 10x slower, always accurate). The FFT product-tree path of
the paper (``log_esp_all_fft``) is for all k at large D: within one tilt it is only accurate
near the bulk of the tilted distribution (FFT round-off is absolute, about
``eps log^2 D`` of the largest probability), so it accepts ``q_j`` only where a round-off
bound guarantees the requested relative accuracy, then re-tilts towards the next uncovered k,
and computes any k that no window covers by the exact single-k DP: it refuses the inaccurate
part of each pass instead of returning it. Cost O(D log^2 D) per pass, about
``D / (9 sd)`` passes for all k (sd = the Poisson-binomial standard deviation).
"""

from __future__ import annotations

import math

import numpy as np
import scipy.fft
from numba import carray

from pm_perm._numba import njit
from pm_perm.kernels._bitgen import generator_at
from pm_perm.kernels._checks import LOGIT_ABS_MAX, as_float_array, as_size, c_array

__all__ = [
    "log_esp",
    "log_esp_and_marginals",
    "log_esp_all",
    "log_esp_all_logspace",
    "log_esp_all_fft",
    "conditional_marginals",
    "sample_conditional_bernoulli",
    "nchoosek_marginals",
    "log_esp_core",
    "log_esp_and_marginals_core",
    "conditional_covariance_dot_core",
    "make_esp_op_kernel",
    "ESP_VALUE",
    "ESP_MARGINALS",
    "ESP_COVARIANCE_DOT",
    "log_esp_all_core",
    "sample_conditional_bernoulli_core",
    "draw_conditional_bernoulli_into",
    "draw_nchoosek_into",
    "draw_ordinal_into",
    "make_draw_kernel",
    "DRAW_ERRORS",
    "DRAW_CONDITIONAL_BERNOULLI",
    "DRAW_NCHOOSEK",
    "DRAW_ORDINAL",
    "COUNT_PROBS_TOL",
    "sample_nchoosek_core",
    "sample_ordinal_core",
    "constrained_count_table",
]

#: Smallest tilted probability the all-k DP trusts (below it the log-space DP is used).
ALL_K_GUARD = 1e-250


# ----------------------------------------------------------------------------- numba cores


@njit(cache=True)
def _copy(dst, src):
    """``dst[:] = src`` for 1-d arrays of equal length, by a loop: numba compiles a formatted
    shape-mismatch error (seconds on an empty cache) for every array-to-array slice assignment."""
    for j in range(src.shape[0]):
        dst[j] = src[j]


@njit(cache=True)
def _n_finite(theta):
    n = 0
    for t in theta:
        if t != -np.inf:
            n += 1
    return n


@njit(cache=True)
def _scan(theta):
    """``(invalid, n_fin, lo, hi)`` of one logit vector in one pass: whether a logit is NaN, +inf
    or finite beyond ``LOGIT_ABS_MAX`` (:func:`_invalid`; the other results are then not
    meaningful), the number of finite logits (:func:`_n_finite`) and their min and max."""
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
def _tilted(theta, target, n_fin, k, lo, hi):
    """:func:`_tilt_into` with new arrays: ``(p, r, const, c)``; ``n_fin``, ``lo`` and ``hi``
    as :func:`_scan` gives them."""
    D = theta.shape[0]
    p = np.empty(D)
    r = np.empty(D)
    e = np.empty(D)
    const, c = _tilt_into(theta, target, n_fin, k, lo, hi, p, r, e)
    return p, r, const, c


@njit(cache=True)
def _tilt_into(theta, target, n_fin, k, lo, hi, p, r, e):
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
def _pb_step(q, top, p, r):
    """One item of the Poisson-binomial DP on ``q[0..top]`` in place (``top`` = new max index)."""
    for j in range(top, 0, -1):
        q[j] = q[j] * r + q[j - 1] * p
    q[0] *= r


@njit(cache=True)
def _invalid(theta):
    """True if a logit is NaN, +inf or finite beyond ``LOGIT_ABS_MAX`` (the cores then return
    NaN instead of dividing by 0 or overflowing)."""
    for t in theta:
        if not (abs(t) <= LOGIT_ABS_MAX or t == -np.inf):
            return True
    return False


@njit(cache=True)
def _edge_value(theta, k, n_fin):
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
def log_esp_core(theta, k):
    """``log e_k(exp theta)`` for one logit vector ``theta`` (D,) and count ``k``. O(D k).

    NaN or ``+inf`` logits give NaN (the public wrappers reject them before).
    """
    D = theta.shape[0]
    invalid, n_fin, lo, hi = _scan(theta)
    if invalid:
        return np.nan
    edge = _edge_value(theta, k, n_fin)
    if not np.isnan(edge):
        return edge
    w = np.zeros(3 * D + k + 1)  # one allocation: p, r, e, q
    p = w[:D]
    r = w[D:2 * D]
    const, _ = _tilt_into(theta, float(k), n_fin, k, lo, hi, p, r, w[2 * D:3 * D])
    q = w[3 * D:]
    q[0] = 1.0
    m = 0
    for d in range(D):
        if p[d] == 0.0:
            continue
        m += 1
        _pb_step(q, min(m, k), p[d], r[d])
    return const + math.log(q[k])


@njit(cache=True)
def _suffix_checkpoints(p, r, k, B):
    """Suffix pmfs ``G_{>=e}`` truncated to 0..k at the block ends ``e = min((b+1)B, D)``."""
    D = p.shape[0]
    ck = np.zeros(((D + B - 1) // B, k + 1))
    g = np.zeros(k + 1)
    _suffix_checkpoints_into(p, r, k, B, ck, g)
    return ck, g  # g = G_{>=0}


@njit(cache=True)
def _suffix_checkpoints_into(p, r, k, B, ck, g):
    """:func:`_suffix_checkpoints` into zeroed ``ck`` (nb, k + 1) and ``g`` (k + 1,), which ends
    as ``G_{>=0}``."""
    D = p.shape[0]
    g[0] = 1.0
    m = 0
    for d in range(D - 1, -1, -1):
        if d + 1 == D or (d + 1) % B == 0:
            _copy(ck[d // B], g)
        if p[d] == 0.0:
            continue
        m += 1
        _pb_step(g, min(m, k), p[d], r[d])


@njit(cache=True)
def _suffix_block(p, r, k, B, b, ck, buf):
    """Fill ``buf[i] = G_{>=b*B + i}`` for i = 1..len(block) from the block's checkpoint."""
    D = p.shape[0]
    start = b * B
    end = min(start + B, D)
    n = end - start
    _copy(buf[n], ck[b])
    for i in range(n - 1, 0, -1):
        d = start + i
        src = buf[i + 1]
        dst = buf[i]
        if p[d] == 0.0:
            _copy(dst, src)
            continue
        # one out-of-place pass (no copy, then update): zeros above the support stay zero
        pd, rd = p[d], r[d]
        dst[0] = src[0] * rd
        for j in range(1, k + 1):
            dst[j] = src[j] * rd + src[j - 1] * pd
    return n


@njit(cache=True)
def _suffix_full(p, r, k, buf):
    """Fill the zeroed ``buf`` (D + 1, k + 1) with ``buf[i] = G_{>=i}`` for i = 1..D, each row
    up to its support only (the rest stays zero); returns the number of items 1..D-1 with
    ``p_d > 0``. The same steps, bit for bit, as :func:`_suffix_checkpoints_into` followed by
    :func:`_suffix_block`."""
    D = p.shape[0]
    buf[D, 0] = 1.0
    m = 0
    for d in range(D - 1, 0, -1):
        src = buf[d + 1]
        dst = buf[d]
        if p[d] == 0.0:
            _copy(dst, src)
            continue
        m += 1
        top = min(m, k)
        pd, rd = p[d], r[d]
        dst[0] = src[0] * rd
        for j in range(1, top + 1):
            dst[j] = src[j] * rd + src[j - 1] * pd
    return m


@njit(cache=True)
def _dot_reversed(f, g, n, k):
    """``sum_{j < n} f[j] g[k-1-j]`` with four partial sums: without fastmath the compiler
    keeps a single accumulator's additions in order, a latency-bound chain; four independent
    chains run ~1.6x faster (all terms are non-negative, so the order does not matter)."""
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


#: Largest suffix table ``(D + 1) (k + 1)`` (doubles) that :func:`log_esp_and_marginals_core`
#: keeps whole; beyond it, checkpoints every ``ceil(sqrt(D))`` items and recomputes each block.
FULL_SUFFIX_MAX = 4096


@njit(cache=True)
def log_esp_and_marginals_core(theta, k):
    """``(log e_k(exp theta), p(y_d = 1 | sum y = k))`` for one vector. O(D k) time (3-7x
    the value). The marginals are the gradient of ``log e_k`` and sum to k. When ``e_k = 0``
    (k < 0 or more than the finite logits) they are all 0.

    Memory: the suffix pmfs ``G_{>d}`` (D + 1 rows of k + 1) when they fit ``FULL_SUFFIX_MAX``,
    else O(sqrt(D) k): checkpoints every ``B = ceil(sqrt(D))`` items, each block's rows
    recomputed from its checkpoint by the same steps (so both give the same bits). One
    allocation per call (the marginals returned are a view of it).
    """
    D = theta.shape[0]
    invalid, n_fin, lo, hi = _scan(theta)
    if invalid:
        return np.nan, np.full(D, np.nan)
    edge = _edge_value(theta, k, n_fin)
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
    const, _ = _tilt_into(theta, float(k), n_fin, k, lo, hi, p, r, w[3 * D:4 * D])
    o = 4 * D
    f = w[o:o + K1]
    g = w[o + K1:o + 2 * K1]
    o += 2 * K1
    ck = w[o:o + nb * K1].reshape((nb, K1))
    buf = w[o + nb * K1:].reshape((B + 1, K1))
    if full:  # one backward pass: buf[i] = G_{>=i} for i = 1..D, then item 0 into g
        m = _suffix_full(p, r, k, buf)
        _copy(g, buf[1])
        if p[0] != 0.0:
            _pb_step(g, min(m + 1, k), p[0], r[0])
    else:
        _suffix_checkpoints_into(p, r, k, B, ck, g)
    qk = g[k]
    f[0] = 1.0
    m = 0
    for b in range(nb):
        n = D if full else _suffix_block(p, r, k, B, b, ck, buf)
        for i in range(n):
            d = b * B + i
            if p[d] == 0.0:
                continue
            s = _dot_reversed(f, buf[i + 1], min(m, k - 1) + 1, k)
            marg[d] = p[d] * s / qk
            m += 1
            _pb_step(f, min(m, k), p[d], r[d])
    return const + math.log(qk), marg


@njit(cache=True)
def _pb_step_tangent(q, dq, top, p, r, dp):
    """``_pb_step`` with its forward-mode tangent (``dr = -dp``), in place, descending."""
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
    invalid, n_fin, lo, hi = _scan(theta)
    if invalid:
        return np.full(D, np.nan)
    if k <= 0 or k >= n_fin:
        return out  # y is deterministic given k: zero covariance
    p, r, _, _ = _tilted(theta, float(k), n_fin, k, lo, hi)
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
            _copy(ck[d // B], g)
            _copy(dck[d // B], dg)
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
        _copy(buf[n], ck[b])
        _copy(dbuf[n], dck[b])
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
            a = _dot_reversed(f, buf[i + 1], top, k)
            da = _dot_reversed(df, buf[i + 1], top, k) + _dot_reversed(f, dbuf[i + 1], top, k)
            marg = p[d] * a / qk
            out[d] = (dp[d] * a + p[d] * da) / qk - marg * dqk / qk
            m += 1
            _pb_step_tangent(f, df, min(m, k), p[d], r[d], dp[d])
    return out


#: ``mode`` of the C kernel of :func:`make_esp_op_kernel`.
ESP_VALUE, ESP_MARGINALS, ESP_COVARIANCE_DOT = 0, 1, 2


def make_esp_op_kernel(version):
    """Body of the C callable that the conditional-Bernoulli Ops call (``numba.cfunc``, see
    :mod:`pm_perm.ops._extern`): ``op_kernel(theta, d, k, v, out, mode)`` for the C-contiguous
    (d,) float64 logits at ``theta`` and the count ``k`` returns ``log e_k(exp theta)``
    (:func:`log_esp_core`, ``mode == ESP_VALUE``) or writes to the (d,) array at ``out`` the
    marginals (``ESP_MARGINALS``, returning the value as :func:`log_esp_and_marginals_core`)
    or ``Cov(y | k) @ v`` for the (d,) array at ``v`` (``ESP_COVARIANCE_DOT``, returning 0;
    :func:`conditional_covariance_dot_core`). Pointers a mode does not use are not touched.
    ``version`` keys numba's cache as in :func:`pm_perm.kernels.permanent.make_op_kernel`.
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
_K_OUT_OF_RANGE = 9


@njit(cache=True)
def draw_conditional_bernoulli_into(rng, theta, k, y):
    """One exact draw of binary ``y`` (D,) int64 (overwritten) with ``sum y = k`` from
    ``p(y | k)``; returns 0, or 1 (``DRAW_ERRORS``) for NaN, ``+inf`` or finite logits beyond
    1e300.

    Walks the checkpointed suffix table: ``p(y_d = 1 | r left) = p_d G_{>d}[r-1] / G_{>=d}[r]``.
    ``k`` must be feasible (0 <= k <= number of finite logits); the caller checks.
    """
    D = theta.shape[0]
    invalid, n_fin, lo, hi = _scan(theta)
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
    p, r, _, _ = _tilted(theta, float(k), n_fin, k, lo, hi)
    B = max(1, int(math.ceil(math.sqrt(D))))
    ck, _ = _suffix_checkpoints(p, r, k, B)
    buf = np.zeros((B + 1, k + 1))
    left = k
    for b in range(ck.shape[0]):
        if left == 0:
            break
        n = _suffix_block(p, r, k, B, b, ck, buf)
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
def _logaddexp(a, b):
    if a < b:
        a, b = b, a
    if b == -np.inf:
        return a
    return a + math.log1p(math.exp(b - a))


@njit(cache=True)
def log_esp_all_logspace_core(theta, K):
    """Reference log-space DP: ``log e_j(exp theta)`` for j = 0..K. O(D K) logaddexp."""
    if _invalid(theta):
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
    invalid, n_fin, lo, hi = _scan(theta)
    if invalid:
        return np.full(K + 1, np.nan), True
    top = min(K, n_fin)
    out = np.full(K + 1, -np.inf)
    out[0] = 0.0
    if top < 2:
        return out, False
    p, r, const0, c = _tilted(theta, 0.5 * top, n_fin, np.int64(0), lo, hi)
    q = np.zeros(top + 1)
    q[0] = 1.0
    m = 0
    for d in range(theta.shape[0]):
        if p[d] == 0.0:
            continue
        m += 1
        _pb_step(q, min(m, top), p[d], r[d])
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
    if _invalid(theta):
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
    feasible = count_probs[:_n_finite(theta) + 1]
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
    n_inf = D - _n_finite(theta)
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
        if kr > _n_finite(sub):  # unreachable: T excludes such counts
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


#: ``which`` of the C kernel of :func:`make_draw_kernel`.
DRAW_CONDITIONAL_BERNOULLI, DRAW_NCHOOSEK, DRAW_ORDINAL = 0, 1, 2


def make_draw_kernel(version):
    """Body of the C callable that PyTensor's draws of ``ConditionalBernoulli``, ``NChooseK``
    and ``OrdinalNChooseK`` call (``numba.cfunc``, see :mod:`pm_perm.ops._extern`):
    ``draw_kernel(bitgen, theta, d, k, count_probs, r, out, which)`` draws with the caller's
    random stream (numpy's ``bitgen_t`` at ``bitgen``, :mod:`pm_perm.kernels._bitgen`) into the
    (d,) int64 array at ``out``, for the C-contiguous (d,) float64 logits at ``theta``: with
    ``which == DRAW_CONDITIONAL_BERNOULLI`` given the count ``k`` (checked to lie in
    0..number of finite logits), ``DRAW_NCHOOSEK`` with the (d + 1,) count probabilities at
    ``count_probs`` (``r`` = 1), ``DRAW_ORDINAL`` with the (r, d + 1) ones. Returns 0 or the index
    in ``DRAW_ERRORS`` of the error. ``version`` keys numba's cache as in
    :func:`pm_perm.kernels.permanent.make_op_kernel`.
    """

    def draw_kernel(bitgen, theta, d, k, count_probs, r, out, which):
        if version < 0:  # never true; referencing version puts it into numba's cache key
            return -1
        rng = generator_at(bitgen)
        th, y = carray(theta, d), carray(out, d)
        if which == DRAW_CONDITIONAL_BERNOULLI:
            if k < 0 or k > _n_finite(th):
                return _K_OUT_OF_RANGE
            return draw_conditional_bernoulli_into(rng, th, k, y)
        if which == DRAW_NCHOOSEK:
            return draw_nchoosek_into(rng, th, carray(count_probs, d + 1), y)
        return draw_ordinal_into(rng, th, carray(count_probs, (r, d + 1)), y)

    return draw_kernel


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
def _log_esp_all_batch(theta, K, logspace):
    out = np.empty((theta.shape[0], K + 1))
    for i in range(theta.shape[0]):
        if logspace:
            out[i] = log_esp_all_logspace_core(theta[i], K)
        else:
            out[i] = log_esp_all_core(theta[i], K)
    return out


@njit(cache=True)
def _sample_batch(rng, theta, k):
    out = np.empty(theta.shape, dtype=np.int64)
    for i in range(theta.shape[0]):
        out[i] = sample_conditional_bernoulli_core(rng, theta[i], k[i])
    return out


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


# ----------------------------------------------------------------------------- FFT product tree

#: Items per leaf of the FFT product tree (leaves use the exact positive DP).
FFT_LEAF = 32
#: Constant of the FFT convolution round-off bound ``kappa eps log2(n)`` per merge level.
FFT_KAPPA = 8.0


@njit(cache=True)
def _leaf_pmfs(p, r, leaf):
    n = p.shape[0]
    nb = max(1, (n + leaf - 1) // leaf)
    out = np.zeros((nb, leaf + 1))
    for b in range(nb):
        q = out[b]
        q[0] = 1.0
        m = 0
        for d in range(b * leaf, min((b + 1) * leaf, n)):
            m += 1
            _pb_step(q, m, p[d], r[d])
    return out


def _product_tree_pmf(p, r):
    """Poisson-binomial pmf of all items by exact leaf DPs and pairwise FFT merges.

    Returns ``(q, bound)`` with ``|q_j - P(S = j)| <= bound`` (absolute): each merge of two
    pmfs (2-norm <= 1) by FFT adds at most ``FFT_KAPPA eps log2(nfft)``, and later
    convolutions with pmfs (1-norm 1) do not amplify an absolute error.
    """
    polys = _leaf_pmfs(p, r, FFT_LEAF)
    bound = 0.0
    while polys.shape[0] > 1:
        if polys.shape[0] % 2:
            delta = np.zeros((1, polys.shape[1]))
            delta[0, 0] = 1.0
            polys = np.vstack([polys, delta])
        a, b = polys[0::2], polys[1::2]
        n_out = 2 * polys.shape[1] - 1
        nfft = scipy.fft.next_fast_len(n_out, real=True)
        fa = scipy.fft.rfft(a, nfft, axis=1, workers=1)
        fb = scipy.fft.rfft(b, nfft, axis=1, workers=1)
        polys = scipy.fft.irfft(fa * fb, nfft, axis=1, workers=1)[:, :n_out]
        bound += FFT_KAPPA * np.finfo(float).eps * math.log2(nfft)
    return polys[0, : p.shape[0] + 1], bound


def _log_esp_all_fft_1d(theta, K, rtol):
    fin = np.ascontiguousarray(theta[np.isfinite(theta)])
    n = fin.shape[0]
    out = np.full(K + 1, -np.inf)
    out[0] = 0.0
    top = min(K, n)
    if top == 0:
        return out, 0
    lo, hi = float(fin.min()), float(fin.max())
    done = np.zeros(top + 1, dtype=bool)
    done[0] = True
    if top == n:
        out[n] = math.fsum(fin)
        done[n] = True
    half = 1.0
    passes = 0
    while not done.all():
        j0 = int(np.argmin(done))  # first uncovered count
        target = min(max(j0 + half, 0.5), n - 0.5)
        p, r, const0, c = _tilted(fin, target, n, 0, lo, hi)
        q, bound = _product_tree_pmf(p, r)
        passes += 1
        ok = q[: top + 1] >= bound / rtol
        if not ok[j0]:
            if half >= 1.0:
                half /= 4.0  # window missed j0: re-centre closer to it
                continue
            out[j0] = log_esp_core(fin, j0)  # refuse the FFT value: exact DP for this k
            done[j0] = True
            continue
        new = np.flatnonzero(ok & ~done)
        out[new] = const0 + new * c + np.log(q[new])
        done[new] = True
        half = max(1.0, 0.45 * (new.max() - j0))
    return out, passes


def log_esp_all_fft(theta, K=None, rtol=1e-8, return_passes=False):
    """``log e_j(exp theta)`` for j = 0..K by the FFT product tree, for large D.

    Each pass tilts the logits (``E[S]`` = a target count), builds the Poisson-binomial pmf by
    exact leaf DPs of 32 items and FFT merges, and keeps only the ``q_j`` above the round-off
    bound divided by ``rtol`` (so each kept ``e_j`` has relative error <= ``rtol``); the next
    pass re-tilts towards the first count not yet covered. A count no window covers is
    computed by the exact single-k DP. Never returns an unguarded FFT value.

    Parameters
    ----------
    theta : array_like of float, shape (..., D)
    K : int, optional
        Largest count (default D).
    rtol : float
        Relative accuracy required of each ``e_j`` (default 1e-8; ``log e_j`` then has absolute
        error <= 1e-8).
    return_passes : bool
        Also return the number of tilted FFT passes used (per batch element).

    Returns
    -------
    ndarray, shape ``(*batch, K + 1)`` (and the pass counts if asked).
    Cost O(D log^2 D) per pass; the number of passes grows like ``K / sd(S)``.
    """
    theta = _as_logits(theta)
    if not (0 < rtol < 1):
        raise ValueError(f"rtol must be in (0, 1); got {rtol}")
    D = theta.shape[-1]
    K = D if K is None else _check_K(K, D)
    th = theta.reshape(-1, D)
    res = [_log_esp_all_fft_1d(t, K, rtol) for t in th]
    out = np.array([o for o, _ in res]).reshape(*theta.shape[:-1], K + 1)  # empty batch: (0,)
    if return_passes:
        return out, np.array([n for _, n in res], dtype=np.int64).reshape(theta.shape[:-1])
    return out


# ----------------------------------------------------------------------------- public API


def _as_logits(theta):
    """``theta`` as a float64 array (..., D) with D >= 1 (:func:`as_float_array`'s checks)."""
    theta = as_float_array(theta, "logits", min_ndim=1)
    if theta.shape[-1] == 0:
        raise ValueError(f"logits must have at least one item (D >= 1) in their last axis; got "
                         f"shape {theta.shape}")
    return theta


def _logits_and_counts(theta, k, k_name="k"):
    """Validate and broadcast ``theta`` (..., D) and integer ``k`` (...); flatten the batch."""
    theta = _as_logits(theta)
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
    th, kk, batch = _logits_and_counts(theta, k)
    return _log_esp_batch(th, kk).reshape(batch)


def log_esp_and_marginals(theta, k):
    """``(log e_k(exp theta), p(y_d = 1 | sum y = k))``; shapes ``batch`` and ``(*batch, D)``.

    The marginals are the gradient of the first output with respect to ``theta``.
    Cost O(D k) per vector (3-7x :func:`log_esp`), memory O(sqrt(D) k).
    """
    th, kk, batch = _logits_and_counts(theta, k)
    v, m = _log_esp_and_marginals_batch(th, kk)
    return v.reshape(batch), m.reshape(*batch, th.shape[-1])


def conditional_marginals(theta, k):
    """``p(y_d = 1 | sum y = k)`` of the conditional Bernoulli, shape ``(*batch, D)``."""
    return log_esp_and_marginals(theta, k)[1]


def _check_K(K, D):
    """``min(K, D)`` for a non-negative integer ``K`` (an integral float is accepted)."""
    if not (np.ndim(K) == 0 and isinstance(K, int | float | np.integer | np.floating)
            and math.isfinite(K) and int(K) == K and K >= 0):
        raise ValueError(f"K must be a non-negative integer (the largest count); got {K!r}")
    return min(int(K), D)


def log_esp_all(theta, K=None):
    """``log e_j(exp theta)`` for j = 0..K (default K = D), shape ``(*batch, K + 1)``.

    Guarded tilted DP (accurate whenever every tilted ``P(S = j) >= 1e-250``), falling back
    to the log-space DP otherwise; both O(D K). Entries with j above the number of finite
    logits are ``-inf``. ``ValueError`` for invalid logits (NaN, ``+inf``, none in the last
    axis) or a ``K`` that is not a non-negative integer.
    """
    theta = _as_logits(theta)
    D = theta.shape[-1]
    K = D if K is None else _check_K(K, D)
    th = theta.reshape(-1, D)
    return _log_esp_all_batch(th, K, False).reshape(*theta.shape[:-1], K + 1)


def log_esp_all_logspace(theta, K=None):
    """Same as :func:`log_esp_all` by the plain log-space DP (reference; ~10x slower)."""
    theta = _as_logits(theta)
    D = theta.shape[-1]
    K = D if K is None else _check_K(K, D)
    th = theta.reshape(-1, D)
    return _log_esp_all_batch(th, K, True).reshape(*theta.shape[:-1], K + 1)


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
    theta = _as_logits(theta)
    D = theta.shape[-1]
    if size is not None:
        size = as_size(size)
        theta = np.broadcast_to(theta, (*size, D))
        k = np.broadcast_to(k, size)
    th, kk, batch = _logits_and_counts(theta, k)
    n_fin = np.isfinite(th).sum(-1)
    if np.any(kk < 0) or np.any(kk > n_fin):
        raise ValueError(
            "k must satisfy 0 <= k <= number of finite logits (items with logit -inf can never "
            f"be on); got k in [{kk.min()}, {kk.max()}] with at most {n_fin.max()} finite logits"
        )
    return _sample_batch(_as_rng(rng), th, kk).reshape(*batch, D)


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
    theta = _as_logits(theta)
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
