"""Short top-k ballots from shared tables: the remainder term of :mod:`pm_perm.kernels.top_k`
for many ballots of one length at O(2^r) to O(k 3^r) each instead of O(|U| r 2^r).

A ballot ranking the ``k < K`` items ``R`` leaves the ``r = K - k`` positions ``k..K-1`` to the
unranked items ``U``: its remainder is the coefficient of the full position set in the product
over ``i in U`` of the linear forms ``f_i = b_i + sum_p A[p, i] x_p`` (``x_p x_p = 0``: a
subset algebra over the ``r`` positions, tables of ``2^r`` entries). For each length ``k``
present in many ballots this module builds, once per evaluation, the products over runs of
consecutive items (``M`` items in index order, ``a < b``):

* ``P[t]`` the items ``< t``, ``Q[t]`` the items ``>= t``;
* ``PP[a, b]`` the items ``< b`` except ``a``; ``QQ[a, b]`` the items ``> a`` except ``b``;
* ``Seg[a, b]`` the items strictly between ``a`` and ``b``,

each one DP step from another (O(M^2 r 2^r) per length). With ``R = {p_1 < ... < p_k}`` the
remainder is ``<X, Y> = sum_S X(S) Y(full - S)`` of two of them, after ``k - 3`` subset
convolutions (``O(3^r)`` each) for ``k >= 4``::

    k = 1: <P[p_1], Q[p_1 + 1]>      k = 2: <P[p_1], QQ[p_1, p_2]>
    k >= 3: <PP[p_1, p_2] * Seg[p_2, p_3] * ... * Seg[p_{k-2}, p_{k-1}], QQ[p_{k-1}, p_k]>

Every term is a sum of products of non-negative weights: nothing is subtracted, so there is no
cancellation whatever the weights (removing the ballot's items from one product over all
items would divide by ``f_i``, an alternating series that loses every digit when the ranked
items dominate, which is the usual case: they are the ballots' favourites).

Gradient: reverse mode. Each ballot adds ``w / <X, Y>`` times the other factor to the adjoint
of the SHARED tables it read (through its convolutions); after all ballots one backward sweep
over each chain of tables turns the adjoints into the gradient of the logits (O(M^2 r 2^r) per
length). Tables are dual-scaled as the kernel's (every weight at most 1) and rescaled by a
power when their largest entry falls below ``1e-100`` (a log scale per table). A ballot whose
scaled remainder is below ``FAST_TINY``, or below the kernel's ``SUFFIX_TINY`` with its scales,
returns NaN: the caller computes it by its own DP (and its log-space fallback).

:func:`plan_lengths` decides, per length, whether the tables pay for themselves (the DP's cost
for that many ballots against the tables' build and sweep, within ``FAST_MAX_BYTES``).
"""

from __future__ import annotations

import math

import numpy as np

from pm_perm._numba import njit

__all__ = ["FAST_MAX_BYTES", "FAST_TINY"]

#: A ballot's scaled remainder below this is left to the caller's DP (it bounds the adjoints
#: ``w / <X, Y>`` far below overflow).
FAST_TINY = 1e-200
#: Largest memory (bytes) of the tables of all ballot lengths and their adjoints.
FAST_MAX_BYTES = 1 << 27

_RESCALE = 1e-100


@njit(cache=True, inline="always")
def layout(M, k):
    """Row offsets of the tables of length ``k`` (``-1`` when absent): ``(PP, QQ, Seg, rows)``;
    ``P[t]`` is row ``t``, ``Q[t]`` row ``M + 1 + t``, the pair ``(a, b)`` row ``off + a M + b``."""
    off = 2 * (M + 1)
    pp = qq = sg = -1
    if k >= 3:
        pp = off
        off += M * M
    if k >= 2:
        qq = off
        off += M * M
    if k >= 4:
        sg = off
        off += M * M
    return pp, qq, sg, off


@njit(cache=True)
def plan_lengths(M, K, n_of_length, fast):
    """Which lengths ``k`` (``1..K-1``) use the tables: ``fast = 1`` every length within the
    memory limit, ``0`` none, ``-1`` those where the DP of ``n_of_length[k]`` ballots costs
    more than the tables (build and sweep) plus their convolutions. The tables of all chosen
    lengths (and their adjoints) take at most ``FAST_MAX_BYTES``, the longest ballots (the
    smallest tables) first."""
    use = np.zeros(K + 1, dtype=np.bool_)
    if fast == 0:
        return use
    budget = FAST_MAX_BYTES
    for k in range(K - 1, 0, -1):
        if n_of_length[k] == 0:
            continue
        r = K - k
        n = 1 << r
        rows = layout(M, k)[3]
        if 16 * rows * n > budget:
            continue
        if fast == 1:
            use[k] = True
            budget -= 16 * rows * n
            continue
        step = (r + 2) * n // 2
        dp = n_of_length[k] * (M - k) * step
        pair_kinds = (rows - 2 * (M + 1)) // (M * M)
        tables = 2 * (2 * M + pair_kinds * M * (M - 1) // 2) * step  # build and sweep
        conv = max(k - 3, 0) * 3.0**r + 3 * n
        use[k] = dp > tables + n_of_length[k] * conv
        budget -= 16 * rows * n if use[k] else 0
    return use


@njit(cache=True, inline="always")
def dp_step(A, i, bi, src, dst, r):
    """``dst(S) = bi src(S) + sum_{j in S} A[j, i] src(S - {j})`` for every subset ``S`` of the
    ``r`` rows, one row ``j`` at a time over contiguous runs (vectorised); returns the largest
    entry of ``dst``."""
    n = 1 << r
    for S in range(n):
        dst[S] = bi * src[S]
    for j in range(r):
        a = A[j, i]
        if a == 0.0:
            continue
        h = 1 << j
        for blk in range(h, n, 2 * h):
            for lo in range(blk, blk + h):
                dst[lo] += a * src[lo - h]
    mx = 0.0
    for S in range(n):
        if dst[S] > mx:
            mx = dst[S]
    return mx


@njit(cache=True, inline="always")
def _advance(As, i, bi, src, dst, s_src):
    """``dst = f_i * src`` (one DP step, item ``i``), rescaled when its largest entry is below
    ``1e-100``; returns the log scale of ``dst``."""
    mx = dp_step(As, i, bi, src, dst, As.shape[0])
    if 0.0 < mx < _RESCALE:
        for S in range(1 << As.shape[0]):
            dst[S] /= mx
        return s_src + math.log(mx)
    return s_src


@njit(cache=True, inline="always")
def _retreat(As, i, bi, src, bdst, bsrc, f, grad, k):
    """Adjoint of ``dst = f * (f_i * src)``: the gradient of item ``i``'s logits into ``grad``
    (positions ``k..K-1`` and the last column) and ``f_i^T bdst`` into ``bsrc``."""
    r = As.shape[0]
    n = 1 << r
    nz = False
    for S in range(n):
        if bdst[S] != 0.0:
            nz = True
            break
    if not nz:
        return
    K = grad.shape[1] - 1
    gb = 0.0
    for S in range(n):
        gb += bdst[S] * src[S]
        bsrc[S] += f * bi * bdst[S]
    grad[i, K] += f * bi * gb
    for j in range(r):
        a = As[j, i]
        if a == 0.0:
            continue
        h = 1 << j
        ga = 0.0
        for blk in range(h, n, 2 * h):
            for lo in range(blk, blk + h):
                ga += bdst[lo] * src[lo - h]
                bsrc[lo - h] += f * a * bdst[lo]
        grad[i, k + j] += f * a * ga


@njit(cache=True, inline="always")
def _unit(row):
    row[:] = 0.0
    row[0] = 1.0


@njit(cache=True)
def build_tables(As, b, M, k):
    """``(T, s)``: the tables of length ``k`` (rows as :func:`layout`, ``2^r`` entries, ``As``
    the rows ``k..K-1`` of the dual-scaled weights) and their log scales."""
    pp, qq, sg, rows = layout(M, k)
    T = np.empty((rows, 1 << As.shape[0]))
    s = np.zeros(rows)
    oq = M + 1
    _unit(T[0])
    for t in range(M):
        s[t + 1] = _advance(As, t, b[t], T[t], T[t + 1], s[t])
    _unit(T[oq + M])
    for t in range(M - 1, -1, -1):
        s[oq + t] = _advance(As, t, b[t], T[oq + t + 1], T[oq + t], s[oq + t + 1])
    for a in range(M - 1):
        if pp >= 0:  # PP[a, a + 1] = P[a], then the items a + 1, ..., b - 1
            T[pp + a * M + a + 1] = T[a]
            s[pp + a * M + a + 1] = s[a]
        if sg >= 0:
            _unit(T[sg + a * M + a + 1])
        for c in range(a + 1, M - 1):
            for off in (pp, sg):
                if off >= 0:
                    x = off + a * M + c
                    s[x + 1] = _advance(As, c, b[c], T[x], T[x + 1], s[x])
    if qq >= 0:
        for c in range(1, M):  # QQ[c - 1, c] = Q[c + 1], then the items c - 1, ..., a + 1
            x = qq + (c - 1) * M + c
            T[x] = T[oq + c + 1]
            s[x] = s[oq + c + 1]
            for a in range(c - 1, 0, -1):
                x = qq + a * M + c
                s[x - M] = _advance(As, a, b[a], T[x], T[x - M], s[x])
    return T, s


@njit(cache=True)
def sweep_tables(As, b, M, k, T, s, B, grad):
    """The backward sweep: the adjoints ``B`` of the tables (accumulated by
    :func:`ballot_remainder`) into the gradient ``grad`` (M, K + 1) of the logits."""
    pp, qq, sg, _ = layout(M, k)
    oq = M + 1
    for a in range(M - 1):
        for off in (sg, pp):
            if off < 0:
                continue
            for c in range(M - 1, a + 1, -1):
                x = off + a * M + c
                _retreat(As, c - 1, b[c - 1], T[x - 1], B[x], B[x - 1],
                         math.exp(s[x - 1] - s[x]), grad, k)
        if pp >= 0:
            B[a] += B[pp + a * M + a + 1]
    if qq >= 0:
        for c in range(1, M):
            for a in range(c - 1):
                x = qq + a * M + c
                _retreat(As, a + 1, b[a + 1], T[x + M], B[x], B[x + M],
                         math.exp(s[x + M] - s[x]), grad, k)
            B[oq + c + 1] += B[qq + (c - 1) * M + c]
    for t in range(M):
        _retreat(As, t, b[t], T[oq + t + 1], B[oq + t], B[oq + t + 1],
                 math.exp(s[oq + t + 1] - s[oq + t]), grad, k)
    for t in range(M, 0, -1):
        _retreat(As, t - 1, b[t - 1], T[t - 1], B[t], B[t - 1], math.exp(s[t - 1] - s[t]),
                 grad, k)


@njit(cache=True, inline="always")
def _convolve(X, Y, out, n):
    """``out(T) = sum_{S subset T} X(S) Y(T - S)``; returns its largest entry."""
    mx = 0.0
    for t in range(n):
        acc = 0.0
        S = t
        while True:
            acc += X[S] * Y[t ^ S]
            if S == 0:
                break
            S = (S - 1) & t
        out[t] = acc
        mx = max(mx, acc)
    return mx


@njit(cache=True)
def ballot_remainder(T, s, B, M, k, R, wk, gk, work, bwork, facs, log_tiny):
    """``log`` of the remainder of the ballot ranking the items ``R[:k]`` (increasing), in the
    dual-scaled frame of the tables; with ``gk`` adds ``wk`` times its adjoints into ``B``.
    NaN when the scaled remainder is below ``FAST_TINY`` or its log below ``log_tiny``: the
    caller's DP then computes it. ``work``, ``bwork`` (K, 2^r or more), ``facs`` (K,): scratch."""
    n = T.shape[1]
    full = n - 1
    pp, qq, sg, _ = layout(M, k)
    if k == 1:
        x, y = R[0], M + 1 + R[0] + 1
    elif k == 2:
        x, y = R[0], qq + R[0] * M + R[1]
    else:
        x, y = pp + R[0] * M + R[1], qq + R[k - 2] * M + R[k - 1]
    nconv = max(k - 3, 0)
    sx = s[x]
    X = T[x]
    for c in range(nconv):  # X = PP[p1, p2] * Seg[p2, p3] * ... * Seg[p_{k-2}, p_{k-1}]
        g = sg + R[c + 1] * M + R[c + 2]
        mx = _convolve(X, T[g], work[c], n)
        sx += s[g]
        facs[c] = 1.0
        if 0.0 < mx < _RESCALE:
            for t in range(n):
                work[c, t] /= mx
            sx += math.log(mx)
            facs[c] = 1.0 / mx
        X = work[c]
    Y = T[y]
    v = 0.0
    for S in range(n):
        v += X[S] * Y[full ^ S]
    if not v > FAST_TINY:
        return np.nan
    lv = math.log(v) + sx + s[y]
    if lv < log_tiny:
        return np.nan
    if not gk:
        return lv
    cw = wk / v
    By = B[y]
    for S in range(n):
        By[full ^ S] += cw * X[S]
    if nconv == 0:
        Bx = B[x]
        for S in range(n):
            Bx[S] += cw * Y[full ^ S]
        return lv
    bw = bwork[nconv - 1]
    for S in range(n):
        bw[S] = cw * Y[full ^ S]
    for c in range(nconv - 1, -1, -1):  # back through X_c = X_{c-1} * Seg / mx
        g = sg + R[c + 1] * M + R[c + 2]
        Xp = T[x] if c == 0 else work[c - 1]
        Yg = T[g]
        f = facs[c]
        bo = bwork[c]
        bi = B[x] if c == 0 else bwork[c - 1]
        if c > 0:
            bi[:] = 0.0
        Bg = B[g]
        for t in range(n):
            bt = f * bo[t]
            if bt == 0.0:
                continue
            S = t
            while True:
                bi[S] += bt * Yg[t ^ S]
                Bg[t ^ S] += bt * Xp[S]
                if S == 0:
                    break
                S = (S - 1) & t
    return lv


@njit(cache=True, inline="always")
def remainder_unscale(u, v, k, U, nU):
    """The log factor from the dual-scaled frame back to the logits of a remainder over the
    items ``U[:nU]`` at positions ``k..K-1``: ``sum_{i in U} u_i + sum_{j >= k} v_j``."""
    K = v.shape[0] - 1
    out = 0.0
    for t in range(nU):
        out += u[U[t]]
    for j in range(k, K):
        out += v[j]
    if nU > K - k:
        out += (nU - (K - k)) * v[K]
    return out


@njit(cache=True)
def ballot_lengths(orders, K):
    """``n[k]``: how many rows rank ``k`` items (``k = 0..K``; longer rows not counted)."""
    n = np.zeros(K + 1, dtype=np.int64)
    for q in range(orders.shape[0]):
        k = 0
        for i in range(orders.shape[1]):
            k += orders[q, i] >= 0
        if k <= K:
            n[k] += 1
    return n


@njit(cache=True, inline="always")
def bit_index(low):
    """The index of the single set bit of ``low``."""
    j = 0
    while low > 1:
        low >>= 1
        j += 1
    return j


@njit(cache=True, inline="always")
def _lse(a, c):
    if a == -np.inf:
        return c
    if c == -np.inf:
        return a
    return max(a, c) + math.log1p(math.exp(-abs(a - c)))


@njit(cache=True)
def suffix_log(L, k, items, wk, grad, gk):
    """The remainder of :func:`pm_perm.kernels.top_k._suffix` in log space on the unscaled
    logits: exact whatever the spread, about 20 times slower; for the ballots whose scaled
    suffix sum is below ``SUFFIX_TINY``."""
    K = L.shape[1] - 1
    r = K - k
    n = 1 << r
    m = items.shape[0]
    full = n - 1
    F = np.full((m + 1, n), -np.inf)
    F[0, 0] = 0.0
    for t in range(m):
        i = items[t]
        for S in range(n):
            acc = L[i, K] + F[t, S]
            s = S
            while s:
                low = s & (-s)
                acc = _lse(acc, L[i, k + bit_index(low)] + F[t, S ^ low])
                s ^= low
            F[t + 1, S] = acc
    lz = F[m, full]
    if not gk or lz == -np.inf:
        return lz
    cur = np.full(n, -np.inf)
    nxt = np.empty(n)
    cur[0] = 0.0
    for t in range(m - 1, -1, -1):
        i = items[t]
        for S in range(n):
            f = F[t, S]
            if f == -np.inf:
                continue
            C = full ^ S
            grad[i, K] += wk * math.exp(f + L[i, K] + cur[C] - lz)
            c = C
            while c:
                low = c & (-c)
                j = bit_index(low)
                grad[i, k + j] += wk * math.exp(f + L[i, k + j] + cur[C ^ low] - lz)
                c ^= low
        for T in range(n):
            acc = L[i, K] + cur[T]
            s = T
            while s:
                low = s & (-s)
                acc = _lse(acc, L[i, k + bit_index(low)] + cur[T ^ low])
                s ^= low
            nxt[T] = acc
        cur, nxt = nxt, cur
    return lz
