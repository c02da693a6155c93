"""The Plackett-Luce-anchored Ops: values against the kernel, gradients by verify_grad, the
numba backend against the Python implementation."""

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.gradient import verify_grad

from pm_perm.kernels.pl_tilted import pl_tilted_loglik as kernel_loglik
from pm_perm.ops.pl_tilted import pl_tilted_loglik, pl_tilted_loglik_sum
from pm_perm.reference.rankings import every_top_k_order


def _inputs(M, seed=0):
    rng = np.random.default_rng(seed)
    orders = every_top_k_order(M)
    return (rng.normal(size=M), rng.normal(size=(M, M)), orders,
            rng.integers(0, 4, len(orders)).astype(np.float64))


@pytest.mark.parametrize("mode", ["FAST_COMPILE", "NUMBA"])
def test_values_and_gradients_agree_with_the_kernel(mode):
    u0, D0, orders, w = _inputs(4)
    u, D = pt.vector("u"), pt.matrix("D")
    values = pl_tilted_loglik(u, D, orders)
    total = pl_tilted_loglik_sum(u, D, orders, w)
    f = pytensor.function([u, D], [values, total, *pytensor.grad(total, [u, D]),
                                   *pytensor.grad((w * values).sum(), [u, D])], mode=mode)
    v, t, gu, gD, gu2, gD2 = f(u0, D0)
    np.testing.assert_allclose(v, kernel_loglik(u0, D0, orders), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(t, w @ v, rtol=1e-12)
    np.testing.assert_allclose(gu, gu2, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gD, gD2, rtol=1e-10, atol=1e-12)


def test_verify_grad_of_both_ops():
    u0, D0, orders, w = _inputs(4, seed=1)
    rng = np.random.default_rng(2)
    verify_grad(lambda u, D: pl_tilted_loglik_sum(u, D, orders, w), [u0, D0], rng=rng)
    c = rng.normal(size=len(orders))
    verify_grad(lambda u, D: (c * pl_tilted_loglik(u, D, orders)).sum(), [u0, D0], rng=rng)


def test_shape_errors_are_named():
    with pytest.raises(TypeError, match=r"utilities \(M,\), tilt logits \(M, M\)"):
        pl_tilted_loglik(pt.matrix(), pt.matrix(), np.zeros((1, 3), dtype=np.int64))
    u, D = pt.vector("u"), pt.matrix("D")
    f = pytensor.function([u, D], pl_tilted_loglik(u, D, np.array([[0, 1, 2]])),
                          mode="FAST_COMPILE")
    with pytest.raises(ValueError, match=r"need tilt logits \(3, 3\)"):
        f(np.zeros(3), np.zeros((2, 2)))


@pytest.mark.parametrize("mode", ["PYTHON", "NUMBA"])
def test_values_and_data_weighted_gradient_share_one_kernel_run(mode):
    # sum(counts * loglik) and its gradient (PLAnchoredRanking's MAP objective): the rewrite
    # local_fuse_pl_tilted_loglik_and_grad leaves ONE kernel node, with the unfused numbers
    from pm_perm._modes import PYTHON_MODE
    from pm_perm.ops.pl_tilted import (
        PLTiltedLoglik,
        PLTiltedLoglikAndGrad,
        PLTiltedLoglikSumAndGrad,
    )

    mode = PYTHON_MODE if mode == "PYTHON" else pytensor.compile.mode.get_mode(mode)
    u0, D0, orders, w = _inputs(4, seed=3)
    u, D = pt.vector("u"), pt.matrix("D")
    values = pl_tilted_loglik(u, D, orders)
    loss = (w * values).sum()
    outs = [values, loss, *pytensor.grad(loss, [u, D])]
    f = pytensor.function([u, D], outs, mode=mode)
    ops = [type(n.op) for n in f.maker.fgraph.apply_nodes]
    assert PLTiltedLoglikAndGrad in ops
    assert PLTiltedLoglik not in ops and PLTiltedLoglikSumAndGrad not in ops
    unfused = pytensor.function(
        [u, D], outs, mode=mode.excluding("local_fuse_pl_tilted_loglik_and_grad"))
    assert PLTiltedLoglikAndGrad not in [type(n.op) for n in unfused.maker.fgraph.apply_nodes]
    for a, b in zip(f(u0, D0), unfused(u0, D0), strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(f(u0, D0)[0], kernel_loglik(u0, D0, orders), rtol=1e-12)


def test_constant_orders_are_parsed_once_per_graph(monkeypatch):
    """Orders that are a constant of the graph (a MAP engine's frozen data) are parsed into
    their plan once, kept on the constant, and give the values and gradients of the same
    orders given as a variable."""
    import pm_perm.ops.pl_tilted as ops

    u0, D0, orders, w = _inputs(4, seed=5)
    calls = []
    real = ops.orders_plan
    monkeypatch.setattr(ops, "orders_plan", lambda o: (calls.append(1), real(o))[1])
    u, D, o = pt.vector("u"), pt.matrix("D"), pt.lmatrix("o")
    outs = {}
    for name, given in (("variable", o), ("constant", pt.constant(orders))):
        total = pl_tilted_loglik_sum(u, D, given, w)
        values = pl_tilted_loglik(u, D, given)
        f = pytensor.function([u, D, o], [values, *pytensor.grad(total, [u, D])],
                              mode="FAST_COMPILE", on_unused_input="ignore")
        calls.clear()
        outs[name] = [f(u0 + s, D0, orders) for s in (0.0, 0.5, 1.0)]
        outs[name + " parses"] = len(calls)
    assert outs["variable parses"] == 2 * 3 and outs["constant parses"] == 1
    for a, b in zip(outs["variable"], outs["constant"], strict=True):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)
