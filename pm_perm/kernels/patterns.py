"""Coarsening a complete ranking to a ballot pattern (its length and tie blocks).

A PATTERN is a rank-form row (``docs/guide/preferences_data.md``) read only for its multiset
of positions: how many items it ranks and which positions are tied. Coarsening a complete
ranking ``y`` (rank form, a permutation of ``0..M-1``) to the pattern ``p`` gives the item at
complete position ``j`` the ``j``-th smallest value of ``p``, unranked (``-1``) counted as last.
The result has the pattern's length and tie blocks, and its probability under a ranking model
is the sum of the probabilities of the complete rankings that coarsen to it: the model's
probability of that partial (tied, top-k) order. O(M) per row.
"""

from __future__ import annotations

import numpy as np
from numba import carray

from pm_perm._numba import njit
from pm_perm.kernels.rank_form import validate_orders

__all__ = ["PATTERN_ERRORS", "coarsen_into", "coarsen_to_patterns", "make_coarsen_kernel",
           "pattern_values"]

#: Messages of the pattern errors, indexed by the status of :func:`coarsen_into`.
PATTERN_ERRORS = (
    "",
    "pattern must have M entries (one per item) or none (no pattern)",
    "pattern must be a rank-form row: item i holds its position (0 = first), tied items the "
    "smallest position of their block with the next block starting right after it, unranked "
    "items -1 (after all ranked ones)",
)


@njit(cache=True)
def coarsen_into(y, pattern, out):
    """Coarsen one complete ranking ``y`` (M,) to ``pattern`` (M,), writing ``out`` (M,).

    ``out[i]`` = the ``y[i]``-th smallest value of ``pattern`` (``-1`` counted as last); ``out``
    may be ``y`` itself. Returns 0, or the index in :data:`PATTERN_ERRORS` of the error
    (``out`` then unchanged): 1 a pattern not of length M, 2 a pattern that is not a valid
    rank-form row. ``y`` must be a permutation of ``0..M-1`` (the samplers' complete draws).
    """
    M = y.shape[0]
    if pattern.shape[0] != M:
        return 1
    count = np.zeros(M + 1, dtype=np.int64)  # count[v + 1]: entries with value v
    for i in range(M):
        v = pattern[i]
        if v < -1 or v >= M:
            return 2
        count[v + 1] += 1
    ranked = M - count[0]
    values = np.empty(M, dtype=np.int64)  # values[j]: the j-th smallest, -1 last
    p = 0
    while p < ranked:
        c = count[p + 1]
        if c == 0:
            return 2
        for v in range(p + 1, p + c):
            if count[v + 1] != 0:
                return 2
        for j in range(p, p + c):
            values[j] = p
        p += c
    for j in range(ranked, M):
        values[j] = -1
    for i in range(M):
        out[i] = values[y[i]]
    return 0


def make_coarsen_kernel(version):
    """Body of the C callable that PyTensor's draws with a pattern call (``numba.cfunc``, see
    :mod:`pm_perm.ops.extern`): ``coarsen_kernel(y, m, pattern, n_pattern)`` runs
    :func:`coarsen_into` in place on the (m,) int64 draw at ``y`` with the (n_pattern,) int64
    pattern at ``pattern``; returns the status. ``version`` keys numba's cache as in
    :func:`pm_perm.kernels.permanent.make_log_permanent_kernel`.
    """

    def coarsen_kernel(y, m, pattern, n_pattern):
        if version < 0:  # never true; referencing version puts it into numba's cache key
            return -1
        out = carray(y, m)
        return coarsen_into(out, carray(pattern, n_pattern), out)

    return coarsen_kernel


def pattern_values(patterns):
    """The sorted positions of each pattern row (..., M): ``-1`` entries last."""
    p = np.asarray(patterns, dtype=np.int64)
    M = p.shape[-1]
    s = np.sort(np.where(p < 0, M, p), axis=-1)
    return np.where(s == M, -1, s)


def coarsen_to_patterns(y, patterns, name="pattern"):
    """Coarsen complete rankings ``y`` (..., M) to ``patterns`` (broadcasting to ``y``).

    Parameters
    ----------
    y : array_like of int, shape (..., M)
        Complete rankings in rank form (permutations of ``0..M-1``).
    patterns : array_like of int, shape (..., M)
        Rank-form rows; only their positions matter (see the module docstring).
    name : str
        Name of ``patterns`` in the error message.

    Returns
    -------
    ndarray of int64, shape of ``y``

    Raises
    ------
    ValueError
        ``patterns`` do not have M entries per row, do not broadcast to ``y``, or a row is not
        valid rank form (naming the first invalid row).
    """
    y = np.asarray(y, dtype=np.int64)
    p = np.asarray(patterns)
    M = y.shape[-1]
    if p.ndim < 1 or p.shape[-1] != M:
        raise ValueError(f"{name}: {PATTERN_ERRORS[1]}; got shape {p.shape} for M = {M}")
    validate_orders(p.reshape(-1, M), M, name=name)
    try:
        s = np.broadcast_to(pattern_values(p), y.shape)
    except ValueError as err:
        raise ValueError(f"{name} of shape {p.shape} does not broadcast to the draws' shape "
                         f"{y.shape}") from err
    return np.take_along_axis(s, y, axis=-1)
