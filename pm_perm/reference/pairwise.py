"""Definitional (slow) implementations for pairwise preferences: oracles of the tests.

A set of pairwise preferences ``(preferred, other)`` of one assessor is an event over complete
rankings: the rankings that put every preferred item before its other item (its linear
extensions). Its probability under any model of complete rankings is the sum over that set.
Nothing here is used by the production code.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from pm_perm.reference.permutations import all_permutations
from pm_perm.reference.rankings import permutation_complete_logp, plackett_luce_complete_logp

__all__ = [
    "bradley_terry_logp_enum",
    "extension_mask",
    "linear_extensions_logp_enum",
    "random_partial_order",
]


def extension_mask(prefs, perms):
    """Boolean (len(perms),): which complete rankings (rank form rows: ``perms[r, i]`` = position
    of item ``i``) agree with every pair of ``prefs`` (P, 2); ``(-1, -1)`` rows are ignored."""
    ok = np.ones(perms.shape[0], dtype=bool)
    for a, b in np.asarray(prefs).reshape(-1, 2):
        if a >= 0:
            ok &= perms[:, a] < perms[:, b]
    return ok


def linear_extensions_logp_enum(params, prefs, family="plackett-luce"):
    """``log p(prefs)`` by enumerating all M! rankings: Plackett-Luce utilities (M,) or, for any
    other ``family``, the normalised permutation exponential family with logits (M, M)."""
    params = np.asarray(params, dtype=np.float64)
    perms = all_permutations(params.shape[0])
    f = plackett_luce_complete_logp if family == "plackett-luce" else permutation_complete_logp
    lp = f(params, perms)
    mask = extension_mask(prefs, perms)
    return float(logsumexp(lp[mask])) if mask.any() else -np.inf


def random_partial_order(rng, M, n_pairs, pad=0):
    """A random acyclic set of ``n_pairs`` distinct preferences over ``M`` items (pairs oriented
    by a random hidden ranking, so never cyclic), then ``pad`` rows ``(-1, -1)``; (P, 2) int64."""
    hidden = rng.permutation(M)  # hidden[i]: position of item i
    pairs = [(i, j) for i in range(M) for j in range(i + 1, M)]
    pick = rng.choice(len(pairs), size=min(n_pairs, len(pairs)), replace=False)
    out = []
    for k in pick:
        i, j = pairs[k]
        out.append((i, j) if hidden[i] < hidden[j] else (j, i))
    out += [(-1, -1)] * pad
    return np.array(out, dtype=np.int64).reshape(-1, 2)


def bradley_terry_logp_enum(u, i, j, outcome, nu=0.0):
    """log probability of one comparison of items ``i`` and ``j`` under Bradley-Terry-Davidson
    with utilities ``u``: ``outcome`` 0 (i wins), 1 (j wins) or 2 (a tie); the three outcomes'
    unnormalised weights ``e^{u_i}``, ``e^{u_j}``, ``nu sqrt(e^{u_i} e^{u_j})``, normalised."""
    u = np.asarray(u, dtype=np.float64)
    w = np.array([np.exp(u[i]), np.exp(u[j]), nu * np.sqrt(np.exp(u[i]) * np.exp(u[j]))])
    return float(np.log(w[outcome] / w.sum()))
