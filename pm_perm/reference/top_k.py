"""Definitional (slow) implementations of the top-k item-by-position model: test oracles.

Logits ``L`` (M, K + 1): ``L[i, j]`` for positions ``j < K``, ``L[i, K]`` the "not in the top
K" logit; ``p(t) ∝ exp(sum_{j<K} L[t_j, j] + sum_{i not in t} L[i, K])`` over the top-K lists
``t`` (ordered selections of K distinct items), enumerated here (``M!/(M-K)!`` of them, M <= 8).
Nothing here is used by the production code.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
from scipy.special import logsumexp

__all__ = ["top_k_lists", "top_k_logp_enum", "top_k_marginals_enum", "top_k_scores"]


@functools.cache
def _lists(M, K):
    rows = []
    for t in itertools.permutations(range(M), K):
        y = np.full(M, -1, dtype=np.int64)
        y[list(t)] = np.arange(K)
        rows.append(y)
    out = np.array(rows, dtype=np.int64).reshape(-1, M)
    out.flags.writeable = False
    return out


def top_k_lists(M: int, K: int) -> np.ndarray:
    """Every top-K list of ``M`` items in rank form (item at position ``j < K`` holds ``j``, the
    others ``-1``), shape (M!/(M-K)!, M), int64 (read-only; cached)."""
    return _lists(int(M), int(K))


def top_k_scores(L, lists):
    """``sum_{j<K} L[t_j, j] + sum_{i not in t} L[i, K]`` of each list (rank form)."""
    L = np.asarray(L, dtype=np.float64)
    K = L.shape[1] - 1
    col = np.where(lists >= 0, lists, K)
    return L[np.arange(L.shape[0]), col].sum(axis=1)


def _consistent(y, lists):
    """Which top-K lists agree with the rank-form ballot ``y``: a ranked item in a block of
    size ``s`` starting at ``p`` sits at a position in ``p..p+s-1``; an unranked item does not
    sit at a position before the ballot's length."""
    y = np.asarray(y)
    k = int((y >= 0).sum())
    ok = np.ones(lists.shape[0], dtype=bool)
    for i in range(y.shape[0]):
        pos = lists[:, i]
        if y[i] < 0:
            ok &= (pos < 0) | (pos >= k)
        else:
            s = int((y == y[i]).sum())
            ok &= (pos >= y[i]) & (pos <= y[i] + s - 1)
    return ok


def top_k_logp_enum(L, y) -> float:
    """``log p(ballot y)`` by enumerating the top-K lists (``-inf`` when none agrees)."""
    L = np.asarray(L, dtype=np.float64)
    lists = top_k_lists(L.shape[0], L.shape[1] - 1)
    s = top_k_scores(L, lists)
    mask = _consistent(y, lists)
    with np.errstate(divide="ignore"):
        return float(logsumexp(s[mask]) - logsumexp(s)) if mask.any() else -np.inf


def top_k_marginals_enum(L):
    """``(log Z, G)``: ``G[i, j] = p(item i at position j)``, ``G[i, K] = p(item i out)``."""
    L = np.asarray(L, dtype=np.float64)
    M, K = L.shape[0], L.shape[1] - 1
    lists = top_k_lists(M, K)
    s = top_k_scores(L, lists)
    lz = logsumexp(s)
    p = np.exp(s - lz)
    G = np.zeros((M, K + 1))
    for i in range(M):
        pos = np.where(lists[:, i] >= 0, lists[:, i], K)
        np.add.at(G[i], pos, p)
    return float(lz), G
