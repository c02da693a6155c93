"""PyTensor Ops of the top-k model: values, gradients (verify_grad), rewrites, errors."""

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.gradient import verify_grad

from pm_perm.kernels.top_k import top_k_loglik as kernel_loglik
from pm_perm.kernels.top_k import top_k_loglik_and_grad as kernel_sum_grad
from pm_perm.ops.top_k import TopKLoglikSum, top_k_loglik, top_k_loglik_sum

# M = 5 items, K = 3 positions: top-3, shorter, empty, tied ballots
ORDERS = np.array(
    [[0, 1, 2, -1, -1], [2, 0, -1, 1, -1], [-1, -1, -1, -1, -1], [0, 0, -1, -1, -1],
     [-1, 0, 0, 0, -1], [-1, -1, 0, -1, -1], [0, 1, 1, -1, -1]]
)
COUNTS = np.array([3.0, 1.0, 2.0, 5.0, 1.0, 4.0, 2.0])


def _core_ops(f):
    names = [type(getattr(node.op, "core_op", node.op)).__name__
             for node in f.maker.fgraph.toposort()]
    return {n: names.count(n) for n in
            ("TopKLoglik", "TopKLoglikSum", "TopKLoglikSumAndGrad", "TopKLoglikAndGrad")}


@pytest.mark.parametrize("mode", ["NUMBA", "FAST_COMPILE"])
def test_values_and_gradient_match_kernel(mode):
    rng = np.random.default_rng(0)
    Lv = rng.normal(size=(3, 5, 4))
    Lv[1, 2, 0] = -np.inf
    L = pt.tensor3("L")
    per = top_k_loglik(L, ORDERS)
    tot = top_k_loglik_sum(L, ORDERS, COUNTS)
    f = pytensor.function([L], [per, tot, pt.grad(tot.sum(), L), pt.grad(per.sum(), L)],
                          mode=mode)
    v, t, g, g1 = f(Lv)
    t_ref, g_ref = kernel_sum_grad(Lv, ORDERS, COUNTS)
    np.testing.assert_allclose(v, kernel_loglik(Lv, ORDERS), atol=1e-13)
    np.testing.assert_allclose(t, t_ref, atol=1e-12)
    np.testing.assert_allclose(g, g_ref, atol=1e-12)
    np.testing.assert_allclose(g1, kernel_sum_grad(Lv, ORDERS, np.ones(7))[1], atol=1e-12)


def test_one_op_run_for_value_and_gradient_value_alone_is_cheaper():
    L = pt.tensor3("L")
    tot = top_k_loglik_sum(L, ORDERS, COUNTS)
    counts = _core_ops(pytensor.function([L], [tot, pt.grad(tot.sum(), L)]))
    assert counts["TopKLoglikSumAndGrad"] == 1
    assert counts["TopKLoglikSum"] == 0 and counts["TopKLoglik"] == 0
    counts = _core_ops(pytensor.function([L], tot))
    assert counts["TopKLoglikSum"] == 1 and counts["TopKLoglikSumAndGrad"] == 0


@pytest.mark.parametrize("mode", ["NUMBA", "FAST_RUN"])
def test_weighted_per_ballot_values_and_gradient_fuse_into_one_node(mode):
    rng = np.random.default_rng(4)
    Lv = rng.normal(size=(5, 4))
    L = pt.matrix("L")
    per = top_k_loglik(L, ORDERS)
    obj = pt.sum(COUNTS * per)
    f = pytensor.function([L], [per, obj, pt.grad(obj, L)], mode=mode)
    ops = _core_ops(f)
    assert ops["TopKLoglikAndGrad"] == 1 and sum(ops.values()) == 1
    v, t, g = f(Lv)
    t_ref, g_ref = kernel_sum_grad(Lv, ORDERS, COUNTS)
    np.testing.assert_allclose(v, kernel_loglik(Lv, ORDERS), atol=1e-13)
    np.testing.assert_allclose(t, t_ref, atol=1e-12)
    np.testing.assert_allclose(g, g_ref, atol=1e-12)
    # weights that depend on the values: no fusion, still right
    f2 = pytensor.function([L], pt.grad(pt.sum(pt.exp(per) * per), L), mode=mode)
    assert _core_ops(f2)["TopKLoglikAndGrad"] == 0
    p = np.exp(kernel_loglik(Lv, ORDERS))
    np.testing.assert_allclose(f2(Lv), kernel_sum_grad(Lv, ORDERS, p * (1 + np.log(p)))[1],
                               atol=1e-12)


@pytest.mark.parametrize("shape", [(5, 4), (2, 5, 4)])
def test_verify_grad_per_ballot(shape):
    rng = np.random.default_rng(1)
    verify_grad(lambda w: top_k_loglik(w, ORDERS), [rng.normal(size=shape)], rng=rng)


@pytest.mark.parametrize("shape", [(5, 4), (2, 5, 4), (5, 6)])
def test_verify_grad_sum(shape):
    rng = np.random.default_rng(2)
    orders = ORDERS if shape[-1] == 4 else np.array([[0, 1, 2, 3, 4], [1, 0, -1, -1, 2]])
    counts = COUNTS[: len(orders)]
    verify_grad(lambda w: top_k_loglik_sum(w, orders, counts), [rng.normal(size=shape)],
                rng=rng)


@pytest.mark.slow  # compiles two graphs of their own (about 10 s)
def test_verify_grad_with_the_kernels_shared_tables():
    """400 ballots of lengths 1..4 over 8 items (K = 5): enough for the kernel's shared tables
    (pm_perm.kernels.top_k_ballots) at lengths 1..3."""
    from pm_perm.kernels.top_k_ballots import ballot_lengths, plan_lengths

    rng = np.random.default_rng(4)
    rows = np.full((400, 8), -1)
    for y, k in zip(rows, rng.integers(1, 5, size=len(rows)), strict=True):
        y[rng.permutation(8)[:k]] = np.arange(k)
    orders, counts = np.unique(rows, axis=0, return_counts=True)
    assert plan_lengths(8, 5, ballot_lengths(orders, 5), -1)[1:4].all()
    verify_grad(lambda w: top_k_loglik_sum(w, orders, counts.astype(float)),
                [rng.normal(size=(8, 6))], rng=rng)
    verify_grad(lambda w: top_k_loglik(w, orders), [rng.normal(size=(8, 6))], rng=rng)


def test_verify_grad_in_counts_and_value_only_graph():
    rng = np.random.default_rng(3)
    Lv = rng.normal(size=(5, 4))
    verify_grad(lambda c: top_k_loglik_sum(Lv, ORDERS, c), [COUNTS], rng=rng)
    verify_grad(lambda w: TopKLoglikSum()(w, ORDERS, COUNTS), [Lv], rng=rng)


def test_second_derivative_is_refused():
    L = pt.matrix("L")
    g = pt.grad(top_k_loglik_sum(L, ORDERS, COUNTS), L)
    with pytest.raises(Exception, match="second derivatives"):
        pt.grad(g.sum(), L)


def test_nan_in_nan_out_and_long_ballots_minus_inf():
    L = pt.matrix("L")
    tot = top_k_loglik_sum(L, ORDERS, COUNTS)
    f = pytensor.function([L], [top_k_loglik(L, ORDERS), tot, pt.grad(tot, L)])
    bad = np.zeros((5, 4))
    bad[1, 1] = np.nan
    assert all(np.all(np.isnan(v)) for v in f(bad))
    infeasible = np.zeros((5, 4))
    infeasible[:, 0] = -np.inf  # no item may be first
    assert all(np.all(np.isnan(v)) for v in f(infeasible))
    g = pytensor.function([L], top_k_loglik(L, np.array([[0, 1, 2, 3, -1]])))
    assert g(np.zeros((5, 4)))[0] == -np.inf  # 4 items ranked, K = 3


@pytest.mark.numba  # the messages a user of the default backend reads
def test_size_limit_and_shape_errors():
    with pytest.raises(ValueError, match="TOP_K_MAX_K.*Plackett-Luce"):
        top_k_loglik(pt.tensor("L", shape=(30, 26)), np.zeros((1, 30), dtype=int))
    with pytest.raises(ValueError, match="1 <= K <= M"):
        top_k_loglik(pt.tensor("L", shape=(3, 5)), np.zeros((1, 3), dtype=int))
    with pytest.raises(TypeError, match="orders must be integers"):
        top_k_loglik(np.zeros((3, 3)), np.zeros((1, 3)))
    L = pt.matrix("L")
    f = pytensor.function([L], top_k_loglik(L, ORDERS))
    with pytest.raises(ValueError, match="K"):
        f(np.zeros((5, 7)))
    with pytest.raises(ValueError, match="orders"):
        f(np.zeros((4, 3)))
