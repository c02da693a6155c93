"""The exact distributions of the Mallows distances (pm_perm.kernels.mallows) against enumeration
of all n! permutations (n = 1..8), closed forms and the exact permanent; the size limits."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import logsumexp

from pm_perm.kernels.mallows import (
    DISTANCES,
    MAX_N,
    SPEARMAN_TABLE_MAX_N,
    check_table_size,
    log_distance_counts,
    log_normaliser,
    max_distance,
)
from pm_perm.kernels.permanent import log_permanent
from pm_perm.reference.mallows import _lis, distance_ref, distances_from_identity

ALPHAS = (0.0, 0.7, 5.0, 40.0)


@pytest.mark.parametrize("distance", DISTANCES)
@pytest.mark.parametrize("n", range(1, 9))
def test_counts_equal_enumeration(distance, n):
    """N_d for every d equals the number of the n! permutations at distance d from the
    identity, and the normaliser equals the enumerated sum at several alpha."""
    d, log_counts = log_distance_counts(distance, n)
    enum = distances_from_identity(distance, n)
    values, counts = np.unique(enum, return_counts=True)
    assert np.array_equal(d, values)
    np.testing.assert_allclose(np.exp(log_counts), counts, rtol=1e-12)
    assert enum.max() <= max_distance(distance, n)
    for alpha in ALPHAS:
        expected = logsumexp(-(alpha / n) * enum)
        assert log_normaliser(distance, n, alpha) == pytest.approx(expected, rel=1e-12,
                                                                   abs=1e-12)


@pytest.mark.parametrize("distance", DISTANCES)
def test_counts_sum_to_n_factorial_at_larger_n(distance):
    for n in (9, 14, 20, 50):
        if n > MAX_N[distance] or (distance == "spearman" and n > SPEARMAN_TABLE_MAX_N):
            continue
        d, log_counts = log_distance_counts(distance, n)
        assert logsumexp(log_counts) == pytest.approx(math.lgamma(n + 1), rel=1e-12)
        assert d[0] == 0 and d[-1] == max_distance(distance, n)


@pytest.mark.parametrize("n", [9, 30, 100])
def test_kendall_and_cayley_closed_forms(n):
    """Kendall: Z = prod_{j=1}^{n} (1 - e^{-jt}) / (1 - e^{-t}); Cayley:
    Z = prod_{j=1}^{n-1} (1 + j e^{-t}), t = alpha / n."""
    for alpha in (0.3, 4.0, 50.0):
        t = alpha / n
        j = np.arange(1, n + 1)
        kendall = np.sum(np.log1p(-np.exp(-j * t))) - n * np.log1p(-np.exp(-t))
        assert log_normaliser("kendall", n, alpha) == pytest.approx(kendall, rel=1e-10)
        cayley = np.sum(np.log1p(np.arange(1, n) * np.exp(-t)))
        assert log_normaliser("cayley", n, alpha) == pytest.approx(cayley, rel=1e-12)


@pytest.mark.parametrize("distance, n", [("footrule", 11), ("footrule", 16),
                                         ("spearman", 11), ("spearman", 14),
                                         ("hamming", 12)])
def test_separable_tables_equal_the_exact_permanent(distance, n):
    """log Z(alpha) = log perm(exp(-(alpha/n) f(i - j))) for the separable distances."""
    i = np.arange(n)
    diff = np.subtract.outer(i, i)
    f = {"footrule": np.abs(diff), "spearman": diff ** 2, "hamming": (diff != 0)}[distance]
    for alpha in (0.5, 3.0, 30.0):
        W = -(alpha / n) * f.astype(float)
        assert log_normaliser(distance, n, alpha) == pytest.approx(float(log_permanent(W)),
                                                                   rel=1e-11)


def test_reference_distances_by_definition():
    """The oracle's distances on hand-checked examples (rank form)."""
    R, rho = [1, 0, 2, 3], [0, 1, 2, 3]
    assert [distance_ref(d, R, rho) for d in DISTANCES] == [2, 2, 2, 1, 1, 1]
    R = [3, 2, 1, 0]
    assert [distance_ref(d, R, rho) for d in DISTANCES] == [8, 20, 4, 6, 2, 3]
    assert _lis([2, 0, 3, 1, 4]) == 3


def test_beyond_the_exact_limit_names_the_alternatives():
    with pytest.raises(ValueError, match=r"n = 201 .* MAX_N\['footrule'\] = 200"):
        check_table_size("footrule", 201)
    with pytest.raises(ValueError, match="n = 27 .*use distance='footrule'"):
        log_distance_counts("spearman", 27)
    with pytest.raises(ValueError, match="SPEARMAN_TABLE_MAX_N = 14"):
        log_distance_counts("spearman", 15)
    with pytest.raises(ValueError, match="ulam.*n = 61.*use distance='footrule'"):
        log_distance_counts("ulam", 61)
    with pytest.raises(ValueError, match="unknown Mallows distance 'taxicab'; use one of"):
        log_distance_counts("taxicab", 5)
    with pytest.raises(ValueError, match="n >= 1"):
        log_distance_counts("kendall", 0)
