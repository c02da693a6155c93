"""Exact top-k item-by-position model for any number of items: likelihood, gradient, draws.

Model
    ``M`` items, ``K <= M`` positions. Logits ``L`` (M, K + 1): ``L[i, j] = W[i, j]`` is the
    logit of item ``i`` at position ``j < K`` and ``L[i, K] = V[i]`` that of item ``i`` being
    NOT in the top K (positions ``K..M-1`` are exchangeable). A top-K list ``t`` (``t_j`` = the
    item at position ``j``) has

    ``p(t) ∝ exp(sum_{j<K} W[t_j, j] + sum_{i not in t} V[i])``,

    the permutation model of :mod:`pm_perm.kernels.partial_orders` with the logits
    ``W_full[:, j] = V`` for every ``j >= K``, marginalised over the order of the items beyond K.
    With ``K = M`` it IS that full model (``V`` unused); with ``K = 1`` a multinomial of first
    choices (``p(i first) ∝ exp(W[i, 0] - V[i])``).

Normaliser
    ``Z = exp(sum_i V_i) perm_K(A)``, ``A[j, i] = exp(W[i, j] - V[i])``, the K x M rectangular
    permanent, by a DP over subsets ``S`` of the K POSITIONS iterating over the items:
    ``F_{i+1}(S) = b_i F_i(S) + sum_{j in S} a[j, i] F_i(S - {j})`` (item ``i`` out of the top
    K, or at position ``j``), ``Z = F_M(all positions)``. Cost O(M K 2^K); memory 2^K per
    table (two for the value, M + 1 for the gradient and draws, :func:`check_top_k_size`).

Ballots
    Rank form as :class:`pm_perm.PartialRanking` (``-1`` = unranked). A ballot ranks ``k <= K``
    items (tied items count as ranked). Its ranked part is the product of its blocks: one logit
    per strict position, the exact ``s x s`` permanent of the logits of a tie block of size
    ``s`` over its positions (the block's items fill its positions in any order; every tie
    pattern inside the top K is supported). The unranked items ``U`` fill positions
    ``k..K-1`` in any way, the others are out: the same DP over subsets of those ``r = K - k``
    positions, iterating over the items of ``U`` only: O(|U| r 2^r) per distinct ballot, nothing
    for ``r = 0`` (``sum_{i in U} V_i``). For a length held by many ballots the remainders come
    instead from tables shared by all of them (:mod:`pm_perm.kernels.top_k_ballots`: products
    over runs of consecutive items, O(M^2 r 2^r) once, then O(2^r) to O(k 3^r) per ballot, no
    subtraction); the argument ``fast`` of :func:`top_k_core` chooses. Ballots of the full
    length K cost O(M) each.

Gradient
    ``d log Z / dL`` are the marginals ``p(item i at position j)`` and ``p(item i out)``, by a
    backward (adjoint) sweep over the stored forward tables; each ballot adds its strict logits,
    its tie blocks' permanent marginals and the marginals of its own suffix DP, times its count.

Draws
    Exact, from the stored forward tables: :mod:`pm_perm.kernels.top_k_sampler`.

Scaling
    ``L`` is shifted by the dual potentials of the max-weight assignment of ``W_full`` (M x M),
    so every product is at most 1 and the largest is 1, as in :mod:`pm_perm.kernels.subset_dp`;
    O(M^3) once per logits matrix: the normaliser's terms that matter are at least 1e-16 and
    never underflow. A ballot's suffix DP uses the same scaled weights; when its scaled sum is
    below ``SUFFIX_TINY`` (the ballot is hundreds of nats less likely than the model's best
    list, and terms may have underflowed) it is recomputed in log space on the unscaled logits
    (exact whatever the spread, about 20 times slower).
"""

from __future__ import annotations

import math

import numpy as np
from numba import carray

from pm_perm._memory import format_bytes, memory_budget
from pm_perm._numba import njit
from pm_perm.kernels._checks import as_float_array, check_weights, finite_or_minus_inf
from pm_perm.kernels.assignment import max_weight_assignment_core
from pm_perm.kernels.partial_orders import _block_log_perm
from pm_perm.kernels.rank_form import order_blocks_work, order_work, validate_orders
from pm_perm.kernels.top_k_ballots import (
    ballot_lengths,
    ballot_remainder,
    build_tables,
    plan_lengths,
    remainder_unscale,
    suffix_log,
    sweep_tables,
)
from pm_perm.kernels.top_k_ballots import bit_index as _bit  # noqa: F401 (top_k_sampler)
from pm_perm.kernels.top_k_ballots import dp_step as _step

__all__ = [
    "SUFFIX_TINY",
    "TOP_K_MAX_K",
    "check_top_k_size",
    "make_top_k_kernel",
    "top_k_core",
    "top_k_into",
    "top_k_log_normalizer",
    "top_k_loglik",
    "top_k_loglik_and_grad",
    "top_k_marginals",
]

#: Largest K (positions) the exact top-k engine accepts (2^24 float64 = 128 MiB per table).
TOP_K_MAX_K = 24

_RESCALE = 1e-100

#: A ballot's dual-scaled suffix sum below this is recomputed in log space (see Scaling).
SUFFIX_TINY = 1e-280
_LOG_TINY = math.log(SUFFIX_TINY)


def check_top_k_size(M: int, K: int) -> None:
    """Raise ``ValueError`` if the exact top-k model of ``M`` items and ``K`` positions is
    beyond its limits: ``1 <= K <= M``, ``K <= TOP_K_MAX_K`` and ``(M + 1) 2^K`` float64 (the
    tables of the gradient and of the draws) within the memory budget
    (``PM_PERM_MEMORY_BUDGET``)."""
    if M < 1 or not 1 <= K <= M:
        raise ValueError(f"the top-k model needs 1 <= K <= M; got K = {K} positions for M = {M} "
                         "items (logits of shape (M, K + 1), the last column the 'not in the "
                         "top K' logit)")
    if K > TOP_K_MAX_K:
        raise ValueError(f"K = {K} positions is beyond the exact limit TOP_K_MAX_K = {TOP_K_MAX_K}"
                         " of the top-k model (O(M K 2^K) time, M 2^K memory). Use the "
                         "Plackett-Luce model (pm_perm.PlackettLuce, any length) or keep fewer "
                         "positions (the ballots' first K items)")
    need = 8 * (M + 1) * (1 << K)
    budget = memory_budget()
    if need > budget:
        raise ValueError(f"the top-k model of M = {M} items and K = {K} positions needs "
                         f"{format_bytes(need)} for its tables, more than the memory budget of "
                         f"{format_bytes(budget)}. Raise PM_PERM_MEMORY_BUDGET (bytes) if the "
                         "machine has the memory, or keep fewer positions")


# ----------------------------------------------------------------------------- numba cores


@njit(cache=True)
def _scaled_weights(L):
    """``(A (K, M), b (M,), log_shift, feasible, u (M,), v)``: ``A[j, i] = exp(L[i, j] + u_i +
    v_j)``, ``b[i] = exp(L[i, K] + u_i + v[K]) <= 1`` with assignment duals of ``W_full``
    (``v[K]`` that of its columns ``K..M-1``); a product over a top-K list times
    ``exp(log_shift)`` is its unscaled weight, every product is at most 1, the best one 1.

    With ``K < M`` and every ``V_i`` finite the duals come from the K x M assignment of the
    positions to the items on ``W[i, j] - V[i]`` (O(K^2 M)): position duals ``p``, item duals
    ``q <= 0`` (0 for the items out of the best list) give ``u_i = q_i - V_i``, ``v_j = p_j``,
    ``v[K] = 0``. Otherwise from the M x M assignment of ``W_full`` (O(M^3)), ``v[K]`` the
    largest dual of its columns ``K..M-1`` (0 if K = M)."""
    M, K = L.shape[0], L.shape[1] - 1
    rect = K < M
    for i in range(M):
        rect = rect and L[i, K] != -np.inf
    if rect:
        C = np.empty((K, M))
        for j in range(K):
            for i in range(M):
                C[j, i] = L[i, j] - L[i, K]
        _, p, q, feasible = max_weight_assignment_core(C)
        u = np.empty(M)
        for i in range(M):
            u[i] = q[i] - L[i, K]
        v = np.zeros(K + 1)
        v[:K] = p
    else:
        Wf = np.empty((M, M))
        for i in range(M):
            for j in range(M):
                Wf[i, j] = L[i, j] if j < K else L[i, K]
        _, u, v, feasible = max_weight_assignment_core(Wf)
        if feasible and K < M:
            vr = v[K]
            for j in range(K + 1, M):
                vr = max(vr, v[j])
            v[K] = vr
    A = np.zeros((K, M))
    b = np.zeros(M)
    if not feasible:
        return A, b, -np.inf, False, u, v
    vr = v[K] if K < M else 0.0
    shift = 0.0
    for i in range(M):
        shift -= u[i]
        for j in range(K):
            w = L[i, j]
            if w != -np.inf:
                A[j, i] = math.exp(min(w + u[i] + v[j], 0.0))
        w = L[i, K]
        if w != -np.inf:
            b[i] = math.exp(min(w + u[i] + vr, 0.0))
    for j in range(K):
        shift -= v[j]
    shift -= (M - K) * vr
    return A, b, shift, True, u, v


@njit(cache=True)
def _forward(A, b, items, tables):
    """Forward tables of the DP over subsets of the ``r`` rows (positions) of ``A``, iterating
    over ``items``: ``tables[t]`` (t = 0..len(items), or alternating rows 0 and 1 when
    ``tables`` has 2 rows) holds ``F_t`` scaled by ``exp(-logs[t])``. Returns ``logs``."""
    r = A.shape[0]
    n = 1 << r
    m = items.shape[0]
    keep = tables.shape[0] > 2
    logs = np.zeros(m + 1)
    tables[0, :] = 0.0
    tables[0, 0] = 1.0
    for t in range(m):
        src = tables[t] if keep else tables[t & 1]
        dst = tables[t + 1] if keep else tables[(t + 1) & 1]
        mx = _step(A, items[t], b[items[t]], src, dst, r)
        logs[t + 1] = logs[t]
        if 0.0 < mx < _RESCALE:
            for S in range(n):
                dst[S] /= mx
            logs[t + 1] += math.log(mx)
    return logs


@njit(cache=True)
def _marginals(A, b, items, F, logs, P, Pout):
    """Given the stored forward tables ``F`` (m + 1, 2^r) of :func:`_forward`, write the
    marginals ``P[t, j] = p(items[t] at row j)`` and ``Pout[t] = p(items[t] out)`` of the
    DP's distribution over assignments covering all ``r`` rows (a backward sweep)."""
    r = A.shape[0]
    n = 1 << r
    m = items.shape[0]
    full = n - 1
    zf = F[m, full]
    logz = math.log(zf) + logs[m]
    cur = np.zeros(n)  # backward table Bk_{t+1}(T), scaled by exp(-tau)
    nxt = np.empty(n)
    cur[0] = 1.0
    tau = 0.0
    for t in range(m - 1, -1, -1):
        i = items[t]
        Ft = F[t]
        scale = math.exp(logs[t] + tau - logz)
        po = 0.0
        for S in range(n):
            po += Ft[S] * cur[full - S]
        Pout[t] = po * b[i] * scale
        for j in range(r):
            h = 1 << j
            acc = 0.0
            for blk in range(0, n, 2 * h):  # S without row j: cur at the complement minus j
                for S in range(blk, blk + h):
                    acc += Ft[S] * cur[full - h - S]
            P[t, j] = acc * A[j, i] * scale
        # Bk_t(T) = b_i Bk_{t+1}(T) + sum_{j in T} a[j, i] Bk_{t+1}(T - j)
        mx = _step(A, i, b[i], cur, nxt, r)
        if 0.0 < mx < _RESCALE:
            for T in range(n):
                nxt[T] /= mx
            tau += math.log(mx)
        cur, nxt = nxt, cur
    return logz


@njit(cache=True)
def _log_normalizer(A, b, shift, P, Pout, want_grad):
    """``log Z`` (and with ``want_grad`` the marginals into ``P`` (M, K), ``Pout`` (M,))."""
    K, M = A.shape
    items = np.arange(M)
    F = np.empty((M + 1 if want_grad else 2, 1 << K))
    logs = _forward(A, b, items, F)
    if not want_grad:
        zf = F[M & 1, (1 << K) - 1]
        return math.log(zf) + logs[M] + shift
    return _marginals(A, b, items, F, logs, P, Pout) + shift


@njit(cache=True)
def _suffix(L, A, b, u, v, k, U, nU, wk, grad, gk):
    """``log`` of the sum over fillings of positions ``k..K-1`` by the items ``U[:nU]`` (the
    others of ``U`` out of the top K); with ``gk`` adds ``wk`` times its marginals into
    ``grad``. On the dual-scaled weights ``A``, ``b`` (duals ``u``, ``v``); a scaled sum below
    ``SUFFIX_TINY`` (its terms may have underflowed) is recomputed in log space."""
    K = A.shape[0]
    r = K - k
    items = U[:nU].copy()
    As = A[k:]
    F = np.empty((nU + 1 if gk else 2, 1 << r))
    logs = _forward(As, b, items, F)
    zf = F[nU if gk else nU & 1, (1 << r) - 1]
    if zf == 0.0 or math.log(zf) + logs[nU] < _LOG_TINY:
        return suffix_log(L, k, items, wk, grad, gk)
    unscale = remainder_unscale(u, v, k, items, nU)
    if not gk:
        return math.log(zf) + logs[nU] - unscale
    P = np.empty((nU, r))
    Pout = np.empty(nU)
    val = _marginals(As, b, items, F, logs, P, Pout)
    for t in range(nU):
        i = items[t]
        grad[i, K] += wk * Pout[t]
        for j in range(r):
            grad[i, k + j] += wk * P[t, j]
    return val - unscale


@njit(cache=True, inline="always")
def _strict_top_k(y, top):
    """True if the rank-form row ``y`` (M,) is a strict top-K list (positions ``0..K-1`` once
    each, every other entry ``-1``; ``K = top.shape[0]``), writing its items in position order
    into ``top``; False for anything else (ties, shorter or invalid rows: the general path)."""
    K = top.shape[0]
    top[:] = -1
    for i in range(y.shape[0]):
        v = y[i]
        if v == -1:
            continue
        if v < 0 or v >= K or top[v] >= 0:
            return False
        top[v] = i
    for j in range(K):
        if top[j] < 0:
            return False
    return True


@njit(cache=True)
def top_k_core(L, orders, weights, values, grad, want_grad, fast=-1):
    """Per-ballot log-likelihoods of ``orders`` under one logits matrix, and the gradient of
    ``sum_n weights[n] * values[n]``.

    Parameters
    ----------
    L : ndarray of float64, shape (M, K + 1)
        Finite logits or ``-inf`` (validated by the caller), the last column the "not in the
        top K" logit.
    orders : ndarray of int64, shape (n, M)
        Rank-form ballots; rows that are not valid rank form or rank more than K items get
        ``-inf`` and no gradient.
    weights : ndarray of float64, shape (n,)
        Any real weights (counts, or a cotangent); rows of weight 0 add no gradient.
    values : ndarray of float64, shape (n,)
        Output: ``log p(ballot n)``.
    grad : ndarray of float64, shape (M, K + 1)
        Output (with ``want_grad``): the gradient; left untouched otherwise.

    fast : int
        The remainders of short ballots from shared tables
        (:mod:`pm_perm.kernels.top_k_ballots`): ``-1`` for the lengths where they are cheaper
        than one DP per ballot, ``1`` for every length (the tests), ``0`` never.

    Returns
    -------
    float
        ``sum_n weights[n] * values[n]`` over the rows of non-zero weight; NaN (and NaN values
        and gradient) if no top-K list has positive weight.
    """
    M, K = L.shape[0], L.shape[1] - 1
    n = orders.shape[0]
    A, b, shift, feasible, u, v = _scaled_weights(L)
    if not feasible:
        values[:] = np.nan
        if want_grad:
            grad[:, :] = np.nan
        return np.nan
    P = np.empty((M, K))
    Pout = np.empty(M)
    log_z = _log_normalizer(A, b, shift, P, Pout, want_grad)
    if want_grad:
        grad[:, :] = 0.0
    seq, starts, count, fill = order_work(M)
    sum_v = 0.0  # for the strict path: sum_i V_i (finite, else the strict path is off)
    for i in range(M):
        sum_v += L[i, K]
    strict = math.isfinite(sum_v)
    top = np.empty(K, dtype=np.int64)
    use = plan_lengths(M, K, ballot_lengths(orders, K) if fast != 0 else np.zeros(K + 1, np.int64),
                       fast)
    tables = [build_tables(A[k:], b, M, k) for k in range(K) if use[k]]
    slot = np.cumsum(use) - 1
    n_work = 1
    for k in range(K - 1, 0, -1):
        n_work = (1 << (K - k)) if use[k] else n_work
    work, bwork = np.empty((K + 1, n_work)), np.empty((K + 1, n_work))
    adjoints = [np.zeros_like(T) for T, _ in tables] if want_grad else [np.zeros((0, 0))]
    facs = np.empty(K + 1)
    total = 0.0
    wsum = 0.0
    wfull = 0.0  # the weight of the strict-path ballots: each adds wk to grad[:, K]
    for q in range(n):
        wk = weights[q]
        gk = want_grad and wk != 0.0
        if strict and _strict_top_k(orders[q], top):
            # a strict top-K list: sum_{j<K} W[t_j, j] + sum_i V_i - sum_{j<K} V[t_j], O(K)
            lp = sum_v
            for j in range(K):
                lp += L[top[j], j] - L[top[j], K]
                if gk:
                    grad[top[j], j] += wk
                    grad[top[j], K] -= wk
            if gk:
                wfull += wk
            values[q] = lp - log_z
            if wk != 0.0:
                total += wk * values[q]
                wsum += wk
            continue
        nb = order_blocks_work(orders[q], seq, starts, count, fill)
        k = M - count[0] if nb >= 0 else 0
        if nb < 0 or k > K:
            values[q] = -np.inf
            if wk != 0.0:
                total += wk * -np.inf
            continue
        if k == 0:  # nothing ranked: the certain event
            values[q] = 0.0
            continue
        lp = 0.0
        for blk in range(nb):
            a, e = starts[blk], starts[blk + 1]
            if a >= k:  # the unranked items
                break
            if e - a == 1:
                lp += L[seq[a], a]
                if gk:
                    grad[seq[a], a] += wk
            else:
                lp += _block_log_perm(L, seq, a, e, wk, grad, gk)
        nU = M - k
        U = seq[k:]
        if k == K:  # the unranked items are all out of the top K
            for t in range(nU):
                lp += L[U[t], K]
                if gk:
                    grad[U[t], K] += wk
        else:  # they fill positions k..K-1: shared tables, else the suffix DP
            lr = np.nan
            if use[k]:
                T, s = tables[slot[k]]
                c = 0
                for i in range(M):  # the ranked items, increasing
                    if orders[q, i] >= 0:
                        top[c] = i
                        c += 1
                lr = ballot_remainder(T, s, adjoints[slot[k] if gk else 0], M, k, top, wk, gk,
                                      work, bwork, facs, _LOG_TINY)
            if lr == lr:
                lp += lr - remainder_unscale(u, v, k, U, nU)
            else:
                lp += _suffix(L, A, b, u, v, k, U, nU, wk, grad, gk)
        values[q] = lp - log_z
        if wk != 0.0:
            total += wk * values[q]
            wsum += wk
    if want_grad:
        for k in range(K):
            if use[k]:
                T, s = tables[slot[k]]
                sweep_tables(A[k:], b, M, k, T, s, adjoints[slot[k]], grad)
        for i in range(M):
            grad[i, K] += wfull - wsum * Pout[i]
            for j in range(K):
                grad[i, j] -= wsum * P[i, j]
    return total


@njit(cache=True)
def top_k_into(L, orders, weights, values, grad, want_grad):
    """:func:`top_k_core` for logits that may hold NaN, ``+inf`` or finite entries beyond
    ``LOGIT_ABS_MAX``: those give NaN. The body of the C kernel of :func:`make_top_k_kernel`."""
    if not finite_or_minus_inf(L):
        values[:] = np.nan
        if want_grad:
            grad[:, :] = np.nan
        return np.nan
    return top_k_core(L, orders, weights, values, grad, want_grad)


def make_top_k_kernel(version):
    """Body of the C callable of the top-k Ops (``numba.cfunc``, see :mod:`pm_perm.ops.extern`):
    ``op_kernel(w, m, q, orders, n, weights, values, grad, want_grad)`` runs
    :func:`top_k_into` on the C-contiguous (m, q) float64 logits at ``w`` (``q = K + 1``), the
    (n, m) int64 orders and (n,) float64 weights, writes the values (n,) and, if ``want_grad``
    is non-zero, the gradient (m, q); returns the weighted sum. ``version`` keys numba's cache
    as in :func:`pm_perm.kernels.permanent.make_log_permanent_kernel`."""

    def op_kernel(w, m, q, orders, n, weights, values, grad, want_grad):
        if version < 0:  # never true; referencing version puts it into numba's cache key
            return np.nan
        G = carray(grad, (m, q)) if want_grad else np.empty((0, 0))
        return top_k_into(carray(w, (m, q)), carray(orders, (n, m)), carray(weights, n),
                          carray(values, n), G, want_grad != 0)

    return op_kernel


@njit(cache=True)
def _normalizer_batch(L, want_grad):
    nb, M, Q = L.shape
    out = np.empty(nb)
    G = np.zeros((nb, M, Q))
    for t in range(nb):
        A, b, shift, feasible, _, _ = _scaled_weights(L[t])
        if not feasible:
            out[t] = -np.inf
            continue
        P = np.empty((M, Q - 1))
        Pout = np.empty(M)
        out[t] = _log_normalizer(A, b, shift, P, Pout, want_grad)
        if want_grad:
            G[t, :, : Q - 1] = P
            G[t, :, Q - 1] = Pout
    return out, G


# ----------------------------------------------------------------------------- public API


def _as_logits(L, name="logits"):
    arr = as_float_array(L, name, min_ndim=2)
    M, Q = arr.shape[-2:]
    if Q < 2:
        raise ValueError(f"{name} must have shape (..., M, K + 1) with K >= 1 positions (the last "
                         f"column the 'not in the top K' logit); got shape {arr.shape}")
    check_top_k_size(M, Q - 1)
    return arr


def _prepare(L, orders):
    arr = _as_logits(L)
    M, K = arr.shape[-2], arr.shape[-1] - 1
    orders = validate_orders(orders, M)
    longest = int((orders >= 0).sum(axis=1).max()) if orders.shape[0] else 0
    if longest > K:
        row = int(np.argmax((orders >= 0).sum(axis=1)))
        raise ValueError(f"orders[{row}] ranks {longest} items, more than the K = {K} positions "
                         f"of the logits (shape {arr.shape}): give logits of shape (M, "
                         f"{longest} + 1) or cut the ballots to their first {K} items")
    return arr, orders


@njit(cache=True)
def _batch(L, orders, weights, want_grad):
    nb = L.shape[0]
    values = np.empty((nb, orders.shape[0]))
    totals = np.empty(nb)
    grad = np.zeros(L.shape)
    for t in range(nb):
        totals[t] = top_k_core(L[t], orders, weights, values[t], grad[t], want_grad)
    return values, totals, grad


def top_k_log_normalizer(L):
    """``log Z`` of the top-k model, batched: ``log sum_t exp(sum_{j<K} W[t_j, j] + sum_{i not
    in t} V[i])`` over the top-K lists ``t``.

    Parameters
    ----------
    L : array_like of float, shape (..., M, K + 1)
        Logits: columns ``0..K-1`` the positions, the last the "not in the top K" logit.

    Returns
    -------
    ndarray of float64, shape (...)
        ``-inf`` when every top-K list uses a ``-inf`` logit.

    Examples
    --------
    >>> import numpy as np
    >>> float(np.exp(top_k_log_normalizer(np.zeros((4, 3)))))  # 4 * 3 top-2 lists
    12.0
    """
    arr = _as_logits(L)
    flat = arr.reshape((-1,) + arr.shape[-2:])
    return _normalizer_batch(flat, False)[0].reshape(arr.shape[:-2])


def top_k_marginals(L):
    """``(log Z, G)`` with ``G[..., i, j] = p(item i at position j)`` for ``j < K`` and
    ``G[..., i, K] = p(item i not in the top K)``: the gradient of ``log Z``. Same arguments
    as :func:`top_k_log_normalizer`; O(M K 2^K) time, (M + 1) 2^K float64 memory."""
    arr = _as_logits(L)
    flat = arr.reshape((-1,) + arr.shape[-2:])
    lz, G = _normalizer_batch(flat, True)
    return lz.reshape(arr.shape[:-2]), G.reshape(arr.shape)


def top_k_loglik(L, orders):
    """Exact ``log p(ballot)`` of each rank-form ballot, batched over the logits.

    Parameters
    ----------
    L : array_like of float, shape (..., M, K + 1)
        Logits (see the module docstring).
    orders : array_like of int, shape (n, M)
        Rank-form ballots ranking at most K items each (ties allowed).

    Returns
    -------
    ndarray of float64, shape (..., n)
        NaN for logits under which no top-K list has positive probability.

    Raises
    ------
    ValueError
        Invalid logits or orders, a ballot longer than K, K beyond ``TOP_K_MAX_K`` or the
        memory budget.
    """
    arr, orders = _prepare(L, orders)
    flat = arr.reshape((-1,) + arr.shape[-2:])
    values, _, _ = _batch(flat, orders, np.ones(orders.shape[0]), False)
    return values.reshape(arr.shape[:-2] + (orders.shape[0],))


def top_k_loglik_and_grad(L, orders, weights):
    """``sum_n weights[n] log p(ballot n)`` and its gradient with respect to ``L``, batched.

    Parameters
    ----------
    L : array_like of float, shape (..., M, K + 1)
    orders : array_like of int, shape (n, M)
    weights : array_like of float, shape (n,)
        Finite real numbers, e.g. the count of each distinct ballot.

    Returns
    -------
    total : ndarray of float64, shape (...)
    grad : ndarray of float64, shape (..., M, K + 1)
    """
    arr, orders = _prepare(L, orders)
    weights = check_weights(weights, orders.shape[0])
    flat = arr.reshape((-1,) + arr.shape[-2:])
    _, totals, grad = _batch(flat, orders, weights, True)
    return totals.reshape(arr.shape[:-2]), grad.reshape(arr.shape)
