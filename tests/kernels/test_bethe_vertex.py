"""Tests of the vertex certificate of the Bethe solver (pm_perm.kernels.bethe_vertex)."""

import math

import numpy as np
import pytensor.tensor as pt
import pytest
from pytensor.gradient import verify_grad
from scipy.optimize import linear_sum_assignment

from pm_perm.kernels.bethe import DAMPED_BP_SWEEPS, _bp, bethe_core
from pm_perm.kernels.bethe_vertex import VERTEX_MARGIN, vertex_certificate
from pm_perm.kernels.permanent import log_permanent


def _free_energy(W, G):
    """F_B(G) with 0 log 0 = 0, for exactly doubly stochastic G (no saturation tricks)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        gl = np.where(G > 0, G * np.log(np.where(G > 0, G, 1.0)), 0.0)
        hl = np.where(G < 1, (1 - G) * np.log(np.where(G < 1, 1 - G, 1.0)), 0.0)
    return -(G * W).sum() + gl.sum() - hl.sum()


def _rho(W):
    """Spectral radius of K (module docstring), by a dense eigensolver."""
    M = W.shape[0]
    _, col = linear_sum_assignment(-W)
    K = np.exp(W[:, col] - W[np.arange(M), col][:, None])
    np.fill_diagonal(K, 0.0)
    return np.abs(np.linalg.eigvals(K)).max(), col


def _sinkhorn(X, sweeps=2000):
    for _ in range(sweeps):
        X = X / X.sum(1, keepdims=True)
        X = X / X.sum(0, keepdims=True)
    return X


def _with_rho(seed, M, target):
    """Logits whose K has spectral radius ``target`` (off-matching logits shifted by a constant;
    the max-weight matching stays the same when target < 1)."""
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(M, M)) * 3.0
    rho, col = _rho(W)
    off = np.ones((M, M), bool)
    off[np.arange(M), col] = False
    W[off] += math.log(target / rho)
    return W


def test_two_by_two_is_always_the_larger_matching():
    # perm_B of a 2 x 2 matrix is the larger of the two matching weights (Vontobel 2013):
    # rho = sqrt(B12 B21 / (B11 B22)) <= 1 for the max-weight matching.
    rng = np.random.default_rng(0)
    for _ in range(50):
        W = rng.normal(size=(2, 2)) * 2.0
        ok, col, value, bound = vertex_certificate(W)
        best = max(W[0, 0] + W[1, 1], W[0, 1] + W[1, 0])
        gap = abs((W[0, 0] + W[1, 1]) - (W[0, 1] + W[1, 0]))
        if gap > 1e-6:
            assert ok
            assert value == pytest.approx(best, abs=1e-12)
            assert _rho(W)[0] <= bound <= 1.0 - VERTEX_MARGIN


def test_all_equal_logits_are_interior():
    for M in (3, 5, 8):  # rho = M - 1 > 1: the uniform matrix is the minimiser
        ok, _, _, bound = vertex_certificate(np.zeros((M, M)))
        assert not ok and bound == math.inf


def test_certificate_agrees_with_the_spectral_radius():
    # Certified exactly when rho(K) < 1 (away from the margin), for M = 2..7 and spreads 0.3-30;
    # the Collatz-Wielandt bound is never below rho.
    rng = np.random.default_rng(1)
    n_vertex = n_interior = 0
    for _ in range(600):
        M = int(rng.integers(2, 8))
        W = rng.normal(size=(M, M)) * float(rng.choice([0.3, 1.0, 3.0, 10.0, 30.0]))
        rho, col = _rho(W)
        ok, col2, value, bound = vertex_certificate(W)
        if rho < 1.0 - 1e-6:
            assert ok, rho
            assert rho <= bound * (1 + 1e-12)
            assert value == pytest.approx(W[np.arange(M), col].sum(), abs=1e-9)
            n_vertex += 1
        elif rho > 1.0 + 1e-6:
            assert not ok, rho
            n_interior += 1
    assert n_vertex > 100 and n_interior > 100


def test_directional_derivative_formula():
    # The one-sided derivative of F_B at the vertex towards X (module docstring) against a
    # finite difference; it is what the certificate bounds from below by -log rho.
    rng = np.random.default_rng(2)
    for _ in range(5):
        M = 5
        W = rng.normal(size=(M, M)) * 3.0
        _, col = linear_sum_assignment(-W)
        P = np.zeros((M, M))
        P[np.arange(M), col] = 1.0
        X = _sinkhorn(rng.random((M, M)))
        eps = 1e-7
        fd = (_free_energy(W, P + eps * (X - P)) - _free_energy(W, P)) / eps
        psi = 0.0
        for i in range(M):
            off = [j for j in range(M) if j != col[i]]
            u = X[i, off].sum()
            psi += sum(X[i, j] * (W[i, col[i]] - W[i, j] + math.log(X[i, j])) for j in off)
            psi -= u * math.log(u)
        assert fd == pytest.approx(psi, rel=1e-5, abs=1e-5)


@pytest.mark.parametrize("seed", range(4))
def test_certified_vertex_beats_every_doubly_stochastic_matrix_tried(seed):
    # rho = 0.9: F_B(P) <= F_B(X) for X near P (every direction) and far from it.
    M = 6
    W = _with_rho(seed, M, 0.9)
    ok, col, value, _ = vertex_certificate(W)
    assert ok
    P = np.zeros((M, M))
    P[np.arange(M), col] = 1.0
    assert -_free_energy(W, P) == pytest.approx(value, abs=1e-12)
    rng = np.random.default_rng(100 + seed)
    for _ in range(40):
        X = _sinkhorn(rng.random((M, M)) ** 3)
        for eps in (1e-6, 1e-3, 0.1, 1.0):
            assert _free_energy(W, P + eps * (X - P)) >= _free_energy(W, P) - 1e-12
    # ... and just above rho = 1 an interior point beats the vertex, so it is not certified.
    W2 = _with_rho(seed, M, 1.5)
    assert not vertex_certificate(W2)[0]
    v, G, _, err = bethe_core(np.ascontiguousarray(W2), 1e-10, 100_000)
    assert err <= 1e-10
    P2 = np.zeros((M, M))
    P2[np.arange(M), vertex_certificate(W2)[1]] = 1.0
    assert _free_energy(W2, G) < _free_energy(W2, P2) - 1e-6


@pytest.mark.parametrize("seed", range(3))
def test_bethe_core_returns_the_vertex_where_bp_crawls(seed):
    # rho = 1 - 1e-5: the beliefs creep towards the vertex, and neither plain BP (500 sweeps)
    # nor damped BP converges; bethe_core certifies the vertex instead, exactly.
    M = 7
    W = _with_rho(seed, M, 1.0 - 1e-5)
    B = np.exp(W - W.max(1, keepdims=True))
    B /= B.max(0, keepdims=True)
    G = np.zeros((M, M))
    assert not _bp(B, 1e-9, 500, G, 1.0)[0]
    G = np.zeros((M, M))
    assert not _bp(B, 1e-9, DAMPED_BP_SWEEPS, G, 0.5)[0]
    v, G, n, err = bethe_core(np.ascontiguousarray(W), 1e-9, 100_000)
    _, col = linear_sum_assignment(-W)
    assert err == 0.0 and n == 500
    assert v == pytest.approx(W[np.arange(M), col].sum(), abs=1e-12)
    np.testing.assert_array_equal(G, np.eye(M)[col])
    # Gurvits: the Bethe value is a lower bound of the exact log-permanent, within M/2 log 2
    exact = log_permanent(W)
    assert v <= exact + 1e-12 and exact - v <= M / 2 * math.log(2)


def test_op_gradient_at_a_vertex():
    # Near a certified vertex log perm_B is the matching weight, so its gradient is the
    # permutation matrix, and finite differences agree.
    from pm_perm.ops.bethe import bethe_log_permanent

    M = 5
    W = _with_rho(0, M, 0.5)
    assert vertex_certificate(W)[0]
    verify_grad(bethe_log_permanent, [W], rng=np.random.default_rng(0), eps=1e-6)
    w = pt.dmatrix("w")
    g = pt.grad(bethe_log_permanent(w), w)
    _, col = linear_sum_assignment(-W)
    np.testing.assert_allclose(g.eval({w: W}), np.eye(M)[col], atol=1e-9)
