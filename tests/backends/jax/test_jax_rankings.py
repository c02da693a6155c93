"""JAX implementations of the partial-order and Plackett-Luce likelihoods against the numba
kernels (float64, 1e-10): ``pm_perm.backends.jax.{rank_form, partial_orders, plackett_luce}``.

Every case runs on both CPU implementations (the FFI call into the numba kernel, the default on a
CPU, and the XLA program, ``PM_PERM_JAX_XLA=1``, what GPUs run) and with the orders both as
constants of the compiled program (parsed once by NumPy, as ``pm.sample(nuts_sampler="numpyro")``
compiles observed data) and as inputs (parsed by the program, as nutpie's JAX backend passes
``pm.Data``). Order sets, for M <= 7: every top-k order of every k (all top-k patterns) and
random tie patterns (blocks of random sizes, the last one maybe unranked), plus invalid rows;
logits batched (2, 3, M, M) with forbidden (``-inf``) entries. Values, per-order gradients
(the pullback of ``loglik`` with the weights as cotangent, i.e. its ``custom_vjp`` backward pass,
which numpyro's ``jax.grad`` calls), the count-weighted sum and its gradient. The default run
covers M = 5 (one XLA compilation per case is most of the time); M = 1..7 with ``--runslow``.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

from tests._jax import require_jax

jax = require_jax()

import jax.numpy as jnp  # noqa: E402

from pm_perm.backends.jax import partial_orders, plackett_luce, rank_form  # noqa: E402
from pm_perm.backends.jax.platform import xla_only  # noqa: E402
from pm_perm.kernels.partial_orders import partial_orders_core  # noqa: E402
from pm_perm.kernels.plackett_luce import plackett_luce_core  # noqa: E402
from pm_perm.reference.rankings import every_top_k_order, random_tie_orders  # noqa: E402

jax.config.update("jax_enable_x64", True)

TOL = 1e-10
SIZES = [pytest.param(M, marks=() if M == 5 else pytest.mark.slow) for M in range(1, 8)]
PATHS = ["cpu-kernel", "xla"]


def _path(path):
    return xla_only() if path == "xla" else contextlib.nullcontext()


def invalid_orders(M):
    rows = [np.full(M, M), np.full(M, -2)]
    if M >= 2:
        rows.append(np.r_[1, np.full(M - 1, -1)])  # starts at 1, not 0
    if M >= 3:
        rows.append(np.r_[0, 0, 1, np.full(M - 3, -1)])  # value inside a tie block
    return np.array(rows, dtype=np.int64)


def order_set(rng, M):
    orders = np.concatenate([every_top_k_order(M), random_tie_orders(rng, M, 60),
                             invalid_orders(M)])
    if len(orders) > 400:  # M = 6, 7: a random subset of the top-k orders keeps the run short
        keep = np.sort(rng.choice(len(orders) - 4, 400, replace=False))
        orders = np.concatenate([orders[:-4][keep], orders[-4:]])
    return orders


def logits(rng, shape):
    """Gaussian logits with forbidden entries, every matrix keeping a feasible matching."""
    W = rng.normal(scale=2.0, size=shape)
    M = shape[-1]
    W[rng.random(W.shape) < 0.15] = -np.inf
    for w in W.reshape(-1, M, M):
        w[np.arange(M), rng.permutation(M)] = rng.normal(scale=2.0, size=M)
    return W


FAMILIES = {
    "partial_orders": (lambda orders: partial_orders.loglik_fns(26, orders), partial_orders_core,
                       lambda rng, M: logits(rng, (2, 3, M, M)), 2),
    "plackett_luce": (plackett_luce.loglik_fns, plackett_luce_core,
                      lambda rng, M: rng.normal(scale=2.0, size=(2, 3, M)), 1),
}


def numba_reference(family, x, orders, w):
    """Per-order values, weighted sum and gradient of each parameter set of ``x`` (batched)."""
    _, core, _, core_ndim = FAMILIES[family]
    batch = x.shape[:x.ndim - core_ndim]
    flat = x.reshape((-1,) + x.shape[len(batch):])
    n = orders.shape[0]
    values, totals, grads = np.empty((len(flat), n)), np.empty(len(flat)), np.empty(flat.shape)
    for b, xb in enumerate(flat):
        totals[b] = core(np.ascontiguousarray(xb), orders, w, values[b], grads[b], True)
    return values.reshape(batch + (n,)), totals.reshape(batch), grads.reshape(x.shape)


def _batched(fn, n_batch, n_shared):
    """``fn(x, *shared)`` vmapped over ``n_batch`` leading dimensions of ``x``."""
    for _ in range(n_batch):
        fn = jax.vmap(fn, in_axes=(0,) + (None,) * n_shared)
    return fn


def close(a, b, tol=TOL):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape
    np.testing.assert_array_equal(np.isinf(a), np.isinf(b))
    np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
    fin = np.isfinite(a)
    np.testing.assert_allclose(a[fin], b[fin], rtol=tol, atol=tol)


# Compiled programs by case, shared by the tests that run the same case (JAX compiles a new
# ``jax.jit`` object again even for an identical program: about 5 s of XLA compilation per case)
_PROGRAMS: dict = {}


def run_jax(family, path, const, x, orders, w, with_vjp=True):
    """``(values, total, grad of the sum, gradient of sum_n w_n loglik_n)`` on one path; the
    last is the pullback of ``loglik`` (what ``jax.grad`` of a weighted sum of it calls, i.e.
    its ``custom_vjp`` backward pass), None unless ``with_vjp``. One compiled program per case
    (family, path, the orders when constant, the shapes), reused by later calls."""
    build, _, _, core_ndim = FAMILIES[family]
    nb = x.ndim - core_ndim
    key = (family, path, orders.tobytes() if const else None, orders.shape, orders.dtype.str,
           with_vjp, nb, rank_form.TIE_BATCH_ELEMENTS, plackett_luce.TIE_BLOCK_MAX)
    with _path(path):
        if key not in _PROGRAMS:
            loglik, sum_and_grad, _ = build(orders if const else None)

            def everything(x, o, w):  # one program: one compilation per case
                if with_vjp:  # the values and their pullback from one forward pass
                    values, pullback = jax.vjp(lambda x: _batched(loglik, nb, 1)(x, o), x)
                    g = pullback(jnp.broadcast_to(jnp.where(w != 0, w, 0.0), values.shape))[0]
                else:
                    values, g = _batched(loglik, nb, 1)(x, o), None
                return (values, *_batched(sum_and_grad, nb, 2)(x, o, w), g)

            _PROGRAMS[key] = jax.jit(everything)
        return _PROGRAMS[key](x, orders, w)


def values_case(M, family):
    """The parameters and orders of test_values_and_gradients_match_numba's case."""
    rng = np.random.default_rng(10 * M + (family == "plackett_luce"))
    return FAMILIES[family][2](rng, M), order_set(rng, M), rng


@pytest.mark.parametrize("const", [True, False], ids=["orders-constant", "orders-input"])
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("M", SIZES)
def test_values_and_gradients_match_numba(M, family, path, const):
    x, orders, rng = values_case(M, family)
    w = rng.integers(0, 4, size=len(orders)).astype(np.float64)
    n_bad = len(invalid_orders(M))
    w[-n_bad:] = [0.0, 1.0, 2.0, 0.0][:n_bad]  # invalid rows with and without weight
    ref_values, ref_total, ref_grad = numba_reference(family, x, orders, w)
    values, total, grad, g = run_jax(family, path, const, x, orders, w)
    close(values, ref_values)
    close(total, ref_total)
    close(grad, ref_grad)
    close(g, ref_grad)  # loglik's pullback with the weights: the same gradient
    assert np.all(np.isfinite(g))  # no NaN from -inf values (impossible or invalid orders)


@pytest.mark.parametrize("path", PATHS)
def test_invalid_parameters_give_nan(path):
    """NaN / +inf / too large logits, logits with no permutation, non-finite utilities: NaN
    values, sums and gradients, as the numba Ops; an impossible order: -inf and a finite
    gradient; weight 0 on the invalid rows keeps the sum finite. The parameter sets are members
    of a batch of test_values_and_gradients_match_numba's M = 5 case (its orders and shapes),
    so that its compiled programs serve here too."""
    for family, bad in [("partial_orders", [np.nan, np.inf, 2e300, "no permutation"]),
                        ("plackett_luce", [np.nan, np.inf, -np.inf])]:
        x, orders, _ = values_case(5, family)
        x = np.where(np.isfinite(x), x, 0.0)  # no forbidden entries: every valid order possible
        S = x.shape[0] * x.shape[1]  # the case's batch (2, 3) as S members
        flat = x.reshape((S,) + x.shape[2:])  # a view
        for b, v in enumerate(bad):
            if v == "no permutation":
                flat[b, 2] = -np.inf  # item 2 fits no position
            else:
                flat[b].flat[1] = v
        impossible = None
        if family == "partial_orders":
            impossible = len(bad)
            flat[impossible, 0, 0] = -np.inf  # item 0 never first: orders ranking it first
        w = np.ones(len(orders))
        w[-len(invalid_orders(5)):] = 0.0
        values, total, grad, g = (np.asarray(a).reshape((S,) + np.shape(a)[2:])
                                  for a in run_jax(family, path, True, x, orders, w))
        n = len(bad)
        assert np.isnan(values[:n]).all() and np.isnan(total[:n]).all()
        assert np.isnan(grad[:n]).all() and np.isnan(g[:n]).all()
        ref_values, ref_total, ref_grad = numba_reference(family, flat[n:], orders, w)
        close(values[n:], ref_values)
        close(total[n:], ref_total)
        close(grad[n:], ref_grad)
        close(g[n:], ref_grad)
        good = [b for b in range(n, S) if b != impossible]
        assert np.isfinite(total[good]).all()  # the invalid rows have weight 0
        if impossible is not None:  # rank form: orders[r, i] is the position of item i
            first = (orders[:, 0] == 0) & ((orders == 0).sum(1) == 1)  # item 0 alone first
            assert first.sum() > 10
            assert (values[impossible][first] == -np.inf).all() and total[impossible] == -np.inf
            assert np.isfinite(g[impossible]).all()


@pytest.mark.parametrize("path", PATHS)
def test_extreme_parameters_stay_exact(path):
    """Logits / utilities hundreds of nats apart (a sampler's warm-up visits them): every value
    finite where numba's is (the XLA programs work in log space) and equal to it. The orders and
    shapes of test_values_and_gradients_match_numba's M = 5 case (every top-k order, random tie
    patterns, invalid rows), so that its compiled programs serve here too."""
    for family in FAMILIES:
        x, orders, _ = values_case(5, family)
        x = x * 250.0  # standard deviation 500
        w = np.ones(len(orders))
        ref_values, ref_total, ref_grad = numba_reference(family, x, orders, w)
        values, total, grad, g = run_jax(family, path, True, x, orders, w)
        n_bad = len(invalid_orders(5))
        assert np.isfinite(ref_values[..., :-n_bad]).mean() > 0.5  # mostly possible orders
        close(values, ref_values)
        close(total, ref_total)
        close(grad, ref_grad, tol=1e-8)
        close(g, ref_grad, tol=1e-8)


@pytest.mark.parametrize("family, const", [
    ("partial_orders", True), ("plackett_luce", False),
    pytest.param("partial_orders", False, marks=pytest.mark.slow),
    pytest.param("plackett_luce", True, marks=pytest.mark.slow)])
def test_tie_blocks_in_batches(family, const, monkeypatch):
    """Many tie blocks: with a tiny batch budget the XLA program evaluates them in checkpointed
    ``lax.map`` batches (by block, or by order for orders given as inputs): same values and
    gradients."""
    monkeypatch.setattr(rank_form, "TIE_BATCH_ELEMENTS", 64)
    rng = np.random.default_rng(6)
    M = 5  # every tie-block size (2..5) batched at this budget; M = 6 compiled 1-5 s more XLA
    x = FAMILIES[family][2](rng, M)[0]
    orders = random_tie_orders(rng, M, 80)
    w = rng.integers(1, 4, size=len(orders)).astype(np.float64)
    ref = numba_reference(family, x, orders, w)
    out = run_jax(family, "xla", const, x, orders, w, with_vjp=False)[:3]
    for got, want in zip(out, ref, strict=True):
        close(got, want)


def test_plackett_luce_tie_block_beyond_the_limit(monkeypatch):
    """A tie block beyond TIE_BLOCK_MAX before the last block (numba raises): ValueError when
    the orders are constants, NaN for all orders when they are inputs (XLA program)."""
    monkeypatch.setattr(plackett_luce, "TIE_BLOCK_MAX", 2)
    orders = np.array([[0, 0, 0, 3, -1], [0, 1, -1, -1, -1]])
    u = np.zeros(5)
    with pytest.raises(ValueError, match="TIE_BLOCK_MAX"):
        plackett_luce.loglik_fns(orders)
    with xla_only():
        values = jax.jit(plackett_luce.loglik_fns()[0])(u, orders)
    assert np.isnan(values).all()


def test_parser_matches_numba():
    """The in-program parser of orders given as inputs: the same validity, blocks and position
    order as the numba parser, on random rows (mostly invalid) and valid top-k / tie rows."""
    rng = np.random.default_rng(7)
    parse = jax.jit(lambda o: (rank_form.blocks_jax(o),
                               rank_form.position_order(rank_form.blocks_jax(o))))
    for M in (1, 2, 4, 7):
        rows = np.concatenate([rng.integers(-1, M + 1, size=(3000, M)),
                               every_top_k_order(min(M, 5)) if M <= 5
                               else random_tie_orders(rng, M, 1),
                               random_tie_orders(rng, M, 300)])
        rows = np.concatenate([rows, np.maximum(rows[:, ::-1], -1)]).astype(np.int64)
        (want, seq) = rank_form.blocks_numpy(rows)
        got, got_seq = parse(rows)
        assert want.valid.mean() > 0.05
        for a, b in zip(want, got, strict=True):
            np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(seq[want.valid], np.asarray(got_seq)[want.valid])


@pytest.mark.parametrize("family", list(FAMILIES))
def test_float32_accuracy(family):
    """float32 on the XLA program (a GPU in float32 mode) against the float64 numba kernel:
    relative error of the count-weighted sum below 1e-5, of the gradient (max error over max
    entry) below 1e-4 (measured: at most 3e-8 and 6e-7 here; benchmarks/bench_jax.py reports
    them on all Meath orders, up to 1.2e-7 and 4.7e-5)."""
    rng = np.random.default_rng(8)
    M = 5
    build, _, params, _ = FAMILIES[family]
    x = params(rng, M)[0, 0]
    if family == "partial_orders":
        x = np.where(np.isfinite(x), x, -3.0)  # finite logits: float32 relative errors
    orders = np.concatenate([every_top_k_order(M)[::5], random_tie_orders(rng, M, 50)])
    w = rng.integers(1, 50, size=len(orders)).astype(np.float64)
    _, ref_total, ref_grad = numba_reference(family, x, orders, w)
    with xla_only():
        total, grad = jax.jit(build(orders)[1])(jnp.asarray(x, jnp.float32), orders,
                                                jnp.asarray(w, jnp.float32))
    assert total.dtype == jnp.float32 and grad.dtype == jnp.float32
    assert abs(float(total) - ref_total) <= 1e-5 * abs(ref_total)
    assert np.max(np.abs(np.asarray(grad, np.float64) - ref_grad)) <= 1e-4 * np.abs(ref_grad).max()


@pytest.mark.parametrize("family", list(FAMILIES))
def test_xla_only_covers_the_backward_pass(family):
    """A function that calls the likelihood inside ``xla_only()`` and is differentiated outside
    it (as the sharding recipe's ``model_logp_fn`` is) gets the XLA program in its backward
    pass too: JAX traces that pass after the call, so the choice made in the forward pass is
    carried to it (regression: the backward pass called the CPU kernel, and XLA gathered the
    sharded orders onto one device for it)."""
    build, _, params, _ = FAMILIES[family]
    x = params(np.random.default_rng(9), 4)[0, 0]
    orders = every_top_k_order(4)[::3]
    loglik = build(None)[0]

    def f(x, o):
        with xla_only():
            return jnp.sum(loglik(x, o))

    text = jax.jit(jax.grad(f)).lower(x, orders).as_text()
    assert "custom_call" not in text
