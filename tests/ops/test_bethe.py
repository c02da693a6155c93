"""Tests of the Bethe PyTensor Ops: value, gradient, batching, backends."""

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.gradient import verify_grad

from pm_perm.kernels.bethe import bethe_log_permanent_and_marginals
from pm_perm.ops.bethe import bethe_log_permanent, bethe_marginals


@pytest.mark.parametrize("mode", ["NUMBA", "FAST_COMPILE"])
def test_value_and_gradient_match_kernel(mode):
    rng = np.random.default_rng(0)
    Wv = rng.normal(size=(2, 6, 6))
    W = pt.tensor3("W")
    lp = bethe_log_permanent(W)
    f = pytensor.function([W], [lp, pt.grad(lp.sum(), W), bethe_marginals(W)], mode=mode)
    v, g, m = f(Wv)
    v_ref, m_ref = bethe_log_permanent_and_marginals(Wv)
    np.testing.assert_allclose(v, v_ref, rtol=1e-12)
    np.testing.assert_allclose(g, m_ref, atol=1e-12)
    np.testing.assert_allclose(m, m_ref, atol=1e-12)


def test_verify_grad():
    rng = np.random.default_rng(1)
    verify_grad(bethe_log_permanent, [rng.normal(size=(5, 5))], rng=rng)


def test_errors_surface():
    W = pt.matrix("W")
    f = pytensor.function([W], bethe_log_permanent(W), mode="FAST_COMPILE")
    # no permutation: -inf, as the exact Op (test_no_permutation_gives_minus_inf_like_exact_op)
    assert f(np.array([[0.0, -np.inf], [-np.inf, -np.inf]])) == -np.inf
    with pytest.raises(TypeError, match="floating"):
        bethe_log_permanent(pt.lmatrix("L"))


def test_find_map_with_bethe_recovers_theta_m100():
    # Generated matching problem: N = 4 instances of M = 100, logits W_n = X_n @ theta with
    # D = 2 Gaussian features; observed permutations drawn by a long swap-MCMC chain (2,000
    # sweeps from the mode: approximate but well mixed at this spread). find_MAP of the
    # Bethe-normalised likelihood must land within 0.15 of theta (the MLE's s.e. here is ~0.03;
    # the rest allows for the Bethe bias).
    import pymc as pm

    from pm_perm.kernels.swap_mcmc import swap_mcmc_sample

    rng = np.random.default_rng(0)
    N, M, D = 4, 100, 2
    theta = np.array([1.0, -0.5])
    X = rng.normal(size=(N, M, M, D))
    W = X @ theta
    Y = np.stack([swap_mcmc_sample(W[n], 1, rng=n, burn_in_sweeps=2000)[0][0] for n in range(N)])
    rows = np.arange(M)
    score_feats = np.stack([X[n, rows, Y[n]].sum(0) for n in range(N)])  # (N, D)
    with pm.Model():
        th = pm.Normal("theta", 0.0, 5.0, shape=D)
        logits = pt.tensordot(pt.as_tensor_variable(X), th, axes=[[3], [0]])
        pm.Potential("lik", (pt.as_tensor_variable(score_feats) @ th).sum()
                     - bethe_log_permanent(logits).sum())
        fit = pm.find_MAP(progressbar=False, return_inferencedata=True, jitter=False)
    est = np.asarray(fit.posterior["theta"]).reshape(-1)
    print("theta MAP (Bethe):", est)
    np.testing.assert_allclose(est, theta, atol=0.15)


def test_value_and_gradient_share_one_fixed_point_run():
    # logp + dlogp compile to a single Bethe Op application (the gradient reuses output 1).
    from pm_perm.ops.bethe import BetheLogPermanentAndMarginals, BetheMarginals

    W = pt.matrix("W")
    lp = bethe_log_permanent(W)
    f = pytensor.function([W], [lp, pt.grad(lp, W)], mode="FAST_RUN")
    ops = [type(getattr(n.op, "core_op", n.op)) for n in f.maker.fgraph.apply_nodes]
    assert ops.count(BetheLogPermanentAndMarginals) == 1
    assert BetheMarginals not in ops


@pytest.mark.parametrize("mode", ["NUMBA", "FAST_COMPILE"])
def test_nan_inf_and_huge_logits_give_nan_like_the_exact_op(mode):
    # NaN, +inf or a finite logit beyond LOGIT_ABS_MAX: NaN value and gradient for that matrix
    # only (the numba path used to drop a NaN silently and return the other terms' value)
    W = pt.tensor3("W")
    lp = bethe_log_permanent(W)
    f = pytensor.function([W], [lp, pt.grad(lp.sum(), W), bethe_marginals(W)], mode=mode)
    Wv = np.random.default_rng(5).normal(size=(4, 3, 3))
    Wv[0, 0, 1] = np.nan
    Wv[1, 2, 2] = np.inf
    Wv[2, 1, 0] = 1.5e308
    v, g, m = f(Wv)
    for b in range(3):
        assert np.isnan(v[b]) and np.all(np.isnan(g[b])) and np.all(np.isnan(m[b]))
    v_ref, m_ref = bethe_log_permanent_and_marginals(Wv[3])
    np.testing.assert_allclose(v[3], v_ref, rtol=1e-12)
    np.testing.assert_allclose(g[3], m_ref, atol=1e-12)


@pytest.mark.parametrize("mode", ["NUMBA", "FAST_COMPILE"])
@pytest.mark.parametrize("op_cls", ["both", "value", "marginals"])
def test_non_convergence_raises_the_same_error_in_both_modes(mode, op_cls):
    # Two sweeps cannot reach tol 1e-9 on a spread-out matrix; the compiled path used to raise
    # a bare RuntimeError while the Python path raised BetheConvergenceError.
    from pytensor.tensor.blockwise import Blockwise

    from pm_perm.kernels.bethe import BetheConvergenceError
    from pm_perm.ops.bethe import (
        BetheLogPermanent,
        BetheLogPermanentAndMarginals,
        BetheMarginals,
    )

    W = pt.matrix("W")
    if op_cls == "both":
        out = Blockwise(BetheLogPermanentAndMarginals(max_iter=2))(W)[0]
    elif op_cls == "value":
        out = Blockwise(BetheLogPermanent(max_iter=2))(W)
    else:
        out = Blockwise(BetheMarginals(max_iter=2))(W)
    f = pytensor.function([W], out, mode=mode)
    # Seed 5: not a vertex case (bethe_vertex), and Newton from the two-sweep beliefs fails too
    # (on seed 0 it succeeds, and the certified result is returned without error).
    Wv = np.random.default_rng(5).normal(size=(8, 8)) * 3.0
    with pytest.raises(BetheConvergenceError, match="did not converge.*increase max_iter"):
        f(Wv)


@pytest.mark.parametrize("mode", ["NUMBA", "FAST_COMPILE"])
def test_no_permutation_gives_minus_inf_like_exact_op(mode):
    # Logits admitting no permutation: -inf value and zero beliefs and gradient, as the exact
    # Ops (so the distribution's parameter check refuses them). Before, an all -inf row raised
    # ValueError, and rows 0 and 1 sharing column 0 alone (no row or column all -inf) ran CCCP
    # to a ZeroDivisionError after ~30 s.
    from pm_perm.ops.permanent import log_permanent

    W = pt.tensor3("W")
    lp = bethe_log_permanent(W)
    f = pytensor.function([W], [lp, pt.grad(lp.sum(), W), bethe_marginals(W),
                                log_permanent(W)], mode=mode)
    Wv = np.zeros((3, 3, 3))
    Wv[0, 1] = -np.inf  # an all -inf row
    Wv[1, :2, 1:] = -np.inf  # rows 0 and 1 reach column 0 only
    Wv[2] = np.random.default_rng(2).normal(size=(3, 3))
    v, g, m, exact = f(Wv)
    assert np.array_equal(v[:2], [-np.inf, -np.inf]) and np.array_equal(exact[:2], v[:2])
    assert not g[:2].any() and not m[:2].any()
    v_ref, m_ref = bethe_log_permanent_and_marginals(Wv[2])
    np.testing.assert_allclose(v[2], v_ref, rtol=1e-12)
    np.testing.assert_allclose(m[2], m_ref, atol=1e-12)
