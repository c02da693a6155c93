"""Definitional (slow) Mallows distances, normalisers and probabilities, by enumeration.

Value convention: rank form, ``R[i]`` is the 0-based rank of item ``i`` (``rho`` likewise).
``p(R | rho, alpha) = exp(-(alpha / n) d(R, rho)) / Z_n(alpha)``. Nothing here is used by the
production code.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
from scipy.special import logsumexp

from pm_perm.reference.permutations import all_permutations

__all__ = [
    "distance_ref",
    "distances_from_identity",
    "mallows_log_normaliser_enum",
    "mallows_logp_enum",
    "mallows_probabilities_enum",
]


def _lis(seq):
    """Length of the longest increasing subsequence (the textbook O(n^2) recursion: the longest
    one ending at each position)."""
    best = []
    for j, x in enumerate(seq):
        best.append(1 + max((best[i] for i in range(j) if seq[i] < x), default=0))
    return max(best, default=0)


def _cycles(sigma):
    seen = [False] * len(sigma)
    count = 0
    for i in range(len(sigma)):
        if not seen[i]:
            count += 1
            j = i
            while not seen[j]:
                seen[j] = True
                j = sigma[j]
    return count


def distance_ref(distance, R, rho):
    """``d(R, rho)`` from each distance's definition (rank-form permutations of ``0..n-1``).

    footrule ``sum |R - rho|``; spearman ``sum (R - rho)^2``; hamming ``#{i : R_i != rho_i}``;
    kendall the number of item pairs the two rankings order differently; cayley the least number
    of transpositions turning ``R`` into ``rho`` (``n - #cycles(R rho^-1)``); ulam ``n`` minus
    the longest common subsequence of the two orderings of the items (``n - LIS``).
    """
    R = np.asarray(R, dtype=np.int64)
    rho = np.asarray(rho, dtype=np.int64)
    n = R.size
    if distance == "footrule":
        return int(np.abs(R - rho).sum())
    if distance == "spearman":
        return int(((R - rho) ** 2).sum())
    if distance == "hamming":
        return int((R != rho).sum())
    if distance == "kendall":
        return sum(1 for i, j in itertools.combinations(range(n), 2)
                   if (R[i] - R[j]) * (rho[i] - rho[j]) < 0)
    # sigma[rho[i]] = R[i]: the ranking R seen from the consensus ordering
    sigma = np.empty(n, dtype=np.int64)
    sigma[rho] = R
    if distance == "cayley":
        return n - _cycles(sigma.tolist())
    if distance == "ulam":
        return n - _lis(sigma.tolist())
    raise ValueError(f"unknown distance {distance!r}")


@functools.lru_cache(maxsize=64)
def distances_from_identity(distance, n):
    """``d(R, id)`` for every ranking ``R`` of :func:`all_permutations(n) <pm_perm.reference.
    permutations.all_permutations>` (``n <= 8``; cached, read-only)."""
    rho = np.arange(n)
    d = np.array([distance_ref(distance, R, rho) for R in all_permutations(n)], dtype=float)
    d.setflags(write=False)
    return d


def mallows_log_normaliser_enum(distance, n, alpha):
    """``log Z_n(alpha)`` by summing over all ``n!`` rankings (``n <= 8``), consensus the
    identity."""
    return float(logsumexp(-(alpha / n) * distances_from_identity(distance, n)))


def mallows_probabilities_enum(distance, rho, alpha):
    """``(rankings, p)``: every ranking of ``n = len(rho)`` items (``n <= 8``) and its
    Mallows probability."""
    rho = np.asarray(rho, dtype=np.int64)
    n = rho.size
    perms = all_permutations(n)
    d = np.array([distance_ref(distance, R, rho) for R in perms], dtype=float)
    logits = -(alpha / n) * d
    return perms, np.exp(logits - logsumexp(logits))


def mallows_logp_enum(distance, R, rho, alpha):
    """``log p(R | rho, alpha)`` by enumeration (``n <= 8``)."""
    n = len(rho)
    return (-(alpha / n) * distance_ref(distance, R, rho)
            - mallows_log_normaliser_enum(distance, n, alpha))
