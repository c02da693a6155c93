"""Plackett-Luce log-likelihood of rank-form orders (top-k, ties), its gradient, exact draws.

Utilities ``u`` (M,): the first item is item ``i`` with probability ``exp(u_i) / sum_j exp(u_j)``,
the next among the rest, and so on. Orders are in rank form (``docs/guide/preferences_data.md``).
An order is a sequence of blocks (single items, tie blocks, then the unranked items); with
``R_b`` the items of blocks ``b, b+1, ...`` and ``L_b = log sum_{j in R_b} exp(u_j)``:

* a single item ``i`` in block ``b``: ``u_i - L_b`` (the usual PL factor);
* a tie block ``S``: the exact PL probability that the items of ``S`` fill these ``|S|``
  positions in ANY internal order, by a subset DP over ``S``:
  ``f(A) = sum_{i in A} f(A - i) exp(u_i) / (T + sum_{j in S - (A - i)} exp(u_j))`` with ``T`` the
  total weight after the block, ``f({}) = 1``; the factor is ``f(S)``, O(s 2^s) for a block of
  size ``s`` (limit ``TIE_BLOCK_MAX``), in log space;
* the unranked items (and any last block that holds all remaining items) contribute 0: they fill
  the remaining positions in some order with probability 1 (top-k PL).

Cost per order O(M) (plus O(s 2^s) per non-final tie block); the weighted sum over n distinct
orders O(n M). Scaling: weights ``w = exp(u - max u)`` and suffix sums of them in linear space
(every term positive, relative error a few ulps); when a suffix sum falls below ``1e-250``
(utilities more than ~575 apart) the order is redone in log space with ``logaddexp``.
The gradient is the reverse pass of the same quantities: ``d/du_j = [j chosen] - sum over the
stages whose remaining set holds j of exp(u_j - L_b)`` (prefix sums of ``1/S_b``), plus the
reverse pass of each tie block's DP.

Draws: Gumbel-max (Yellott 1977): ranking the items by ``u_i + G_i`` with iid standard Gumbel
``G_i`` is an exact PL draw; a top-k ballot keeps the first ``k`` with ``k ~ length_probs``.
"""

from __future__ import annotations

import math

import numpy as np
from numba import carray

from pm_perm._numba import njit
from pm_perm.kernels._bitgen import generator_at
from pm_perm.kernels._checks import as_float_array, as_size, c_array, check_weights
from pm_perm.kernels.rank_form import order_blocks_work, validate_orders

__all__ = [
    "TIE_BLOCK_MAX",
    "check_length_probs",
    "PL_DRAW_ERRORS",
    "PL_TIE_BLOCK_TOO_LARGE",
    "TIE_BLOCK_MESSAGE",
    "draw_plackett_luce_into",
    "make_plackett_luce_draw_kernel",
    "make_plackett_luce_kernel",
    "plackett_luce_core",
    "plackett_luce_into",
    "plackett_luce_loglik",
    "plackett_luce_loglik_and_grad",
    "sample_plackett_luce",
    "sample_plackett_luce_core",
]

#: Largest tie block (other than a last block holding every remaining item) whose exact
#: probability is computed: the DP costs O(s 2^s) time and 2^s float64 of memory per order.
TIE_BLOCK_MAX = 20

_TINY = 1e-250  # below this a suffix sum of scaled weights is redone in log space


@njit(cache=True)
def _logaddexp(a, b):
    if a == -np.inf:
        return b
    if b == -np.inf:
        return a
    if a > b:
        return a + math.log1p(math.exp(b - a))
    return b + math.log1p(math.exp(a - b))


@njit(cache=True)
def _tie_block(u, items, lam, gu, scale, want_grad):
    """log P(the items fill the next len(items) positions in any order | T = exp(lam) after).

    With ``want_grad`` adds ``scale`` times d/du of the value into ``gu`` for the block's items
    and returns d value / d lam as the second output.
    """
    s = items.shape[0]
    n = 1 << s
    full = n - 1
    ld = np.empty(n)  # ld[C] = log(T + sum_{j in C} exp(u_j))
    ld[0] = lam
    for C in range(1, n):
        low = C & (-C)
        j = 0
        while (1 << j) != low:
            j += 1
        ld[C] = _logaddexp(ld[C ^ low], u[items[j]])
    logf = np.empty(n)
    logf[0] = 0.0
    for A in range(1, n):
        m = -np.inf
        for i in range(s):
            if A & (1 << i):
                B = A ^ (1 << i)
                t = logf[B] + u[items[i]] - ld[full ^ B]
                if t > m:
                    m = t
        acc = 0.0
        for i in range(s):
            if A & (1 << i):
                B = A ^ (1 << i)
                acc += math.exp(logf[B] + u[items[i]] - ld[full ^ B] - m)
        logf[A] = m + math.log(acc)
    value = logf[full]
    if not want_grad:
        return value, 0.0
    adj = np.zeros(n)   # d value / d logf[A]
    aden = np.zeros(n)  # d value / d ld[full ^ B], negated
    adj[full] = 1.0
    for A in range(full, 0, -1):
        if adj[A] == 0.0:
            continue
        for i in range(s):
            if A & (1 << i):
                B = A ^ (1 << i)
                c = adj[A] * math.exp(logf[B] + u[items[i]] - ld[full ^ B] - logf[A])
                adj[B] += c
                gu[items[i]] += scale * c
                aden[B] += c
    dlam = 0.0
    for B in range(full):
        if aden[B] == 0.0:
            continue
        C = full ^ B
        for j in range(s):
            if C & (1 << j):
                gu[items[j]] -= scale * aden[B] * math.exp(u[items[j]] - ld[C])
        dlam -= aden[B] * math.exp(lam - ld[C])
    return value, dlam


@njit(cache=True, inline="always")
def _order(u, w, c, y, work, iwork, gu, scale, want_grad):
    """log PL probability of one rank-form order; adds ``scale`` x its gradient into ``gu``.

    ``w = exp(u - c)``; ``work`` (3, M + 1) float and ``iwork`` (4, M + 1) int work arrays.
    Returns -inf (and no gradient) for an invalid order, and ``+inf`` (never a log-probability;
    no gradient) for a tie block beyond TIE_BLOCK_MAX before the last block.
    """
    seq, starts = iwork[0], iwork[1]
    S, lam, coef = work[0], work[1], work[2]
    nb = order_blocks_work(y, seq, starts, iwork[2], iwork[3])
    if nb < 0:
        return -np.inf
    for b in range(nb - 1):
        if starts[b + 1] - starts[b] > TIE_BLOCK_MAX:
            return np.inf
    # suffix sums of the scaled weights: S[b] = sum of w over blocks b, b+1, ...
    S[nb] = 0.0
    for b in range(nb - 1, -1, -1):
        acc = 0.0
        for t in range(starts[b], starts[b + 1]):
            acc += w[seq[t]]
        S[b] = S[b + 1] + acc
    linear = nb < 2 or S[nb - 1] >= _TINY
    if linear:
        for b in range(nb - 1 if nb < 2 or starts[nb - 1] - starts[nb - 2] == 1 else nb):
            lam[b] = c + math.log(S[b])  # lam[nb - 1] only for a tie block before it
    else:  # log space: lam[b] = logsumexp(u over blocks b, b+1, ...)
        lam[nb] = -np.inf
        for b in range(nb - 1, -1, -1):
            m = -np.inf
            for t in range(starts[b], starts[b + 1]):
                m = max(m, u[seq[t]])
            acc = 0.0
            for t in range(starts[b], starts[b + 1]):
                acc += math.exp(u[seq[t]] - m)
            lam[b] = _logaddexp(lam[b + 1], m + math.log(acc))
    value = 0.0
    for b in range(nb):
        coef[b] = 0.0
    for b in range(nb - 1):  # the last block's factor is 1
        a = starts[b]
        if starts[b + 1] - a == 1:
            value += u[seq[a]] - lam[b]
            coef[b] -= 1.0
            if want_grad:
                gu[seq[a]] += scale
        else:
            v, dlam = _tie_block(u, seq[a:starts[b + 1]], lam[b + 1], gu, scale, want_grad)
            value += v
            coef[b + 1] += dlam
    if want_grad:
        # item j in block beta: sum_{b <= beta} coef[b] exp(u_j - lam[b])
        run = 0.0
        for b in range(nb):
            if linear:
                run += coef[b] / S[b]
                for t in range(starts[b], starts[b + 1]):
                    gu[seq[t]] += scale * run * w[seq[t]]
            else:
                for t in range(starts[b], starts[b + 1]):
                    j = seq[t]
                    acc = 0.0
                    for bb in range(b + 1):
                        acc += coef[bb] * math.exp(u[j] - lam[bb])
                    gu[j] += scale * acc
    return value


@njit(cache=True)
def _finite(u):
    for i in range(u.shape[0]):
        if not abs(u[i]) < np.inf:
            return False
    return True


#: Status of :func:`plackett_luce_into` and its message.
PL_TIE_BLOCK_TOO_LARGE = 1
TIE_BLOCK_MESSAGE = ("an order has a tie block of more than TIE_BLOCK_MAX = 20 items before its "
                     "last block; its exact probability costs O(s 2^s)")


@njit(cache=True)
def plackett_luce_into(u, orders, g, values, grad, want_grad):
    """:func:`plackett_luce_core` without raising: ``(total, status)``, with ``status``
    ``PL_TIE_BLOCK_TOO_LARGE`` (the outputs then partly written) for an order with a tie block
    beyond ``TIE_BLOCK_MAX`` before its last block, else 0. The body of the C kernel of
    :func:`make_plackett_luce_kernel`."""
    M = u.shape[0]
    n = orders.shape[0]
    if want_grad:
        grad[:] = 0.0
    if not _finite(u):
        values[:] = np.nan
        grad[:] = np.nan
        return np.nan, 0
    c = -np.inf
    for i in range(M):
        c = max(c, u[i])
    w = np.empty(M)
    for i in range(M):
        w[i] = math.exp(u[i] - c)
    work = np.empty((3, M + 1))
    iwork = np.empty((4, M + 1), dtype=np.int64)
    total = 0.0
    for r in range(n):
        wants = want_grad and g[r] != 0.0
        values[r] = _order(u, w, c, orders[r], work, iwork, grad, g[r], wants)
        if values[r] == np.inf:
            return np.nan, PL_TIE_BLOCK_TOO_LARGE
        if g[r] != 0.0:
            total += g[r] * values[r]
    return total, 0


@njit(cache=True)
def plackett_luce_core(u, orders, g, values, grad, want_grad):
    """Per-order log-likelihoods into ``values`` (n,) and ``sum_n g[n] d values[n] / du`` into
    ``grad`` (M,) (overwritten) when ``want_grad``; returns ``sum_n g[n] values[n]`` (rows with
    ``g[n] == 0`` add nothing). NaN / inf utilities: NaN everywhere. Invalid orders: -inf.
    Raises ``ValueError`` for a tie block beyond ``TIE_BLOCK_MAX`` before the last block."""
    total, status = plackett_luce_into(u, orders, g, values, grad, want_grad)
    if status != 0:
        raise ValueError(TIE_BLOCK_MESSAGE)
    return total


def make_plackett_luce_kernel(version):
    """Body of the C callable that the Plackett-Luce Ops call (``numba.cfunc``, see
    :mod:`pm_perm.ops.extern`): ``op_kernel(u, m, orders, n, g, values, grad, want_grad,
    total)`` runs :func:`plackett_luce_into` on the C-contiguous (m,) float64 utilities at
    ``u``, the (n, m) int64 orders and the (n,) float64 weights ``g``, writing the (n,) values,
    the (m,) gradient (when ``want_grad`` is non-zero; ``grad`` must point to m float64 either
    way) and the weighted sum to ``total[0]``; returns the status. ``version`` keys numba's
    cache as in :func:`pm_perm.kernels.permanent.make_log_permanent_kernel`.
    """

    def op_kernel(u, m, orders, n, g, values, grad, want_grad, total):
        if version < 0:  # never true; referencing version puts it into numba's cache key
            return -1
        total[0], status = plackett_luce_into(carray(u, m), carray(orders, (n, m)), carray(g, n),
                                              carray(values, n), carray(grad, m), want_grad != 0)
        return status

    return op_kernel


#: Messages of the sampler's input errors, indexed by the status of
#: :func:`draw_plackett_luce_into`.
PL_DRAW_ERRORS = (
    "",
    "utilities must be finite (no NaN or inf)",
    "length_probs must have M + 1 entries (probabilities of k = 0..M)",
    "length_probs must be finite and non-negative",
    "length_probs must sum to 1",
    "utilities must have M >= 1 items",
)


@njit(cache=True)
def draw_plackett_luce_into(rng, u, length_probs, y, cut=True):
    """One exact draw into ``y`` (M,) int64 in rank form: a complete ranking by Gumbel-max,
    then, if ``length_probs`` (M + 1,) is not empty, only the first ``k ~ length_probs`` kept (the
    rest -1); ``cut=False`` checks ``length_probs`` but keeps the complete ranking (for draws
    coarsened to a pattern instead, :mod:`pm_perm.kernels.patterns`). Returns 0, or the index
    in ``PL_DRAW_ERRORS`` of the input error (``y`` then not a draw). The body of the C kernel
    of :func:`make_plackett_luce_draw_kernel`."""
    M = u.shape[0]
    if M == 0:
        return 5
    if not _finite(u):
        return 1
    keys = np.empty(M)
    for i in range(M):
        keys[i] = -(u[i] - math.log(-math.log(rng.random())))
    order = np.argsort(keys)
    for t in range(M):
        y[order[t]] = t
    if length_probs.shape[0] == 0:
        return 0
    if length_probs.shape[0] != M + 1:
        return 2
    total = 0.0
    for k in range(M + 1):
        p = length_probs[k]
        if not (p >= 0.0 and p < np.inf):
            return 3
        total += p
    if abs(total - 1.0) > 1e-6:
        return 4
    if not cut:
        return 0
    target = rng.random() * total
    k = 0
    acc = length_probs[0]
    while acc <= target and k < M:
        k += 1
        acc += length_probs[k]
    for i in range(M):
        if y[i] >= k:
            y[i] = -1
    return 0


@njit(cache=True)
def sample_plackett_luce_core(rng, u, length_probs):
    """One exact draw (M,) int64 in rank form (:func:`draw_plackett_luce_into`). Raises
    ``ValueError`` for non-finite utilities or invalid ``length_probs``."""
    y = np.empty(u.shape[0], dtype=np.int64)
    status = draw_plackett_luce_into(rng, u, length_probs, y)
    if status != 0:
        raise ValueError(PL_DRAW_ERRORS[status])
    return y


def make_plackett_luce_draw_kernel(version):
    """Body of the C callable that PyTensor's draws of ``PlackettLuce`` call (``numba.cfunc``,
    see :mod:`pm_perm.ops.extern`): ``draw_kernel(bitgen, u, m, length_probs, n_lengths, cut,
    out)`` runs :func:`draw_plackett_luce_into` on the C-contiguous (m,) float64 utilities at
    ``u`` and the (n_lengths,) length probabilities (``cut`` non-zero: cut the draw after
    ``k ~ length_probs`` items) with the caller's random stream (numpy's ``bitgen_t``
    at ``bitgen``, :mod:`pm_perm.kernels._bitgen`), writing the draw to the (m,) int64 array at
    ``out``; returns the status. ``version`` keys numba's cache as in
    :func:`pm_perm.kernels.permanent.make_log_permanent_kernel`.
    """

    def draw_kernel(bitgen, u, m, length_probs, n_lengths, cut, out):
        if version < 0:  # never true; referencing version puts it into numba's cache key
            return -1
        return draw_plackett_luce_into(generator_at(bitgen), carray(u, m),
                                       carray(length_probs, n_lengths), carray(out, m),
                                       cut != 0)

    return draw_kernel


@njit(cache=True)
def _sample_batch(rng, u, length_probs, out):
    for r in range(out.shape[0]):
        out[r] = sample_plackett_luce_core(rng, u[r], length_probs[r])


# ----------------------------------------------------------------------------- public API


def _utilities(utilities):
    u = as_float_array(utilities, "utilities", max_abs=np.inf)
    if np.isinf(u).any():
        raise ValueError("utilities contain -inf; Plackett-Luce utilities must be finite")
    if u.shape[-1] == 0:
        raise ValueError("utilities must have M >= 1 items")
    return u


def check_length_probs(length_probs, M):
    """``length_probs`` as float64 (..., M + 1), checked: finite, non-negative, summing to 1."""
    p = np.asarray(length_probs, dtype=np.float64)
    if p.ndim < 1 or p.shape[-1] != M + 1:
        raise ValueError(f"length_probs must have M + 1 = {M + 1} entries (probabilities of "
                         f"ranking k = 0..{M} items); got shape {p.shape}")
    if not np.all(np.isfinite(p)) or (p < 0).any():
        raise ValueError("length_probs must be finite and non-negative")
    if not np.allclose(p.sum(-1), 1.0, rtol=0, atol=1e-6):
        raise ValueError(f"length_probs must sum to 1; sums are {p.sum(-1)}")
    return p


def plackett_luce_loglik(utilities, orders):
    """Per-order log PL probabilities (see the module docstring for ties and top-k).

    Parameters
    ----------
    utilities : array_like of float, shape (..., M)
        Finite. Shift-invariant: adding a constant to every utility changes nothing.
    orders : array_like of int, shape (n, M)
        Rank form; invalid rows raise ``ValueError``, and so does a tie block of more than
        ``TIE_BLOCK_MAX`` items before the last block.

    Returns
    -------
    ndarray of float64, shape (..., n)
    """
    u = _utilities(utilities)
    arr = validate_orders(orders, u.shape[-1])
    flat = u.reshape(-1, u.shape[-1])
    out = np.empty((flat.shape[0], arr.shape[0]))
    g = np.zeros(arr.shape[0])
    grad = np.empty(u.shape[-1])
    for b in range(flat.shape[0]):
        plackett_luce_core(flat[b], arr, g, out[b], grad, False)
    return out.reshape(u.shape[:-1] + (arr.shape[0],))


def plackett_luce_loglik_and_grad(utilities, orders, weights=None):
    """``(sum_n weights[n] loglik[n], its gradient in utilities)``, batched over ``...``.

    Returns arrays of shape (...) and (..., M); O(n M) per utilities vector. ``weights`` (n,),
    default all 1, are finite real numbers (counts, or a cotangent); a wrong shape or a NaN or
    infinite weight raises ``ValueError`` naming it.
    """
    u = _utilities(utilities)
    arr = validate_orders(orders, u.shape[-1])
    g = np.ones(arr.shape[0]) if weights is None else check_weights(weights, arr.shape[0])
    flat = u.reshape(-1, u.shape[-1])
    total = np.empty(flat.shape[0])
    grad = np.empty_like(flat)
    values = np.empty(arr.shape[0])
    for b in range(flat.shape[0]):
        total[b] = plackett_luce_core(flat[b], arr, g, values, grad[b], True)
    return total.reshape(u.shape[:-1]), grad.reshape(u.shape)


def sample_plackett_luce(utilities, size=None, rng=None, length_probs=None):
    """Exact PL draws in rank form, int64 (*size, M); see :func:`sample_plackett_luce_core`.

    ``size`` (an int or a tuple of ints) is the full batch shape (utilities' batch shape
    broadcasts to it); with ``length_probs`` (..., M + 1) each draw keeps its first
    ``k ~ length_probs`` items.
    """
    rng = np.random.default_rng(rng)
    u = _utilities(utilities)
    M = u.shape[-1]
    lp = (np.zeros(u.shape[:-1] + (0,)) if length_probs is None
          else check_length_probs(length_probs, M))
    batch = np.broadcast_shapes(u.shape[:-1], lp.shape[:-1])
    size = batch if size is None else as_size(size)
    try:
        ub = np.broadcast_to(u, size + (M,)).reshape(-1, M)
        lpb = np.broadcast_to(lp, size + lp.shape[-1:]).reshape(ub.shape[0], lp.shape[-1])
    except ValueError as err:
        raise ValueError(f"utilities / length_probs with batch shape {batch} do not broadcast "
                         f"to size {size}") from err
    out = np.empty((ub.shape[0], M), dtype=np.int64)
    _sample_batch(rng, c_array(ub), c_array(lpb), out)
    return out.reshape(size + (M,))
