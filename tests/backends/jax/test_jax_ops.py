"""JAX implementations of every pm_perm Op against the numba path (float64, 1e-10).

Two gradients are checked for each differentiable Op: PyTensor's gradient graph compiled to JAX
(what nutpie's JAX backend runs) and ``jax.grad`` of the jaxified value graph (what numpyro and
blackjax run). Sizes cover the brute-force test sets (M <= 7, D <= 10), with batch dimensions.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

from tests._jax import require_jax

jax = require_jax()

import pytensor  # noqa: E402
import pytensor.tensor as pt  # noqa: E402
from pymc.sampling.jax import get_jaxified_graph  # noqa: E402

import pm_perm  # noqa: E402,F401  (registers the JAX implementations)
from pm_perm.ops.bethe import bethe_log_permanent, bethe_marginals  # noqa: E402
from pm_perm.ops.cardinality import (  # noqa: E402
    conditional_marginals,
    log_esp,
    log_expected_topk_gain,
)
from pm_perm.ops.matching import max_weight_matching  # noqa: E402
from pm_perm.ops.permanent import (  # noqa: E402
    log_permanent,
    log_permanent_and_marginals,
    permutation_marginals,
)

TOL = 1e-10


def _sizes(sizes, default):
    """Parameters over ``sizes``; those not in ``default`` are marked slow (run with --runslow):
    the default run compiles XLA programs for a representative subset only (each size is a new
    program), the full brute-force sets run with --runslow."""
    return [pytest.param(n, marks=() if n in default else pytest.mark.slow) for n in sizes]


def _both_modes(inputs, outputs, *values):
    """The outputs by the test's backend (the Python linker unless --all-numba: the numba kernels
    through each Op's perform, tests/conftest.py) and by the JAX backend."""
    numba = pytensor.function(inputs, outputs)(*values)
    jx = pytensor.function(inputs, outputs, mode="JAX")(*values)
    return numba, jx


def _close(a, b, tol=TOL):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape
    same_inf = np.isinf(a) & (a == b)
    np.testing.assert_allclose(np.where(same_inf, 0, a), np.where(same_inf, 0, b), rtol=tol,
                               atol=tol)


def _jax_grad_of_sum(inputs, value, *values, argnum=0):
    """``jax.grad`` of the jaxified scalar graph ``sum(value)`` (numpyro's path)."""
    fn = get_jaxified_graph(inputs=inputs, outputs=[pt.sum(value)])
    return np.asarray(jax.jit(jax.grad(lambda *a: fn(*a)[0], argnums=argnum))(*values))


@pytest.fixture(params=["cpu-kernel", "xla"])
def jax_path(request, monkeypatch):
    """Both CPU implementations of the kernels: the FFI call into the numba kernel (default on
    CPU) and the XLA program (``PM_PERM_JAX_XLA=1``, what GPUs run)."""
    monkeypatch.setenv("PM_PERM_JAX_XLA", "1" if request.param == "xla" else "0")
    return request.param


def _logits(rng, shape, scale=2.0, forbid=True):
    W = rng.normal(size=shape) * scale
    M = shape[-1]
    if forbid and M > 2:
        W[..., 0, 1] = -np.inf  # a forbidden edge: exact zero, zero gradient
    return W


@pytest.mark.parametrize("M", _sizes(range(1, 8), (1, 3, 7)))
def test_log_permanent_value_and_gradients(M, jax_path):
    rng = np.random.default_rng(M)
    W = pt.tensor("W", shape=(None, None, M, M))
    Wv = _logits(rng, (2, 3, M, M))
    v = log_permanent(W)
    outs = [v, pt.grad(pt.sum(v * np.arange(1.0, 4.0)), W), permutation_marginals(W),
            *log_permanent_and_marginals(W)]
    numba, jx = _both_modes([W], outs, Wv)
    for a, b in zip(numba, jx, strict=True):
        _close(a, b)
    _close(_jax_grad_of_sum([W], v, Wv), numba[2])  # jax.grad == marginals
    if M > 2:
        assert np.all(jx[2][..., 0, 1] == 0)  # forbidden edge: zero marginal


def test_log_permanent_infeasible_and_invalid(jax_path):
    W = pt.matrix("W")
    Wv = np.zeros((3, 3))
    Wv[0] = -np.inf  # no permutation
    v = log_permanent(W)
    numba, jx = _both_modes([W], [v, pt.grad(v, W)], Wv)
    assert jx[0] == -np.inf and numba[0] == -np.inf
    assert np.all(jx[1] == 0)
    assert np.all(_jax_grad_of_sum([W], v, Wv) == 0)  # no NaN from the -inf value
    Wn = np.zeros((3, 3))
    Wn[1, 1] = np.nan
    assert np.isnan(pytensor.function([W], v, mode="JAX")(Wn))


def test_log_permanent_spread_logits(jax_path):
    """Logits hundreds of nats apart (a sampler's warm-up visits them): no underflow to -inf.

    Regression: a fixed number of Sinkhorn sweeps as scaling gave log perm = -inf here, so the
    log density was +inf and numpyro ran away on the demo model."""
    rng = np.random.default_rng(7)
    W = pt.tensor("W", shape=(None, 8, 8))
    Wv = rng.normal(size=(4, 8, 8)) * 500.0
    v = log_permanent(W)
    numba, jx = _both_modes([W], [v, pt.grad(pt.sum(v), W)], Wv)
    assert np.all(np.isfinite(jx[0]))
    _close(numba[0], jx[0])
    _close(numba[1], jx[1])


@pytest.mark.parametrize("D", _sizes(range(1, 11), (1, 4, 10)))
def test_log_esp_value_and_gradients(D, jax_path):
    rng = np.random.default_rng(100 + D)
    th = pt.tensor("th", shape=(None, D))
    k = pt.tensor("k", shape=(None,), dtype="int64")
    v = pt.tensor("v", shape=(None, D))
    rows = D + 3  # every k from -1 to D + 1
    thv = rng.normal(size=(rows, D)) * 2
    if D > 3:
        thv[::2, 1] = -np.inf
    kv = np.arange(-1, D + 2)
    vv = rng.normal(size=(rows, D))
    lz = log_esp(th, k)
    m = conditional_marginals(th, k)
    outs = [lz, pt.grad(pt.sum(lz[kv >= 0]), th), m, pt.grad(pt.sum(m * v), th)]
    numba, jx = _both_modes([th, k, v], outs, thv, kv, vv)
    for a, b in zip(numba, jx, strict=True):
        _close(a, b)
    ok = kv >= 0
    jg = _jax_grad_of_sum([th, k], lz[ok], thv, kv)
    _close(jg, numba[1])


@pytest.mark.parametrize("D", _sizes([3, 6, 10], (6,)))
def test_expected_topk_gain(D, jax_path):
    rng = np.random.default_rng(D)
    th = pt.matrix("th")
    t = pt.lvector("t")
    thv = rng.normal(size=(4, D))
    tv = np.array([0, 1, D - 1, 2])
    g = log_expected_topk_gain(th, t, 2)
    numba, jx = _both_modes([th, t], [g, pt.grad(pt.sum(g), th)], thv, tv)
    for a, b in zip(numba, jx, strict=True):
        _close(a, b)
    _close(_jax_grad_of_sum([th, t], g, thv, tv), numba[1])


@pytest.mark.parametrize("M", _sizes(range(1, 8), (2, 5)))
def test_bethe_value_and_gradients(M, jax_path):
    """Same fixed point: agreement to the fixed-point tolerance (1e-9 residual -> ~1e-9)."""
    rng = np.random.default_rng(200 + M)
    W = pt.tensor("W", shape=(None, M, M))
    Wv = _logits(rng, (3, M, M), scale=1.0)
    v = bethe_log_permanent(W)
    outs = [v, pt.grad(pt.sum(v), W), bethe_marginals(W)]
    numba, jx = _both_modes([W], outs, Wv)
    for a, b in zip(numba, jx, strict=True):
        _close(a, b, tol=1e-8)
    _close(_jax_grad_of_sum([W], v, Wv), numba[1], tol=1e-8)


def test_bethe_nonconvergence_is_nan(jax_path):
    from pm_perm.backends.jax.bethe import (
        bethe_log_permanent_and_marginals,
        bethe_log_permanent_info,
    )

    Wv = np.random.default_rng(0).normal(size=(6, 6))
    value, beliefs, n_iter, err = bethe_log_permanent_info(Wv, tol=1e-9, max_iter=2)
    assert int(n_iter) == 2 and float(err) > 1e-9
    assert np.isnan(value) and np.isnan(beliefs).all()
    # the numba kernel (CPU path) converges here in 5 steps (its Newton stage); a tolerance below
    # rounding cannot be met by either: NaN instead of the numba Op's exception
    value, beliefs = jax.jit(bethe_log_permanent_and_marginals, static_argnums=(1, 2))(
        Wv, 1e-20, 2)
    assert np.isnan(value) and np.isnan(beliefs).all()


@pytest.mark.parametrize("M", _sizes([1, 4, 7], (4,)))
def test_max_weight_matching(M):
    rng = np.random.default_rng(M)
    W = pt.tensor("W", shape=(None, M, M))
    Wv = _logits(rng, (3, M, M))
    numba, jx = _both_modes([W], [max_weight_matching(W)], Wv)
    np.testing.assert_array_equal(numba[0], jx[0])


def _orders(M):
    """Rank-form orders of M items: complete, top-2, tied blocks (rows are valid)."""
    rows = [np.arange(M)[::-1].copy(), np.r_[0, 1, np.full(M - 2, -1)]]
    tied = np.arange(M)
    tied[1] = 0  # items 0 and 1 tie for first
    rows.append(tied)
    return np.array(rows, dtype=np.int64)


# The ranking Ops at M = 3 by default: what this file adds is the Op wiring (PyTensor's JAX
# dispatch, its gradient graph, jax.grad of the jaxified graph), the same at every M; the JAX
# likelihoods themselves are checked at M = 5 on every order pattern in test_jax_rankings.py
# (M = 5 here compiled 4-5 s more XLA per case).
@pytest.mark.parametrize("M", _sizes([3, 5, 7], (3,)))
def test_partial_order_loglik(M, jax_path):
    from pm_perm.ops.partial_orders import partial_order_loglik, partial_order_loglik_sum

    rng = np.random.default_rng(300 + M)
    W = pt.tensor("W", shape=(None, M, M))
    o = pt.lmatrix("o")
    c = pt.vector("c")
    Wv, ov, cv = _logits(rng, (2, M, M), forbid=False), _orders(M), np.array([3.0, 1.0, 2.0])
    per = partial_order_loglik(W, o)
    tot = partial_order_loglik_sum(W, o, c)
    outs = [per, pt.grad(pt.sum(per * np.arange(1.0, 4.0)), W), tot, pt.grad(pt.sum(tot), W),
            pt.grad(pt.sum(tot), c)]
    numba, jx = _both_modes([W, o, c], outs, Wv, ov, cv)
    for a, b in zip(numba, jx, strict=True):
        _close(a, b)
    _close(_jax_grad_of_sum([W, o, c], tot, Wv, ov, cv), numba[3])


@pytest.mark.parametrize("M", _sizes([3, 5, 7], (3,)))
def test_plackett_luce_loglik(M, jax_path):
    from pm_perm.ops.plackett_luce import plackett_luce_loglik, plackett_luce_loglik_sum

    rng = np.random.default_rng(400 + M)
    u = pt.matrix("u")
    o = pt.lmatrix("o")
    c = pt.vector("c")
    uv, ov, cv = rng.normal(size=(2, M)), _orders(M), np.array([3.0, 1.0, 2.0])
    per = plackett_luce_loglik(u, o)
    tot = plackett_luce_loglik_sum(u, o, c)
    outs = [per, pt.grad(pt.sum(per * np.arange(1.0, 4.0)), u), tot, pt.grad(pt.sum(tot), u)]
    numba, jx = _both_modes([u, o, c], outs, uv, ov, cv)
    for a, b in zip(numba, jx, strict=True):
        _close(a, b)
    _close(_jax_grad_of_sum([u, o, c], tot, uv, ov, cv), numba[3])
    per_grad = pytensor.function([u, o], pt.grad(pt.sum(per), u))(uv, ov)
    _close(_jax_grad_of_sum([u, o], per, uv, ov), per_grad)


def test_glynn_method_has_no_jax_implementation():
    """method='glynn' (pm_perm.kernels.glynn) is numba only: the JAX backend says so instead of
    silently running the DP (whose table is what method='glynn' avoids)."""
    W = pt.matrix("W")
    with pytest.raises(NotImplementedError, match="method='glynn'.*numba backend"):
        pytensor.function([W], log_permanent(W, method="glynn"), mode="JAX")(np.zeros((3, 3)))


def test_cpu_path_dispatch():
    """On a CPU the lowered program calls the numba kernels (FFI targets) and holds no XLA DP;
    under ``xla_only`` (``PM_PERM_JAX_XLA=1``) it is the other way round, and the ranking
    likelihoods then hold no custom call or callback at all (so XLA can partition them)."""
    from pm_perm.backends.jax import partial_orders, plackett_luce
    from pm_perm.backends.jax.cardinality import log_esp
    from pm_perm.backends.jax.permanent import log_permanent
    from pm_perm.backends.jax.platform import xla_only

    W, th = np.zeros((6, 6)), np.zeros(5)
    orders, w = _orders(6), np.ones(3)
    for xla in (False, True):
        with xla_only() if xla else contextlib.nullcontext():
            perm = jax.jit(jax.grad(log_permanent)).lower(W).as_text()
            esp = jax.jit(jax.grad(log_esp)).lower(th, 2).as_text()
            po = jax.jit(partial_orders.loglik_fns(26)[1]).lower(W, orders, w).as_text()
            pl = jax.jit(plackett_luce.loglik_fns()[1]).lower(W[0], orders, w).as_text()
        assert ("pm_perm_log_permanent" in perm) != xla
        assert ("pm_perm_log_esp" in esp) != xla
        assert (f"tensor<{2 ** 6}x" in perm) == xla  # the XLA DP's subset table
        assert ("pm_perm_partial_orders" in po) != xla
        assert ("pm_perm_plackett_luce" in pl) != xla
        if xla:
            assert "custom_call" not in po and "custom_call" not in pl


def test_cpu_only_process_traces_the_cpu_branch_alone(monkeypatch):
    """Where the CPU is JAX's only backend (this machine), the program holds the FFI call alone
    (the XLA branch is not traced: 1.3 s of tracing per ranking model at M = 8 with ties); where
    another backend exists, both branches are traced and the platform picks one when the
    program is lowered."""
    from pm_perm.backends.jax import plackett_luce, platform

    if not platform._cpu_only():
        pytest.skip("JAX has a backend other than the CPU here")
    loglik = plackett_luce.loglik_fns()[0]
    orders = _orders(4)

    def jaxpr():
        return str(jax.make_jaxpr(jax.grad(lambda u: loglik(u, orders).sum()))(np.zeros(4)))

    assert "platform_index" not in jaxpr() and "pm_perm_plackett_luce" in jaxpr()
    monkeypatch.setattr(platform, "_cpu_only", lambda: False)
    assert "platform_index" in jaxpr()


def test_cpu_path_float32():
    """float32 inputs on the CPU path: float32 outputs, the float64 kernel's values rounded
    (the FFI handler converts to float64 and back), batched by vmap."""
    from pm_perm.backends.jax.cardinality import log_esp_and_marginals
    from pm_perm.backends.jax.permanent import log_permanent_and_marginals
    from pm_perm.kernels.esp import log_esp_and_marginals_core
    from pm_perm.kernels.permanent import log_permanent_and_marginals_core

    rng = np.random.default_rng(11)
    W = rng.normal(size=(3, 6, 6)).astype(np.float32)
    v, P = jax.jit(jax.vmap(log_permanent_and_marginals))(W)
    assert v.dtype == np.float32 and P.dtype == np.float32
    for b in range(3):
        rv, rP = log_permanent_and_marginals_core(W[b].astype(np.float64))
        np.testing.assert_allclose(v[b], rv, rtol=1e-6)
        np.testing.assert_allclose(P[b], rP, rtol=1e-5, atol=1e-7)
    th = rng.normal(size=(3, 8)).astype(np.float32)
    k = np.array([1, 4, 7], dtype=np.int32)
    lv, m = jax.jit(jax.vmap(log_esp_and_marginals))(th, k)
    assert lv.dtype == np.float32
    for b in range(3):
        rv, rm = log_esp_and_marginals_core(th[b].astype(np.float64), int(k[b]))
        np.testing.assert_allclose(lv[b], rv, rtol=1e-6)
        np.testing.assert_allclose(m[b], rm, rtol=1e-5, atol=1e-7)


def test_log_esp_second_derivative(jax_path):
    """``jax.jacrev(jax.grad(log_esp))`` (reverse over reverse) is the conditional covariance on
    both paths (``jax.hessian``, forward over reverse, is refused by ``jax.custom_vjp``)."""
    from pm_perm.backends.jax.cardinality import log_esp
    from pm_perm.kernels.esp import conditional_covariance_dot_core

    th = np.random.default_rng(12).normal(size=6)
    H = np.asarray(jax.jit(jax.jacrev(jax.grad(log_esp)))(th, 2))
    ref = np.stack([conditional_covariance_dot_core(th, 2, e) for e in np.eye(6)])
    _close(H, ref)
