"""Definitional oracles for count-structured labels, by enumeration over all subsets / labelings.

Slow on purpose (O(2^D) or O(R^D)); D <= 12 (``MAX_D``). Used by the tests and benchmarks as
ground truth for :mod:`pm_perm.kernels.esp` and the ``ConditionalBernoulli``,
``NChooseK`` and ``OrdinalNChooseK`` distributions. Every sum is done in log space with
``scipy.special.logsumexp`` so extreme logits are fine.
"""

from __future__ import annotations

import itertools

import numpy as np
from scipy.special import logsumexp

__all__ = [
    "MAX_D",
    "binary_vectors",
    "conditional_bernoulli_log_pmf",
    "conditional_marginals",
    "log_esp",
    "nchoosek_log_pmf",
    "ordinal_labelings",
    "ordinal_log_pmf",
]

MAX_D = 12


def _check_d(D):
    if D > MAX_D:
        raise ValueError(f"enumeration oracle limited to D <= {MAX_D}; got D = {D}")


def _dot(theta, y):
    """``sum_d theta_d y_d`` with ``-inf * 0 = 0`` (an off item with a -inf logit is fine)."""
    y = np.asarray(y)
    return float(np.sum(np.where(y == 1, theta, 0.0)))


def binary_vectors(D, k=None):
    """All binary vectors of length D (with exactly ``k`` ones if given), int64 (n, D)."""
    _check_d(D)
    if k is None:
        rows = list(itertools.product([0, 1], repeat=D))
        return np.array(rows, dtype=np.int64).reshape(len(rows), D)
    rows = []
    for c in itertools.combinations(range(D), k):
        y = np.zeros(D, dtype=np.int64)
        y[list(c)] = 1
        rows.append(y)
    return np.array(rows, dtype=np.int64).reshape(len(rows), D)


def log_esp(theta, k):
    """``log e_k(exp theta) = log sum_{|c| = k} exp(sum_{d in c} theta_d)`` by enumeration."""
    theta = np.asarray(theta, dtype=np.float64)
    D = theta.shape[-1]
    if k < 0 or k > D:
        return -np.inf
    Y = binary_vectors(D, k)
    return float(logsumexp([_dot(theta, y) for y in Y]))


def conditional_bernoulli_log_pmf(theta, k):
    """``(Y, log p(Y | k))`` over all binary ``Y`` with k ones."""
    theta = np.asarray(theta, dtype=np.float64)
    Y = binary_vectors(theta.shape[-1], k)
    s = np.array([_dot(theta, y) for y in Y])
    return Y, s - logsumexp(s)


def conditional_marginals(theta, k):
    """``p(y_d = 1 | sum y = k)`` by enumeration."""
    Y, lp = conditional_bernoulli_log_pmf(theta, k)
    return (np.exp(lp)[:, None] * Y).sum(0)


def nchoosek_log_pmf(theta, count_probs):
    """``(Y, log p(Y))`` over all ``2^D`` binary ``Y`` for ``NChooseK``:
    ``p(y) = count_probs[sum y] exp(theta . y) / e_{sum y}(exp theta)``."""
    theta = np.asarray(theta, dtype=np.float64)
    Y = binary_vectors(theta.shape[-1])
    out = np.empty(len(Y))
    with np.errstate(divide="ignore"):
        for i, y in enumerate(Y):
            s = int(y.sum())
            out[i] = np.log(count_probs[s]) + _dot(theta, y) - log_esp(theta, s)
    return Y, out


def ordinal_labelings(D, R):
    """All ``R^D`` label vectors with values 0..R-1, int64 (R^D, D)."""
    _check_d(D)
    rows = list(itertools.product(range(R), repeat=D))
    return np.array(rows, dtype=np.int64).reshape(len(rows), D)


def _log_count_prior(counts, count_probs):
    """``log p(k)`` for the per-level prior with the sum-to-D constraint, by enumeration."""
    R, M = count_probs.shape
    D = M - 1
    logZ = []
    for ks in itertools.product(range(D + 1), repeat=R):
        if sum(ks) == D:
            logZ.append(sum(np.log(count_probs[r, ks[r]]) for r in range(R)))
    with np.errstate(divide="ignore"):
        num = sum(np.log(count_probs[r, counts[r]]) for r in range(R))
    return num - logsumexp(logZ)


def ordinal_log_pmf(theta, y, R, count_probs=None):
    """Log probability of labels ``y`` (D,) in 0..R-1 under the ordinal n-choose-k model.

    Level by level from R-1 down to 1: the items labelled r are a conditional-Bernoulli draw
    of ``k_r`` items among those with label <= r, each normaliser by enumeration. With
    ``count_probs`` (R, D+1) adds ``log p(k)`` of the per-level count prior under the
    sum-to-D constraint (normaliser by enumerating all count vectors); without it the result
    is ``log p(y | k = counts of y)``.
    """
    theta = np.asarray(theta, dtype=np.float64)
    y = np.asarray(y)
    D = theta.shape[-1]
    _check_d(D)
    lp = 0.0
    for r in range(R - 1, 0, -1):
        avail = np.flatnonzero(y <= r)
        chosen = y[avail] == r
        lp += _dot(theta[avail], chosen.astype(np.int64)) - log_esp(theta[avail], int(chosen.sum()))
    if count_probs is not None:
        counts = np.bincount(y, minlength=R)
        lp += _log_count_prior(counts, np.asarray(count_probs, dtype=np.float64))
    return lp
