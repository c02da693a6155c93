"""Definitional (slow) implementations for partial orders: oracles of the tests.

A rank-form order (``docs/guide/preferences_data.md``) is an event over complete rankings: the
complete rankings consistent with it. Its probability under any model of complete rankings is
the sum over that set. Nothing here is used by the production code.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from pm_perm.reference.permutations import all_permutations

__all__ = [
    "consistent_mask",
    "partial_order_logp_enum",
    "plackett_luce_complete_logp",
    "plackett_luce_logp_enum",
]


def consistent_mask(y, perms=None):
    """Boolean (M!,): which complete rankings (rank form, rows of ``all_permutations``) are
    consistent with the rank-form order ``y``: every item ranked at position ``p`` with a block
    of size ``s`` (``s`` items share ``p``) sits in ``p..p+s-1``; unranked items after all ranked
    ones."""
    y = np.asarray(y)
    M = y.shape[0]
    perms = all_permutations(M) if perms is None else perms
    ranked = int((y >= 0).sum())
    ok = np.ones(perms.shape[0], dtype=bool)
    for i in range(M):
        if y[i] < 0:
            lo, hi = ranked, M - 1
        else:
            lo = int(y[i])
            hi = lo + int((y == y[i]).sum()) - 1
        ok &= (perms[:, i] >= lo) & (perms[:, i] <= hi)
    return ok


def plackett_luce_complete_logp(u, perms):
    """log PL probability of each complete ranking (rank form rows of ``perms``)."""
    u = np.asarray(u, dtype=np.float64)
    order = np.argsort(perms, axis=1)          # order[:, t] = item at position t
    uo = u[order]
    tail = np.logaddexp.accumulate(uo[:, ::-1], axis=1)[:, ::-1]   # log-sum over positions >= t
    return (uo - tail).sum(axis=1)


def plackett_luce_logp_enum(u, y):
    """log PL probability of the partial order ``y`` = log-sum over consistent rankings."""
    perms = all_permutations(len(u))
    lp = plackett_luce_complete_logp(u, perms)
    return float(logsumexp(lp[consistent_mask(y, perms)]))


def partial_order_logp_enum(W, y) -> float:
    """``log p(y)`` of the rank-form order ``y`` under the permutation exponential family
    ``p(pi) ∝ exp(sum_i W[i, pi[i]])``: log-sum-exp of the scores of the consistent permutations
    minus that of all permutations (``-inf`` when none is consistent)."""
    W = np.asarray(W, dtype=np.float64)
    perms = all_permutations(W.shape[0])
    scores = W[np.arange(W.shape[0]), perms].sum(-1)
    mask = consistent_mask(y, perms)
    with np.errstate(divide="ignore"):
        return float(logsumexp(scores[mask]) - logsumexp(scores)) if mask.any() else -np.inf
