"""Tests of the conditional-Bernoulli PyTensor Ops: value, gradient, batching, backends."""

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.gradient import NullTypeGradError, verify_grad

from pm_perm._modes import PYTHON_MODE
from pm_perm.ops.cardinality import (
    LogESP,
    LogESPAndMarginals,
    conditional_marginals,
    expected_topk_gain,
    log_esp,
    log_expected_topk_gain,
)
from pm_perm.reference import subsets as S

# verify_grad compiles many small graphs: the Python VM (calling the same njit kernels) keeps
# this file fast; the numba backend is covered by the value/gradient and one-Op tests.
# PyTensor's Python linker with the default rewrites (PYTHON_MODE, the other tests' mode), not
# FAST_COMPILE, whose linker compiles C code for the inner graph of a softmax (the count-label
# test files of tests/ops and tests/distributions on an empty PyTensor cache: 61 -> 41 CPU s).
FAST = PYTHON_MODE


@pytest.mark.parametrize("mode", ["NUMBA", FAST], ids=["NUMBA", "python"])
def test_value_and_gradient_against_enumeration(mode):
    rng = np.random.default_rng(0)
    D = 7
    T = rng.normal(size=(D + 1, D)) * 2
    K = np.arange(D + 1)
    th, k = pt.matrix("th"), pt.lvector("k")
    v = log_esp(th, k)
    outs = [v, pt.grad(v.sum(), th), conditional_marginals(th, k)]
    f = pytensor.function([th, k], outs, mode=mode)
    val, grad, marg = f(T, K)
    for i in range(D + 1):
        assert val[i] == pytest.approx(S.log_esp(T[i], K[i]), rel=1e-13, abs=1e-13)
        np.testing.assert_allclose(grad[i], S.conditional_marginals(T[i], K[i]), atol=1e-13)
    np.testing.assert_array_equal(grad, marg)


@pytest.mark.parametrize("k", [1, 2, 4])
def test_verify_grad(k):
    rng = np.random.default_rng(k)
    verify_grad(lambda t: log_esp(t, pt.constant(k)), [rng.normal(size=6)], rng=rng, mode=FAST)
    verify_grad(lambda t: log_esp(t, pt.constant(k)), [rng.normal(size=(3, 6))], rng=rng, mode=FAST)


def test_verify_grad_extreme_logits():
    rng = np.random.default_rng(2)
    theta = 50.0 * np.array([1, -1, 1, -1, 1, 0.1])
    verify_grad(lambda t: log_esp(t, pt.constant(3)), [theta], rng=rng, mode=FAST)


def test_value_only_graphs_use_the_cheaper_op():
    # logp alone: the rewrite swaps in the value-only Op; logp + gradient keep one two-output Op
    th, k = pt.matrix("th"), pt.lvector("k")
    v = log_esp(th, k)
    T = np.random.default_rng(3).normal(size=(2, 9))
    K = np.array([2, 5])
    f = pytensor.function([th, k], v, mode="NUMBA")
    ops = [type(getattr(n.op, "core_op", n.op)) for n in f.maker.fgraph.apply_nodes]
    assert LogESP in ops and LogESPAndMarginals not in ops
    np.testing.assert_allclose(f(T, K), [S.log_esp(T[i], K[i]) for i in range(2)], rtol=1e-13)
    g = pytensor.function([th, k], [v, pt.grad(v.sum(), th)], mode="NUMBA")
    ops = [type(getattr(n.op, "core_op", n.op)) for n in g.maker.fgraph.apply_nodes]
    assert ops.count(LogESPAndMarginals) == 1 and LogESP not in ops


def test_value_only_op_gradient():
    from pytensor.tensor.blockwise import Blockwise

    rng = np.random.default_rng(4)
    value_only = Blockwise(LogESP())
    verify_grad(lambda t: value_only(t, pt.constant(3)), [rng.normal(size=(2, 6))], rng=rng,
                mode=FAST)


def test_infer_shape_does_not_run_the_kernel():
    th, k = pt.matrix("th"), pt.lvector("k")
    f = pytensor.function([th, k], [log_esp(th, k).shape, conditional_marginals(th, k).shape])
    ops = [type(getattr(n.op, "core_op", n.op)) for n in f.maker.fgraph.apply_nodes]
    assert LogESPAndMarginals not in ops
    s1, s2 = f(np.zeros((4, 5)), np.zeros(4, dtype=np.int64))
    assert tuple(s1) == (4,) and tuple(s2) == (4, 5)


def test_broadcasting_counts():
    th = pt.tensor("th", shape=(3, 6))
    k = pt.tensor("k", dtype="int64", shape=(4, 1))
    T = np.random.default_rng(1).normal(size=(3, 6))
    out = log_esp(th, k).eval({th: T, k: np.arange(4)[:, None]}, mode=FAST)
    assert out.shape == (4, 3)
    assert out[2, 1] == pytest.approx(S.log_esp(T[1], 2), rel=1e-13)


def test_infeasible_count_is_minus_inf_with_zero_gradient():
    th = pt.vector("th")
    v = log_esp(th, 3)
    f = pytensor.function([th], [v, pt.grad(v, th)], mode=FAST)
    val, g = f(np.array([0.0, 1.0, -np.inf]))
    assert val == -np.inf and np.all(g == 0)


def test_bad_types_and_third_derivative():
    with pytest.raises(TypeError, match="integer"):
        log_esp(pt.vector("t"), pt.scalar("k"))
    th = pt.vector("th")
    h = pytensor.grad((conditional_marginals(th, 2) ** 2).sum(), th)
    with pytest.raises(NullTypeGradError):
        pytensor.grad(h.sum(), th)


@pytest.mark.parametrize("mode", ["NUMBA", FAST], ids=["NUMBA", "python"])
def test_hessian_is_the_conditional_covariance(mode):
    rng = np.random.default_rng(8)
    D = 7
    theta = rng.normal(size=D) * 2
    th = pt.vector("th")
    k = pt.lscalar("k")
    f = pytensor.function([th, k], pytensor.gradient.hessian(log_esp(th, k), th), mode=mode)
    for kk in range(D + 1):
        Y, lp = S.conditional_bernoulli_log_pmf(theta, kk)
        P = np.exp(lp)
        m = P @ Y
        cov = (Y * P[:, None]).T @ Y - np.outer(m, m)
        np.testing.assert_allclose(f(theta, kk), cov, atol=1e-12)


def test_verify_grad_of_marginals():
    rng = np.random.default_rng(9)
    w = rng.normal(size=(2, 6))
    theta = rng.normal(size=(2, 6))
    theta[1, 2] = 40.0

    def f(t):
        return (pt.constant(w) * conditional_marginals(t, pt.constant(np.array([2, 3])))).sum()

    verify_grad(f, [theta], rng=rng, mode=FAST)


def test_expected_topk_gain_against_enumeration_and_gradient():
    rng = np.random.default_rng(4)
    D = 6
    T = rng.normal(size=(3, D))
    target = np.array([0, 3, 5])
    th, t = pt.matrix("th"), pt.lvector("t")
    for K in (1, 2, 4):
        g = expected_topk_gain(th, t, K).eval({th: T, t: target}, mode=FAST)
        ref = [S.conditional_marginals(T[i], K)[target[i]] for i in range(3)]
        np.testing.assert_allclose(g, ref, atol=1e-13)
    # K = 1 is the softmax probability of the target
    soft = np.exp(T[np.arange(3), target]) / np.exp(T).sum(-1)
    top1 = expected_topk_gain(th, t, 1).eval({th: T, t: target}, mode=FAST)
    np.testing.assert_allclose(top1, soft)

    def log_gain(x):
        return log_expected_topk_gain(x, pt.constant(target), 3)

    verify_grad(log_gain, [T], rng=rng, mode=FAST)


def test_expected_topk_gain_refuses_out_of_range_target_and_K():
    """A target outside 0..D-1 matched no class and gave e_{K-1}/e_K, a plausible value; a K
    outside 1..D gave NaN. Known when the graph is built: ValueError; symbolic: -inf."""
    theta = np.array([1.0, 0.5, -0.2, 0.3])
    for target in (4, -1, 10, np.array([0, 4])):
        with pytest.raises(ValueError, match="target must be a class index in 0..3; got"):
            expected_topk_gain(theta, target, 2)
    for K in (0, 5, -1):
        with pytest.raises(ValueError, match=f"K must be the number of predictions in 1..4; "
                                             f"got {K}"):
            expected_topk_gain(theta, 0, K)
    with pytest.raises(TypeError, match="target must be a class index, an integer tensor"):
        expected_topk_gain(theta, 1.0, 2)
    th, t, k = pt.matrix("th"), pt.lvector("t"), pt.lscalar("k")
    g = log_expected_topk_gain(th, t, k)
    f = pytensor.function([th, t, k], [g, pt.grad(g.sum(), th)], mode=FAST)
    T = np.tile(theta, (3, 1))
    val, grad = f(T, np.array([3, 4, -1]), 2)
    assert val[0] == pytest.approx(np.log(S.conditional_marginals(theta, 2)[3]), abs=1e-13)
    assert np.all(val[1:] == -np.inf) and np.all(np.isfinite(grad)) and np.all(grad[1:] == 0)
    for K in (0, 5):
        val, grad = f(T, np.array([0, 1, 2]), K)
        assert np.all(val == -np.inf) and np.all(grad == 0)


def test_expected_topk_gain_with_fewer_than_K_finite_logits_is_zero_not_nan():
    """Only 2 finite logits and K = 3: no 3 items can be predicted. The gain was NaN (-inf minus
    -inf) with a gradient of 1 on the target; it is 0 (log -inf) with a zero gradient. A row
    with K finite logits keeps its exact value (here 1: all of them are predicted)."""
    th = pt.vector("th")
    g = log_expected_topk_gain(th, 0, 3)
    f = pytensor.function([th], [g, pt.grad(g, th)], mode=FAST)
    val, grad = f(np.array([0.5, 1.0, -np.inf, -np.inf]))
    assert val == -np.inf and np.all(grad == 0)
    val, grad = f(np.array([0.5, 1.0, 0.2, -np.inf]))
    assert val == pytest.approx(0.0, abs=1e-13) and np.allclose(grad, 0.0, atol=1e-12)


@pytest.mark.parametrize("mode", ["NUMBA", FAST], ids=["NUMBA", "python"])
def test_nan_or_posinf_logits_give_nan_not_a_crash(mode):
    # The distributions reject such logits with check_parameters; the Op itself must not
    # divide by zero or loop on them.
    th = pt.vector("th")
    v = log_esp(th, 2)
    f = pytensor.function([th], [v, pt.grad(v, th)], mode=mode)
    for bad in (np.nan, np.inf):
        val, g = f(np.array([0.0, bad, 1.0]))
        assert np.isnan(val) and np.all(np.isnan(g))


def test_python_linker_runs_the_batch_in_one_call(monkeypatch):
    """On the Python linker each Op runs the whole batch in one compiled loop (the core Ops'
    ``gufunc_spec``), not ``perform`` once per row, and gives numba's results bit for bit:
    broadcast batch dimensions, -inf / NaN logits, counts 0, D and beyond, the value-only Op,
    the marginals and the Hessian-vector products."""
    from pm_perm.ops.cardinality import ConditionalCovarianceDot, _cov_dot

    rng = np.random.default_rng(11)
    D = 6
    T = rng.normal(size=(3, 1, D)) * 3
    T[0, 0, 2] = -np.inf
    T[1, 0, 4] = np.nan
    K = np.array([[0, 2, 3, D, D + 1]])  # (1, 5): broadcast against the logits' (3, 1)
    V = rng.normal(size=(1, 5, D))
    th = pt.tensor("th", shape=(None, 1, D))
    k = pt.tensor("k", dtype="int64", shape=(1, None))
    v = pt.tensor("v", shape=(1, None, D))
    value = log_esp(th, k)
    outs = [value, pt.grad(value.sum(), th), _cov_dot(th, k, v)]
    numba_results = pytensor.function([th, k, v], outs, mode="NUMBA")(T, K, V)

    def per_row(*args):
        raise AssertionError("perform ran once per row")

    for op in (LogESP, LogESPAndMarginals, ConditionalCovarianceDot):
        monkeypatch.setattr(op, "perform", per_row)
    f_value = pytensor.function([th, k], value, mode=FAST)
    assert any(isinstance(getattr(n.op, "core_op", None), LogESP)
               for n in f_value.maker.fgraph.apply_nodes)  # the value-only Op is used
    f = pytensor.function([th, k, v], outs, mode=FAST)
    results = [f_value(T, K), *f(T, K, V)]
    for got, want in zip(results, [numba_results[0], *numba_results], strict=True):
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    assert np.isnan(results[0][1]).all() and np.isfinite(results[0][2, :4]).all()
    assert results[0][0, 3] == -np.inf  # k = D with a -inf logit: infeasible
    assert np.all(results[0][[0, 2], 4] == -np.inf) and np.all(results[3][[0, 2], 4] == 0.0)


def test_python_linker_covariance_dot_refuses_vectors_of_another_length():
    from pm_perm.ops.cardinality import _cov_dot

    th, v = pt.matrix("th"), pt.matrix("v")
    f = pytensor.function([th, v], _cov_dot(th, np.int64(1), v), mode=FAST)
    with pytest.raises(ValueError, match="theta and v must have the same length; got 5 and 4"):
        f(np.zeros((2, 5)), np.zeros((2, 4)))
