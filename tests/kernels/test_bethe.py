"""Tests of the Bethe approximation against brute-force enumeration and known bounds."""

import math

import numpy as np
import pytest

from pm_perm.kernels.assignment import max_weight_assignment_core
from pm_perm.kernels.bethe import (
    BETHE_MAX_M,
    BetheConvergenceError,
    _bp,
    bethe_core,
    bethe_log_permanent,
    bethe_log_permanent_and_marginals,
    bethe_marginals,
)
from pm_perm.kernels.permanent import log_permanent
from pm_perm.reference.permutations import log_permanent_enum


@pytest.mark.parametrize("M", [1, 2, 3, 4, 5, 6, 7])
@pytest.mark.parametrize("s", [0.1, 1.0, 3.0])
def test_lower_bound_gurvits_and_doubly_stochastic(M, s):
    rng = np.random.default_rng(100 * M + int(10 * s))
    W = rng.normal(size=(M, M)) * s
    v, g = bethe_log_permanent_and_marginals(W)
    lz = log_permanent_enum(W)
    # Gurvits: perm_B <= perm <= 2^(M/2) perm_B.
    assert v <= lz + 1e-9
    assert lz <= v + 0.5 * M * math.log(2) + 1e-9
    np.testing.assert_allclose(g.sum(0), 1.0, atol=1e-8)
    np.testing.assert_allclose(g.sum(1), 1.0, atol=1e-8)
    assert (g >= 0).all()


def test_m1_exact_and_m2_is_max():
    v, g = bethe_log_permanent_and_marginals(np.array([[0.7]]))
    assert v == pytest.approx(0.7) and g[0, 0] == pytest.approx(1.0)
    # For M = 2 the Bethe free energy is linear: perm_B = max(w(identity), w(swap)).
    rng = np.random.default_rng(2)
    for _ in range(5):
        W = rng.normal(size=(2, 2))
        v = bethe_log_permanent(W)
        assert v == pytest.approx(max(W[0, 0] + W[1, 1], W[0, 1] + W[1, 0]), abs=1e-7)


def test_uniform_closed_form():
    # For the all-ones matrix the beliefs are 1/M and
    # log perm_B = M log M + M (M - 1) log(1 - 1/M).
    M = 9
    v, g = bethe_log_permanent_and_marginals(np.zeros((M, M)))
    assert v == pytest.approx(M * math.log(M) + M * (M - 1) * math.log1p(-1 / M), abs=1e-9)
    np.testing.assert_allclose(g, 1 / M, atol=1e-10)


@pytest.mark.parametrize("s", [0.1, 1.0, 3.0, 10.0])
def test_gradient_is_beliefs_finite_differences(s):
    # Central differences with eps = 1e-5: truncation O(eps^2) plus fixed-point error ~tol/eps;
    # we require agreement to 1e-6.
    rng = np.random.default_rng(7)
    W = rng.normal(size=(6, 6)) * s
    _, g = bethe_log_permanent_and_marginals(W, tol=1e-12)
    eps = 1e-5
    fd = np.empty_like(W)
    for i in range(6):
        for j in range(6):
            Wp = W.copy()
            Wp[i, j] += eps
            Wm = W.copy()
            Wm[i, j] -= eps
            fd[i, j] = (bethe_log_permanent(Wp, tol=1e-12) - bethe_log_permanent(Wm, tol=1e-12)) / (
                2 * eps
            )
    np.testing.assert_allclose(fd, g, atol=1e-6)


def test_forbidden_edges_and_single_permutation():
    # Upper-triangular with -inf below the diagonal: the identity is the only permutation.
    M = 5
    rng = np.random.default_rng(3)
    W = rng.normal(size=(M, M))
    W[np.tril_indices(M, -1)] = -np.inf
    v, g = bethe_log_permanent_and_marginals(W)
    assert v == pytest.approx(np.trace(W), abs=1e-7)
    np.testing.assert_allclose(g, np.eye(M), atol=1e-7)
    # -inf entries keep zero belief in general.
    W = rng.normal(size=(M, M))
    W[0, 1] = W[2, 3] = -np.inf
    g = bethe_marginals(W)
    assert g[0, 1] == 0.0 and g[2, 3] == 0.0
    lz = log_permanent_enum(W)
    assert bethe_log_permanent(W) <= lz + 1e-9


def test_batched():
    rng = np.random.default_rng(11)
    W = rng.normal(size=(2, 3, 4, 4))
    v, g = bethe_log_permanent_and_marginals(W)
    assert v.shape == (2, 3) and g.shape == (2, 3, 4, 4)
    assert v[1, 2] == pytest.approx(bethe_log_permanent(W[1, 2]))


def test_errors():
    with pytest.raises(ValueError, match="all -inf"):
        bethe_log_permanent(np.array([[0.0, -np.inf], [-np.inf, -np.inf]]))
    # Rows/cols non-empty but no perfect matching: rows 0 and 1 both only reach column 0.
    W = np.full((3, 3), -np.inf)
    W[0, 0] = W[1, 0] = 0.0
    W[2, :] = 0.0
    with pytest.raises(ValueError, match="rows 0, 1 have finite entries only in column 0"):
        bethe_log_permanent(W, max_iter=200)
    with pytest.raises(ValueError, match="square"):
        bethe_log_permanent(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="NaN"):
        bethe_log_permanent(np.array([[np.nan]]))
    with pytest.raises(ValueError, match=f"M <= {BETHE_MAX_M}"):
        bethe_log_permanent(np.zeros((1, BETHE_MAX_M + 1, BETHE_MAX_M + 1)))
    with pytest.raises(ValueError, match="tol"):
        bethe_log_permanent(np.zeros((2, 2)), tol=0.0)


@pytest.mark.parametrize("s", [1.0, 3.0])
def test_fixed_point_satisfies_bethe_stationarity(s):
    # Stationarity of F_B on the Birkhoff polytope: log g + log(1 - g) - W = a_i + b_j for all
    # edges (Lagrange multipliers of the row/column constraints), i.e. the residual has no
    # interaction term. This checks the BP fixed point independently of how it was reached.
    rng = np.random.default_rng(21)
    M = 7
    W = rng.normal(size=(M, M)) * s
    _, g = bethe_log_permanent_and_marginals(W, tol=1e-12)
    one_minus = np.array([[g[i].sum() - g[i, j] for j in range(M)] for i in range(M)])
    R = np.log(g) + np.log(one_minus) - W
    inter = R - R.mean(1, keepdims=True) - R.mean(0, keepdims=True) + R.mean()
    assert np.abs(inter).max() < 1e-6


def test_bp_and_cccp_fallback_agree():
    # A matrix with a forced edge (row 0 has one finite entry) makes BP messages non-finite,
    # so the CCCP fallback runs; perturbing that entry slightly away from -inf (BP path) must
    # give nearly the same beliefs and value.
    rng = np.random.default_rng(4)
    M = 6
    W = rng.normal(size=(M, M)) * 2
    W[0, 1:] = -np.inf
    v1, g1 = bethe_log_permanent_and_marginals(W, tol=1e-11)
    W2 = W.copy()
    W2[0, 1:] = -40.0
    v2, g2 = bethe_log_permanent_and_marginals(W2, tol=1e-11)
    assert g1[0, 0] == pytest.approx(1.0)
    assert v1 == pytest.approx(v2, abs=1e-8)
    np.testing.assert_allclose(g1, g2, atol=1e-8)


def _shifted(W):
    # the rescaling bethe_core applies before iterating (row maxima, then column maxima)
    B = np.exp(W - W.max(1, keepdims=True))
    return B / B.max(0, keepdims=True)


# Matrices on which plain BP has not converged after 500 sweeps (it oscillates or crawls) but
# does converge eventually, after 2,075 / 9,041 / 39,876 / 2,252 / 4,984 sweeps at tol 1e-12;
# found by a search over seeds (the CMU house pairs behave the same at logit ranges of 30-300).
SLOW_BP = [(10, 6, 30.0), (136, 6, 30.0), (230, 6, 30.0), (45, 7, 10.0), (221, 6, 10.0)]


@pytest.mark.parametrize("seed, M, scale", SLOW_BP)
def test_slow_bp_cases_converge_and_agree_with_long_plain_bp(seed, M, scale):
    W = np.random.default_rng(seed).normal(size=(M, M)) * scale
    B = _shifted(W)
    G = np.zeros((M, M))
    assert not _bp(B, 1e-9, 500, G, 1.0)[0]  # the fallback path is what this test exercises
    ref = np.zeros((M, M))
    assert _bp(B, 1e-12, 200_000, ref, 1.0)[0]
    v, g, n_iter, err = bethe_core(np.ascontiguousarray(W), 1e-9, 100_000)
    assert err <= 1e-9
    # tol bounds the change per sweep; with a contraction factor close to 1 the distance to the
    # fixed point is larger (measured: 1e-7 to 3.3e-6 on these five)
    np.testing.assert_allclose(g, ref, atol=1e-5)
    v2, g2 = bethe_log_permanent_and_marginals(W)
    assert v2 == v
    # Gurvits / Anari-Rezaei bounds against the exact permanent
    lz = log_permanent_enum(W)
    assert v <= lz + 1e-9
    assert lz <= v + M / 2 * math.log(2) + 1e-9


@pytest.mark.parametrize("s", [1e3, 1e6, 1e10])
@pytest.mark.parametrize("M", [3, 6, 9])
def test_logit_spreads_beyond_exp_range(M, s):
    # Spreads of thousands of nats and more: exp underflows on most edges. The solver rescales by
    # the max-weight matching's dual potentials, so the result is the near-deterministic limit:
    # beliefs on the max-weight matching, value within the Gurvits bounds of the exact value.
    # (Before, seed 6 / M 6 / s 1e3 returned 7309 > log perm = 6891 with NaN beliefs, and s 1e10
    # raised "no permutation has finite weight".)
    W = np.random.default_rng(M).normal(size=(M, M)) * s
    v, g = bethe_log_permanent_and_marginals(W)
    lz = log_permanent(W)
    eps = 1e-14 * M * np.abs(W).max()  # float64 rounding of sums of M logits
    assert v <= lz + eps
    assert lz <= v + M / 2 * math.log(2) + eps
    assert np.all(np.isfinite(g))
    np.testing.assert_allclose(g.sum(0), 1.0, atol=1e-9)
    np.testing.assert_allclose(g.sum(1), 1.0, atol=1e-9)
    col = max_weight_assignment_core(W)[0]
    np.testing.assert_allclose(g[np.arange(M), col], 1.0, atol=1e-6)


def test_no_permutation_without_an_all_inf_row_is_refused_at_once():
    # Rows 0 and 1 reach column 0 only (no row or column all -inf): no permutation. Before,
    # BP failed, CCCP's scalings diverged, and after ~30 s numba raised a bare
    # ZeroDivisionError; bethe_core now checks the pattern first.
    from pm_perm.kernels.bethe import _cccp

    X = np.array([[0, -np.inf, -np.inf], [0, -np.inf, -np.inf], [0, 0, 0.0]])
    for f in (bethe_log_permanent, bethe_marginals, bethe_log_permanent_and_marginals):
        with pytest.raises(ValueError, match=r"^logits admit no permutation \(every one uses a "
                           r"-inf entry\): rows 0, 1 have finite entries only in column 0"):
            f(X)
    v, g, n_iter, err = bethe_core(X, 1e-9, 100_000)
    assert v == -np.inf and not g.any() and n_iter == 0
    with pytest.raises(ValueError, match=r"^logits\[1, 0\] admit no permutation"):
        bethe_log_permanent(np.stack([np.zeros((2, 3, 3)), np.stack([X, np.zeros((3, 3))])]))
    # CCCP itself, run on such a support, stops unconverged instead of dividing by zero
    n, err = _cccp(np.exp(X), 1e-9, 100_000, np.empty((3, 3)))
    assert err == np.inf and n < 100_000


def test_non_convergence_still_raises_convergence_error():
    # a feasible, spread-out matrix that two sweeps cannot settle (the check above does not
    # turn genuine non-convergence into a "no permutation" error)
    W = np.random.default_rng(5).normal(size=(8, 8)) * 3.0
    with pytest.raises(BetheConvergenceError, match="did not converge in"):
        bethe_log_permanent(W, max_iter=2)
