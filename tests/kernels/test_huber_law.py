"""Tests of the Huber-Law exact sampler: bound properties, goodness of fit, marginals."""

import math

import numpy as np
import pytest

from pm_perm.kernels.huber_law import (
    HUBER_LAW_MAX_M,
    HuberLawTrialsExceeded,
    huber_law_log_bound,
    huber_law_log_permanent_estimate,
    huber_law_sample,
    huber_law_scale,
)
from pm_perm.kernels.permanent import permutation_marginals
from pm_perm.reference.permutations import log_permanent_enum, permutation_probabilities_enum
from pm_perm.testing import chi_square_pvalue


def _random_unit_matrix(rng, m, kind):
    if kind == 0:
        return rng.random((m, m))
    if kind == 1:
        A = np.exp(rng.normal(size=(m, m)) * 3)
        return A / A.max(1, keepdims=True)
    if kind == 2:
        return (rng.random((m, m)) < 0.5).astype(float)
    if kind == 3:
        A = np.exp(rng.normal(size=(m, m)) * 3)
        return A / A.max()
    return rng.random((m, m)) ** 5


def _drop(A, i, j):
    return np.delete(np.delete(A, i, 0), j, 1)


def _bound(A):
    return 1.0 if A.shape[0] == 0 else math.exp(huber_law_log_bound(A))


def test_super_additivity_of_column_expansion():
    # (P1) for the expansion the sampler uses: sum_i A[i,0] U(A_{-i,-0}) <= U(A), on 3000 random
    # matrices in [0, 1] of five kinds (uniform, row-max-scaled lognormal, 0/1, max-scaled
    # lognormal, skewed) and sizes 1..7.
    rng = np.random.default_rng(0)
    worst = 0.0
    for t in range(3000):
        m = int(rng.integers(1, 8))
        A = _random_unit_matrix(rng, m, t % 5)
        children = sum(A[i, 0] * _bound(_drop(A, i, 0)) for i in range(m))
        worst = max(worst, children / _bound(A))
    assert worst <= 1.0 + 1e-12


def test_row_expansion_against_row_sum_bound_is_not_super_additive():
    # The naive version: expanding a ROW while the bound uses row sums. It violates (P1) on
    # 0/1 matrices, which is why the sampler expands columns.
    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(500):
        m = int(rng.integers(2, 7))
        A = _random_unit_matrix(rng, m, 2)
        children = sum(A[0, j] * _bound(_drop(A, 0, j)) for j in range(m))
        worst = max(worst, children / _bound(A))
    assert worst > 1.05


def test_bound_is_an_upper_bound_and_exact_at_singletons():
    rng = np.random.default_rng(1)
    for t in range(200):
        m = int(rng.integers(1, 7))
        A = _random_unit_matrix(rng, m, t % 5)
        lz = log_permanent_enum(np.log(np.where(A > 0, A, 1e-300)))
        assert lz <= huber_law_log_bound(A) + 1e-9
    # (P2) at the leaf of the recursion: a 1x1 block with entry a in [0, 1] contributes
    # a * U(empty) = a exactly; the bound of a 1x1 matrix [1] is 1.
    assert huber_law_log_bound(np.ones((1, 1))) == pytest.approx(0.0, abs=1e-15)


def test_scaling_preserves_permanent():
    rng = np.random.default_rng(2)
    W = rng.normal(size=(5, 5)) * 2
    W[1, 2] = -np.inf
    A, log_c = huber_law_scale(W)
    assert A.max() == pytest.approx(1.0) and A.min() >= 0.0 and A[1, 2] == 0.0
    la = log_permanent_enum(np.log(np.where(A > 0, A, 1e-300)))
    assert la + log_c == pytest.approx(log_permanent_enum(W), abs=1e-9)


@pytest.mark.parametrize("M", [2, 3, 4, 5, 6])
def test_chi_square_goodness_of_fit(M):
    # Pearson chi-square of 30,000 draws against exact enumeration, cells with expected count
    # < 5 pooled. Fixed seeds; the test fails at p < 1e-3, so under a correct sampler the
    # false-failure rate is 0.1% per size (0.5% for the five sizes together).
    rng = np.random.default_rng(10 + M)
    W = rng.normal(size=(M, M)) * 0.7
    if M >= 3:
        W[0, M - 1] = -np.inf  # a forbidden edge too
    P, p = permutation_probabilities_enum(W)
    n = 30_000
    s = huber_law_sample(W, size=(n,), rng=100 + M)
    if M >= 3:
        assert not (s[:, 0] == M - 1).any()
    assert chi_square_pvalue(s, P, p) > 1e-3  # p = 0 if a forbidden permutation is drawn


@pytest.mark.parametrize("M", [12, 16])
def test_sample_marginals_match_exact(M):
    # 4,000 draws; every cell within 5 binomial standard errors (+1e-3): per-cell false-failure
    # probability < 6e-7, so < 2e-4 over the M^2 cells.
    rng = np.random.default_rng(M)
    W = rng.normal(size=(M, M)) * 0.5
    mar = permutation_marginals(W)
    n = 4000
    s = huber_law_sample(W, size=(n,), rng=M + 1)
    emp = np.zeros((M, M))
    np.add.at(emp, (np.broadcast_to(np.arange(M), s.shape), s), 1.0)
    emp /= n
    se = np.sqrt(mar * (1 - mar) / n)
    assert (np.abs(emp - mar) <= 5 * se + 1e-3).all()


def test_permanent_estimate():
    rng = np.random.default_rng(5)
    W = rng.normal(size=(5, 5))
    lz = log_permanent_enum(W)
    est, rate, s = huber_law_log_permanent_estimate(W, n_samples=4000, rng=6)
    assert 0 < rate <= 1 and s.shape == (4000, 5)
    # relative s.e. of the rate estimate ~ sqrt((1 - rate) / 4000) < 0.02; allow 0.08 (4 s.e.)
    assert est == pytest.approx(lz, abs=0.08)


def test_shapes_and_batches():
    rng = np.random.default_rng(3)
    W = rng.normal(size=(2, 4, 4))
    assert huber_law_sample(W, rng=0).shape == (2, 4)
    s = huber_law_sample(W, size=(3, 2), rng=0)
    assert s.shape == (3, 2, 4)
    assert (np.sort(s, axis=-1) == np.arange(4)).all()
    assert huber_law_sample(W[0], rng=0).shape == (4,)
    with pytest.raises(ValueError, match="not compatible"):
        huber_law_sample(W, size=(3,), rng=0)


def test_errors():
    rng = np.random.default_rng(4)
    W = rng.normal(size=(30, 30)) * 3
    with pytest.raises(HuberLawTrialsExceeded, match="acceptance rate"):
        huber_law_sample(W, size=(5,), rng=0, max_trials=50)
    with pytest.raises(ValueError, match=f"M <= {HUBER_LAW_MAX_M}"):
        huber_law_sample(np.zeros((HUBER_LAW_MAX_M + 1, HUBER_LAW_MAX_M + 1)))
    W = np.zeros((3, 3))
    W[1] = -np.inf
    with pytest.raises(ValueError, match="all -inf"):
        huber_law_sample(W)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        huber_law_log_bound(np.full((2, 2), 2.0))


def test_sample_marginals_match_exact_dp_m20():
    # M = 20, 4,000 draws; same criterion as above (5 s.e. + 1e-3 per cell; false failure
    # < 3e-4 over the 400 cells).
    M = 20
    rng = np.random.default_rng(M)
    W = rng.normal(size=(M, M)) * 0.5
    mar = permutation_marginals(W)
    n = 4000
    s = huber_law_sample(W, size=(n,), rng=M + 1)
    emp = np.zeros((M, M))
    np.add.at(emp, (np.broadcast_to(np.arange(M), s.shape), s), 1.0)
    emp /= n
    se = np.sqrt(mar * (1 - mar) / n)
    assert (np.abs(emp - mar) <= 5 * se + 1e-3).all()


def test_no_permutation_refused_before_any_trial():
    # No row or column all -inf, yet no permutation: before, every trial was rejected and the
    # sampler reported HuberLawTrialsExceeded ("weights too spread ... use swap MCMC") after
    # max_trials trials (minutes at larger M and the default max_trials).
    X = np.array([[0, -np.inf, -np.inf], [0, -np.inf, -np.inf], [0, 0, 0.0]])
    big = np.zeros((60, 60))
    big[:2, 1:] = -np.inf
    for W in (X, big):
        with pytest.raises(ValueError, match=r"admit no permutation \(every one uses a -inf "
                           r"entry\): rows 0, 1 have finite entries only in column 0"):
            huber_law_sample(W, size=(1,), rng=0)
        with pytest.raises(ValueError, match="admit no permutation"):
            huber_law_log_permanent_estimate(W, rng=0)


def test_size_must_be_integers():
    W = np.zeros((3, 3))
    assert huber_law_sample(W, size=2, rng=0).shape == (2, 3)
    for size in (2.5, (2, 0.5), -1):
        with pytest.raises(ValueError, match="size must be a non-negative integer"):
            huber_law_sample(W, size=size, rng=0)
