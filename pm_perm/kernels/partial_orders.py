"""Exact likelihood of partial orders (top-k and weak orders with ties) under the permutation
exponential family, with gradients, by one shared suffix subset table.

Model: ``p(y) = exp(sum_i W[i, y[i]]) / perm(exp W)`` with item ``i`` (row) at position ``y[i]``
(column). A partial order in rank form (the convention of :class:`pm_perm.PartialRanking`; tied
items share their block's smallest position, unranked items are ``-1`` and fill the last
positions) is a sequence of blocks: block ``b`` holds a set of items that fill positions
``p_b .. p_b + s_b - 1`` in any order. Its probability is a product of block permanents over
``perm(exp W)``.

Suffix table
    ``h(U) = sum over bijections of the item set U onto the LAST |U| positions`` of
    ``prod exp W``: ``h({}) = 1``, ``h(U) = sum_{i in U} exp(W[i, M - |U|]) h(U - {i})``. It is
    the forward table of :mod:`pm_perm.kernels.permanent` for the matrix with rows = positions
    from last to first and columns = items, so the same blocked DP fills it, and
    ``perm(exp W) = h(all items)``. The LAST block of every order (its unranked items, or its
    last tie block, or its last item) is a suffix set: ``log h(U)``. A middle block of size 1 is
    one logit; a middle tie block of size ``s >= 2`` is the exact ``log perm`` of its ``s x s``
    sub-matrix (:func:`pm_perm.kernels.permanent.log_permanent_and_marginals_core`).

Gradient
    ``d/dW sum_n c_n log p_n``: ``c_n`` on the logits of each strict position, ``c_n`` times the
    block marginals of each middle tie block, and for the suffix terms one reverse (adjoint)
    sweep of the table seeded with ``c_n / h(U_n)`` at each order's last block and with
    ``-sum c_n / h(all)`` at the full set (the gradient of ``log perm``).

Scaling
    ``W`` is shifted by the dual potentials of its max-weight assignment
    (:func:`pm_perm.kernels.assignment.max_weight_assignment_core`), so every product is at most 1
    and ``h(all) >= 1``; the shifts are added back per set. A suffix set whose scaled ``h(U)``
    is below ``SUFFIX_TINY`` (the order is extremely unlikely under ``W``; ``h`` may have lost
    precision to underflow) is instead evaluated by its own dual-scaled block permanent, so the
    result stays exact in log space whatever the spread of the logits.

Cost per logits matrix: O(M 2^M) for the table and the same for the adjoint sweep, independent
of the number ``n`` of orders; O(M) per order plus O(s 2^s) per middle tie block of size s. Memory:
two tables of 2^M float64. The exact limit is ``EXACT_MAX_M`` and the memory budget
(``PM_PERM_MEMORY_BUDGET``) for those two tables: :func:`check_partial_order_size`.
"""

from __future__ import annotations

import math

import numpy as np
from numba import carray

from pm_perm._memory import format_bytes, memory_budget
from pm_perm._numba import njit
from pm_perm.kernels._checks import as_square_logits, check_weights, finite_or_minus_inf
from pm_perm.kernels.assignment import max_weight_assignment_core
from pm_perm.kernels.permanent import EXACT_MAX_M, log_permanent_and_marginals_core
from pm_perm.kernels.rank_form import (
    order_blocks_work,
    order_work,
    position_suffix_sums,
    validate_orders,
)
from pm_perm.kernels.subset_dp import forward, padded, popcount, workspace

__all__ = [
    "SUFFIX_TINY",
    "check_partial_order_size",
    "partial_orders_into",
    "make_partial_orders_kernel",
    "partial_order_loglik",
    "partial_order_loglik_and_grad",
    "partial_orders_core",
]

#: Scaled suffix sums below this are recomputed by their own dual-scaled block permanent.
SUFFIX_TINY = 1e-200

#: Tables the likelihood keeps at once (the suffix table and its adjoint).
_TABLES = 2


def check_partial_order_size(M: int, *, plackett_luce: str = "pm_perm.PlackettLuce",
                             top_k: str = "pm_perm.TopKRanking, "
                             "pm_perm.preferences.models.top_k_model") -> None:
    """Raise ``ValueError`` if exact partial-order likelihoods of ``M`` items are beyond the limit.

    The limit is ``EXACT_MAX_M`` items and the memory budget (``PM_PERM_MEMORY_BUDGET``) for two
    tables of ``2^M`` float64. ``plackett_luce`` and ``top_k`` are how the message names the
    alternative models (the Python names by default; the CLI names its flags).
    """
    alternatives = (
        f"Use the Plackett-Luce model ({plackett_luce}, any number of items), or for ballots of "
        f"at most K items the exact top-k model ({top_k}; any number of items, O(M K 2^K)), "
        "or rank fewer items (e.g. merge or drop rarely ranked ones)."
    )
    if M > EXACT_MAX_M:
        raise ValueError(
            f"M = {M} items is beyond the exact limit EXACT_MAX_M = {EXACT_MAX_M} of the "
            f"partial-order likelihood (O(M 2^M) time, 2^M memory). {alternatives}"
        )
    need = _TABLES * 8 * (1 << max(M, 3))
    budget = memory_budget()
    if need > budget:
        raise ValueError(
            f"the exact partial-order likelihood of M = {M} items needs {format_bytes(need)} "
            f"for its tables, more than the memory budget of {format_bytes(budget)}. Raise "
            f"PM_PERM_MEMORY_BUDGET (bytes) if the machine has the memory. {alternatives}"
        )


# ----------------------------------------------------------------------------- numba cores


@njit(cache=True)
def _block_log_perm(W, seq, a, b, weight, grad, want_grad):
    """``log perm(exp W[items, a:b])`` of the block ``seq[a:b]``; with ``want_grad`` adds
    ``weight`` times its marginals into ``grad``."""
    s = b - a
    sub = np.empty((s, s))
    for r in range(s):
        for c in range(s):
            sub[r, c] = W[seq[a + r], a + c]
    val, P = log_permanent_and_marginals_core(sub)
    if want_grad:
        for r in range(s):
            for c in range(s):
                grad[seq[a + r], a + c] += weight * P[r, c]
    return val


@njit(cache=True)
def partial_orders_core(W, orders, weights, values, grad, want_grad):
    """Per-order log-likelihoods of ``orders`` under one logits matrix, and the gradient of
    ``sum_n weights[n] * values[n]``.

    Parameters
    ----------
    W : ndarray of float64, shape (M, M)
        Finite logits or ``-inf`` (validated by the caller), ``M <= EXACT_MAX_M``.
    orders : ndarray of int64, shape (n, M)
        Rank-form orders; invalid rows get ``-inf`` and no gradient.
    weights : ndarray of float64, shape (n,)
        Any real weights (counts, or a cotangent); rows of weight 0 add no gradient.
    values : ndarray of float64, shape (n,)
        Output: ``log p(order n)``.
    grad : ndarray of float64, shape (M, M)
        Output (with ``want_grad``): the gradient; left untouched otherwise.

    Returns
    -------
    float
        ``sum_n weights[n] * values[n]`` over the rows of non-zero weight; NaN (and NaN values
        and gradient) if no permutation has positive weight (``perm(exp W) = 0``).
    """
    M = W.shape[0]
    n = orders.shape[0]
    _, u, v, feasible = max_weight_assignment_core(W)
    if not feasible:
        values[:] = np.nan
        if want_grad:
            grad[:, :] = np.nan
        return np.nan
    # rows = positions from last to first, columns = items, dual-scaled: Bp[r, i] <= 1
    Bp = np.zeros((M, M))
    for i in range(M):
        for r in range(M):
            w = W[i, M - 1 - r]
            if w != -np.inf:
                Bp[r, i] = math.exp(min(w + u[i] + v[M - 1 - r], 0.0))
    Bp = padded(Bp)
    # the permanent's workspace: 2^max(M, 5) entries (it has none for M <= ENUMERATE_MAX_M = 4,
    # hence the 5), kept per thread for 16 <= M <= 22
    h = workspace(max(M, 5))
    forward(Bp, h)
    vsuf = position_suffix_sums(v)  # vsuf[s] = sum of v over the last s positions
    full = (1 << M) - 1
    log_z = math.log(h[full]) - u.sum() - vsuf[M]
    seed = np.zeros(h.shape[0] if want_grad else 0)
    if want_grad:
        grad[:, :] = 0.0
    seq, starts, count, fill = order_work(M)
    total = 0.0
    wsum = 0.0
    for k in range(n):
        wk = weights[k]
        gk = want_grad and wk != 0.0
        nb = order_blocks_work(orders[k], seq, starts, count, fill)
        if nb < 0:
            values[k] = -np.inf
            if wk != 0.0:
                total += wk * -np.inf
            continue
        lp = 0.0
        for b in range(nb):
            a, e = starts[b], starts[b + 1]
            if e == M:  # last block: a suffix set
                U = 0
                ushift = 0.0
                for t in range(a, M):
                    U |= 1 << seq[t]
                    ushift += u[seq[t]]
                hu = h[U]
                if hu >= SUFFIX_TINY:
                    lp += math.log(hu) - ushift - vsuf[M - a]
                    if gk:
                        seed[U] += wk / hu
                else:
                    lp += _block_log_perm(W, seq, a, e, wk, grad, gk)
            elif e - a == 1:
                lp += W[seq[a], a]
                if gk:
                    grad[seq[a], a] += wk
            else:
                lp += _block_log_perm(W, seq, a, e, wk, grad, gk)
        values[k] = lp - log_z
        if wk != 0.0:
            total += wk * values[k]
            wsum += wk
    if want_grad:
        seed[full] -= wsum / h[full]
        _suffix_adjoint(Bp, h, seed, grad, M)
    return total


@njit(cache=True)
def partial_orders_into(W, orders, weights, values, grad, want_grad):
    """:func:`partial_orders_core` for logits that may hold NaN, ``+inf`` or finite entries
    beyond ``LOGIT_ABS_MAX``: those give NaN (values, the total and, with ``want_grad``, the
    gradient). The body of the C kernel of :func:`make_partial_orders_kernel`."""
    if not finite_or_minus_inf(W):
        values[:] = np.nan
        if want_grad:
            grad[:, :] = np.nan
        return np.nan
    return partial_orders_core(W, orders, weights, values, grad, want_grad)


def make_partial_orders_kernel(version):
    """Body of the C callable that the partial-order Ops call (``numba.cfunc``, see
    :mod:`pm_perm.ops.extern`): ``op_kernel(w, m, orders, n, weights, values, grad,
    want_grad)`` runs :func:`partial_orders_into` on the C-contiguous (m, m) float64
    logits at ``w``, the (n, m) int64 orders and the (n,) float64 weights, writes the per-order
    values to the (n,) array at ``values`` and, if ``want_grad`` is non-zero, the gradient to the
    (m, m) array at ``grad`` (otherwise ``grad`` is not touched), and returns the weighted sum.
    ``version`` keys numba's cache as in
    :func:`pm_perm.kernels.permanent.make_log_permanent_kernel`.
    """

    def op_kernel(w, m, orders, n, weights, values, grad, want_grad):
        if version < 0:  # never true; referencing version puts it into numba's cache key
            return np.nan
        G = carray(grad, (m, m)) if want_grad else np.empty((0, 0))
        return partial_orders_into(carray(w, (m, m)), carray(orders, (n, m)),
                                           carray(weights, n), carray(values, n), G,
                                           want_grad != 0)

    return op_kernel


@njit(cache=True, fastmath=True)
def _suffix_adjoint(Bp, h, a, grad, M):
    """Reverse sweep of the suffix table: with ``a[U]`` seeded by ``d out / d h(U)``, add
    ``d out / d W`` into ``grad``; ``a`` is overwritten. ``h`` and ``Bp`` hold finite
    non-negative numbers (fastmath is safe)."""
    G = np.zeros((M, M))  # G[r, i]: d out / d log Bp[r, i]
    for S in range((1 << M) - 1, 0, -1):
        x = a[S]
        if x == 0.0:
            continue
        r = popcount(S) - 1
        row = Bp[r]
        g = G[r]
        s = S
        while s:
            low = s & (-s)
            i = popcount(low - 1)
            t = x * row[i]
            g[i] += t * h[S ^ low]
            a[S ^ low] += t
            s ^= low
    for i in range(M):
        for r in range(M):
            grad[i, M - 1 - r] += G[r, i]


@njit(cache=True)
def _batch(W, orders, weights, want_grad):
    nb, M = W.shape[0], W.shape[1]
    values = np.empty((nb, orders.shape[0]))
    totals = np.empty(nb)
    grad = np.zeros((nb, M, M))
    for b in range(nb):
        totals[b] = partial_orders_core(W[b], orders, weights, values[b], grad[b], want_grad)
    return values, totals, grad


# ----------------------------------------------------------------------------- public API


def _prepare(W, orders):
    arr = as_square_logits(W)
    M = arr.shape[-1]
    check_partial_order_size(M)
    return arr, validate_orders(orders, M)


def partial_order_loglik(W, orders):
    """Exact ``log p(order)`` of each rank-form order, batched over the logits.

    Parameters
    ----------
    W : array_like of float, shape (..., M, M)
        Logits, rows = items, columns = positions; ``-inf`` forbids an item at a position.
    orders : array_like of int, shape (n, M)
        Rank-form orders (see :class:`pm_perm.PartialRanking`).

    Returns
    -------
    ndarray of float64, shape (..., n)
        NaN for a matrix under which no permutation has positive probability.

    Notes
    -----
    O(M 2^M + n M) per matrix plus O(s 2^s) per middle tie block of size s; two tables of 2^M
    float64. Raises ``ValueError`` beyond the exact limit (:func:`check_partial_order_size`).
    """
    arr, orders = _prepare(W, orders)
    flat = arr.reshape((-1,) + arr.shape[-2:])
    values, _, _ = _batch(flat, orders, np.ones(orders.shape[0]), False)
    return values.reshape(arr.shape[:-2] + (orders.shape[0],))


def partial_order_loglik_and_grad(W, orders, weights):
    """``sum_n weights[n] log p(order n)`` and its gradient with respect to ``W``, batched.

    Parameters
    ----------
    W : array_like of float, shape (..., M, M)
    orders : array_like of int, shape (n, M)
    weights : array_like of float, shape (n,)
        Finite real numbers, e.g. the count of each distinct order.

    Returns
    -------
    total : ndarray of float64, shape (...)
    grad : ndarray of float64, shape (..., M, M)

    Raises
    ------
    ValueError
        For invalid logits or orders, M beyond the exact limit, and ``weights`` of another
        shape or with a NaN or infinite entry (named in the message).

    Notes
    -----
    One suffix table and one adjoint sweep per matrix, O(M 2^M), whatever ``n``.
    """
    arr, orders = _prepare(W, orders)
    weights = check_weights(weights, orders.shape[0])
    flat = arr.reshape((-1,) + arr.shape[-2:])
    _, totals, grad = _batch(flat, orders, weights, True)
    return totals.reshape(arr.shape[:-2]), grad.reshape(arr.shape)
