"""Exact distributions of the Mallows distances over all ``n!`` permutations (log counts).

For a right-invariant distance ``d`` and ``n`` items, ``log_distance_counts(distance, n)`` is
``(d_values, log_counts)``: every value ``d`` the distance takes and ``log N_d``, ``N_d = #{sigma :
d(sigma, id) = d}``. The Mallows normaliser is then, for any consensus ``rho``,
``log Z_n(alpha) = logsumexp_d(log N_d - alpha d / n)``: the table is computed once per
``(distance, n)`` (cached) and every ``alpha`` costs one log-sum-exp over it. Counts are kept in
log space (they overflow int64 from n = 21).

=========  ====================================================  ===========================
distance   method                                                cost (time; table length D)
=========  ====================================================  ===========================
footrule   DP over k = 1..n, state = number m of "open" pairs      O(n^4 / 8); D = n^2 / 4
           (``sum_i |i - sigma(i)| = 2 sum_k m_k``)
spearman   subset DP with distance-indexed polynomial entries      O(2^n n D), D ~ n^3 / 6;
           (rows in order, state = set of used ranks)              n <= SPEARMAN_TABLE_MAX_N
hamming    ``N(n - k fixed points) = C(n, k) D_{n-k}``             O(n); D = n
           (derangements)
kendall    Mahonian numbers (product of 1 + x + ... + x^(j-1))     O(n^4 / 4); D = n^2 / 2
cayley     Stirling numbers of the first kind                      O(n^2); D = n
           (product of 1 + j x, j = 1..n-1)
ulam       ``#{LIS = l} = sum_{lambda_1 = l} (f^lambda)^2``        O(p(n) n) (p: partitions)
           (hook length formula over all partitions of n)
=========  ====================================================  ===========================

``MAX_N[distance]`` is the exact limit of each table (time or floating range);
:func:`check_table_size` raises ``ValueError`` beyond it, naming the alternatives.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from pm_perm._numba import njit

__all__ = [
    "DISTANCES",
    "MAX_N",
    "SPEARMAN_TABLE_MAX_N",
    "check_distance",
    "check_table_size",
    "log_distance_counts",
    "log_normaliser",
    "max_distance",
]

#: The distances of :class:`pm_perm.distributions.mallows.Mallows`.
DISTANCES = ("footrule", "spearman", "hamming", "kendall", "cayley", "ulam")

#: Largest n of the exact Spearman table (its subset DP keeps C(n, n/2) polynomials of length
#: n^3 / 3: 25 MB and about 0.5 s at n = 14). Beyond it, up to the exact permanent's limit
#: (``EXACT_MAX_M = 26``), the Spearman normaliser is ``log perm(exp(-alpha/n (i - j)^2))``,
#: computed at every evaluation (see :mod:`pm_perm.distributions.mallows`).
SPEARMAN_TABLE_MAX_N = 14

#: Exact limit of each distance's normaliser: the table's cost (footrule: O(n^4) time, ulam:
#: all p(n) partitions of n, p(60) = 966,467), the float range of its counts (kendall: the
#: table holds probabilities, the smallest 1/n!, which underflows beyond n = 170), or, for
#: spearman, the exact permanent's (26).
MAX_N = {"footrule": 200, "spearman": 26, "hamming": 10_000, "kendall": 170,
         "cayley": 10_000, "ulam": 60}

_ALTERNATIVES = {
    "footrule": "use distance='cayley' or 'hamming' (exact to n = 10,000), or the footrule "
                "as a separable distance through PermutationExpFamily with method='bethe' "
                "(approximate)",
    "spearman": "use distance='footrule' (exact to n = 200), 'kendall' (170), 'cayley' or "
                "'hamming' (10,000)",
    "hamming": "no larger table is available",
    "kendall": "use distance='cayley' or 'hamming' (exact to n = 10,000) or 'footrule' "
               "(n = 200)",
    "cayley": "no larger table is available",
    "ulam": "use distance='footrule' (exact to n = 200), 'kendall' (170), 'cayley' or "
            "'hamming' (10,000)",
}


def check_distance(distance) -> str:
    """``distance`` if it is one of :data:`DISTANCES`, else ``ValueError`` listing them."""
    if distance not in DISTANCES:
        raise ValueError(f"unknown Mallows distance {distance!r}; use one of "
                         f"{', '.join(repr(d) for d in DISTANCES)}")
    return distance


def check_table_size(distance: str, n: int) -> None:
    """Raise ``ValueError`` if ``n`` items are beyond the exact limit of ``distance``'s
    normaliser (:data:`MAX_N`), naming the alternatives."""
    check_distance(distance)
    if n > MAX_N[distance]:
        raise ValueError(
            f"Mallows(distance={distance!r}): n = {n} items is beyond the exact limit "
            f"MAX_N[{distance!r}] = {MAX_N[distance]} of its normaliser; "
            f"{_ALTERNATIVES[distance]}")


def max_distance(distance: str, n: int) -> int:
    """Largest value of ``distance`` between two permutations of ``n`` items."""
    check_distance(distance)
    if distance == "footrule":
        return (n * n) // 2
    if distance == "spearman":
        return (n * n * n - n) // 3
    if distance == "kendall":
        return n * (n - 1) // 2
    return max(n - 1, 0) if distance in ("cayley", "ulam") else n


# ----------------------------------------------------------------------------- the tables


def _footrule(n):
    """log N_d for d = 0..n^2/2 (odd d have N_d = 0): the DP over positions k with m "open"
    rows (and as many open columns) after step k; the distance grows by 2 m per step."""
    D = (n * n) // 2
    neg = -np.inf
    cur = np.full((n // 2 + 2, D + 1), neg)
    cur[0, 0] = 0.0
    for k in range(n):
        new = np.full_like(cur, neg)
        for m in range(min(k, n - k) + 1):
            row = cur[m]
            if row[0] == neg and not np.isfinite(row).any():
                continue
            terms = [(m, 0.0)]  # row k and column k matched together, m stays
            if m > 0:
                terms.append((m - 1, 2.0 * math.log(m)))  # both to open partners: m - 1
                terms.append((m, math.log(2 * m)))  # one to an open partner, the other opens
            if m + 1 < cur.shape[0]:
                terms.append((m + 1, 0.0))  # both stay open: m + 1
            for m2, logw in terms:
                shift = 2 * m2
                if shift > D:
                    continue
                target = new[m2, shift:]
                np.logaddexp(target, row[:D + 1 - shift] + logw, out=target)
        cur = new
    return np.arange(D + 1), cur[0]


def _hamming(n):
    """log N_d = log C(n, d) + log D_d (D_d derangements of d items), d = 0..n."""
    log_der = np.full(n + 1, -np.inf)
    log_der[0] = 0.0
    for k in range(2, n + 1):  # D_k = (k - 1)(D_{k-1} + D_{k-2})
        log_der[k] = math.log(k - 1) + np.logaddexp(log_der[k - 1], log_der[k - 2])
    d = np.arange(n + 1)
    lgam = np.array([math.lgamma(i + 1) for i in range(n + 1)])
    return d, lgam[n] - lgam[d] - lgam[n - d] + log_der


def _kendall(n):
    """Mahonian numbers: the distribution of inversions, the convolution of uniforms on
    0..j-1 (j = 1..n), kept as probabilities (all positive sums), times n!."""
    p = np.ones(1)
    for j in range(2, n + 1):
        p = np.convolve(p, np.full(j, 1.0 / j))
    with np.errstate(divide="ignore"):
        return np.arange(p.size), np.log(p) + math.lgamma(n + 1)


def _cayley(n):
    """Unsigned Stirling numbers of the first kind: N_d = c(n, n - d), the coefficients of
    prod_{j=1}^{n-1} (1 + j x)."""
    logc = np.full(max(n, 1), -np.inf)
    logc[0] = 0.0
    for j in range(1, n):
        shifted = np.full_like(logc, -np.inf)
        shifted[1:] = logc[:-1] + math.log(j)
        logc = np.logaddexp(logc, shifted)
    return np.arange(logc.size), logc


@njit(cache=True)
def _spearman_counts(n, D):
    """N_d (float64, exact below 2^53) of sum_i (i - sigma(i))^2, layer by layer over the rows:
    after row k the state is the set S of ranks used (|S| = k + 1), a polynomial over d."""
    size = 1 << n
    rank = np.zeros(size, dtype=np.int64)  # index of a subset within its layer
    count = np.zeros(n + 1, dtype=np.int64)
    for s in range(size):
        c = 0
        t = s
        while t:
            t &= t - 1
            c += 1
        rank[s] = count[c]
        count[c] += 1
    cur = np.zeros((1, D + 1))
    cur[0, 0] = 1.0
    subsets = np.zeros(1, dtype=np.int64)
    for k in range(n):
        nxt_subsets = np.empty(count[k + 1], dtype=np.int64)
        nxt = np.zeros((count[k + 1], D + 1))
        for a in range(subsets.size):
            s = subsets[a]
            poly = cur[a]
            hi = 0
            for d in range(D, -1, -1):
                if poly[d] != 0.0:
                    hi = d
                    break
            for j in range(n):
                if s & (1 << j):
                    continue
                t = s | (1 << j)
                b = rank[t]
                nxt_subsets[b] = t
                c = (k - j) * (k - j)
                row = nxt[b]
                for d in range(hi + 1):
                    if d + c <= D:
                        row[d + c] += poly[d]
        cur = nxt
        subsets = nxt_subsets
    return cur[0]


def _spearman(n):
    if n > SPEARMAN_TABLE_MAX_N:
        raise ValueError(f"the exact Spearman table is limited to n <= SPEARMAN_TABLE_MAX_N = "
                         f"{SPEARMAN_TABLE_MAX_N}; got n = {n}")
    D = max_distance("spearman", n)
    with np.errstate(divide="ignore"):
        return np.arange(D + 1), np.log(_spearman_counts(n, D))


@njit(cache=True)
def _ulam_table(n):
    """log #{sigma : LIS(sigma) = l} for l = 0..n: log-sum of 2 log f^lambda over the
    partitions lambda of n with lambda_1 = l (all partitions, in reverse lexicographic order)."""
    out = np.full(n + 1, -np.inf)
    if n == 0:
        out[0] = 0.0
        return out
    lgn = math.lgamma(n + 1)
    parts = np.zeros(n, dtype=np.int64)
    parts[0] = n
    length = 1
    conj = np.zeros(n + 1, dtype=np.int64)
    while True:
        v = 2.0 * log_syt_count(parts, length, conj, lgn)
        l1 = parts[0]
        m = max(out[l1], v)
        out[l1] = m + math.log(math.exp(out[l1] - m) + math.exp(v - m))
        length = next_partition(parts, length)
        if length == 0:
            return out


@njit(cache=True)
def log_syt_count(parts, length, conj, lgn):
    """log f^lambda (standard Young tableaux of shape ``parts[:length]``) by the hook length
    formula; ``conj`` is scratch of length >= parts[0] + 1, ``lgn`` = lgamma(n + 1)."""
    for j in range(parts[0]):
        conj[j] = 0
    for i in range(length):
        for j in range(parts[i]):
            conj[j] += 1
    s = 0.0
    for i in range(length):
        for j in range(parts[i]):
            s += math.log(parts[i] - j + conj[j] - i - 1)
    return lgn - s


@njit(cache=True)
def next_partition(parts, length):
    """Step ``parts[:length]`` (non-increasing) to the next partition of the same n in reverse
    lexicographic order, in place; returns its length, or 0 after the last (1, ..., 1)."""
    rem = 0
    k = length - 1
    while k >= 0 and parts[k] == 1:
        rem += 1
        k -= 1
    if k < 0:
        return 0
    v = parts[k] - 1
    parts[k] = v
    rem += 1
    k += 1
    while rem > 0:
        take = min(v, rem)
        parts[k] = take
        rem -= take
        k += 1
    return k


def _ulam(n):
    table = _ulam_table(n)
    # d = n - LIS, d = 0..n-1 (LIS >= 1 for n >= 1)
    d = np.arange(max(n, 1))
    return d, table[n - d] if n else np.zeros(1)


_TABLES = {"footrule": _footrule, "spearman": _spearman, "hamming": _hamming,
           "kendall": _kendall, "cayley": _cayley, "ulam": _ulam}


@functools.lru_cache(maxsize=64)
def _cached(distance, n):
    d, logn = _TABLES[distance](n)
    keep = np.isfinite(logn)
    d, logn = d[keep].astype(np.float64), logn[keep]
    d.setflags(write=False)
    logn.setflags(write=False)
    return d, logn


def log_distance_counts(distance: str, n: int):
    """The exact distribution of ``distance`` over all ``n!`` permutations.

    Parameters
    ----------
    distance : {"footrule", "spearman", "hamming", "kendall", "cayley", "ulam"}
    n : int
        Number of items (>= 1).

    Returns
    -------
    d : ndarray of float64, shape (K,)
        The values the distance takes (only those with ``N_d > 0``), increasing.
    log_counts : ndarray of float64, shape (K,)
        ``log N_d``; ``logsumexp(log_counts) = log n!``. Read-only arrays, cached per
        ``(distance, n)``.

    Raises
    ------
    ValueError
        For an unknown distance, ``n < 1``, or ``n`` beyond the exact limit :data:`MAX_N` (for
        spearman, beyond :data:`SPEARMAN_TABLE_MAX_N`).

    Examples
    --------
    >>> d, logn = log_distance_counts("kendall", 3)
    >>> d.tolist(), np.round(np.exp(logn)).tolist()   # inversions of the 6 permutations of 3
    ([0.0, 1.0, 2.0, 3.0], [1.0, 2.0, 2.0, 1.0])
    """
    check_distance(distance)
    n = int(n)
    if n < 1:
        raise ValueError(f"a Mallows model needs n >= 1 items; got n = {n}")
    check_table_size(distance, n)
    return _cached(distance, n)


def log_normaliser(distance: str, n: int, alpha):
    """``log Z_n(alpha) = log sum_sigma exp(-(alpha / n) d(sigma, id))`` (NumPy, for checks and
    draws; the distribution builds the same sum in PyTensor). ``alpha`` may be an array."""
    d, logn = log_distance_counts(distance, n)
    a = np.asarray(alpha, dtype=np.float64)[..., None]
    terms = logn - a * d / n
    m = terms.max(axis=-1, keepdims=True)
    return (m + np.log(np.exp(terms - m).sum(axis=-1, keepdims=True)))[..., 0]
