"""Max-weight perfect matching with dual potentials (Hungarian algorithm), in numba.

The exact permanent kernels use the dual potentials to scale the weights: with ``u, v`` optimal
for the dual of the assignment problem, ``W[i, j] + u[i] + v[j] <= 0`` everywhere with equality
on the max-weight matching. After that shift every term of the permanent is at most 1 and the
largest one is exactly 1, so ``1 <= perm(exp W') <= M!``: the dynamic program adds only positive
numbers in a range where float64 neither overflows nor loses the dominant terms, whatever the
spread of the logits. (Row-max scaling alone is not enough: when the row maxima sit in one
column, ``perm`` of the row-scaled matrix underflows at logit spreads of about 40.)
"""

from __future__ import annotations

import math

import numpy as np
from numba import carray

from pm_perm._numba import njit
from pm_perm.kernels._checks import LOGIT_ABS_MAX

__all__ = [
    "MATCHING_ERRORS",
    "dual_scaled",
    "make_matching_kernel",
    "matching_into",
    "max_weight_assignment_core",
]


@njit(cache=True)
def max_weight_assignment_core(W):
    """Max-weight perfect matching of ``W`` (M, M) with ``-inf`` meaning a forbidden edge.

    Shortest-augmenting-path Hungarian algorithm on costs ``-W`` (Kuhn 1955; Jonker & Volgenant
    1987 form), O(M^3) time, O(M) extra memory. A rectangular ``W`` (n, m) with ``n <= m``
    matches every row to its own column (O(n^2 m)); the columns left unmatched keep ``v = 0``.

    Parameters
    ----------
    W : ndarray of float64, shape (M, M), or (n, m) with n <= m
        Finite logits or ``-inf``; no NaN or ``+inf`` (the caller validates).

    Returns
    -------
    col_of_row : ndarray of int64, shape (M,)
        ``col_of_row[i]`` is the column matched to row ``i`` (all ``-1`` if infeasible).
    u, v : ndarray of float64, shape (M,) (rectangular: (n,) and (m,), ``v <= 0``)
        Dual potentials with ``W[i, j] + u[i] + v[j] <= 0`` (up to rounding) and equality on the
        matching, so ``sum(W[i, col_of_row[i]]) = -(sum(u) + sum(v))``.
    feasible : bool
        False when every perfect matching uses a forbidden edge (then ``perm(exp W) = 0``).
    """
    n, m = W.shape
    inf = np.inf
    # 1-based arrays; column 0 is the virtual start of each augmenting path
    u = np.zeros(n + 1)
    v = np.zeros(m + 1)
    row_of_col = np.zeros(m + 1, dtype=np.int64)
    way = np.zeros(m + 1, dtype=np.int64)
    minv = np.empty(m + 1)
    used = np.empty(m + 1, dtype=np.bool_)
    col_of_row = np.full(n, -1, dtype=np.int64)
    for i in range(1, n + 1):
        row_of_col[0] = i
        j0 = 0
        minv[:] = inf
        used[:] = False
        while True:
            used[j0] = True
            i0 = row_of_col[j0]
            delta = inf
            j1 = -1
            for j in range(1, m + 1):
                if not used[j]:
                    cur = -W[i0 - 1, j - 1] - u[i0] - v[j]
                    if cur < minv[j]:
                        minv[j] = cur
                        way[j] = j0
                    if minv[j] < delta:
                        delta = minv[j]
                        j1 = j
            if j1 == -1 or delta == inf:
                return col_of_row, u[1:], v[1:], False
            for j in range(m + 1):
                if used[j]:
                    u[row_of_col[j]] += delta
                    v[j] -= delta
                else:
                    minv[j] -= delta
            j0 = j1
            if row_of_col[j0] == 0:
                break
        while True:
            j1 = way[j0]
            row_of_col[j0] = row_of_col[j1]
            j0 = j1
            if j0 == 0:
                break
    for j in range(1, m + 1):
        if row_of_col[j] > 0:
            col_of_row[row_of_col[j] - 1] = j - 1
    return col_of_row, u[1:], v[1:], True


@njit(cache=True, inline="always")
def dual_scaled(W):
    """Scale by the assignment duals: returns ``(B, log_shift, feasible)``.

    ``B = exp(W + u + v) <= 1`` (0 on ``-inf`` edges), equal to 1 on the max-weight matching, and
    ``log perm(exp W) = log perm(B) + log_shift``; ``feasible`` is False (and ``B`` all zeros,
    ``log_shift = -inf``) when no perfect matching has finite weight. Cost O(M^3).
    """
    M = W.shape[0]
    _, u, v, feasible = max_weight_assignment_core(W)
    B = np.zeros((M, M))
    if not feasible:
        return B, -np.inf, False
    for i in range(M):
        for j in range(M):
            w = W[i, j]
            if w != -np.inf:
                B[i, j] = math.exp(min(w + u[i] + v[j], 0.0))
    return B, -(u.sum() + v.sum()), True


#: Messages of :func:`matching_into`'s errors, indexed by its status.
MATCHING_ERRORS = (
    "",
    "logits contain NaN, +inf or a finite value beyond 1e300: no max-weight matching",
    "logits have no perfect matching avoiding their -inf entries",
)


@njit(cache=True)
def matching_into(W, out):
    """Max-weight perfect matching of logits ``W`` (M, M) into ``out`` (M,) int64
    (``out[i]`` the column matched to row ``i``); returns 0, or the index in
    ``MATCHING_ERRORS`` of the error (NaN, ``+inf`` or finite logits beyond 1e300; no
    perfect matching avoiding the ``-inf`` entries)."""
    M = W.shape[0]
    for i in range(M):
        for j in range(M):
            if not (abs(W[i, j]) <= LOGIT_ABS_MAX or W[i, j] == -np.inf):
                return 1
    y, _, _, feasible = max_weight_assignment_core(W)
    if not feasible:
        return 2
    out[:] = y
    return 0


def make_matching_kernel(version):
    """Body of the C callable of the ``MaxWeightMatching`` Op (``numba.cfunc``, see
    :mod:`pm_perm.ops.extern`): ``matching_kernel(w, m, out)`` runs :func:`matching_into` on
    the C-contiguous (m, m) float64 logits at ``w`` and the (m,) int64 array at ``out``.
    ``version`` keys numba's cache as in
    :func:`pm_perm.kernels.permanent.make_log_permanent_kernel`.
    """

    def matching_kernel(w, m, out):
        if version < 0:  # never true; referencing version puts it into numba's cache key
            return -1
        return matching_into(carray(w, (m, m)), carray(out, m))

    return matching_kernel
