"""Exact likelihood of complete and top-k orders under the Plackett-Luce-anchored (tilted)
permutation model, with gradients, by one subset table.

Model: ``p(pi | u, D) = PL(pi; u) exp(sum_i D[i, pi(i)]) / Z(u, D)`` with item ``i`` at position
``pi(i)``, ``PL(pi; u) = prod_j e^{u_(j)} / sum_{k in S_j} e^{u_k}`` (``S_j`` the items not
placed before position ``j``). ``D = 0`` is Plackett-Luce exactly (``Z = 1``); ``u = 0`` is the
permutation exponential family with logits ``D`` (:mod:`pm_perm.kernels.partial_orders`).

Suffix table
    PL's factor at each step depends only on the set ``S`` of items still unplaced, so
    ``h(S) = (1 / sigma(S)) sum_{i in S} e^{u_i + D[i, M - |S|]} h(S - {i})``, ``h({}) = 1``,
    ``sigma(S) = sum_{k in S} e^{u_k}``, is the sum over the orders of ``S`` on the LAST ``|S|``
    positions of their PL-times-tilt factors, and ``Z = h(all items)``. A rank-form order
    (convention of :class:`pm_perm.PartialRanking`: unranked items are ``-1`` and fill the last
    positions) has ``log p = sum over ranked positions j < k of (u_i + D[i, j] - log sigma(S_j))
    + log h(U) - log Z`` with ``U`` its last block (the unranked items, or the last item). At
    ``D = 0``, ``h(U) = 1``: Plackett-Luce's top-k probability.

Ties
    A tie block in the middle of an order (not its last block) is not supported (its
    probability would need a small DP per block); it gives NaN here and the public functions
    raise ``ValueError`` naming the alternatives (:func:`check_no_middle_ties`). A tie block at
    the end of an order is a suffix set and is exact.

Gradient
    Explicit terms per ranked position, and one reverse (adjoint) sweep of the table seeded with
    ``c_n / h(U_n)`` at each order's last block and ``-sum c_n / h(all)`` at the full set.

Scaling
    ``D`` is shifted by the dual potentials of its max-weight assignment
    (:func:`pm_perm.kernels.assignment.max_weight_assignment_core`), so every tilt factor is at
    most 1, and ``e^{u_i} / sigma(S) <= 1``: every ``h(S) <= 1`` (no overflow). The shifts are
    added back per set (a row or column shift of ``D`` changes no probability). ``h`` can
    underflow only when the orders that ``D`` favours have PL probability below about 1e-300 (not
    met at the scales the models fit); an underflowed suffix set gives ``-inf``.

Cost per ``(u, D)``: O(M 2^M) for the table and the same for the adjoint sweep, whatever the
number ``n`` of orders, plus O(M^2) per order; three tables of 2^M float64 (limit: as the
partial-order kernel, :func:`pm_perm.kernels.partial_orders.check_partial_order_size`).
"""

from __future__ import annotations

import math

import numpy as np

from pm_perm._numba import njit
from pm_perm.kernels._checks import as_float_array, c_array, check_weights
from pm_perm.kernels.assignment import max_weight_assignment_core
from pm_perm.kernels.partial_orders import check_partial_order_size
from pm_perm.kernels.rank_form import (
    order_blocks_work,
    order_work,
    position_suffix_sums,
    validate_orders,
)
from pm_perm.kernels.subset_dp import DEBRUIJN, ctz, popcount

__all__ = [
    "INVALID",
    "MIDDLE_TIE",
    "check_no_middle_ties",
    "middle_tie_rows",
    "orders_plan",
    "pl_tilted_core",
    "pl_tilted_loglik",
    "pl_tilted_loglik_and_grad",
    "pl_tilted_planned",
    "pl_tilted_seeded_grad",
    "plan_weights",
]


@njit(cache=True)
def _finite(x):
    for v in x.ravel():
        if not abs(v) <= 1e300:
            return False
    return True


@njit(cache=True)
def _bit_index(low):
    return popcount(low - 1)


@njit(cache=True)
def pl_tilted_core(u, D, orders, weights, values, gu, gD, want_grad):
    """Per-order log-likelihoods under ``(u, D)`` and the gradient of ``sum_n w_n values[n]``.

    Parameters
    ----------
    u : ndarray of float64, shape (M,)
        Utilities (finite).
    D : ndarray of float64, shape (M, M)
        Tilt logits, rows = items, columns = positions (finite).
    orders : ndarray of int64, shape (n, M)
        Rank-form orders; invalid rows get ``-inf`` and rows with a middle tie block NaN; neither
        adds gradient.
    weights : ndarray of float64, shape (n,)
        Real weights (counts, or a cotangent); rows of weight 0 add no gradient.
    values : ndarray of float64, shape (n,)
        Output: ``log p(order n)``.
    gu, gD : ndarray of float64, shapes (M,) and (M, M)
        Outputs (with ``want_grad``): the gradient with respect to ``u`` and ``D``.

    Returns
    -------
    float
        ``sum_n weights[n] * values[n]`` over the rows of non-zero weight; NaN (and NaN values
        and gradient) for non-finite ``u`` or ``D``.
    """
    return pl_tilted_planned(u, D, *orders_plan(orders), weights, values, gu, gD, want_grad)


#: :func:`orders_plan`'s length of a row that is not a rank-form order (``log p = -inf``)
INVALID = -1
#: :func:`orders_plan`'s length of a row with a tie block before its last block (NaN)
MIDDLE_TIE = -2


@njit(cache=True)
def orders_plan(orders):
    """What :func:`pl_tilted_planned` needs of rank-form orders (n, M), parsed once.

    Returns ``(items, lengths, set_ids, last_ids, sets)``: ``lengths`` (n,) int64, the number
    of positions before the row's last block (its unranked items, or its last item), else
    :data:`INVALID` or :data:`MIDDLE_TIE`; ``items`` (n, M) int8, the item at each of those
    positions; ``set_ids`` (n, M) int32, the index in ``sets`` of the set of items not placed
    before that position; ``last_ids`` (n,) int32, the index of the last block's set; ``sets``
    (int64 bit masks), the distinct sets the orders meet (e.g. 21,700 for 313,430 top-5 orders
    of 20 items): the likelihood computes its per-set terms once per distinct set. Depends on
    the orders only: :mod:`pm_perm.ops.pl_tilted` keeps it for orders that are a constant of
    the graph (a MAP engine's frozen data), so a fit parses them once.
    """
    n, M = orders.shape
    items = np.zeros((n, M), dtype=np.int8)
    set_ids = np.zeros((n, M), dtype=np.int32)
    last_ids = np.zeros(n, dtype=np.int32)
    lengths = np.empty(n, dtype=np.int64)
    index = np.full(1 << M, -1, dtype=np.int32)  # set -> its index in sets
    sets = np.empty(16, dtype=np.int64)
    n_sets = 0
    seq, starts, count, fill = order_work(M)
    for k in range(n):
        nb = order_blocks_work(orders[k], seq, starts, count, fill)
        if nb < 0:
            lengths[k] = INVALID
            continue
        L = nb - 1
        for blk in range(nb - 1):
            if starts[blk + 1] - starts[blk] > 1:
                L = MIDDLE_TIE
        lengths[k] = L
        if L < 0:
            continue
        rem = (1 << M) - 1
        for j in range(L + 1):  # blocks of one item each: block j starts at position j
            if index[rem] < 0:
                if n_sets == sets.shape[0]:
                    sets = np.concatenate((sets, np.empty(n_sets, dtype=np.int64)))
                index[rem] = n_sets
                sets[n_sets] = rem
                n_sets += 1
            if j == L:
                last_ids[k] = index[rem]
            else:
                set_ids[k, j] = index[rem]
                items[k, j] = seq[j]
                rem ^= 1 << seq[j]
    return items, lengths, set_ids, last_ids, sets[:n_sets].copy()


@njit(cache=True)
def pl_tilted_planned(u, D, items, lengths, set_ids, last_ids, sets, weights, values, gu, gD,
                      want_grad):
    """:func:`pl_tilted_core` on the orders' :func:`orders_plan`."""
    n = lengths.shape[0]
    if not (_finite(u) and _finite(D)):
        values[:] = np.nan
        if want_grad:
            gu[:] = np.nan
            gD[:, :] = np.nan
        return np.nan
    a, umax, eu, Q, h, sig, bsuf, log_z = _tables(u, D)
    # the terms of each distinct set once: log sigma(S) of a position whose unplaced items are
    # S, and the last-block term of S
    n_sets = sets.shape[0]
    log_sig = np.empty(n_sets)
    last_term = np.empty(n_sets)
    for t in range(n_sets):
        S = sets[t]
        log_sig[t] = math.log(sig[S]) if S != 0 else 0.0
        last_term[t] = _last_block_term(h[S], a, bsuf, S)
    total = 0.0
    for k in range(n):
        wk = weights[k]
        L = lengths[k]
        if L == INVALID:
            values[k] = -np.inf
            if wk != 0.0:
                total += wk * -np.inf
            continue
        if L == MIDDLE_TIE:
            values[k] = np.nan
            if wk != 0.0:
                total += np.nan
            continue
        lp = 0.0
        for j in range(L):  # ranked positions before the last block: one item each
            i = np.int64(items[k, j])
            lp += u[i] - umax + D[i, j] - log_sig[set_ids[k, j]]
        lp += last_term[last_ids[k]]  # the last block: a suffix set on the last positions
        values[k] = lp - log_z
        if wk != 0.0:
            total += wk * values[k]
    if want_grad:
        seeds = plan_weights(items, lengths, set_ids, last_ids, sets.shape[0], weights,
                             u.shape[0])
        _seeded_gradient(Q, eu, h, sig, sets, *seeds, gu, gD)
    return total


@njit(cache=True)
def plan_weights(items, lengths, set_ids, last_ids, n_sets, weights, M):
    """The data part of the gradient of ``sum_n w_n log p_n`` (it does not depend on ``u`` or
    ``D``): ``(gu0 (M,), gD0 (M, M), sig_w, last_w (n_sets,), wsum)``, the counts of each item
    and item-position pair over the ranked positions, the summed weights of the positions whose
    unplaced items are each set and of the last blocks that are each set, and the summed weight
    of the valid orders (rows of weight 0, invalid rows and middle ties add nothing)."""
    gu0, gD0 = np.zeros(M), np.zeros((M, M))
    sig_w, last_w = np.zeros(n_sets), np.zeros(n_sets)
    wsum = 0.0
    for k in range(lengths.shape[0]):
        wk = weights[k]
        L = lengths[k]
        if L < 0 or wk == 0.0:
            continue
        for j in range(L):
            i = np.int64(items[k, j])
            gu0[i] += wk
            gD0[i, j] += wk
            sig_w[set_ids[k, j]] += wk
        last_w[last_ids[k]] += wk
        wsum += wk
    return gu0, gD0, sig_w, last_w, wsum


@njit(cache=True)
def pl_tilted_seeded_grad(u, D, sets, gu0, gD0, sig_w, last_w, wsum, gu, gD):
    """The gradient of ``sum_n w_n log p_n`` from the orders' :func:`plan_weights` (no work per
    order: repeated gradients on fixed data, e.g. the differences of a Laplace Hessian), into
    ``gu`` (M,) and ``gD`` (M, M); NaN for non-finite ``u`` or ``D``."""
    if not (_finite(u) and _finite(D)):
        gu[:] = np.nan
        gD[:, :] = np.nan
        return
    _, _, eu, Q, h, sig, _, _ = _tables(u, D)
    _seeded_gradient(Q, eu, h, sig, sets, gu0, gD0, sig_w, last_w, wsum, gu, gD)


@njit(cache=True)
def _tables(u, D):
    """``(a, umax, eu, Q, h, sig, bsuf, log_z)``: the assignment shifts of items, the largest
    utility, ``e^{u - umax}``, the scaled tilt factors ``Q``, the suffix table ``h`` and the
    subset sums ``sig`` (2^M), the position shifts' suffix sums and ``log Z``."""
    M = u.shape[0]
    _, a, b, _ = max_weight_assignment_core(D)
    umax = u.max()
    eu = np.empty(M)
    for i in range(M):
        eu[i] = math.exp(u[i] - umax)
    # Q[r, i] = e^{u_i - umax} e^{D[i, r] + a_i + b_r} <= eu[i]
    Q = np.empty((M, M))
    for r in range(M):
        for i in range(M):
            Q[r, i] = eu[i] * math.exp(min(D[i, r] + a[i] + b[r], 0.0))
    size = 1 << M
    h = np.empty(size)
    sig = np.empty(size)
    _forward(Q, eu, h, sig, M)
    bsuf = position_suffix_sums(b)  # bsuf[s] = sum of b over the last s positions
    log_z = math.log(h[size - 1]) - a.sum() - bsuf[M]
    return a, umax, eu, Q, h, sig, bsuf, log_z


@njit(cache=True)
def _seeded_gradient(Q, eu, h, sig, sets, gu0, gD0, sig_w, last_w, wsum, gu, gD):
    """``gu``, ``gD`` = the data part plus, per distinct set, the gradient of ``-w log sigma``
    (:func:`_sub_share`) and the table's adjoint seeded with ``w / h(S)`` at the last blocks and
    ``-wsum / h(all)`` at the full set."""
    M = eu.shape[0]
    full = (1 << M) - 1
    gu[:] = gu0
    gD[:, :] = gD0
    adj = np.zeros(full + 1)
    for t in range(sets.shape[0]):
        S = sets[t]
        if sig_w[t] != 0.0:
            _sub_share(gu, sig_w[t] / sig[S], S, eu)
        if last_w[t] != 0.0 and h[S] > 0.0:
            adj[S] += last_w[t] / h[S]
    adj[full] -= wsum / h[full]
    _adjoint(Q, eu, h, sig, adj, gu, gD, M)


@njit(cache=True)
def _last_block_term(hu, a, bsuf, rem):
    """``log h(rem)`` with the assignment shifts of its items and positions taken off (``-inf``
    when ``h`` underflowed): the last block's term of an order whose last block is ``rem``."""
    ashift = 0.0
    s = rem
    while s:
        lw = s & (-s)
        ashift += a[_bit_index(lw)]
        s ^= lw
    return (math.log(hu) if hu > 0.0 else -np.inf) - ashift - bsuf[popcount(rem)]


@njit(cache=True)
def _sub_share(gu, c, S, eu):
    """``gu[q] -= c e^{u_q}`` for each item ``q`` of the set ``S``: the gradient in ``u`` of
    ``-w log sigma(S)`` with ``c = w / sigma(S)``."""
    while S:
        lw = S & (-S)
        q = _bit_index(lw)
        gu[q] -= c * eu[q]
        S ^= lw


@njit(cache=True, fastmath=True)
def _forward(Q, eu, h, sig, M):
    """Fill ``h`` and ``sig`` (2^M,): the suffix table and the subset sums of ``eu``. Finite
    non-negative numbers only (fastmath is safe)."""
    table = DEBRUIJN
    h[0] = 1.0
    sig[0] = 0.0
    for S in range(1, 1 << M):
        low = S & (-S)
        sig[S] = sig[S ^ low] + eu[ctz(low, table)]
        row = Q[M - popcount(S)]
        acc = 0.0
        s = S
        while s:
            lw = s & (-s)
            acc += row[ctz(lw, table)] * h[S ^ lw]
            s ^= lw
        h[S] = acc / sig[S]


@njit(cache=True, fastmath=True)
def _adjoint(Q, eu, h, sig, adj, gu, gD, M):
    """Reverse sweep of the table: with ``adj[S]`` seeded by ``d out / d h(S)``, add
    ``d out / d u`` and ``d out / d D`` into ``gu`` and ``gD``; ``adj`` is overwritten.

    Per set and item two accumulations only: ``G[r, i]`` (``d out / d D[i, r]``, whose row sums
    are also ``u_i``'s share through the tilt factors) and ``ys[i]``, the summed
    ``d out / d log sigma(S)`` of the sets holding ``i`` (times ``e^{u_i}`` at the end)."""
    table = DEBRUIJN
    G = np.zeros((M, M))  # G[r, i]: d out / d D[i, r]
    ys = np.zeros(M)
    for S in range((1 << M) - 1, 0, -1):
        x = adj[S]
        if x == 0.0:
            continue
        r = M - popcount(S)
        row = Q[r]
        inv = x / sig[S]
        y = inv * h[S]  # d out / d log sigma(S) = -x h(S); times e^{u_k} / sigma(S) per k
        g = G[r]
        s = S
        while s:
            lw = s & (-s)
            i = ctz(lw, table)
            c = inv * row[i]
            g[i] += c * h[S ^ lw]
            ys[i] += y
            adj[S ^ lw] += c
            s ^= lw
    for i in range(M):
        t = 0.0
        for r in range(M):
            t += G[r, i]
            gD[i, r] += G[r, i]
        gu[i] += t - ys[i] * eu[i]


@njit(cache=True)
def middle_tie_rows(orders):
    """Boolean (n,): the valid rank-form rows with a tie block before their last block."""
    M = orders.shape[1]
    out = np.zeros(orders.shape[0], dtype=np.bool_)
    seq, starts, count, fill = order_work(M)
    for k in range(orders.shape[0]):
        nb = order_blocks_work(orders[k], seq, starts, count, fill)
        for blk in range(nb - 1):
            if starts[blk + 1] - starts[blk] > 1:
                out[k] = True
    return out


def check_no_middle_ties(orders, what="orders"):
    """Raise ``ValueError`` if a rank-form order has a tie block before its last block.

    The Plackett-Luce-anchored model's exact likelihood covers complete and top-k orders (and a
    tie at the end of an order); a tie in the middle is not implemented. The message names the
    first such row and the alternatives.
    """
    bad = middle_tie_rows(c_array(orders, np.int64))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"{what} row {i} ({np.asarray(orders)[i].tolist()}) has tied items before its last "
            "block: the Plackett-Luce-anchored full model supports complete and top-k orders "
            "only. Use the full model without the Plackett-Luce base (full_model(data)) or the "
            "Plackett-Luce model, which handle ties exactly, or break the ties.")


def _prepare(u, D, orders):
    u = as_float_array(u, "utilities", min_ndim=1)
    D = as_float_array(D, "tilt logits D", min_ndim=2)
    for name, x in (("utilities", u), ("tilt logits D", D)):
        if np.isinf(x).any():
            raise ValueError(f"{name} contain -inf: the Plackett-Luce-anchored model needs finite "
                             "values (no forbidden item-position pairs); use the full model "
                             "(pm_perm.PartialRanking logits) for forbidden pairs")
    M = u.shape[-1]
    if D.shape[-2:] != (M, M):
        raise ValueError(f"D must have shape (..., {M}, {M}) for {M} utilities; got {D.shape}")
    check_partial_order_size(M)
    orders = validate_orders(orders, M)
    check_no_middle_ties(orders)
    batch = np.broadcast_shapes(u.shape[:-1], D.shape[:-2])
    uf = c_array(np.broadcast_to(u, (*batch, M))).reshape(-1, M)
    Df = c_array(np.broadcast_to(D, (*batch, M, M))).reshape(-1, M, M)
    return uf, Df, orders, batch


def pl_tilted_loglik(u, D, orders):
    """Exact ``log p(order)`` of each complete or top-k rank-form order, batched.

    Parameters
    ----------
    u : array_like of float, shape (..., M)
        Plackett-Luce utilities.
    D : array_like of float, shape (..., M, M)
        Tilt logits, rows = items, columns = positions.
    orders : array_like of int, shape (n, M)
        Rank-form orders (see :class:`pm_perm.PartialRanking`), without middle tie blocks.

    Returns
    -------
    ndarray of float64, shape (batch..., n)

    Raises
    ------
    ValueError
        Invalid inputs, an order with a middle tie block, or M beyond the exact limit.

    Examples
    --------
    >>> import numpy as np
    >>> lp = pl_tilted_loglik([1.0, 0.0, -1.0], np.zeros((3, 3)), [[0, 1, 2], [0, -1, -1]])
    >>> np.round(np.exp(lp), 4).tolist()  # Plackett-Luce at D = 0
    [0.4863, 0.6652]
    """
    uf, Df, orders, batch = _prepare(u, D, orders)
    n, M = orders.shape[0], uf.shape[1]
    out = np.empty((uf.shape[0], n))
    w = np.zeros(n)
    gu, gD = np.empty(M), np.empty((M, M))
    plan = orders_plan(orders)
    for b in range(uf.shape[0]):
        pl_tilted_planned(uf[b], Df[b], *plan, w, out[b], gu, gD, False)
    return out.reshape(batch + (n,))


def pl_tilted_loglik_and_grad(u, D, orders, weights):
    """``sum_n weights[n] log p(order n)`` and its gradients with respect to ``u`` and ``D``.

    Parameters
    ----------
    u : array_like of float, shape (..., M)
    D : array_like of float, shape (..., M, M)
    orders : array_like of int, shape (n, M)
    weights : array_like of float, shape (n,)
        Finite real numbers, e.g. the count of each distinct order.

    Returns
    -------
    total : ndarray of float64, shape (batch...)
    grad_u : ndarray of float64, shape (batch..., M)
    grad_D : ndarray of float64, shape (batch..., M, M)

    Raises
    ------
    ValueError
        As :func:`pl_tilted_loglik`; also ``weights`` of another shape or not finite.
    """
    uf, Df, orders, batch = _prepare(u, D, orders)
    weights = check_weights(weights, orders.shape[0])
    n, M = orders.shape[0], uf.shape[1]
    totals = np.empty(uf.shape[0])
    gu = np.empty((uf.shape[0], M))
    gD = np.empty((uf.shape[0], M, M))
    values = np.empty(n)
    plan = orders_plan(orders)
    for b in range(uf.shape[0]):
        totals[b] = pl_tilted_planned(uf[b], Df[b], *plan, weights, values, gu[b], gD[b], True)
    return totals.reshape(batch), gu.reshape(batch + (M,)), gD.reshape(batch + (M, M))
