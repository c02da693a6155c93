"""Exact permanent engine against enumeration, closed forms and the long-double reference."""

import math

import numpy as np
import pytest

from pm_perm.kernels.permanent import (
    EXACT_MAX_M,
    check_exact_size,
    log_permanent,
    log_permanent_and_marginals,
    permutation_marginals,
)
from pm_perm.kernels.permutation_sampler import sample_permutations
from pm_perm.reference.permutations import (
    all_permutations,
    log_permanent_dp_longdouble,
    log_permanent_enum,
    permutation_marginals_enum,
)
from tests.kernels._logits import random_logits


@pytest.mark.parametrize("M", range(1, 8))
def test_against_enumeration(M):
    rng = np.random.default_rng(100 + M)
    W = random_logits(rng, M, batch=(4,))
    W[0, 0, : max(M - 1, 0)] = -np.inf  # a row with only one allowed column
    lp, P = log_permanent_and_marginals(W)
    ref = log_permanent_enum(W)
    np.testing.assert_allclose(log_permanent(W), ref, rtol=0, atol=1e-12 * max(1, M))
    np.testing.assert_allclose(lp, ref, rtol=0, atol=1e-12 * max(1, M))
    np.testing.assert_allclose(P, permutation_marginals_enum(W), rtol=0, atol=1e-12)
    np.testing.assert_allclose(P.sum(-1), 1.0, atol=1e-12)
    np.testing.assert_allclose(P.sum(-2), 1.0, atol=1e-12)
    assert np.all(P[np.isneginf(W)] == 0.0)


@pytest.mark.parametrize("M", range(1, 8))
def test_probabilities_sum_to_one(M):
    rng = np.random.default_rng(M)
    W = random_logits(rng, M)
    perms = all_permutations(M)
    scores = W[np.arange(M), perms].sum(-1)
    with np.errstate(over="ignore"):
        total = np.exp(scores - log_permanent(W)).sum()
    assert abs(total - 1.0) < 1e-12


@pytest.mark.parametrize("M", range(1, 13))
def test_all_ones_matrix_is_factorial(M):
    assert abs(log_permanent(np.zeros((M, M))) - math.lgamma(M + 1)) <= 1e-13 * math.lgamma(M + 2)
    np.testing.assert_allclose(permutation_marginals(np.zeros((M, M))), 1.0 / M, atol=1e-14)


def test_invariances_rows_columns_shifts():
    rng = np.random.default_rng(5)
    W = rng.normal(size=(9, 9))
    a, b = rng.normal(size=9), rng.normal(size=9)
    base = log_permanent(W)
    assert abs(log_permanent(W + a[:, None] + b[None, :]) - (base + a.sum() + b.sum())) < 1e-12
    assert abs(log_permanent(W[rng.permutation(9)][:, rng.permutation(9)]) - base) < 1e-12


def test_block_diagonal_is_product():
    rng = np.random.default_rng(6)
    A, C = rng.normal(size=(5, 5)), rng.normal(size=(6, 6))
    W = np.full((11, 11), -np.inf)
    W[:5, :5], W[5:, 5:] = A, C
    assert abs(log_permanent(W) - log_permanent(A) - log_permanent(C)) < 1e-12


@pytest.mark.parametrize("spread", [1.0, 30.0, 300.0, 3000.0])
def test_huge_spread_stays_accurate(spread):
    """Dual scaling keeps the dominant terms: no underflow whatever the logit spread."""
    rng = np.random.default_rng(7)
    W = spread * rng.normal(size=(7, 7))
    W[:, 0] += 5 * spread  # all row maxima in one column: row-max scaling alone would underflow
    ref = log_permanent_enum(W)
    assert np.isfinite(log_permanent(W))
    assert abs(log_permanent(W) - ref) <= 1e-13 * max(1.0, abs(ref))
    np.testing.assert_allclose(permutation_marginals(W), permutation_marginals_enum(W), atol=1e-12)


@pytest.mark.parametrize("M", [12, 16, 18])
def test_against_long_double_reference(M):
    rng = np.random.default_rng(M)
    W = rng.normal(scale=1.0, size=(M, M))
    ref = log_permanent_dp_longdouble(W)
    assert abs(log_permanent(W) - ref) <= 1e-13 * abs(ref)


def test_infeasible_gives_minus_inf_and_zero_marginals():
    W = np.zeros((4, 4))
    W[:2, :3] = -np.inf  # rows 0, 1 can only use column 3
    lp, P = log_permanent_and_marginals(W)
    assert lp == -np.inf and np.all(P == 0.0)
    assert log_permanent_enum(W) == -np.inf


def test_batched_shapes():
    rng = np.random.default_rng(8)
    W = rng.normal(size=(2, 3, 5, 5))
    lp, P = log_permanent_and_marginals(W)
    assert lp.shape == (2, 3) and P.shape == (2, 3, 5, 5)
    np.testing.assert_allclose(lp[1, 2], log_permanent(W[1, 2]), atol=1e-14)
    assert log_permanent(W[0, 0]).shape == ()


def test_gradient_is_marginals_by_finite_differences():
    rng = np.random.default_rng(9)
    W = rng.normal(size=(6, 6))
    P = permutation_marginals(W)
    eps = 1e-6
    for i, j in [(0, 0), (2, 5), (5, 3)]:
        E = np.zeros_like(W)
        E[i, j] = eps
        fd = (log_permanent(W + E) - log_permanent(W - E)) / (2 * eps)
        assert abs(fd - P[i, j]) < 1e-8


@pytest.mark.parametrize(
    "bad, match",
    [
        (np.array([[0.0, np.nan], [0.0, 0.0]]), "NaN"),
        (np.array([[0.0, np.inf], [0.0, 0.0]]), r"\+inf"),
        (np.zeros((2, 3)), "square"),
        (np.zeros(4), "at least 2"),
        (np.zeros((0, 0)), "M >= 1"),
    ],
)
def test_bad_input(bad, match):
    for fn in (log_permanent, permutation_marginals, sample_permutations):
        with pytest.raises(ValueError, match=match):
            fn(bad)


def test_beyond_exact_limit_refuses_at_once():
    W = np.zeros((EXACT_MAX_M + 1, EXACT_MAX_M + 1))
    for fn in (log_permanent, permutation_marginals, sample_permutations):
        with pytest.raises(ValueError, match="EXACT_MAX_M.*bethe"):
            fn(W)
    with pytest.raises(ValueError, match="EXACT_MAX_M"):
        log_permanent(np.zeros((32, 32)))


def test_memory_budget(monkeypatch):
    monkeypatch.setenv("PM_PERM_MEMORY_BUDGET", "1M")
    check_exact_size(17)  # 2^17 x 8 B = 1 MiB: allowed
    with pytest.raises(ValueError, match="memory budget"):
        check_exact_size(18)
    with pytest.raises(ValueError, match="memory budget"):
        log_permanent(np.zeros((18, 18)))
    monkeypatch.setenv("PM_PERM_MEMORY_BUDGET", "lots")
    with pytest.raises(ValueError, match="PM_PERM_MEMORY_BUDGET"):
        check_exact_size(3)


@pytest.mark.parametrize("value", ["infG", "nanG", "-1", "0", "-2G", "2x", "1e400"])
def test_memory_budget_must_be_a_positive_byte_count(monkeypatch, value):
    # before: infG raised OverflowError; -1 gave "more than the memory budget of -0.00 GiB"
    from pm_perm.kernels.permanent import memory_budget

    monkeypatch.setenv("PM_PERM_MEMORY_BUDGET", value)
    with pytest.raises(ValueError, match=rf"^PM_PERM_MEMORY_BUDGET='{value}' is not a positive "
                       "byte count; set it to e.g. 2147483648 or 2G"):
        log_permanent(np.zeros((3, 3)))
    monkeypatch.setenv("PM_PERM_MEMORY_BUDGET", "1.5K")
    assert memory_budget() == 1536
