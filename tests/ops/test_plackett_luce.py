"""PyTensor Ops of the Plackett-Luce log-likelihood (pm_perm.ops.plackett_luce)."""

from __future__ import annotations

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.gradient import verify_grad

from pm_perm.kernels.plackett_luce import plackett_luce_loglik as loglik_np
from pm_perm.ops.plackett_luce import plackett_luce_loglik, plackett_luce_loglik_sum

ORDERS = np.array([[0, 1, 2, 3, 4], [2, -1, 0, 1, -1], [0, 0, 2, -1, -1], [1, 0, 1, 3, 3],
                   [-1, -1, -1, -1, -1], [0, 0, 0, 3, 4]])
COUNTS = np.array([3.0, 1.0, 2.0, 5.0, 4.0, 0.0])


def test_values_match_the_kernel_batched():
    U = np.random.default_rng(0).normal(size=(3, 5))
    u = pt.matrix("u")
    f = pytensor.function([u], [plackett_luce_loglik(u, ORDERS),
                                plackett_luce_loglik_sum(u, ORDERS, COUNTS)])
    per, total = f(U)
    np.testing.assert_allclose(per, loglik_np(U, ORDERS), rtol=1e-12)
    np.testing.assert_allclose(total, (loglik_np(U, ORDERS) * COUNTS).sum(-1), rtol=1e-12)
    # the python perform path agrees with the numba implementation
    g = pytensor.function([u], plackett_luce_loglik(u, ORDERS), mode="FAST_COMPILE")
    np.testing.assert_allclose(g(U), per, rtol=1e-12)


def test_verify_grad():
    """The pullbacks (FAST_COMPILE runs the Ops' perform: the same kernels, no numba build;
    the compiled numba path is compared with it in the other tests)."""
    rng = np.random.default_rng(1)
    mode = "FAST_COMPILE"
    verify_grad(lambda u: plackett_luce_loglik(u, ORDERS), [rng.normal(size=5)], rng=rng,
                mode=mode)
    verify_grad(lambda u: plackett_luce_loglik(u, ORDERS) * np.arange(6.0),
                [rng.normal(size=(2, 5))], rng=rng, mode=mode)
    verify_grad(lambda u: plackett_luce_loglik_sum(u, ORDERS, COUNTS), [rng.normal(size=(2, 5))],
                rng=rng, mode=mode)


def test_sum_value_and_gradient_share_one_node():
    u = pt.vector("u")
    total = plackett_luce_loglik_sum(u, ORDERS, COUNTS)
    f = pytensor.function([u], [total, pytensor.grad(total, u)])
    nodes = [n for n in f.maker.fgraph.toposort() if "PlackettLuce" in str(n.op)]
    assert len(nodes) == 1, nodes
    v, g = f(np.zeros(5) + 0.3)
    np.testing.assert_allclose(g.sum(), 0.0, atol=1e-10)   # shift invariance


def test_value_and_vjp_fused_into_one_node():
    u = pt.matrix("u")
    per = plackett_luce_loglik(u, ORDERS)
    total = (per * COUNTS).sum()
    f = pytensor.function([u], [per, pytensor.grad(total, u)])
    names = [type(getattr(n.op, "core_op", n.op)).__name__ for n in f.maker.fgraph.toposort()]
    assert "PlackettLuceLoglikAndVJP" in names
    assert "PlackettLuceLoglik" not in names and "PlackettLuceLoglikVJP" not in names
    U = np.random.default_rng(4).normal(size=(2, 5))
    v, g = f(U)
    np.testing.assert_allclose(v, loglik_np(U, ORDERS), rtol=1e-12)
    unfused = pytensor.function([u], pytensor.grad(total, u), mode="FAST_COMPILE")
    np.testing.assert_allclose(g, unfused(U), rtol=1e-12)


def test_bad_input():
    u = pt.vector("u")
    with pytest.raises(ValueError, match=r"orders\[0\] = \[0, 2, -1, -1, -1\] is not a valid"):
        plackett_luce_loglik(u, [[0, 2, -1, -1, -1]])
    with pytest.raises(TypeError, match="integer tensor"):
        plackett_luce_loglik(u, pt.matrix("o"))
    f = pytensor.function([u], plackett_luce_loglik(u, ORDERS))
    assert np.isnan(f(np.array([0.0, np.nan, 0, 0, 0]))).all()
    with pytest.raises(ValueError):
        f(np.zeros(4))   # orders have 5 items
    o = pt.lmatrix("o")
    g = pytensor.function([u, o], plackett_luce_loglik(u, o))
    assert g(np.zeros(3), np.array([[0, 5, 1]]))[0] == -np.inf   # invalid order at run time


def test_mixture_gradient_is_not_fused_into_a_cycle():
    """A mixture's cotangent depends on the per-order values (logsumexp over components): the
    value/VJP fusion rewrite must leave such a graph alone (fusing it made the graph cyclic and
    the compile of pm.find_MAP's function never finished)."""
    rng = np.random.default_rng(3)

    def mixture(u):
        return pt.logsumexp(plackett_luce_loglik(u, ORDERS), axis=0) * np.arange(1.0, 7.0)

    verify_grad(mixture, [rng.normal(size=(2, 5))], rng=rng, abs_tol=1e-6, rel_tol=1e-6)
    u = pt.matrix("u")
    out = pt.sum(mixture(u))
    f = pytensor.function([u], [out, pytensor.grad(out, u)])
    x = rng.normal(size=(2, 5))
    eps, num = 1e-6, np.zeros_like(x)
    for idx in np.ndindex(*x.shape):
        d = np.zeros_like(x)
        d[idx] = eps
        num[idx] = (f(x + d)[0] - f(x - d)[0]) / (2 * eps)
    np.testing.assert_allclose(f(x)[1], num, rtol=1e-5, atol=1e-6)
