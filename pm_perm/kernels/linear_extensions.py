"""Exact likelihood of an arbitrary partial order (a set of pairwise preferences of one assessor):
the sum over its linear extensions, by a dynamic program over its down-sets (order ideals).

A partial order of one assessor is a (P, 2) int64 array of ``(preferred, other)`` item pairs,
rows ``(-1, -1)`` padding (a batch of assessors: (n, P, 2)). A ranking (a linear extension)
agrees with it when every preferred item comes before its other item. Its probability is

    ``p(prefs) = sum over linear extensions L of p(L)``

Ideals
    ``S`` (a set of items) is an ideal when every predecessor of an item of ``S`` is in ``S``.
    The extensions are the paths ``{} -> ... -> all items`` of the ideal lattice that add a
    minimal item ``i`` of the complement at each step: ``f({}) = 1``,
    ``f(S + i) += f(S) * factor(S, i)``, ``p = f(all)``. The ideals are enumerated level by level
    (size ``k``, sorted bitmasks); the cost is O(#ideals x m) time and memory, m the number of
    items of the DP (at most ``MAX_ITEMS``). A total order has m + 1 ideals, no preference at
    all 2^m.

Families (``family``)
    * ``PLACKETT_LUCE`` (utilities ``u`` (M,)): ``factor(S, i) = exp(u_i) / sum_{j not in S}
      exp(u_j)``, a function of the set of remaining items. Plackett-Luce is consistent under
      marginalisation (the order it induces on a subset of items is Plackett-Luce with the same
      utilities), so the DP runs over the items that appear in a preference only.
    * ``EXP_FAMILY`` (logits ``W`` (M, M), rows = items, columns = positions): ``factor(S, i) =
      exp(W[i, |S|])``, a function of the position; the DP runs over all M items and gives the
      UNNORMALISED ``log sum_L exp(sum_i W[i, L_i])``: subtract ``log perm(exp W)``
      (:mod:`pm_perm.ops.permanent`) for the log-probability. A separable Mallows model
      (footrule, Spearman, Hamming) is such a ``W``.

Gradient
    One adjoint (backward) sweep ``b(S) = sum_i factor(S, i) b(S + i)``, ``b(all) = 1``: the
    probability that the extension passes ``S -> S + i`` is ``f(S) factor b(S + i) / f(all)``,
    which weights ``d log factor``. Everything in log space (no underflow whatever ``n``).

Errors are reported by status (the kernel is a C callable that cannot raise, see
:mod:`pm_perm.ops.extern`) with the assessor and the items in ``info``; :func:`check_preferences`
raises them in Python and names a cycle's items.
"""

from __future__ import annotations

import math

import numpy as np
from numba import carray

from pm_perm._numba import njit
from pm_perm.kernels.plackett_luce import _logaddexp  # the log-space sum of the PL kernels

__all__ = [
    "EXP_FAMILY",
    "LINEAR_EXTENSION_ERRORS",
    "MAX_CELLS",
    "MAX_ITEMS",
    "PLACKETT_LUCE",
    "check_preferences",
    "count_ideals",
    "find_cycle",
    "linear_extensions_into",
    "linear_extension_loglik",
    "linear_extension_loglik_and_grad",
    "make_linear_extensions_kernel",
]

PLACKETT_LUCE = 0
EXP_FAMILY = 1

#: Most items a DP can hold (bitmasks in int64).
MAX_ITEMS = 62

#: Default budget of the DP per assessor: #ideals x (items of the DP), i.e. its time, and its
#: memory in units of 8 bytes (2^24 cells: about 0.1-0.3 s and at most 130 MB).
MAX_CELLS = 1 << 24

#: Status of :func:`linear_extensions_into` -> message (format fields: ``info[1:4]``).
LINEAR_EXTENSION_ERRORS = (
    "",
    "assessor {0}: item id {1} out of range 0..{2} (M = {3} items); item ids are 0-based row "
    "indices of the utilities (fix the ids, or give utilities for every item)",
    "assessor {0}: item {1} is preferred to itself; drop the pair (a preference needs two "
    "different items)",
    "assessor {0}: a pair with one -1 (padding must be (-1, -1)); fix the row or drop it",
    "assessor {0}: cyclic preferences through items {1} and {2} (each is preferred to the other "
    "through a chain): no ranking agrees with them. Drop or fix one preference of the cycle "
    "(pm_perm.kernels.linear_extensions.find_cycle names all of it)",
    "assessor {0}: the exact linear-extension likelihood needs more than the budget of {1} "
    "cells (#ideals x items; {2} items in the DP). Alternatives: the pairwise Bradley-Terry "
    "model on the pairs (pm_perm.BradleyTerry; independent comparisons), fewer items, or a "
    "larger max_cells",
    "the DP holds at most MAX_ITEMS = 62 items; assessor {0} involves {1}. Alternatives: the "
    "pairwise Bradley-Terry model (pm_perm.BradleyTerry) or fewer items",
    "params have the wrong shape for the family",
)


# ----------------------------------------------------------------------------- numba cores


@njit(cache=True)
def _local_items(prefs, M, use_all, items, local, info):
    """Validate one assessor's pairs; fill ``items`` (local -> item) and ``local`` (item ->
    local or -1); returns m (>= 0) or -status."""
    for i in range(M):
        local[i] = -1
    m = 0
    if use_all:
        for i in range(M):
            local[i] = i
            items[i] = i
        m = M
    for r in range(prefs.shape[0]):
        a, b = prefs[r, 0], prefs[r, 1]
        if a == -1 and b == -1:
            continue
        if a == -1 or b == -1:
            return -3
        for x in (a, b):
            if x < 0 or x >= M:
                info[1], info[2], info[3] = x, M - 1, M
                return -1
        if a == b:
            info[1] = a
            return -2
        for x in (a, b):
            if local[x] < 0:
                local[x] = m
                items[m] = x
                m += 1
    if m > MAX_ITEMS:
        info[1] = m
        return -6
    return m


@njit(cache=True)
def _predecessors(prefs, local, m):
    pred = np.zeros(m, dtype=np.int64)
    for r in range(prefs.shape[0]):
        a, b = prefs[r, 0], prefs[r, 1]
        if a < 0:
            continue
        pred[local[b]] |= np.int64(1) << np.int64(local[a])
    return pred


@njit(cache=True)
def _ideals(pred, m, max_cells, info):
    """``(ideals, starts, status)``: the ideals by level (level k = ``ideals[starts[k]:
    starts[k+1]]``, sorted), status 0, 4 (a cycle: ``info[1:3]`` two of its items) or 5
    (beyond ``max_cells``)."""
    cap = 64
    ideals = np.empty(cap, dtype=np.int64)
    ideals[0] = 0
    starts = np.zeros(m + 2, dtype=np.int64)
    starts[1] = 1
    total = 1
    cells = m
    one = np.int64(1)
    for k in range(m):
        a, b = starts[k], starts[k + 1]
        c = 0
        for t in range(a, b):
            S = ideals[t]
            for i in range(m):
                if (S >> i) & 1 == 0 and (pred[i] & ~S) == 0:
                    c += 1
        if c == 0:  # a cycle among the items outside the ideal: walk predecessors back
            S = ideals[a]
            i = 0
            while (S >> i) & 1:
                i += 1
            seen = np.zeros(m, dtype=np.int64)
            step = 1
            while seen[i] == 0:
                seen[i] = step
                step += 1
                rest = pred[i] & ~S
                j = 0
                while (rest >> j) & 1 == 0:
                    j += 1
                i = j
            rest = pred[i] & ~S  # i is on the cycle, and so is the walk's next item
            j = 0
            while (rest >> j) & 1 == 0:
                j += 1
            info[1], info[2] = i, j
            return ideals[:total], starts, 4
        cand = np.empty(c, dtype=np.int64)
        c = 0
        for t in range(a, b):
            S = ideals[t]
            for i in range(m):
                if (S >> i) & 1 == 0 and (pred[i] & ~S) == 0:
                    cand[c] = S | (one << i)
                    c += 1
        cand.sort()
        u = 0
        for t in range(c):
            if t == 0 or cand[t] != cand[t - 1]:
                cand[u] = cand[t]
                u += 1
        cells += u * m
        if cells > max_cells:
            info[1], info[2] = max_cells, m
            return ideals[:total], starts, 5
        if total + u > cap:
            while total + u > cap:
                cap *= 2
            grown = np.empty(cap, dtype=np.int64)
            grown[:total] = ideals[:total]
            ideals = grown
        ideals[total:total + u] = cand[:u]
        total += u
        starts[k + 2] = total
    return ideals[:total], starts, 0


@njit(cache=True)
def _log_factor(params, family, items, S, k, i, lse):
    if family == PLACKETT_LUCE:
        return params[items[i], 0] - lse
    return params[items[i], k]


@njit(cache=True)
def _remaining_lse(params, family, items, m, S):
    if family != PLACKETT_LUCE:
        return 0.0
    mx = -np.inf
    for j in range(m):
        if (S >> j) & 1 == 0:
            mx = max(mx, params[items[j], 0])
    if mx == -np.inf:
        return -np.inf
    acc = 0.0
    for j in range(m):
        if (S >> j) & 1 == 0:
            acc += math.exp(params[items[j], 0] - mx)
    return mx + math.log(acc)


@njit(cache=True)
def _one(params, family, items, m, pred, weight, grad, want_grad, max_cells, info):
    """``(log sum over extensions, status)`` of one assessor; adds ``weight`` x the gradient."""
    ideals, starts, status = _ideals(pred, m, max_cells, info)
    if status == 4:
        info[1], info[2] = items[info[1]], items[info[2]]
    if status != 0:
        return np.nan, status
    n_id = ideals.shape[0]
    lf = np.full(n_id, -np.inf)
    lf[0] = 0.0
    one = np.int64(1)
    for k in range(m):
        a, b, nb = starts[k], starts[k + 1], starts[k + 2]
        nxt = ideals[b:nb]
        for t in range(a, b):
            S = ideals[t]
            if lf[t] == -np.inf:
                continue
            lse = _remaining_lse(params, family, items, m, S)
            for i in range(m):
                if (S >> i) & 1 == 0 and (pred[i] & ~S) == 0:
                    T = S | (one << i)
                    idx = b + np.searchsorted(nxt, T)
                    lf[idx] = _logaddexp(lf[idx], lf[t] + _log_factor(params, family, items,
                                                                      S, k, i, lse))
    value = lf[n_id - 1]
    if not want_grad or weight == 0.0 or value == -np.inf or not np.isfinite(value):
        return value, 0
    lb = np.full(n_id, -np.inf)
    lb[n_id - 1] = 0.0
    for k in range(m - 1, -1, -1):
        a, b, nb = starts[k], starts[k + 1], starts[k + 2]
        nxt = ideals[b:nb]
        for t in range(a, b):
            S = ideals[t]
            lse = _remaining_lse(params, family, items, m, S)
            acc = -np.inf
            for i in range(m):
                if (S >> i) & 1 == 0 and (pred[i] & ~S) == 0:
                    T = S | (one << i)
                    idx = b + np.searchsorted(nxt, T)
                    lfac = _log_factor(params, family, items, S, k, i, lse)
                    acc = _logaddexp(acc, lfac + lb[idx])
                    if lf[t] != -np.inf and lb[idx] != -np.inf:
                        q = weight * math.exp(lf[t] + lfac + lb[idx] - value)
                        if family == PLACKETT_LUCE:
                            grad[items[i], 0] += q
                        else:
                            grad[items[i], k] += q
            lb[t] = acc
            if family == PLACKETT_LUCE and lf[t] != -np.inf and acc != -np.inf:
                Q = weight * math.exp(lf[t] + acc - value)  # p(the extension passes S)
                for j in range(m):
                    if (S >> j) & 1 == 0:
                        grad[items[j], 0] -= Q * math.exp(params[items[j], 0] - lse)
    return value, 0


@njit(cache=True)
def linear_extensions_into(params, family, prefs, weights, values, grad, want_grad, max_cells,
                           info):
    """Per-assessor ``log sum over linear extensions`` and the gradient of the weighted sum.

    Parameters
    ----------
    params : ndarray of float64, shape (M, 1) (Plackett-Luce utilities) or (M, M) (logits)
    family : int
        ``PLACKETT_LUCE`` or ``EXP_FAMILY``.
    prefs : ndarray of int64, shape (n, P, 2)
        Per assessor, ``(preferred, other)`` pairs, ``(-1, -1)`` padding.
    weights : ndarray of float64, shape (n,)
        Rows of weight 0 add nothing to the total nor to the gradient.
    values, grad : ndarray of float64, shapes (n,) and params'
        Outputs (``grad`` only with ``want_grad``; overwritten).
    max_cells : int
        Budget per assessor, #ideals x items of the DP.
    info : ndarray of int64, shape (4,)
        Output: on an error, the assessor and the items of the message (format fields of
        ``LINEAR_EXTENSION_ERRORS[status]``).

    Returns
    -------
    (total, status)
        ``sum_n weights[n] values[n]`` and 0, or NaN and the status of the first bad assessor.
        NaN or infinite utilities (or NaN / +inf logits) give NaN values and gradient.
    """
    M = params.shape[0]
    n = prefs.shape[0]
    if want_grad:
        grad[:, :] = 0.0
    if family == PLACKETT_LUCE and params.shape[1] != 1 or (
            family == EXP_FAMILY and params.shape[1] != M):
        return np.nan, 7
    finite = True
    for i in range(M):
        for j in range(params.shape[1]):
            x = params[i, j]
            if x != x or x == np.inf or (family == PLACKETT_LUCE and x == -np.inf):
                finite = False
    items = np.empty(max(M, 1), dtype=np.int64)
    local = np.empty(max(M, 1), dtype=np.int64)
    total = 0.0
    for r in range(n):
        info[0] = r
        m = _local_items(prefs[r], M, family == EXP_FAMILY, items, local, info)
        if m < 0:
            return np.nan, -m
        if not finite:
            values[r] = np.nan
            continue
        pred = _predecessors(prefs[r], local, m)
        v, status = _one(params, family, items, m, pred, weights[r], grad,
                         want_grad and weights[r] != 0.0, max_cells, info)
        if status != 0:
            return np.nan, status
        values[r] = v
        if weights[r] != 0.0:
            total += weights[r] * v
    if not finite:
        values[:] = np.nan
        if want_grad:
            grad[:, :] = np.nan
        return np.nan, 0
    return total, 0


def make_linear_extensions_kernel(version):
    """Body of the C callable of the linear-extension Ops (``numba.cfunc``, see
    :mod:`pm_perm.ops.extern`): ``op_kernel(params, m, cols, family, prefs, n, p, weights,
    values, grad, want_grad, max_cells, info)`` runs :func:`linear_extensions_into` on the
    C-contiguous (m, cols) float64 params, the (n, p, 2) int64 prefs and the (n,) weights,
    writes ``values`` (n,), the (m, cols) gradient when ``want_grad`` is non-zero, the status
    to ``info[0]`` and the message's fields to ``info[1:5]``; returns the weighted sum.
    ``version`` keys numba's cache as in
    :func:`pm_perm.kernels.permanent.make_log_permanent_kernel`.
    """

    def op_kernel(params, m, cols, family, prefs, n, p, weights, values, grad, want_grad,
                  max_cells, info):
        if version < 0:  # never true; referencing version puts it into numba's cache key
            return np.nan
        status_info = carray(info, 5)
        G = carray(grad, (m, cols)) if want_grad else np.empty((0, 0))
        total, status = linear_extensions_into(
            carray(params, (m, cols)), family, carray(prefs, (n, p, 2)), carray(weights, n),
            carray(values, n), G, want_grad != 0, max_cells, status_info[1:])
        status_info[0] = status
        return total

    return op_kernel


# ----------------------------------------------------------------------------- Python API


def find_cycle(prefs, M=None):
    """A cycle of the preference pairs ``prefs`` (P, 2) as a list of items ``[i0, i1, ..., i0]``
    (each preferred to the next), or None when they are acyclic. ``(-1, -1)`` rows are ignored."""
    prefs = np.asarray(prefs, dtype=np.int64).reshape(-1, 2)
    succ: dict[int, list[int]] = {}
    for a, b in prefs:
        if a >= 0:
            succ.setdefault(int(a), []).append(int(b))
    state: dict[int, int] = {}  # 1 on the stack, 2 done
    for start in list(succ):
        if state.get(start):
            continue
        stack = [(start, iter(succ.get(start, ())))]
        path = [start]
        state[start] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[node] = 2
                stack.pop()
                path.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                stack.append((nxt, iter(succ.get(nxt, ()))))
                path.append(nxt)
    return None


def _as_prefs(prefs):
    arr = np.asarray(prefs)
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
            raise ValueError("preference pairs must be integer item ids (-1 = padding); got "
                             "non-integer values")
    elif arr.dtype.kind not in "iu":
        raise ValueError(f"preference pairs must be integer item ids; got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    if arr.ndim == 2:
        arr = arr[None]
    if arr.ndim != 3 or arr.shape[-1] != 2:
        raise ValueError("preferences must be (P, 2) (preferred, other) pairs of one assessor, "
                         f"or (n, P, 2) for n assessors; got shape {np.asarray(prefs).shape}")
    return np.ascontiguousarray(arr)


def check_preferences(prefs, M, *, use_all=False, max_cells=MAX_CELLS, first=0):
    """Validate preference sets (n, P, 2) (or (P, 2)) over ``M`` items and count their DP cells.

    Raises ``ValueError`` naming the assessor and the fix for an item id out of range, a pair
    ``(i, i)``, a half-padded row, cyclic preferences (the whole cycle, by :func:`find_cycle`)
    and a DP beyond ``max_cells``. Returns the int64 array (n, P, 2). Assessors are numbered
    from ``first`` in the messages.
    """
    arr = _as_prefs(prefs)
    for r in range(arr.shape[0]):
        info = np.zeros(4, dtype=np.int64)
        items = np.empty(max(M, 1), dtype=np.int64)
        local = np.empty(max(M, 1), dtype=np.int64)
        m = _local_items(arr[r], M, use_all, items, local, info)
        if m < 0:
            info[0] = first + r
            raise ValueError(LINEAR_EXTENSION_ERRORS[-m].format(*info))
        pred = _predecessors(arr[r], local, m)
        _, _, status = _ideals(pred, m, max_cells, info)
        if status == 4:
            cycle = find_cycle(arr[r])
            chain = " > ".join(str(i) for i in cycle)
            raise ValueError(f"assessor {first + r}: cyclic preferences {chain} (each preferred "
                             "to the next): no ranking agrees with them. Drop or fix one "
                             "preference of the cycle")
        if status != 0:
            info[0] = first + r
            raise ValueError(LINEAR_EXTENSION_ERRORS[status].format(*info))
    return arr


def count_ideals(prefs, M=None, *, use_all=False, max_cells=MAX_CELLS):
    """Number of ideals (down-sets) of one assessor's partial order (P, 2): the DP's size
    (``use_all``: over all ``M`` items, as the exp-family likelihood; else over the items of
    the pairs). Raises ``ValueError`` beyond ``max_cells``."""
    arr = _as_prefs(prefs)[0]
    M = int(arr.max()) + 1 if M is None else M
    info = np.zeros(4, dtype=np.int64)
    items, local = np.empty(max(M, 1), np.int64), np.empty(max(M, 1), np.int64)
    m = _local_items(arr, M, use_all, items, local, info)
    if m < 0:
        raise ValueError(LINEAR_EXTENSION_ERRORS[-m].format(*info))
    ideals, _, status = _ideals(_predecessors(arr, local, m), m, max_cells, info)
    if status == 4:
        info[1], info[2] = items[info[1]], items[info[2]]
    if status != 0:
        raise ValueError(LINEAR_EXTENSION_ERRORS[status].format(*info))
    return int(ideals.shape[0])


def _params(params, family):
    p = np.asarray(params, dtype=np.float64)
    if family == PLACKETT_LUCE:
        if p.ndim != 1:
            raise ValueError(f"utilities must have shape (M,); got {p.shape}")
        return np.ascontiguousarray(p[:, None])
    if p.ndim != 2 or p.shape[0] != p.shape[1]:
        raise ValueError(f"logits must have shape (M, M); got {p.shape}")
    return np.ascontiguousarray(p)


def _run(params, family, prefs, weights, want_grad, max_cells):
    P = _params(params, family)
    arr = _as_prefs(prefs)
    n = arr.shape[0]
    w = np.ones(n) if weights is None else np.ascontiguousarray(weights, dtype=np.float64)
    values = np.empty(n)
    grad = np.zeros(P.shape)
    info = np.zeros(4, dtype=np.int64)
    total, status = linear_extensions_into(P, family, arr, w, values, grad, want_grad,
                                           max_cells, info)
    if status == 4:
        check_preferences(arr[info[0]:info[0] + 1], P.shape[0], max_cells=max_cells,
                          first=int(info[0]))
    if status != 0:
        raise ValueError(LINEAR_EXTENSION_ERRORS[status].format(*info))
    return total, values, grad[:, 0] if family == PLACKETT_LUCE else grad


def linear_extension_loglik(params, prefs, *, family=PLACKETT_LUCE, max_cells=MAX_CELLS):
    """Per assessor, ``log sum over the linear extensions`` of its preferences.

    Parameters
    ----------
    params : array_like of float
        Plackett-Luce utilities (M,) (``family=PLACKETT_LUCE``: the log-probability) or logits
        (M, M) (``family=EXP_FAMILY``: the UNNORMALISED log-sum; subtract
        ``log_permanent(W)``).
    prefs : array_like of int, shape (P, 2) or (n, P, 2)
        ``(preferred, other)`` pairs; ``(-1, -1)`` rows are padding.
    family : int
    max_cells : int
        Budget per assessor (#ideals x items of the DP); beyond it ``ValueError`` names the
        alternatives.

    Returns
    -------
    ndarray of float64, shape (n,)
    """
    return _run(params, family, prefs, None, False, max_cells)[1]


def linear_extension_loglik_and_grad(params, prefs, weights=None, *, family=PLACKETT_LUCE,
                                     max_cells=MAX_CELLS):
    """``(sum_n weights[n] loglik[n], its gradient in params)`` (see
    :func:`linear_extension_loglik`); one forward and one adjoint sweep per assessor."""
    total, _, grad = _run(params, family, prefs, weights, True, max_cells)
    return total, grad
