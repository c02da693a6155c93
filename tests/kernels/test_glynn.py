"""Glynn's formula (pm_perm.kernels.glynn): exact log-permanent and marginals in O(M^2) memory."""

import math

import numpy as np
import pytest
from scipy import stats

from pm_perm.kernels.glynn import (
    GLYNN_MAX_M,
    glynn_log_permanent,
    glynn_log_permanent_and_marginals,
    glynn_sample_permutations,
)
from pm_perm.kernels.permanent import log_permanent_and_marginals
from pm_perm.reference.permutations import (
    all_permutations,
    log_permanent_enum,
    permutation_marginals_enum,
)


@pytest.mark.parametrize("M", range(1, 8))
@pytest.mark.parametrize("scale", [0.0, 1.0, 5.0])
def test_matches_enumeration_for_every_small_m(M, scale):
    rng = np.random.default_rng(10 * M + int(scale))
    W = scale * rng.normal(size=(3, M, M))
    if M > 1:
        W[1, 0, 1:] = -np.inf  # forbidden edges: row 0 must take column 0
    v, P = glynn_log_permanent_and_marginals(W)
    np.testing.assert_allclose(v, log_permanent_enum(W), rtol=0, atol=1e-13)
    np.testing.assert_allclose(P, permutation_marginals_enum(W), rtol=0, atol=1e-13)
    np.testing.assert_allclose(glynn_log_permanent(W), v, rtol=0, atol=1e-13)


@pytest.mark.parametrize("M,scale", [(10, 0.1), (12, 1.0), (14, 3.0), (16, 10.0), (16, 30.0)])
def test_agrees_with_the_dp_at_moderate_m(M, scale):
    """Relative error of perm within 1e-12 and marginals within 1e-12 (absolute) of the DP."""
    W = scale * np.random.default_rng(M).normal(size=(M, M))
    v, P = glynn_log_permanent_and_marginals(W)
    v_dp, P_dp = log_permanent_and_marginals(W)
    assert abs(math.expm1(v - v_dp)) < 1e-12
    np.testing.assert_allclose(P, P_dp, rtol=0, atol=1e-12)
    assert abs(math.expm1(glynn_log_permanent(W) - v_dp)) < 1e-12


def test_all_ones_matrix_gives_m_factorial():
    """The uniform matrix is Glynn's worst cancellation: perm = M! exactly known."""
    for M in (8, 14, 18):
        v, P = glynn_log_permanent_and_marginals(np.zeros((M, M)))
        assert abs(math.expm1(v - math.lgamma(M + 1))) < 1e-12
        np.testing.assert_allclose(P, 1.0 / M, rtol=1e-11)


def test_infeasible_gives_minus_inf_and_zero_marginals():
    W = np.zeros((5, 5))
    W[2, :] = -np.inf
    v, P = glynn_log_permanent_and_marginals(W)
    assert v == -np.inf and np.all(P == 0.0)
    assert glynn_log_permanent(W) == -np.inf


def test_bad_input_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="NaN"):
        glynn_log_permanent(np.array([[0.0, np.nan], [0.0, 0.0]]))
    with pytest.raises(ValueError, match=r"\+inf"):
        glynn_log_permanent_and_marginals(np.array([[0.0, np.inf], [0.0, 0.0]]))
    with pytest.raises(ValueError, match="square"):
        glynn_log_permanent(np.zeros((2, 3)))
    with pytest.raises(ValueError, match=f"GLYNN_MAX_M = {GLYNN_MAX_M}.*bethe"):
        glynn_log_permanent(np.zeros((GLYNN_MAX_M + 1, GLYNN_MAX_M + 1)))


def test_sampler_chi_square_at_m4():
    """Row-by-row draws from Glynn marginals are exact: chi-square over all 24 permutations,
    8,000 draws, fixed seed; fails if p < 1e-4 (false-failure rate 1e-4)."""
    W = np.random.default_rng(7).normal(size=(4, 4))
    W[0, 3] = -np.inf
    draws = glynn_sample_permutations(W, size=(8000,), rng=8)
    assert draws.shape == (8000, 4)
    perms = all_permutations(4)
    p = np.exp(W[np.arange(4), perms].sum(-1) - log_permanent_enum(W))
    counts = np.array([(draws == q).all(-1).sum() for q in perms])
    assert counts[p == 0].sum() == 0
    keep = p > 0
    chi2 = ((counts[keep] - 8000 * p[keep]) ** 2 / (8000 * p[keep])).sum()
    assert stats.chi2.sf(chi2, keep.sum() - 1) > 1e-4


def test_sampler_refuses_bad_input():
    with pytest.raises(ValueError, match="NaN"):
        glynn_sample_permutations(np.array([[0.0, np.nan], [0.0, 0.0]]))
    with pytest.raises(ValueError, match="no permutation"):
        glynn_sample_permutations(np.array([[-np.inf, -np.inf], [0.0, 0.0]]))
    with pytest.raises(ValueError, match="broadcast"):
        glynn_sample_permutations(np.zeros((2, 3, 3)), size=(3,))


def test_result_does_not_depend_on_the_thread_count():
    """The terms are split into a fixed number of chunks reduced in a fixed order, so one and
    two numba threads give bit-identical results (needs NUMBA_NUM_THREADS >= 2 to run)."""
    import numba

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("NUMBA_NUM_THREADS < 2: only one thread available")
    W = np.random.default_rng(9).normal(size=(16, 16))
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        v1, P1 = glynn_log_permanent_and_marginals(W)
        numba.set_num_threads(2)
        v2, P2 = glynn_log_permanent_and_marginals(W)
    finally:
        numba.set_num_threads(before)
    assert v1 == v2 and np.array_equal(P1, P2)


def test_glynn_sampler_refuses_a_fractional_size():
    """size=2.5 was truncated to 2 draws without a word."""
    from pm_perm.kernels.glynn import glynn_sample_permutations

    with pytest.raises(ValueError, match="size must be a non-negative integer"):
        glynn_sample_permutations(np.zeros((3, 3)), size=2.5, rng=0)
