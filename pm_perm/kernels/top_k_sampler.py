"""Exact draws of the top-k item-by-position model (:mod:`pm_perm.kernels.top_k`).

Item by item from the last, from the stored forward tables ``F_i`` of the DP over subsets of
the K positions (the DP's conditionals): with the positions ``S`` still free, item ``i`` is out
of the top K or takes a free position ``j`` with probability proportional to ``b_i F_i(S)`` or
``a[j, i] F_i(S - {j})``. O(M K 2^K) for the tables of one logits matrix (shared by its draws),
O(M K) per draw; (M + 1) 2^K float64 of memory.
"""

from __future__ import annotations

import numpy as np

from pm_perm._numba import njit
from pm_perm.kernels.top_k import _as_logits, _bit, _forward, _scaled_weights

__all__ = ["draw_top_k_into", "sample_top_k"]


@njit(cache=True)
def _draw_from_tables(rng, A, b, F, out):
    """One top-K list from the stored forward tables, in rank form into ``out`` (M,)."""
    K, M = A.shape
    S = (1 << K) - 1
    for i in range(M - 1, -1, -1):
        Fi = F[i]
        tot = b[i] * Fi[S]
        s = S
        while s:
            low = s & (-s)
            tot += A[_bit(low), i] * Fi[S ^ low]
            s ^= low
        x = rng.random() * tot
        acc = b[i] * Fi[S]
        out[i] = -1
        if x >= acc:
            s = S
            chosen = -1
            while s:
                low = s & (-s)
                chosen = low
                acc += A[_bit(low), i] * Fi[S ^ low]
                if x < acc:
                    break
                s ^= low
            out[i] = _bit(chosen)
            S ^= chosen
    return out


@njit(cache=True)
def _sample_batch(rng, L, which, out):
    """Draws ``out[d]`` from ``L[which[d]]`` (one set of tables per distinct matrix, reused
    for its consecutive draws); returns False if a matrix admits no top-K list."""
    last = -1
    K, M = L.shape[2] - 1, L.shape[1]
    A = np.empty((K, M))
    b = np.empty(M)
    F = np.empty((M + 1, 1 << K))
    for d in range(out.shape[0]):
        w = which[d]
        if w != last:
            A, b, _, feasible, _, _ = _scaled_weights(L[w])
            if not feasible:
                return False
            _forward(A, b, np.arange(M), F)
            last = w
        _draw_from_tables(rng, A, b, F, out[d])
    return True


@njit(cache=True)
def draw_top_k_into(rng, L, out):
    """One exact draw from the validated logits ``L`` (M, K + 1) into ``out`` (M,) (rank form);
    returns False (``out`` untouched) if no top-K list has positive weight. For the numba
    implementation of the distribution's draws."""
    M, K = L.shape[0], L.shape[1] - 1
    A, b, _, feasible, _, _ = _scaled_weights(L)
    if not feasible:
        return False
    F = np.empty((M + 1, 1 << K))
    _forward(A, b, np.arange(M), F)
    _draw_from_tables(rng, A, b, F, out)
    return True


def sample_top_k(L, size=None, rng=None):
    """Exact draws of top-K lists in rank form (item at position ``j < K`` holds ``j``, the
    others ``-1``).

    Parameters
    ----------
    L : array_like of float, shape (..., M, K + 1)
    size : tuple of int, optional
        Output batch shape (broadcast with the batch shape of ``L``); default that batch shape.
    rng : numpy.random.Generator, optional

    Returns
    -------
    ndarray of int64, shape (*size, M)
    """
    arr = _as_logits(L)
    rng = np.random.default_rng(rng)
    batch = arr.shape[:-2]
    size = batch if size is None else tuple(size)
    np.broadcast_shapes(size, batch)
    flat = arr.reshape((-1,) + arr.shape[-2:])
    which = np.broadcast_to(np.arange(flat.shape[0]).reshape(batch), size).ravel()
    order = np.argsort(which, kind="stable")
    out = np.empty((which.size, arr.shape[-2]), dtype=np.int64)
    tmp = np.empty_like(out)
    if not _sample_batch(rng, flat, np.ascontiguousarray(which[order]), tmp):
        raise ValueError("logits admit no top-K list (every one uses a -inf logit)")
    out[order] = tmp
    return out.reshape(size + (arr.shape[-2],))
