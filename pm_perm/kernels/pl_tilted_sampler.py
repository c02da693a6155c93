"""Exact draws of complete orders from the Plackett-Luce-anchored (tilted) permutation model.

Model (as :mod:`pm_perm.kernels.pl_tilted`): ``p(pi | u, D) = PL(pi; u) exp(sum_i D[i, pi(i)])
/ Z`` with item ``i`` at position ``pi(i)``. With the suffix table ``h`` of that kernel,
``h(S) = (1 / sigma(S)) sum_{i in S} e^{u_i + D[i, M - |S|]} h(S - {i})``, ``h({}) = 1``,
``sigma(S) = sum_{k in S} e^{u_k}``, an order is drawn position by position: with ``S`` the
items not yet placed and ``j = M - |S|`` the next position,

    ``p(item i at position j | S) = e^{u_i} / sigma(S) * e^{D[i, j]} * h(S - {i}) / h(S)``,

which sums to 1 over ``i in S`` by the recursion, and whose product over the positions is
``p(pi | u, D)`` (``h(all items) = Z``). The table is kept in LOG space (``log h`` and
``log sigma`` by log-sum-exp), so no set underflows whatever the scale of ``u`` and ``D``.

Cost: O(M 2^M) for the table (2^M float64 twice) once per distinct ``(u, D)``, then O(M^2)
per draw.
Size limit: as the likelihood (:func:`pm_perm.kernels.partial_orders.check_partial_order_size`).
"""

from __future__ import annotations

import math

import numpy as np

from pm_perm._numba import njit
from pm_perm.kernels._checks import as_size, c_array
from pm_perm.kernels.partial_orders import check_partial_order_size
from pm_perm.kernels.subset_dp import DEBRUIJN, ctz, popcount

__all__ = ["DRAW_ERRORS", "pl_tilted_draw_into", "pl_tilted_log_table", "sample_pl_tilted"]

#: Messages of the non-zero statuses of :func:`pl_tilted_log_table` (status ``k`` is entry
#: ``k - 1``).
DRAW_ERRORS = (
    "PLAnchoredRanking: utilities and deviations must be finite (no NaN or inf)",
    "PLAnchoredRanking: utilities (M,) need deviations (M, M)",
)


@njit(cache=True)
def pl_tilted_log_table(u, D, logh, logsig):
    """Fill ``logh`` and ``logsig`` (2^M,) with ``log h(S)`` and ``log sigma(S)``.

    Parameters
    ----------
    u : ndarray of float64, shape (M,)
    D : ndarray of float64, shape (M, M)
        Rows = items, columns = positions.
    logh, logsig : ndarray of float64, shape (2^M,)
        Outputs.

    Returns
    -------
    int
        0, or a status of :data:`DRAW_ERRORS` (1: non-finite ``u`` or ``D``; 2: shapes). Never
        raises.
    """
    M = u.shape[0]
    if D.shape[0] != M or D.shape[1] != M or logh.shape[0] != (1 << M) \
            or logsig.shape[0] != (1 << M):
        return 2
    for i in range(M):
        if not abs(u[i]) <= 1e300:
            return 1
        for j in range(M):
            if not abs(D[i, j]) <= 1e300:
                return 1
    table = DEBRUIJN
    logh[0] = 0.0
    logsig[0] = -np.inf
    for S in range(1, 1 << M):
        low = S & (-S)
        k = ctz(low, table)
        a, b = logsig[S ^ low], u[k]
        hi = a if a > b else b
        logsig[S] = hi + math.log1p(math.exp(min(a, b) - hi)) if a > -np.inf else b
        r = M - popcount(S)
        m = -np.inf
        s = S
        while s:
            lw = s & (-s)
            i = ctz(lw, table)
            t = u[i] + D[i, r] + logh[S ^ lw]
            if t > m:
                m = t
            s ^= lw
        acc = 0.0
        s = S
        while s:
            lw = s & (-s)
            i = ctz(lw, table)
            acc += math.exp(u[i] + D[i, r] + logh[S ^ lw] - m)
            s ^= lw
        logh[S] = m + math.log(acc) - logsig[S]
    return 0


@njit(cache=True)
def pl_tilted_draw_into(u, D, logh, rng, y):
    """One exact draw into ``y`` (M,) int64 (rank form: ``y[i]`` = position of item ``i``),
    from the table of :func:`pl_tilted_log_table` (``u`` and ``D`` checked there)."""
    M = u.shape[0]
    table = DEBRUIJN
    S = (1 << M) - 1
    w = np.empty(M)
    for j in range(M):
        m = -np.inf
        s = S
        while s:  # log of the conditional, up to the common term -log sigma(S) - log h(S)
            lw = s & (-s)
            i = ctz(lw, table)
            w[i] = u[i] + D[i, j] + logh[S ^ lw]
            if w[i] > m:
                m = w[i]
            s ^= lw
        total = 0.0
        s = S
        while s:
            lw = s & (-s)
            i = ctz(lw, table)
            w[i] = math.exp(w[i] - m)
            total += w[i]
            s ^= lw
        x = rng.random() * total
        s = S
        pick = -1
        while s:
            lw = s & (-s)
            i = ctz(lw, table)
            pick = i  # the last item of S if rounding leaves x >= the running sum
            x -= w[i]
            if x < 0.0:
                break
            s ^= lw
        y[pick] = j
        S ^= 1 << pick
    return y


@njit(cache=True)
def _sample_batch(rng, uf, Df, index, out):
    M = uf.shape[1]
    logh, logsig = np.empty(1 << M), np.empty(1 << M)
    last = -1
    for n in range(index.shape[0]):
        b = index[n]
        if b != last:  # draws are grouped by parameter row: one table per row
            pl_tilted_log_table(uf[b], Df[b], logh, logsig)
            last = b
        pl_tilted_draw_into(uf[b], Df[b], logh, rng, out[n])


def sample_pl_tilted(u, D, size=None, rng=None):
    """Exact complete draws from ``p(pi) ∝ PL(pi; u) exp(sum_i D[i, pi(i)])``.

    Parameters
    ----------
    u : array_like of float, shape (..., M)
        Utilities (finite).
    D : array_like of float, shape (..., M, M)
        Deviations (tilt logits), rows = items, columns = positions (finite).
    size : tuple of int, optional
        Full batch shape of the output (the parameters' batch shape broadcasts to it); default
        their broadcast batch shape (the ``RandomVariable.rng_fn`` convention).
    rng : numpy.random.Generator or int, optional

    Returns
    -------
    ndarray of int64, shape (*size, M)
        Rank form: ``y[..., i]`` is the position of item ``i``.

    Raises
    ------
    ValueError
        Non-finite parameters, shapes that do not match or broadcast, or M beyond the exact
        limit.

    Examples
    --------
    >>> import numpy as np
    >>> sample_pl_tilted([5.0, 0.0, -5.0], np.zeros((3, 3)), size=(2,), rng=0).tolist()
    [[0, 1, 2], [0, 1, 2]]
    """
    rng = np.random.default_rng(rng)
    u = np.asarray(u, dtype=np.float64)
    D = np.asarray(D, dtype=np.float64)
    if u.ndim < 1 or D.ndim < 2 or D.shape[-2:] != (u.shape[-1], u.shape[-1]):
        raise ValueError(f"{DRAW_ERRORS[1]}; got shapes {u.shape} and {D.shape}")
    if not (np.isfinite(u).all() and np.isfinite(D).all()):
        raise ValueError(DRAW_ERRORS[0])
    M = u.shape[-1]
    check_partial_order_size(M)
    batch = np.broadcast_shapes(u.shape[:-1], D.shape[:-2])
    size = batch if size is None else as_size(size)
    try:
        index = np.broadcast_to(np.arange(math.prod(batch)).reshape(batch), size)
    except ValueError as err:
        raise ValueError(f"parameters with batch shape {batch} do not broadcast to size "
                         f"{size}") from err
    uf = c_array(np.broadcast_to(u, (*batch, M))).reshape(-1, M)
    Df = c_array(np.broadcast_to(D, (*batch, M, M))).reshape(-1, M, M)
    index = index.ravel()
    if uf.shape[0] > 1:  # equal parameter rows (e.g. broadcast ones) share one table
        rows = np.concatenate([uf, Df.reshape(-1, M * M)], axis=1)
        _, first, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
        uf, Df, index = uf[first], Df[first], inverse.ravel()[index]
    order = np.argsort(index, kind="stable")
    out = np.empty((index.size, M), dtype=np.int64)
    drawn = np.empty_like(out)
    _sample_batch(rng, uf, Df, c_array(index[order], np.int64), drawn)
    out[order] = drawn
    return out.reshape(size + (M,))
