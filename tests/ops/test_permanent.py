"""PyTensor Ops of the exact permanent: values, gradients, fusion rewrite, backends, errors."""

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.gradient import verify_grad

from pm_perm.kernels.permanent import log_permanent_and_marginals as kernel_both
from pm_perm.ops.permanent import (
    LogPermanent,
    LogPermanentAndMarginals,
    log_permanent,
    log_permanent_and_marginals,
    permutation_marginals,
)


def _ops_in(f):
    """Names of the permanent core Ops in a compiled function (inner graphs included)."""
    text = pytensor.dprint(f, file="str")
    names = ("LogPermanent{", "PermutationMarginals{", "LogPermanentAndMarginals{")
    return {n[:-1]: text.count(n) for n in names}


@pytest.mark.parametrize("mode", ["NUMBA", "FAST_COMPILE"])
def test_value_gradient_marginals_match_kernel(mode):
    rng = np.random.default_rng(0)
    Wv = rng.normal(size=(3, 6, 6))
    Wv[0, 1, :4] = -np.inf
    W = pt.tensor3("W")
    lp = log_permanent(W)
    f = pytensor.function([W], [lp, pt.grad(lp.sum(), W), permutation_marginals(W)], mode=mode)
    v, g, m = f(Wv)
    v_ref, m_ref = kernel_both(Wv)
    np.testing.assert_allclose(v, v_ref, atol=1e-13)
    np.testing.assert_allclose(g, m_ref, atol=1e-13)
    np.testing.assert_allclose(m, m_ref, atol=1e-13)
    both = pytensor.function([W], list(log_permanent_and_marginals(W)), mode=mode)(Wv)
    np.testing.assert_allclose(both[0], v_ref, atol=1e-13)


def test_value_and_gradient_are_fused_value_alone_is_not():
    W = pt.tensor3("W")
    lp = log_permanent(W)
    f = pytensor.function([W], [lp, pt.grad(lp.sum(), W)])
    counts = _ops_in(f)
    assert counts["LogPermanentAndMarginals"] >= 1
    assert counts["LogPermanent"] == 0 and counts["PermutationMarginals"] == 0
    counts = _ops_in(pytensor.function([W], lp))
    assert counts["LogPermanent"] >= 1 and counts["LogPermanentAndMarginals"] == 0


@pytest.mark.parametrize("shape", [(5, 5), (2, 4, 4), (1, 1)])
def test_verify_grad(shape):
    rng = np.random.default_rng(1)
    verify_grad(log_permanent, [rng.normal(size=shape)], rng=rng)


def test_verify_grad_through_fused_op():
    rng = np.random.default_rng(2)
    verify_grad(lambda w: log_permanent_and_marginals(w)[0], [rng.normal(size=(4, 4))], rng=rng)


def test_infer_shape_does_not_run_the_kernel():
    W = pt.tensor3("W")
    f = pytensor.function([W], [log_permanent(W).shape, permutation_marginals(W).shape])
    assert not any(_ops_in(f).values())
    s1, s2 = f(np.zeros((2, 3, 3)))
    assert tuple(s1) == (2,) and tuple(s2) == (2, 3, 3)


def test_nan_in_nan_out_and_errors():
    W = pt.matrix("W")
    f = pytensor.function([W], log_permanent(W))
    assert np.isnan(f(np.array([[0.0, np.nan], [0.0, 0.0]])))
    assert np.isnan(f(np.array([[0.0, np.inf], [0.0, 0.0]])))
    assert f(np.array([[0.0, -np.inf], [-np.inf, -np.inf]])) == -np.inf
    with pytest.raises(ValueError, match="square"):
        f(np.zeros((2, 3)))
    with pytest.raises(TypeError, match="floating"):
        log_permanent(pt.lmatrix("L"))
    with pytest.raises(ValueError, match="EXACT_MAX_M"):
        log_permanent(pt.tensor("W", shape=(32, 32)))
    with pytest.raises(ValueError, match="exact limit"):
        f(np.zeros((30, 30)))  # dynamic shape: refused at run time, before any allocation


def test_memory_budget_sets_the_limit(monkeypatch):
    monkeypatch.setenv("PM_PERM_MEMORY_BUDGET", "1M")
    op = LogPermanent()
    assert op.max_m == 17  # 2^17 x 8 B = 1 MiB fits; 2^18 x 8 B does not
    assert LogPermanentAndMarginals(max_m=3).max_m == 3


def test_ops_pickle():
    import pickle

    W = pt.matrix("W")
    out = log_permanent(W)
    f = pytensor.function([W], [out, pt.grad(out, W)])
    g = pickle.loads(pickle.dumps(f))
    x = np.random.default_rng(3).normal(size=(4, 4))
    np.testing.assert_allclose(g(x)[0], f(x)[0])


@pytest.mark.parametrize("M", range(1, 7))
def test_numba_blockwise_writes_outputs_in_place(M):
    """The numba Blockwise loop hands the core its output views (``handles_out``): values,
    marginals and the NaN / infeasible conventions must survive, for enumerated (M <= 4) and DP
    sizes, and for a non-contiguous batch."""
    from pm_perm.reference.permutations import log_permanent_enum, permutation_marginals_enum

    rng = np.random.default_rng(40 + M)
    Wv = rng.normal(scale=2.0, size=(6, M, M))
    Wv[1, 0, :] = -np.inf  # infeasible: -inf value, zero marginals
    Wv[2, M - 1, 0] = np.nan  # NaN in, NaN out (this matrix only)
    Wv[3, 0, : M - 1] = -np.inf
    W = pt.tensor3("W")
    lp = log_permanent(W)
    f = pytensor.function([W], [lp, pt.grad(lp.sum(), W), permutation_marginals(W)], mode="NUMBA")
    for arr in (Wv, np.ascontiguousarray(Wv.transpose(0, 2, 1)).transpose(0, 2, 1)):
        v, g, m = f(arr)
        ok = [0, 3, 4, 5]
        np.testing.assert_allclose(v[ok], log_permanent_enum(arr[ok]), rtol=0, atol=1e-12)
        np.testing.assert_allclose(g[ok], permutation_marginals_enum(arr[ok]), atol=1e-12)
        np.testing.assert_allclose(m[ok], permutation_marginals_enum(arr[ok]), atol=1e-12)
        assert v[1] == -np.inf and np.all(m[1] == 0.0)
        assert np.isnan(v[2]) and np.all(np.isnan(m[2]))
    vt, _, _ = f(Wv.transpose(0, 2, 1))  # a transposed (non-contiguous) view: perm(W^T) = perm(W)
    np.testing.assert_allclose(vt[ok], v[ok], atol=1e-12)


def test_logits_beyond_the_magnitude_limit_give_nan():
    """Finite logits above LOGIT_ABS_MAX = 1e300 (their sums overflow float64) are treated like
    NaN: NaN value and marginals, never a division by zero inside the compiled loop."""
    W = pt.tensor3("W")
    lp = log_permanent(W)
    f = pytensor.function([W], [lp, pt.grad(lp.sum(), W)], mode="NUMBA")
    Wv = np.zeros((2, 3, 3))
    Wv[0, 1, 1] = 1.5e308
    v, g = f(Wv)
    assert np.isnan(v[0]) and np.all(np.isnan(g[0]))
    np.testing.assert_allclose(v[1], np.log(6.0))


# ----------------------------------------------------------------------------- method="glynn"


@pytest.mark.parametrize("mode", ["NUMBA", "FAST_COMPILE"])
def test_glynn_method_matches_the_dp_and_is_fused(mode):
    rng = np.random.default_rng(50)
    Wv = rng.normal(scale=2.0, size=(3, 7, 7))
    Wv[0, 1, :4] = -np.inf
    Wv[1, 0, :] = -np.inf  # infeasible
    W = pt.tensor3("W")
    lp = log_permanent(W, method="glynn")
    f = pytensor.function([W], [lp, pt.grad(lp.sum(), W)], mode=mode)
    v, g = f(Wv)
    v_ref, m_ref = kernel_both(Wv)
    np.testing.assert_allclose(v, v_ref, atol=1e-13)
    np.testing.assert_allclose(g, m_ref, atol=1e-13)
    m = pytensor.function([W], permutation_marginals(W, method="glynn"), mode=mode)(Wv)
    np.testing.assert_allclose(m, m_ref, atol=1e-13)
    if mode == "NUMBA":
        text = pytensor.dprint(f, file="str")
        assert "LogPermanentAndMarginals{max_m=32, method='glynn'}" in text
        assert "PermutationMarginals{" not in text


def test_glynn_verify_grad():
    rng = np.random.default_rng(51)
    verify_grad(lambda w: log_permanent(w, method="glynn"), [rng.normal(size=(2, 5, 5))], rng=rng)


def test_fusion_keeps_methods_apart():
    """A graph with a DP value and a Glynn gradient must not fuse them into one method."""
    W = pt.matrix("W")
    a = log_permanent(W)
    b = log_permanent(W, method="glynn")
    f = pytensor.function([W], [a, pt.grad(b, W)])
    text = pytensor.dprint(f, file="str")
    assert "LogPermanent{max_m=" in text and "method='dp'" in text
    x = np.random.default_rng(52).normal(size=(5, 5))
    v, g = f(x)
    np.testing.assert_allclose(g, kernel_both(x)[1], atol=1e-13)


@pytest.mark.numba  # the messages a user of the default backend reads
def test_glynn_limits_and_the_dp_message_names_glynn():
    W = pt.matrix("W")
    with pytest.raises(ValueError, match="GLYNN_MAX_M = 32"):
        log_permanent(pt.tensor("V", shape=(33, 33)), method="glynn")
    with pytest.raises(ValueError, match="GLYNN_MAX_M = 32"):
        log_permanent(W, method="glynn").eval({W: np.zeros((33, 33))})
    with pytest.raises(ValueError, match=r"method='glynn'.*about \d+ s per value and gradient "
                                         r"at M = 30"):
        log_permanent(pt.tensor("V", shape=(30, 30)))
    with pytest.raises(ValueError, match=r"method='glynn'.*\d s at M = 27.*\d s at M = 30"):
        log_permanent(W).eval({W: np.zeros((28, 28))})  # symbolic M: the run-time message
    with pytest.raises(ValueError, match="method"):
        LogPermanent(method="ryser")


@pytest.mark.parametrize("method", ["dp", "glynn"])
def test_python_linker_runs_a_batch_in_one_compiled_loop(monkeypatch, method):
    """On the Python linker the Blockwise hands the whole batch to one compiled loop over the
    C kernel (not a Python call per matrix), with the numba backend's results bit for bit:
    several batch dimensions, a non-contiguous input, a NaN matrix, a forbidden entry."""
    from pm_perm._modes import PYTHON_MODE
    from pm_perm.ops import permanent as ops

    per_matrix = []
    run_kernel = ops._run_kernel
    monkeypatch.setattr(ops, "_run_kernel", lambda *a: (per_matrix.append(1), run_kernel(*a))[1])
    rng = np.random.default_rng(2)
    Wv = rng.normal(size=(4, 2, 5, 5)).transpose(1, 0, 3, 2)  # (2, 4, 5, 5), not C-contiguous
    Wv[1, 2, 0, 0] = np.nan
    Wv[0, 3, 1, :3] = -np.inf
    W = pt.tensor4("W")
    outs = [*log_permanent_and_marginals(W, method=method), log_permanent(W, method=method),
            permutation_marginals(W, method=method)]
    py = pytensor.function([W], outs, mode=PYTHON_MODE)(Wv)
    assert per_matrix == []
    nb = pytensor.function([W], outs, mode="NUMBA")(Wv)
    for a, b in zip(py, nb, strict=True):
        assert a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    assert np.isnan(py[0][1, 2]) and np.isfinite(np.delete(py[0].ravel(), 6)).all()
    v_ref, _ = kernel_both(np.delete(Wv.reshape(8, 5, 5), 6, axis=0))
    np.testing.assert_allclose(np.delete(py[0].ravel(), 6), v_ref, rtol=1e-12)
