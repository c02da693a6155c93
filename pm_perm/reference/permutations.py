"""Definitional (slow) implementations for permutations: the oracles of the tests and benchmarks.

Value convention as everywhere in pm_perm: ``y[i]`` is the column matched to row ``i`` and
``p(y) = exp(sum_i W[i, y[i]]) / perm(exp W)``. Nothing here is used by the production code.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from scipy.special import logsumexp

__all__ = [
    "ENUM_MAX_M",
    "all_permutations",
    "log_permanent_dp_longdouble",
    "log_permanent_enum",
    "log_permanent_ryser",
    "permutation_logp_enum",
    "permutation_marginals_enum",
    "permutation_probabilities_enum",
]

#: Enumeration over all M! permutations is limited to M <= 8 (40,320 permutations).
ENUM_MAX_M = 8


def all_permutations(M: int) -> np.ndarray:
    """All ``M!`` permutations of ``range(M)`` in lexicographic order, shape (M!, M), int64."""
    if not 0 <= M <= ENUM_MAX_M:
        raise ValueError(f"enumeration needs 0 <= M <= {ENUM_MAX_M}; got M = {M}")
    return np.array(list(itertools.permutations(range(M))), dtype=np.int64).reshape(-1, M)


def _scores(W):
    W = np.asarray(W, dtype=np.float64)
    perms = all_permutations(W.shape[-1])
    rows = np.arange(W.shape[-1])
    return perms, W[..., rows, perms].sum(-1)  # (..., M!)


def log_permanent_enum(W):
    """``log perm(exp W)`` by summing ``exp`` of all M! permutation scores (log-sum-exp)."""
    _, s = _scores(W)
    with np.errstate(divide="ignore"):
        return logsumexp(s, axis=-1)


def permutation_logp_enum(W, y):
    """``log p(y)`` by enumeration; ``y`` (..., M) int."""
    W = np.asarray(W, dtype=np.float64)
    y = np.asarray(y)
    batch = np.broadcast_shapes(W.shape[:-2], y.shape[:-1])
    Wb = np.broadcast_to(W, batch + W.shape[-2:])
    yb = np.broadcast_to(y, batch + y.shape[-1:])
    score = np.take_along_axis(Wb, yb[..., :, None], axis=-1)[..., 0].sum(-1)
    return score - log_permanent_enum(W)


def permutation_probabilities_enum(W):
    """Every permutation of one (M, M) ``W`` and its probability, by enumeration.

    Returns
    -------
    perms : ndarray
        (M!, M) int64, the rows of ``all_permutations(M)``.
    probs : ndarray
        (M!,) ``p(perms[r])``, summing to 1.

    Examples
    --------
    >>> perms, probs = permutation_probabilities_enum(np.log([[2.0, 1.0], [1.0, 1.0]]))
    >>> perms.tolist(), probs.round(4).tolist()
    ([[0, 1], [1, 0]], [0.6667, 0.3333])
    """
    perms, s = _scores(W)
    return perms, np.exp(s - logsumexp(s))


def permutation_marginals_enum(W):
    """``P[..., i, j] = p(y[i] = j)`` by enumeration."""
    perms, s = _scores(W)
    lz = log_permanent_enum(W)
    with np.errstate(invalid="ignore"):
        p = np.exp(s - lz[..., None])
    p = np.where(np.isfinite(lz)[..., None], p, 0.0)
    M = perms.shape[1]
    onehot = np.zeros((perms.shape[0], M, M))
    onehot[np.arange(perms.shape[0])[:, None], np.arange(M), perms] = 1.0
    return np.einsum("...k,kij->...ij", p, onehot)



def _row_shifted(W, max_m, what):
    """``(W, M, shift)``: ``W`` as float64, its size ``M <= max_m`` (else a ``ValueError`` naming
    ``what``) and its row maxima (0 for a row of ``-inf``), the scaling of both references."""
    W = np.asarray(W, dtype=np.float64)
    M = W.shape[0]
    if M > max_m:
        raise ValueError(f"{what} is for M <= {max_m}")
    shift = W.max(axis=1, keepdims=True)
    shift[~np.isfinite(shift)] = 0.0
    return W, M, shift

def log_permanent_ryser(W) -> float:
    """``log perm(exp W)`` of one (M, M) matrix by Ryser's formula with a Gray code.

    Rows are scaled by their maxima first; the inclusion-exclusion sum is still an alternating
    sum in float64, which loses relative accuracy as M grows (this is why production code uses
    the subset dynamic program). O(M 2^M) time, O(M) memory, pure NumPy loop: M <= 20.
    """
    W, M, shift = _row_shifted(W, 20, "the reference Ryser loop")
    A = np.exp(W - shift)
    row_sums = np.zeros(M)
    total = 0.0
    prev = 0
    for k in range(1, 1 << M):
        gray = k ^ (k >> 1)
        changed = gray ^ prev
        j = changed.bit_length() - 1
        if gray & changed:
            row_sums += A[:, j]
        else:
            row_sums -= A[:, j]
        prev = gray
        sign = -1.0 if bin(gray).count("1") % 2 else 1.0
        total += sign * np.prod(row_sums)
    value = (-1) ** M * total
    return math.log(value) + float(shift.sum()) if value > 0 else -math.inf


def log_permanent_dp_longdouble(W) -> float:
    """``log perm(exp W)`` of one (M, M) matrix by the subset DP in extended precision.

    Vectorised over each layer of the subset lattice in ``np.longdouble`` (80-bit on x86: 64-bit
    mantissa), with row-max scaling. An accuracy reference for the float64 kernel at M up to 24:
    independent code, about 2^11 times smaller rounding error. O(M 2^M) time, 2^M long doubles.
    """
    W, M, shift = _row_shifted(W, 24, "the long-double reference DP")
    B = np.exp((W - shift).astype(np.longdouble))
    N = 1 << M
    subsets = np.arange(N, dtype=np.int64)
    pc = np.zeros(N, dtype=np.int64)
    for j in range(M):
        pc += (subsets >> j) & 1
    f = np.zeros(N, dtype=np.longdouble)
    f[0] = 1
    for r in range(M):  # layer r + 1: assign row r
        layer = subsets[pc == r + 1]
        acc = np.zeros(layer.size, dtype=np.longdouble)
        for j in range(M):
            has = ((layer >> j) & 1).astype(bool)
            acc[has] += f[layer[has] ^ (1 << j)] * B[r, j]
        f[layer] = acc
    total = f[N - 1]
    return float(np.log(total)) + float(shift.sum()) if total > 0 else -math.inf
