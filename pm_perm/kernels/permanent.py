"""Exact log-permanent, permutation marginals and exact sampling by the subset dynamic program.

For logits ``W`` (M, M), ``B = exp(W)`` and the permutation model
``p(y) = prod_i B[i, y[i]] / perm(B)`` (``y[i]`` is the column matched to row ``i``):

* forward table ``f[S] = sum over bijections of rows 0..|S|-1 onto the column set S`` of the
  product of ``B``, so ``f[S] = sum_{j in S} f[S - {j}] B[|S| - 1, j]`` and
  ``perm(B) = f[all columns]`` (Petterson et al. 2009, sec. 4.2; Ryser's formula is NOT used:
  its alternating sum cancels catastrophically);
* backward table ``g[T] = `` the same sum for rows ``|T|..M-1`` onto the columns not in ``T``;
* marginals ``P[i, j] = sum_{|T| = i, j not in T} f[T] B[i, j] g[T + {j}] / perm(B)``, which is
  the gradient ``d log perm(exp W) / dW``, accumulated inside the backward pass;
* exact sampling walks the backward table row by row:
  ``p(y[i] = j | y[:i]) = B[i, j] g[T + {j}] / g[T]`` with ``T = {y[0], ..., y[i-1]}``.

Scaling: before the DP, ``W`` is shifted by the dual potentials of the max-weight assignment
(see :mod:`pm_perm.kernels.assignment`), so every product is at most 1 and the largest is 1:
only positive numbers in ``[0, M!]`` are added, and the relative error of ``log perm`` is a
few ulps times ``M`` whatever the spread of the logits. ``-inf`` logits (forbidden edges) become
exact zeros; if no permutation avoids them, ``log perm = -inf`` and the marginals are all zero.

Cost: value O(M 2^M) time and one table of 2^M float64 (512 MiB at M = 26); value with
marginals about 3x the time in the same table (the backward pass overwrites the forward table in
place); a sampler table the same. The exact limit is ``EXACT_MAX_M = 26``
and a memory budget (``PM_PERM_MEMORY_BUDGET`` bytes, default 2 GiB); beyond either a
``ValueError`` names the exact O(M^2)-memory method of :mod:`pm_perm.kernels.glynn`
(``method='glynn'``, with its expected time) and the approximate methods of
:mod:`pm_perm.kernels.bethe`, :mod:`pm_perm.kernels.huber_law` and
:mod:`pm_perm.kernels.swap_mcmc`.
"""

from __future__ import annotations

import math
import sys
import threading

import numpy as np
from numba import carray, objmode, types
from numba.core.types import ExternalFunction

from pm_perm._memory import format_bytes, memory_budget
from pm_perm._numba import njit
from pm_perm.kernels._bitgen import generator_at
from pm_perm.kernels._checks import (
    LOGIT_ABS_MAX,
    as_size,
    as_square_logits,
    finite_or_minus_inf,
)
from pm_perm.kernels.assignment import dual_scaled, max_weight_assignment_core
from pm_perm.kernels.glynn import GLYNN_MAX_M, format_seconds, glynn_seconds_estimate

__all__ = [
    "DRAW_ERRORS",
    "EXACT_MAX_M",
    "check_exact_size",
    "draw_permutation_into",
    "log_permanent",
    "log_permanent_and_marginals",
    "log_permanent_and_marginals_core",
    "make_draw_kernel",
    "make_op_kernel",
    "memory_budget",
    "permutation_marginals",
    "sample_permutation_core",
    "sample_permutations",
]

#: Largest M the exact engine accepts (2^26 float64 = 512 MiB of table, ~5-10 s per call).
EXACT_MAX_M = 26


#: The part of the "beyond the exact limit" message after the numbers (shared by the static
#: check and the Ops' run-time checks, which see M only when the shape is symbolic).
_DP_COST = " of the subset dynamic program (O(M 2^M) time, 2^M memory)."
_APPROX = (
    " Otherwise use an approximation: the Bethe approximation (pm_perm.kernels.bethe, "
    "method='bethe'), the Huber-Law exact sampler (pm_perm.kernels.huber_law) or swap MCMC "
    "(pm_perm.kernels.swap_mcmc)."
)
EXACT_LIMIT_ADVICE = (
    _DP_COST + f" Up to M = {GLYNN_MAX_M}, method='glynn' (Glynn's formula, pm_perm.kernels."
    "glynn) is exact in O(M^2) memory: about "
    f"{format_seconds(glynn_seconds_estimate(27))} at M = 27 and "
    f"{format_seconds(glynn_seconds_estimate(30))} at M = 30 per value and gradient on one core "
    "(doubling with each M; numba threads share the work)." + _APPROX
)


def _glynn_advice(M):
    """The "use method='glynn'" sentence of the size errors, with the expected time at ``M``."""
    if M > GLYNN_MAX_M:
        return f" M is also beyond GLYNN_MAX_M = {GLYNN_MAX_M} of the exact Glynn method."
    when = format_seconds(glynn_seconds_estimate(M))
    return (f" method='glynn' (Glynn's formula, pm_perm.kernels.glynn) is exact in O(M^2) "
            f"memory and takes about {when} per value and gradient at M = {M} on one core "
            "(numba threads share the work).")


def check_exact_size(M: int) -> None:
    """Raise ``ValueError`` if an exact computation of size ``M`` is beyond the exact limit.

    Parameters
    ----------
    M : int
        Number of rows (= columns) of the logits.
    """
    if M > EXACT_MAX_M:
        raise ValueError(f"M = {M} is beyond the exact limit EXACT_MAX_M = {EXACT_MAX_M}"
                         + _DP_COST + _glynn_advice(M) + _APPROX)
    need = 8 * (1 << M)  # every exact kernel works in one table of 2^M float64
    budget = memory_budget()
    if need > budget:
        raise ValueError(
            f"the exact permanent at M = {M} needs {format_bytes(need)} for its table, more than "
            f"the memory budget of {format_bytes(budget)}. Raise PM_PERM_MEMORY_BUDGET (bytes) "
            "if the machine has the memory." + _glynn_advice(M) + _APPROX
        )


# ----------------------------------------------------------------------------- numba cores

#: Up to this M the value and marginals enumerate the M! permutations directly (at most 120
#: products of 5 terms, no allocation); above it the subset DP. Measured per 3 x 3 matrix:
#: 1.2 us by the DP (assignment duals, padded blocks and their scratch arrays dominate), about
#: 0.2 us by enumeration; at M = 4 0.7 us against 1.7 us, at M = 5 3.8 us against 2.7 us.
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


@njit(cache=True)
def _best_permutation_score(W):
    """``max_y sum_i W[i, y[i]]`` over the ``M!`` permutations, ``M <= ENUMERATE_MAX_M``."""
    M = W.shape[0]
    perms = _SMALL_PERMS
    best = -np.inf
    for r in range(_FACTORIAL[M]):
        s = 0.0
        for i in range(M):
            s += W[i, perms[r, i]]
        if s > best:
            best = s
    return best


@njit(cache=True)
def _enumerate_value(W):
    """``log perm(exp W)`` by enumerating the ``M!`` permutations, ``M <= ENUMERATE_MAX_M``;
    log-sum-exp scaled by the best permutation, so every term is in ``[0, 1]``."""
    M = W.shape[0]
    perms = _SMALL_PERMS
    best = _best_permutation_score(W)
    if best == -np.inf:
        return -np.inf
    total = 0.0
    for r in range(_FACTORIAL[M]):
        s = 0.0
        for i in range(M):
            s += W[i, perms[r, i]]
        total += math.exp(s - best)
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
        s = 0.0
        for i in range(M):
            s += W[i, perms[r, i]]
        t = math.exp(s - best)
        if t > 0.0:
            total += t
            for i in range(M):
                out[i, perms[r, i]] += t
    inv = 1.0 / total
    for i in range(M):
        for j in range(M):
            out[i, j] *= inv
    return math.log(total) + best


_DEBRUIJN = np.array(
    [0, 1, 28, 2, 29, 14, 24, 3, 30, 22, 20, 15, 25, 17, 4, 8,
     31, 27, 13, 23, 21, 19, 16, 7, 26, 12, 18, 6, 11, 5, 10, 9],
    dtype=np.int64,
)  # fmt: skip


@njit(cache=True, inline="always")
def _ctz(low, table):
    """Index of the single set bit of ``low`` (a power of two below 2^32)."""
    return table[((low * 0x077CB531) & 0xFFFFFFFF) >> 27]


@njit(cache=True, inline="always")
def _popcount(x):
    x = x - ((x >> 1) & 0x55555555)
    x = (x & 0x33333333) + ((x >> 2) & 0x33333333)
    x = (x + (x >> 4)) & 0x0F0F0F0F
    return ((x * 0x01010101) & 0xFFFFFFFF) >> 24


# The DP runs over blocks of 8 subsets that share their high bits (S = 8 q + t): for a high
# column j >= 3 the eight predecessors S ^ (1 << j) are again eight consecutive entries, so the
# eight sums are independent and vectorise; the three low columns are resolved inside the block.
# This is 3-4x faster than one subset at a time, whose single accumulator waits on FMA latency.

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
def _forward(B, f):
    """Fill ``f[S]`` (rows 0..|S|-1 onto columns S) for M >= 3; returns perm(B) = f[full].

    ``B`` holds finite non-negative numbers (fastmath is safe: no inf or NaN can occur).
    """
    M = B.shape[0]
    H = M - 3
    C = _block_weights(B, -1)
    table = _DEBRUIJN
    for q in range(1 << H):
        pq = _popcount(q)
        a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = 0.0
        s = q
        while s:
            low = s & (-s)
            src = (q ^ low) << 3
            c = C[pq, _ctz(low, table) + 3]
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
def _backward(B, f, g, P, marginals):
    """Fill ``g[T]`` (rows |T|..M-1 onto the columns not in T) for M >= 3; returns g[0].

    With ``marginals``, also accumulate ``P[i, j] += f[T] B[i, j] g[T + {j}]`` over ``|T| = i``
    (unnormalised marginals; ``f`` must be the forward table). ``P`` must start at zero.

    For the high columns, ``B[i, j]`` depends on ``t`` only through ``popcount(t)``, so the
    eight products ``f g`` of a block and column fold into four row sums before they are stored
    (``PT[j, row]``, multiplied by ``B`` once at the end): half the read-modify-writes of one
    accumulator per (row offset, column, t), which cost more than the two passes themselves
    (measured at M = 20: 7.5-11.5 ms against 12.3-14 ms for value and marginals).
    """
    M = B.shape[0]
    H = M - 3
    D = _block_weights(B, 0)
    PT = np.zeros((M, M + 3))  # PT[j, r] = sum of f[T] g[T + {j}] over |T| = r, high columns j
    table = _DEBRUIJN
    top = (1 << H) - 1
    for q in range(top, -1, -1):
        pq = _popcount(q)
        base = q << 3
        a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = 0.0
        # (local copies: stores into PT could otherwise alias f and block vectorisation)
        f0, f1, f2, f3 = f[base], f[base + 1], f[base + 2], f[base + 3]
        f4, f5, f6, f7 = f[base + 4], f[base + 5], f[base + 6], f[base + 7]
        s = top ^ q
        while s:
            low = s & (-s)
            j = _ctz(low, table) + 3
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
def _padded(B):
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

        Without it, first-touch page faults of numba's allocations cost as much as the DP itself
        at M >= 22 on the machines we measured (15 ms of 31 ms at M = 22). Advisory only: a
        kernel that refuses simply keeps small pages.
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
#: call (measured: 4,000 faults, +7 ms at M = 20 inside PyTensor-compiled functions), as much as
#: the DP itself. Larger tables are allocated per call (their DP dwarfs the faults) and freed.
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
def _workspace(M):
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
def _log_permanent_into(W, work):
    if W.shape[0] <= ENUMERATE_MAX_M:
        return _enumerate_value(W)
    B, shift, feasible = dual_scaled(W)
    if not feasible:
        return -np.inf
    return math.log(_forward(_padded(B), work)) + shift


@njit(cache=True, inline="always")
def _log_permanent_and_marginals_into(W, work, out):
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
    B = _padded(B)
    P = np.zeros((B.shape[0], B.shape[0]))
    perm = _forward(B, work)
    _backward(B, work, work, P, True)
    inv = 1.0 / perm
    for i in range(M):
        for j in range(M):
            out[i, j] = P[i, j] * inv
    return math.log(perm) + shift


@njit(cache=True)
def log_permanent_and_marginals_core(W):
    """``(log perm(exp W), P)`` for one validated (M, M) float64 matrix (M >= 1), for other
    numba kernels (the tie blocks of :mod:`pm_perm.kernels.partial_orders`); the PyTensor Ops call
    the C kernel of :func:`make_op_kernel` instead."""
    out = np.empty(W.shape)
    v = _log_permanent_and_marginals_into(W, _workspace(W.shape[0]), out)
    return v, out


@njit(cache=True, inline="always")
def checked_value_into(W, P, marginals):
    """``log perm(exp W)`` of a C-contiguous (m, m) float64 matrix; if ``marginals``, ``P`` is
    written to the (m, m) array ``P`` (otherwise it is not touched). NaN or ``+inf`` logits, or
    finite ones beyond ``LOGIT_ABS_MAX``, give NaN (and NaN marginals): the body of the C kernels
    (:func:`make_op_kernel`, and the JAX backend's XLA FFI handler), which cannot raise."""
    m = W.shape[0]
    if not finite_or_minus_inf(W):
        if marginals:
            P[:, :] = np.nan
        return np.nan
    if marginals:
        return _log_permanent_and_marginals_into(W, _workspace(m), P)
    return _log_permanent_into(W, _workspace(m))


def make_op_kernel(version):
    """Body of the C callable that the PyTensor Ops call (``numba.cfunc``, see
    :mod:`pm_perm.ops._extern`): ``op_kernel(w, m, out, marginals)`` returns
    ``log perm(exp W)`` of the C-contiguous (m, m) float64 matrix at ``w``; if ``marginals`` is
    non-zero, ``P`` is written to the (m, m) matrix at ``out`` (otherwise ``out`` is not
    touched). NaN or ``+inf`` logits, or finite ones beyond ``LOGIT_ABS_MAX``, give NaN (and NaN
    marginals): a C callable cannot raise.

    ``version`` (an int identifying the kernel sources, :func:`pm_perm.kernels._version.
    code_version`) is a closure variable of the returned function, so numba's on-disk cache key
    of the compiled callable changes with ANY kernel source file (numba itself only checks the
    file of the function it caches, not of the functions it calls).
    """

    def op_kernel(w, m, out, marginals):
        if version < 0:  # never true; referencing version puts it into numba's cache key
            return np.nan
        W = carray(w, (m, m))
        return checked_value_into(W, carray(out, (m, m)) if marginals else W, marginals)

    return op_kernel


@njit(cache=True)
def _draw_from_table(rng, B, g, out):
    """One exact draw into ``out`` (length >= 1) from the backward table ``g`` of ``B``;
    only the first ``len(out)`` rows are drawn (the rest is the fixed padding)."""
    M = B.shape[0]
    full = (1 << M) - 1
    table = _DEBRUIJN
    T = 0
    for r in range(out.shape[0]):
        target = rng.random() * g[T]
        acc = 0.0
        last = -1
        s = full ^ T
        chosen = -1
        while s:
            low = s & (-s)
            j = _ctz(low, table)
            t = B[r, j] * g[T | low]
            if t > 0.0:
                last = j
                acc += t
                if acc > target:
                    chosen = j
                    break
            s ^= low
        if chosen == -1:  # rounding: target fell past the float sum; take the last positive term
            chosen = last
        out[r] = chosen
        T |= 1 << chosen


@njit(cache=True)
def _sampler_table(W):
    """Padded scaled weights and their backward table, for :func:`_draw_from_table`."""
    B, _, _ = dual_scaled(W)
    B = _padded(B)
    n = B.shape[0]
    g = _workspace(n) if n > ENUMERATE_MAX_M else np.empty(1 << n)
    _backward(B, g, g, B, False)  # f and P are not read without marginals
    return B, g


#: Messages of the exact sampler's input errors, indexed by the status of
#: :func:`draw_permutation_into`.
DRAW_ERRORS = (
    "",
    "logits must be a square (M, M) matrix with M >= 1",
    "M is beyond the exact limit EXACT_MAX_M = 26 of the exact sampler",
    "logits contain NaN, +inf or a finite value beyond 1e300",
    "cannot sample: no permutation avoids the -inf logits",
)


@njit(cache=True)
def draw_permutation_into(rng, W, out):
    """One exact draw of ``y`` into ``out`` (M,) int64 for one (M, M) logits matrix; returns 0,
    or, without drawing, the index in ``DRAW_ERRORS`` of what is wrong with ``W`` (non-square
    or empty, M beyond ``EXACT_MAX_M``, NaN or ``+inf`` logits, ``perm(exp W) = 0``). The body
    of the C kernel of :func:`make_draw_kernel`, which cannot raise."""
    M = W.shape[0]
    if W.shape[1] != M or M == 0:
        return 1
    if M > EXACT_MAX_M:
        return 2
    for i in range(M):
        for j in range(M):
            if not (abs(W[i, j]) <= LOGIT_ABS_MAX or W[i, j] == -np.inf):
                return 3
    if not max_weight_assignment_core(W)[3]:
        return 4
    B, g = _sampler_table(W)
    _draw_from_table(rng, B, g, out)
    return 0


@njit(cache=True)
def sample_permutation_core(rng, W):
    """One exact draw of ``y`` (M,) int64 for one (M, M) logits matrix.

    Checks its input: raises ``ValueError`` (a message of ``DRAW_ERRORS``) for a non-square
    matrix, M beyond ``EXACT_MAX_M``, NaN or ``+inf`` logits, or ``perm(exp W) = 0``.
    """
    out = np.empty(W.shape[0], dtype=np.int64)
    status = draw_permutation_into(rng, W, out)
    if status != 0:
        raise ValueError(DRAW_ERRORS[status])
    return out


def make_draw_kernel(version):
    """Body of the C callable that PyTensor's draws of ``PermutationExpFamily`` call
    (``numba.cfunc``, see :mod:`pm_perm.ops._extern`): ``draw_kernel(bitgen, w, m0, m1, out)``
    runs :func:`draw_permutation_into` on the C-contiguous (m0, m1) float64 logits at ``w`` with
    the caller's random stream (numpy's ``bitgen_t`` at ``bitgen``,
    :mod:`pm_perm.kernels._bitgen`), writing the draw to the (m0,) int64 array at ``out``, and
    returns the status. ``version`` keys numba's cache as in :func:`make_op_kernel`.
    """

    def draw_kernel(bitgen, w, m0, m1, out):
        if version < 0:  # never true; referencing version puts it into numba's cache key
            return -1
        return draw_permutation_into(generator_at(bitgen), carray(w, (m0, m1)), carray(out, m0))

    return draw_kernel


@njit(cache=True)
def _log_permanent_batch(W):
    n = W.shape[0]
    out = np.empty(n)
    work = _workspace(W.shape[1])
    for b in range(n):
        out[b] = _log_permanent_into(W[b], work)
    return out


@njit(cache=True)
def _log_permanent_and_marginals_batch(W):
    n, M = W.shape[0], W.shape[1]
    out = np.empty(n)
    P = np.empty((n, M, M))
    work = _workspace(M)
    for b in range(n):
        out[b] = _log_permanent_and_marginals_into(W[b], work, P[b])
    return out, P


@njit(cache=True)
def _sample_batch(rng, W, which, counts, out):
    """Draw ``counts[b]`` permutations from ``W[b]`` into the rows ``which[b]`` of ``out``."""
    start = 0
    for b in range(W.shape[0]):
        c = counts[b]
        if c == 0:
            continue
        B, g = _sampler_table(W[b])
        for k in range(c):
            _draw_from_table(rng, B, g, out[which[start + k]])
        start += c


# ----------------------------------------------------------------------------- public API


def _prepare(W):
    arr = as_square_logits(W)
    check_exact_size(arr.shape[-1])
    return arr, arr.shape[:-2], arr.reshape((-1,) + arr.shape[-2:])


def log_permanent(W):
    """Exact ``log perm(exp W)``, batched over leading dimensions.

    Parameters
    ----------
    W : array_like of float, shape (..., M, M)
        Logits; ``-inf`` marks a forbidden edge. NaN and ``+inf`` are errors.

    Returns
    -------
    ndarray of float64, shape (...)
        ``log sum_y prod_i exp(W[i, y[i]])``; ``-inf`` if every permutation uses a forbidden
        edge.

    Notes
    -----
    Subset dynamic program on dual-scaled weights: O(M 2^M) time and 2^M float64 per matrix.
    Raises ``ValueError`` for M > ``EXACT_MAX_M`` or beyond the memory budget.

    Examples
    --------
    >>> import numpy as np
    >>> float(np.exp(log_permanent(np.zeros((4, 4)))))  # perm of the all-ones matrix = 4!
    24.000000000000004
    """
    arr, batch, flat = _prepare(W)
    return _log_permanent_batch(flat).reshape(batch)


def log_permanent_and_marginals(W):
    """``(log_permanent(W), permutation_marginals(W))`` from one forward-backward pass.

    Returns
    -------
    logperm : ndarray of float64, shape (...)
    P : ndarray of float64, shape (..., M, M)
        ``P[..., i, j] = p(y[i] = j)``, doubly stochastic (all zeros if ``perm = 0``).

    Notes
    -----
    About 3x the time of the value alone, the same 2^M float64 of memory.
    """
    arr, batch, flat = _prepare(W)
    lp, P = _log_permanent_and_marginals_batch(flat)
    return lp.reshape(batch), P.reshape(arr.shape)


def permutation_marginals(W):
    """Marginals ``P[..., i, j] = p(y[i] = j)`` of ``p(y) ∝ exp(sum_i W[i, y[i]])``.

    This is the gradient of :func:`log_permanent` with respect to ``W``. Same arguments and cost
    as :func:`log_permanent_and_marginals`.
    """
    return log_permanent_and_marginals(W)[1]


def sample_permutations(W, size=None, rng=None):
    """Exact draws from ``p(y) = exp(sum_i W[i, y[i]]) / perm(exp W)``.

    Parameters
    ----------
    W : array_like of float, shape (..., M, M)
        Logits; ``-inf`` forbidden. Every matrix must admit a permutation of positive weight.
    size : tuple of int, optional
        Full batch shape of the output (``W``'s batch shape broadcasts to it); default the batch
        shape of ``W``. This is the ``RandomVariable.rng_fn`` convention.
    rng : numpy.random.Generator or int, optional

    Returns
    -------
    ndarray of int64, shape (*size, M)
        ``y[..., i]`` is the column matched to row ``i``.

    Notes
    -----
    One backward table per distinct matrix (O(M 2^M), 2^M float64), then O(M^2) per draw.
    """
    rng = np.random.default_rng(rng)
    arr = as_square_logits(W)
    M = arr.shape[-1]
    check_exact_size(M)
    wbatch = arr.shape[:-2]
    size = wbatch if size is None else as_size(size)
    try:
        index = np.broadcast_to(np.arange(math.prod(wbatch)).reshape(wbatch), size)
    except ValueError as err:
        raise ValueError(
            f"logits with batch shape {wbatch} do not broadcast to size {size}"
        ) from err
    flat = arr.reshape((-1, M, M))
    if np.any(_log_permanent_batch(flat) == -np.inf):
        raise ValueError(
            "cannot sample: some logits matrix has no permutation avoiding its -inf entries "
            "(perm(exp W) = 0)"
        )
    index = index.ravel()
    order = np.argsort(index, kind="stable").astype(np.int64)
    counts = np.bincount(index, minlength=flat.shape[0]).astype(np.int64)
    out = np.empty((index.size, M), dtype=np.int64)
    _sample_batch(rng, flat, order, counts, out)
    return out.reshape(size + (M,))
