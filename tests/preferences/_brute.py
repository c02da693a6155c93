"""Brute-force oracles for the rankings tests: enumerate all M! complete rankings (M <= 6).

Rank form: ``y[i]`` = position of item i, ``-1`` = not ranked, tied items share the smallest
position of their block. A partial order's probability is the sum over the complete rankings
consistent with it.
"""

import numpy as np
from scipy.special import logsumexp

from pm_perm.reference.permutations import all_permutations


def every_top_k_order(M):
    """Every top-k order of M items, for every k = 0..M (rank form), each once, sorted."""
    perms = all_permutations(M)  # perms[r, i]: position of item i
    rows = [np.where(perms < k, perms, -1) for k in range(M + 1)]
    return np.unique(np.concatenate(rows), axis=0)


def random_tie_orders(rng, M, n):
    """Up to ``n`` random weak orders (distinct, sorted): a random composition of M into blocks,
    the last block unranked half the time."""
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


def consistent(order, perms):
    """Boolean mask over ``perms`` (P, M) of the complete rankings consistent with ``order``."""
    order = np.asarray(order)
    k = int((order >= 0).sum())
    ok = np.ones(perms.shape[0], bool)
    for i, v in enumerate(order):
        lo, hi = (k, order.size - 1) if v < 0 else (v, v + int((order == v).sum()) - 1)
        ok &= (perms[:, i] >= lo) & (perms[:, i] <= hi)
    return ok


def complete_logp_pef(W, perms):
    M = W.shape[0]
    s = W[np.arange(M), perms].sum(axis=1)
    return s - logsumexp(s)


def complete_logp_pl(u, perms):
    items = np.argsort(perms, axis=1)  # items first to last
    uu = u[items]
    tails = np.logaddexp.accumulate(uu[:, ::-1], axis=1)[:, ::-1]
    return (uu - tails).sum(axis=1)


def partial_loglik(complete_logp, orders, perms):
    """Per-order log-likelihood from the log-probabilities of all complete rankings."""
    return np.array([logsumexp(complete_logp[consistent(o, perms)]) for o in orders])


def mixture_loglik(family, params, weights, orders):
    """Brute-force mixture log-likelihood of each order; params (K, M, M) or (K, M)."""
    perms = all_permutations(params.shape[1])
    f = complete_logp_pl if family == "plackett-luce" else complete_logp_pef
    comps = np.stack([partial_loglik(f(p, perms), orders, perms) for p in params])
    return logsumexp(np.log(weights)[:, None] + comps, axis=0), comps
