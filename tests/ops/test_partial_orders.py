"""PyTensor Ops of the partial-order likelihood: values, gradients, rewrite, backends, errors."""

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.gradient import verify_grad

from pm_perm.kernels.partial_orders import partial_order_loglik as kernel_loglik
from pm_perm.kernels.partial_orders import partial_order_loglik_and_grad as kernel_sum_grad
from pm_perm.ops.partial_orders import partial_order_loglik, partial_order_loglik_sum

ORDERS = np.array(
    [[0, 1, 2, 3, 4], [2, 0, -1, 1, -1], [-1, -1, -1, -1, -1], [0, 0, 2, 2, 2], [2, 0, 0, 3, -1],
     [-1, -1, 0, -1, -1], [0, 1, 1, 3, 4]]
)
COUNTS = np.array([3.0, 1.0, 2.0, 5.0, 1.0, 4.0, 2.0])


def _core_ops(f):
    """Number of nodes of each core Op (Blockwise or not) in a compiled function."""
    names = [type(getattr(node.op, "core_op", node.op)).__name__
             for node in f.maker.fgraph.toposort()]
    return {n: names.count(n) for n in
            ("PartialOrderLoglik", "PartialOrderLoglikSum", "PartialOrderLoglikSumAndGrad",
             "PartialOrderLoglikAndGrad")}


@pytest.mark.parametrize("mode", ["NUMBA", "FAST_COMPILE"])
def test_values_and_gradient_match_kernel(mode):
    rng = np.random.default_rng(0)
    Wv = rng.normal(size=(3, 5, 5))
    Wv[1, 2, 0] = -np.inf
    W = pt.tensor3("W")
    per = partial_order_loglik(W, ORDERS)
    tot = partial_order_loglik_sum(W, ORDERS, COUNTS)
    f = pytensor.function([W], [per, tot, pt.grad(tot.sum(), W), pt.grad(per.sum(), W)],
                          mode=mode)
    v, t, g, g1 = f(Wv)
    t_ref, g_ref = kernel_sum_grad(Wv, ORDERS, COUNTS)
    np.testing.assert_allclose(v, kernel_loglik(Wv, ORDERS), atol=1e-13)
    np.testing.assert_allclose(t, t_ref, atol=1e-12)
    np.testing.assert_allclose(g, g_ref, atol=1e-12)
    np.testing.assert_allclose(g1, kernel_sum_grad(Wv, ORDERS, np.ones(7))[1], atol=1e-12)


def test_one_op_run_for_value_and_gradient_value_alone_is_cheaper():
    W = pt.tensor3("W")
    tot = partial_order_loglik_sum(W, ORDERS, COUNTS)
    counts = _core_ops(pytensor.function([W], [tot, pt.grad(tot.sum(), W)]))
    assert counts["PartialOrderLoglikSumAndGrad"] == 1
    assert counts["PartialOrderLoglikSum"] == 0 and counts["PartialOrderLoglik"] == 0
    counts = _core_ops(pytensor.function([W], tot))
    assert counts["PartialOrderLoglikSum"] == 1 and counts["PartialOrderLoglikSumAndGrad"] == 0


@pytest.mark.parametrize("mode", ["NUMBA", "FAST_RUN"])
def test_weighted_per_order_values_and_gradient_fuse_into_one_node(mode):
    rng = np.random.default_rng(4)
    Wv = rng.normal(size=(5, 5))
    W = pt.matrix("W")
    per = partial_order_loglik(W, ORDERS)
    obj = pt.sum(COUNTS * per)
    f = pytensor.function([W], [per, obj, pt.grad(obj, W)], mode=mode)
    ops = _core_ops(f)
    assert ops["PartialOrderLoglikAndGrad"] == 1 and sum(ops.values()) == 1
    v, t, g = f(Wv)
    t_ref, g_ref = kernel_sum_grad(Wv, ORDERS, COUNTS)
    np.testing.assert_allclose(v, kernel_loglik(Wv, ORDERS), atol=1e-13)
    np.testing.assert_allclose(t, t_ref, atol=1e-12)
    np.testing.assert_allclose(g, g_ref, atol=1e-12)
    # weights that depend on the values: no fusion (the values must come first), still right
    obj2 = pt.sum(pt.exp(per) * per)
    f2 = pytensor.function([W], pt.grad(obj2, W), mode=mode)
    assert _core_ops(f2)["PartialOrderLoglikAndGrad"] == 0
    p = np.exp(kernel_loglik(Wv, ORDERS))
    lp = np.log(p)
    g2 = kernel_sum_grad(Wv, ORDERS, p * (1 + lp))[1]
    np.testing.assert_allclose(f2(Wv), g2, atol=1e-12)


@pytest.mark.parametrize("shape", [(5, 5), (2, 5, 5)])
def test_verify_grad_per_order(shape):
    rng = np.random.default_rng(1)
    verify_grad(lambda w: partial_order_loglik(w, ORDERS), [rng.normal(size=shape)], rng=rng)


@pytest.mark.parametrize("shape", [(5, 5), (2, 5, 5)])
def test_verify_grad_sum(shape):
    rng = np.random.default_rng(2)
    verify_grad(lambda w: partial_order_loglik_sum(w, ORDERS, COUNTS), [rng.normal(size=shape)],
                rng=rng)


def test_verify_grad_in_counts_and_value_only_graph():
    rng = np.random.default_rng(3)
    Wv = rng.normal(size=(5, 5))
    verify_grad(lambda c: partial_order_loglik_sum(Wv, ORDERS, c), [COUNTS], rng=rng)
    # gradient through the value-only Op (what a graph without the gradient output holds)
    from pm_perm.ops.partial_orders import PartialOrderLoglikSum

    verify_grad(lambda w: PartialOrderLoglikSum()(w, ORDERS, COUNTS), [Wv], rng=rng)


def test_second_derivative_is_refused():
    W = pt.matrix("W")
    g = pt.grad(partial_order_loglik_sum(W, ORDERS, COUNTS), W)
    with pytest.raises(Exception, match="second derivatives"):
        pt.grad(g.sum(), W)


def test_nan_in_nan_out():
    W = pt.matrix("W")
    tot = partial_order_loglik_sum(W, ORDERS, COUNTS)
    f = pytensor.function([W], [partial_order_loglik(W, ORDERS), tot, pt.grad(tot, W)])
    bad = np.zeros((5, 5))
    bad[1, 1] = np.nan
    for v in f(bad):
        assert np.all(np.isnan(v))
    bad[1, 1] = np.inf
    assert all(np.all(np.isnan(v)) for v in f(bad))
    infeasible = np.zeros((5, 5))
    infeasible[:, 0] = -np.inf  # no item may be first: perm(exp W) = 0
    assert all(np.all(np.isnan(v)) for v in f(infeasible))


@pytest.mark.numba  # the messages a user of the default backend reads
def test_size_limit_and_shape_errors():
    with pytest.raises(ValueError, match="M = 27 items.*Plackett-Luce"):
        partial_order_loglik(pt.tensor("W", shape=(27, 27)), np.zeros((1, 27), dtype=int))
    with pytest.raises(TypeError, match="orders must be integers"):
        partial_order_loglik(np.zeros((3, 3)), np.zeros((1, 3)))
    W = pt.matrix("W")
    f = pytensor.function([W], partial_order_loglik(W, ORDERS))
    with pytest.raises(ValueError, match="M"):
        f(np.zeros((4, 4)))
