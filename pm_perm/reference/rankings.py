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
    "every_top_k_order",
    "mixture_loglik_enum",
    "partial_order_logp_enum",
    "partial_orders_loglik_enum",
    "permutation_complete_logp",
    "plackett_luce_complete_logp",
    "plackett_luce_logp_enum",
    "pl_tilted_complete_logp",
    "random_tie_orders",
]


def every_top_k_order(M):
    """Every top-k order of ``M`` items for every k = 0..M (rank form: ``y[i]`` = position of
    item ``i``, ``-1`` = not ranked), each once, in ``np.unique`` order; (n, M) int64.

    Examples
    --------
    >>> every_top_k_order(2)
    array([[-1, -1],
           [-1,  0],
           [ 0, -1],
           [ 0,  1],
           [ 1,  0]])
    """
    perms = all_permutations(M)  # perms[r, i]: position of item i
    rows = [np.where(perms < k, perms, -1) for k in range(M + 1)]
    return np.unique(np.concatenate(rows), axis=0)


def random_tie_orders(rng, M, n):
    """Up to ``n`` random weak orders of ``M`` items (rank form, distinct, ``np.unique`` order):
    each a random composition of M into tie blocks (a cut after each position with probability
    0.4), the items shuffled, the last block unranked half the time. Tied items share the
    smallest position of their block."""
    out = []
    for _ in range(n):
        cuts = np.flatnonzero(rng.random(M - 1) < 0.4) + 1
        sizes = np.diff(np.concatenate([[0], cuts, [M]]))
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        value = np.repeat(starts, sizes)
        if rng.random() < 0.5:
            value[value == starts[-1]] = -1
        y = np.empty(M, dtype=np.int64)
        y[rng.permutation(M)] = value
        out.append(y)
    return np.unique(np.array(out), axis=0)


def permutation_complete_logp(W, perms):
    """log probability of each complete ranking (rows of ``perms``, rank form) under the
    permutation exponential family ``p(pi) ∝ exp(sum_i W[i, pi[i]])``, normalised over the rows
    of ``perms`` (all M! of them for a probability)."""
    W = np.asarray(W, dtype=np.float64)
    s = W[np.arange(W.shape[0]), perms].sum(axis=1)
    return s - logsumexp(s)


def partial_orders_loglik_enum(complete_logp, orders, perms):
    """Log-likelihood of each rank-form order of ``orders``: the log-sum of ``complete_logp``
    (log probabilities of the complete rankings ``perms``) over the consistent rankings."""
    return np.array([logsumexp(complete_logp[consistent_mask(o, perms)]) for o in orders])


def mixture_loglik_enum(family, params, weights, orders):
    """Log-likelihood of each order under a K-component mixture, by enumeration (M <= 8).

    Parameters
    ----------
    family : {"plackett-luce", "full"}
        ``"plackett-luce"``: ``params`` (K, M) utilities; anything else: the permutation
        exponential family, ``params`` (K, M, M) logits.
    params : ndarray
        The components' parameters.
    weights : ndarray
        (K,) mixture weights.
    orders : ndarray
        (n, M) rank-form orders (top-k and ties allowed).

    Returns
    -------
    loglik : ndarray
        (n,) mixture log-likelihood of each order.
    components : ndarray
        (K, n) log-likelihood of each order under each component.
    """
    params = np.asarray(params, dtype=np.float64)
    perms = all_permutations(params.shape[1])
    f = plackett_luce_complete_logp if family == "plackett-luce" else permutation_complete_logp
    comps = np.stack([partial_orders_loglik_enum(f(p, perms), orders, perms) for p in params])
    return logsumexp(np.log(weights)[:, None] + comps, axis=0), comps


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


def pl_tilted_complete_logp(u, D, perms):
    """log probability of each complete ranking (rank-form rows of ``perms``) under the
    Plackett-Luce-anchored model ``p(pi) ∝ PL(pi; u) exp(sum_i D[i, pi[i]])``, normalised over
    the rows of ``perms`` (all M! of them for a probability)."""
    D = np.asarray(D, dtype=np.float64)
    s = plackett_luce_complete_logp(u, perms) + D[np.arange(D.shape[0]), perms].sum(axis=1)
    return s - logsumexp(s)


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
