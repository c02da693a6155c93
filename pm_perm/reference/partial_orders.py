"""Definitional partial-order likelihoods by enumeration over all M! permutations (test oracle).

Rank form as in :class:`pm_perm.PartialRanking`: item ``i`` holds position ``y[i]``, tied items
share the smallest position of their block, unranked items are ``-1``. Nothing here is used by
the production code.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from pm_perm.reference.permutations import all_permutations

__all__ = ["consistent_permutations", "partial_order_logp_enum"]


def consistent_permutations(order) -> np.ndarray:
    """Boolean mask over :func:`all_permutations` (M!,): the complete orders consistent with
    ``order`` (each item within its block of positions; unranked items after all ranked ones)."""
    y = np.asarray(order, dtype=np.int64)
    M = y.shape[0]
    ranked = int((y >= 0).sum())
    size = np.array([(y == y[i]).sum() for i in range(M)])
    lo = np.where(y >= 0, y, ranked)
    hi = np.where(y >= 0, y + size, M)
    perms = all_permutations(M)
    return np.all((perms >= lo) & (perms < hi), axis=1)


def partial_order_logp_enum(W, order) -> float:
    """``log p(order)`` under ``p(y) ∝ exp(sum_i W[i, y[i]])``: log-sum-exp of the scores of the
    consistent permutations minus that of all permutations."""
    W = np.asarray(W, dtype=np.float64)
    M = W.shape[0]
    perms = all_permutations(M)
    scores = W[np.arange(M), perms].sum(-1)
    mask = consistent_permutations(order)
    with np.errstate(divide="ignore"):
        return float(logsumexp(scores[mask]) - logsumexp(scores)) if mask.any() else -np.inf
