"""The subset dynamic program behind the exact log-permanent, its marginals and exact sampler.

For non-negative weights ``B`` (M, M) (``B = exp(W)`` after the dual scaling below):

* forward table ``f[S] = sum over bijections of rows 0..|S|-1 onto the column set S`` of the
  product of ``B``, so ``f[S] = sum_{j in S} f[S - {j}] B[|S| - 1, j]`` and
  ``perm(B) = f[all columns]`` (Petterson et al. 2009, sec. 4.2; Ryser's formula is NOT used:
  its alternating sum cancels catastrophically) (:func:`forward`);
* backward table ``g[T] = `` the same sum for rows ``|T|..M-1`` onto the columns not in ``T``;
  the unnormalised marginals ``sum_{|T| = i, j not in T} f[T] B[i, j] g[T + {j}]`` (the
  gradient of ``log perm``) are accumulated inside the backward pass (:func:`backward`), which
  overwrites the forward table in place, so value and marginals need one table of 2^M float64.

Blocking: the DP runs over blocks of 8 subsets that share their high bits (``S = 8 q + t``):
for a high column the eight predecessors are again eight consecutive entries, so the eight sums
are independent and vectorise; the three low columns are resolved inside the block. Matrices
with M < 3 are padded with an identity tail (:func:`padded`); M up to ``ENUMERATE_MAX_M`` is
enumerated instead (no table).

Scaling (:func:`dp_value`, :func:`dp_value_and_marginals`): ``W`` is shifted by the dual
potentials of the max-weight assignment (:func:`pm_perm.kernels.assignment.dual_scaled`), so
every product is at most 1 and the largest is 1: only positive numbers in ``[0, M!]`` are added,
and the relative error of ``log perm`` is a few ulps times ``M`` whatever the spread of the
logits. ``-inf`` logits become exact zeros.

Cost: O(M 2^M) time and one table of 2^M float64 (:func:`workspace`); with marginals a small
constant times the value's time in the same table.
"""

from __future__ import annotations

import math
import sys
import threading

import numpy as np
from numba import objmode, types
from numba.core.types import ExternalFunction

from pm_perm._numba import njit
from pm_perm.kernels.assignment import dual_scaled

__all__ = [
    "DEBRUIJN",
    "ENUMERATE_MAX_M",
    "KEEP_MAX_M",
    "KEEP_MIN_M",
    "backward",
    "ctz",
    "dp_value",
    "dp_value_and_marginals",
    "forward",
    "padded",
    "popcount",
    "workspace",
]


#: Up to this M the value and marginals enumerate the M! permutations directly (at most 24
#: products of 4 terms, no allocation): cheaper than the DP's fixed costs (assignment duals,
#: padded blocks and their scratch arrays); above it the subset DP.
ENUMERATE_MAX_M = 4


def _nested_permutations(m_max):
    """All permutations of ``range(m_max)`` ordered so that the first ``m!`` rows are the
    permutations of ``range(m)`` (extended by the identity), for every ``m <= m_max``."""
    from itertools import permutations

    rows: list[tuple[int, ...]] = []
    seen = set()
    for m in range(1, m_max + 1):
        for p in permutations(range(m)):
            full = p + tuple(range(m, m_max))
            if full not in seen:
                seen.add(full)
                rows.append(full)
    return np.array(rows, dtype=np.int64)


_SMALL_PERMS = _nested_permutations(ENUMERATE_MAX_M)
_FACTORIAL = np.array([1, 1, 2, 6, 24, 120], dtype=np.int64)


@njit(cache=True, inline="always")
def _score(W, r):
    """``sum_i W[i, y[i]]`` of the ``r``-th permutation ``y`` of ``_SMALL_PERMS``."""
    s = 0.0
    for i in range(W.shape[0]):
        s += W[i, _SMALL_PERMS[r, i]]
    return s


@njit(cache=True)
def _best_permutation_score(W):
    """``max_y sum_i W[i, y[i]]`` over the ``M!`` permutations, ``M <= ENUMERATE_MAX_M``."""
    best = -np.inf
    for r in range(_FACTORIAL[W.shape[0]]):
        s = _score(W, r)
        if s > best:
            best = s
    return best


@njit(cache=True)
def _enumerate_value(W):
    """``log perm(exp W)`` by enumerating the ``M!`` permutations, ``M <= ENUMERATE_MAX_M``;
    log-sum-exp scaled by the best permutation, so every term is in ``[0, 1]``."""
    best = _best_permutation_score(W)
    if best == -np.inf:
        return -np.inf
    total = 0.0
    for r in range(_FACTORIAL[W.shape[0]]):
        total += math.exp(_score(W, r) - best)
    return math.log(total) + best


@njit(cache=True)
def _enumerate_with_marginals(W, out):
    """As :func:`_enumerate_value`, with the marginals ``P`` written into ``out`` (M, M)
    (all zeros if ``perm = 0``)."""
    M = W.shape[0]
    perms = _SMALL_PERMS
    for i in range(M):
        for j in range(M):
            out[i, j] = 0.0
    best = _best_permutation_score(W)
    if best == -np.inf:
        return -np.inf
    total = 0.0
    for r in range(_FACTORIAL[M]):
        t = math.exp(_score(W, r) - best)
        if t > 0.0:
            total += t
            for i in range(M):
                out[i, perms[r, i]] += t
    inv = 1.0 / total
    for i in range(M):
        for j in range(M):
            out[i, j] *= inv
    return math.log(total) + best


DEBRUIJN = np.array(
    [0, 1, 28, 2, 29, 14, 24, 3, 30, 22, 20, 15, 25, 17, 4, 8,
     31, 27, 13, 23, 21, 19, 16, 7, 26, 12, 18, 6, 11, 5, 10, 9],
    dtype=np.int64,
)  # fmt: skip


@njit(cache=True, inline="always")
def ctz(low, table):
    """Index of the single set bit of ``low`` (a power of two below 2^32)."""
    return table[((low * 0x077CB531) & 0xFFFFFFFF) >> 27]


@njit(cache=True, inline="always")
def popcount(x):
    x = x - ((x >> 1) & 0x55555555)
    x = (x & 0x33333333) + ((x >> 2) & 0x33333333)
    x = (x + (x >> 4)) & 0x0F0F0F0F
    return ((x * 0x01010101) & 0xFFFFFFFF) >> 24


# The DP runs over blocks of 8 subsets that share their high bits (S = 8 q + t): for a high
# column j >= 3 the eight predecessors S ^ (1 << j) are again eight consecutive entries, so the
# eight sums are independent and vectorise; the three low columns are resolved inside the block.
# One subset at a time would be slower: its single accumulator waits on FMA latency.

_PC8 = np.array([0, 1, 1, 2, 1, 2, 2, 3], dtype=np.int64)


@njit(cache=True, inline="always")
def _block_weights(B, offset):
    """``C[pq, j, t] = B[pq + popcount(t) + offset, j]`` (0 outside the rows), for the blocks."""
    M = B.shape[0]
    H = M - 3
    C = np.zeros((H + 1, M, 8))
    for pq in range(H + 1):
        for t in range(8):
            r = pq + _PC8[t] + offset
            if 0 <= r < M:
                for j in range(M):
                    C[pq, j, t] = B[r, j]
    return C


@njit(cache=True, fastmath=True)
def forward(B, f):
    """Fill ``f[S]`` (rows 0..|S|-1 onto columns S) for M >= 3; returns perm(B) = f[full].

    ``B`` holds finite non-negative numbers (fastmath is safe: no inf or NaN can occur).
    """
    M = B.shape[0]
    H = M - 3
    C = _block_weights(B, -1)
    table = DEBRUIJN
    for q in range(1 << H):
        pq = popcount(q)
        a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = 0.0
        s = q
        while s:
            low = s & (-s)
            src = (q ^ low) << 3
            c = C[pq, ctz(low, table) + 3]
            a0 += f[src] * c[0]
            a1 += f[src + 1] * c[1]
            a2 += f[src + 2] * c[2]
            a3 += f[src + 3] * c[3]
            a4 += f[src + 4] * c[4]
            a5 += f[src + 5] * c[5]
            a6 += f[src + 6] * c[6]
            a7 += f[src + 7] * c[7]
            s ^= low
        # low columns 0, 1, 2; the row of subset 8q + t is pq + popcount(t) - 1
        f0 = 1.0 if q == 0 else a0
        f1 = a1 + f0 * B[pq, 0]
        f2 = a2 + f0 * B[pq, 1]
        f4 = a4 + f0 * B[pq, 2]
        f3 = a3 + f2 * B[pq + 1, 0] + f1 * B[pq + 1, 1]
        f5 = a5 + f4 * B[pq + 1, 0] + f1 * B[pq + 1, 2]
        f6 = a6 + f4 * B[pq + 1, 1] + f2 * B[pq + 1, 2]
        f7 = a7 + f6 * B[pq + 2, 0] + f5 * B[pq + 2, 1] + f3 * B[pq + 2, 2]
        base = q << 3
        f[base] = f0
        f[base + 1] = f1
        f[base + 2] = f2
        f[base + 3] = f3
        f[base + 4] = f4
        f[base + 5] = f5
        f[base + 6] = f6
        f[base + 7] = f7
    return f[(1 << M) - 1]


@njit(cache=True, fastmath=True)
def backward(B, f, g, P, marginals):
    """Fill ``g[T]`` (rows |T|..M-1 onto the columns not in T) for M >= 3; returns g[0].

    With ``marginals``, also accumulate ``P[i, j] += f[T] B[i, j] g[T + {j}]`` over ``|T| = i``
    (unnormalised marginals; ``f`` must be the forward table). ``P`` must start at zero.

    For the high columns, ``B[i, j]`` depends on ``t`` only through ``popcount(t)``, so the
    eight products ``f g`` of a block and column fold into four row sums before they are stored
    (``PT[j, row]``, multiplied by ``B`` once at the end): half the read-modify-writes of one
    accumulator per (row offset, column, t), which would cost more than the two passes
    themselves.
    """
    M = B.shape[0]
    H = M - 3
    D = _block_weights(B, 0)
    PT = np.zeros((M, M + 3))  # PT[j, r] = sum of f[T] g[T + {j}] over |T| = r, high columns j
    table = DEBRUIJN
    top = (1 << H) - 1
    for q in range(top, -1, -1):
        pq = popcount(q)
        base = q << 3
        a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = 0.0
        # (local copies: stores into PT could otherwise alias f and block vectorisation)
        f0, f1, f2, f3 = f[base], f[base + 1], f[base + 2], f[base + 3]
        f4, f5, f6, f7 = f[base + 4], f[base + 5], f[base + 6], f[base + 7]
        s = top ^ q
        while s:
            low = s & (-s)
            j = ctz(low, table) + 3
            src = (q | low) << 3
            d = D[pq, j]
            g0, g1, g2, g3 = g[src], g[src + 1], g[src + 2], g[src + 3]
            g4, g5, g6, g7 = g[src + 4], g[src + 5], g[src + 6], g[src + 7]
            a0 += d[0] * g0
            a1 += d[1] * g1
            a2 += d[2] * g2
            a3 += d[3] * g3
            a4 += d[4] * g4
            a5 += d[5] * g5
            a6 += d[6] * g6
            a7 += d[7] * g7
            if marginals:  # rows pq + popcount(t)
                pt = PT[j]
                pt[pq] += f0 * g0
                pt[pq + 1] += f1 * g1 + f2 * g2 + f4 * g4
                pt[pq + 2] += f3 * g3 + f5 * g5 + f6 * g6
                pt[pq + 3] += f7 * g7
            s ^= low
        # low columns, t from 7 down; the row of subset 8q + t is pq + popcount(t)
        g7 = 1.0 if q == top else a7
        r2 = pq + 2
        r1 = pq + 1
        e6_0 = B[r2, 0] * g7  # r2 <= H + 2 = M - 1
        e5_1 = B[r2, 1] * g7
        e3_2 = B[r2, 2] * g7
        g6 = a6 + e6_0
        g5 = a5 + e5_1
        g3 = a3 + e3_2
        e4_0 = B[r1, 0] * g5
        e4_1 = B[r1, 1] * g6
        e2_0 = B[r1, 0] * g3
        e2_2 = B[r1, 2] * g6
        e1_1 = B[r1, 1] * g3
        e1_2 = B[r1, 2] * g5
        g4 = a4 + e4_0 + e4_1
        g2 = a2 + e2_0 + e2_2
        g1 = a1 + e1_1 + e1_2
        e0_0 = B[pq, 0] * g1
        e0_1 = B[pq, 1] * g2
        e0_2 = B[pq, 2] * g4
        g0 = a0 + e0_0 + e0_1 + e0_2
        g[base] = g0
        g[base + 1] = g1
        g[base + 2] = g2
        g[base + 3] = g3
        g[base + 4] = g4
        g[base + 5] = g5
        g[base + 6] = g6
        g[base + 7] = g7
        if marginals:
            P[r2, 0] += f6 * e6_0
            P[r2, 1] += f5 * e5_1
            P[r2, 2] += f3 * e3_2
            P[r1, 0] += f4 * e4_0 + f2 * e2_0
            P[r1, 1] += f4 * e4_1 + f1 * e1_1
            P[r1, 2] += f2 * e2_2 + f1 * e1_2
            P[pq, 0] += f0 * e0_0
            P[pq, 1] += f0 * e0_1
            P[pq, 2] += f0 * e0_2
    if marginals:
        for r in range(M):
            for j in range(3, M):
                P[r, j] += B[r, j] * PT[j, r]
    return g[0]


@njit(cache=True, inline="always")
def padded(B):
    """Embed ``B`` (M < 3) as the leading block of a 3 x 3 matrix with a fixed identity tail,
    so the blocked DP (which needs M >= 3) applies; the permanent is unchanged."""
    M = B.shape[0]
    if M >= 3:
        return B
    Bp = np.zeros((3, 3))
    for i in range(M):  # (a loop: a slice assignment compiles numba's shape-error formatting)
        for j in range(M):
            Bp[i, j] = B[i, j]
    for i in range(M, 3):
        Bp[i, i] = 1.0
    return Bp


if sys.platform.startswith("linux"):
    _madvise = ExternalFunction("madvise", types.intc(types.intp, types.uintp, types.intc))

    @njit(cache=True)
    def _advise_huge_pages(table):
        """Ask Linux for transparent huge pages on the table (``MADV_HUGEPAGE`` = 14).

        Without it, first-touch page faults of numba's allocations can cost as much as the DP
        itself at M >= 22. Advisory only: a kernel that refuses simply keeps small pages.
        """
        huge = 1 << 21
        addr = table.ctypes.data
        start = (addr + huge - 1) & ~(huge - 1)
        end = (addr + table.size * 8) & ~(huge - 1)
        if end > start:
            _madvise(start, end - start, 14)

else:

    @njit(cache=True)
    def _advise_huge_pages(table):
        """No-op outside Linux."""


#: Tables of 2^KEEP_MIN_M .. 2^KEEP_MAX_M float64 (512 KiB .. 32 MiB) are kept, one per thread,
#: and reused by later calls: a fresh allocation of that size costs thousands of page faults per
#: call, as much as the DP itself. Larger tables are allocated per call (their DP dwarfs the
#: faults) and freed.
KEEP_MIN_M, KEEP_MAX_M = 16, 22
_KEPT: dict[int, np.ndarray] = {}


def _kept_table(M):
    key = threading.get_ident()
    table = _KEPT.get(key)
    if table is None or table.size != 1 << M:
        table = np.empty(1 << M)
        _KEPT[key] = table
    return table


@njit(cache=True)
def workspace(M):
    """The one table of 2^max(M, 3) float64 the DP needs (reused across a batch and, for
    KEEP_MIN_M <= M <= KEEP_MAX_M, across calls in the same thread)."""
    if M <= ENUMERATE_MAX_M:
        return np.empty(0)  # enumeration needs no table
    n = max(M, 3)
    if KEEP_MIN_M <= n <= KEEP_MAX_M:
        with objmode(table="float64[::1]"):
            table = _kept_table(n)
        return table
    table = np.empty(1 << n)
    if n >= 18:
        _advise_huge_pages(table)
    return table


@njit(cache=True, inline="always")
def dp_value(W, work):
    if W.shape[0] <= ENUMERATE_MAX_M:
        return _enumerate_value(W)
    B, shift, feasible = dual_scaled(W)
    if not feasible:
        return -np.inf
    return math.log(forward(padded(B), work)) + shift


@njit(cache=True, inline="always")
def dp_value_and_marginals(W, work, out):
    """Value, and marginals into ``out`` (M, M). The backward pass overwrites the forward table
    in place: block ``q`` reads its own ``f`` entries before writing ``g`` there, and reads ``g``
    only from blocks above it, so one table of 2^M doubles suffices."""
    M = W.shape[0]
    if M <= ENUMERATE_MAX_M:
        return _enumerate_with_marginals(W, out)
    out[:, :] = 0.0
    B, shift, feasible = dual_scaled(W)
    if not feasible:
        return -np.inf
    B = padded(B)
    P = np.zeros((B.shape[0], B.shape[0]))
    perm = forward(B, work)
    backward(B, work, work, P, True)
    inv = 1.0 / perm
    for i in range(M):
        for j in range(M):
            out[i, j] = P[i, j] * inv
    return math.log(perm) + shift
