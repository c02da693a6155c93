"""The top-k Ops (pm_perm.ops.top_k) compiled by PyTensor's JAX linker (pm_perm.backends.jax.top_k:
the numba kernel as an XLA FFI custom call) against the numba backend: values and gradients to
1e-10 on random logits and ballots (ties, every length, invalid rows), the NaN / -inf conventions,
kernel errors as XLA errors, numpyro's NUTS on a tiny TopKRanking model, and the value of the
sharding recipe on two forced host devices."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="jax is not installed: pip install pm-perm[jax]")

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import pytensor  # noqa: E402
import pytensor.tensor as pt  # noqa: E402

from pm_perm.backends.jax import cpu_ffi  # noqa: E402
from pm_perm.backends.jax import top_k as jax_top_k  # noqa: E402
from pm_perm.ops.top_k import top_k_loglik, top_k_loglik_sum  # noqa: E402
from pm_perm.reference.rankings import random_tie_orders  # noqa: E402

TOL = 1e-10


def _ballots(rng, M, K, n):
    """Random ballots: weak orders cut to at most K ranked items, distinct, plus the empty
    ballot."""
    out = [np.full(M, -1)]
    for y in random_tie_orders(rng, M, n):
        y = np.where(y < K, y, -1)  # the items placed at K or later become unranked
        # a tie block straddling position K would rank more than K items: drop those too
        ranked = np.flatnonzero(y >= 0)
        if len(ranked) > K:
            y = np.where(y < y[ranked].max(), y, -1)
        out.append(y)
    return np.unique(np.array(out, dtype=np.int64), axis=0)


def _compile(mode, batch):
    L = pt.tensor("L", shape=(None,) * (2 + batch), dtype="float64")
    orders = pt.lmatrix("orders")
    w = pt.dvector("w")
    values = top_k_loglik(L, orders)
    weighted = pt.sum(w * values)
    total = pt.sum(top_k_loglik_sum(L, orders, w))
    outs = [values, pt.grad(weighted, L), total, pt.grad(total, L), pt.grad(total, w)]
    return pytensor.function([L, orders, w], outs, mode=mode)


@pytest.fixture(scope="module")
def fns():
    return {b: (_compile("NUMBA", b), _compile("JAX", b)) for b in (0, 1)}


def _close(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape
    assert np.array_equal(np.isnan(a), np.isnan(b))
    assert np.array_equal(np.isneginf(a), np.isneginf(b))
    ok = np.isfinite(a)
    np.testing.assert_allclose(a[ok], b[ok], rtol=TOL, atol=TOL)


@pytest.mark.parametrize("M, K", [(1, 1), (3, 1), (4, 2), (5, 5), (7, 3)])
@pytest.mark.parametrize("batch", [0, 1])
def test_values_and_gradients_match_numba(fns, M, K, batch):
    rng = np.random.default_rng(10 * M + K + 100 * batch)
    orders = _ballots(rng, M, K, 12)
    assert ((orders >= 0).sum(axis=1) <= K).all()
    w = rng.integers(0, 4, size=len(orders)).astype(float)
    L = rng.normal(size=(2,) * batch + (M, K + 1)) * 1.5
    numba_fn, jax_fn = fns[batch]
    for a, b in zip(numba_fn(L, orders, w), jax_fn(L, orders, w), strict=True):
        _close(a, b)


def test_many_short_ballots_match_one_dp_per_ballot(fns):
    """3,000 ballots of lengths 1..6 over 12 items: enough for the kernel's shared tables
    (pm_perm.kernels.top_k_ballots); the JAX and numba Ops give the values and gradients of one
    DP per ballot (``top_k_core(..., fast=0)``)."""
    from pm_perm.kernels.top_k import top_k_core
    from pm_perm.kernels.top_k_ballots import ballot_lengths, plan_lengths

    rng = np.random.default_rng(8)
    M, K = 12, 6
    u = rng.normal(size=M)
    rows = np.full((3000, M), -1)
    for y, k in zip(rows, rng.integers(1, K + 1, size=len(rows)), strict=True):
        y[np.argsort(-(u + rng.gumbel(size=M)))[:k]] = np.arange(k)
    orders, counts = np.unique(rows, axis=0, return_counts=True)
    assert plan_lengths(M, K, ballot_lengths(orders, K), -1)[1:4].all()
    w = counts.astype(float)
    L = rng.normal(size=(M, K + 1)) * 1.5
    values, grad = np.empty(len(orders)), np.empty(L.shape)
    total = top_k_core(L, orders, w, values, grad, True, 0)
    numba_fn, jax_fn = fns[0]
    for fn in (numba_fn, jax_fn):
        got = fn(L, orders, w)
        _close(got[0], values)
        _close(got[2], total)
        _close(got[3], grad)


def test_invalid_ballots_and_logits_follow_numba(fns):
    """An invalid row, or one ranking more than K items, is -inf (not NaN, not an error) in both
    backends; NaN / +inf logits and logits admitting no top-K list give NaN in both."""
    M, K = 5, 2
    orders = np.array([[0, 1, -1, -1, -1],   # valid
                       [0, 1, 2, -1, -1],    # ranks 3 > K items
                       [0, 2, -1, -1, -1],   # a gap (position 1 empty): not rank form
                       [7, -1, -1, -1, -1]])  # a position beyond M
    w = np.ones(4)
    numba_fn, jax_fn = fns[0]
    L = np.random.default_rng(1).normal(size=(M, K + 1))
    got = jax_fn(L, orders, w)
    assert np.isfinite(got[0][0]) and np.isneginf(got[0][1:]).all()
    for a, b in zip(numba_fn(L, orders, w), got, strict=True):
        _close(a, b)
    bad = [L.copy() for _ in range(3)]
    bad[0][1, 1] = np.nan
    bad[1][0, 0] = np.inf
    bad[2][:, 0] = -np.inf  # no item may take position 0: no top-K list
    for Lb in bad:
        v_numba, v_jax = numba_fn(Lb, orders[:1], w[:1])[0], jax_fn(Lb, orders[:1], w[:1])[0]
        assert np.isnan(v_jax).all() and np.isnan(v_numba).all()


def test_jax_functions_refuse_bad_shapes_when_traced():
    fn = jax_top_k.loglik_fns(24)[0]
    with pytest.raises(ValueError, match="1 <= K <= M"):
        fn(jnp.zeros((2, 4)), jnp.full((1, 2), -1))
    with pytest.raises(ValueError, match="orders have 3 columns but the logits have 4 rows"):
        fn(jnp.zeros((4, 3)), jnp.full((1, 3), -1))
    with pytest.raises(ValueError, match="beyond the Op's limit max_k = 2"):
        jax_top_k.loglik_fns(2)[0](jnp.zeros((4, 4)), jnp.full((1, 4), -1))


def test_a_kernel_error_is_an_xla_error():
    """Logits of a shape the kernel refuses (K = 3 > M = 2 items), passed to the FFI target
    directly (the JAX functions refuse them when traced): the handler raises and JAX raises an
    XLA error at the call; the results are never read as NaN or garbage."""
    shapes = [jax.ShapeDtypeStruct((1,), jnp.float64)]
    with pytest.raises(Exception, match="INTERNAL: pm_perm: a numba kernel raised") as info:
        out = cpu_ffi.call("pm_perm_top_k", shapes, jnp.zeros((2, 4)),
                           jnp.full((1, 2), -1, dtype=jnp.int64), jnp.ones(1),
                           vmap_method="expand_dims")
        np.asarray(out[0])
    assert cpu_ffi.HANDLER_RAISED in str(info.value)
    # the target still answers a valid call afterwards: two items, K = 1, uniform logits
    out = cpu_ffi.call("pm_perm_top_k", shapes, jnp.zeros((2, 2)),
                       jnp.asarray([[0, -1]], dtype=jnp.int64), jnp.ones(1),
                       vmap_method="expand_dims")
    np.testing.assert_allclose(np.asarray(out[0]), [np.log(0.5)], rtol=1e-12)


@pytest.mark.slow  # about 15 s (compiles the JAX model for numpyro)
def test_numpyro_samples_a_tiny_top_k_model():
    """pm.sample(nuts_sampler="numpyro") runs on a TopKRanking model (logits from a rank-one
    item score, observed ballots with counts) and moves: finite draws, no divergences, the
    posterior mean of the score of the item most often ranked first is the largest."""
    pytest.importorskip("numpyro", reason="numpyro is not installed: pip install pm-perm[jax]")
    import warnings

    import pymc as pm

    import pm_perm

    M = 4  # items; K = 2 positions (the logits have K + 1 = 3 columns)
    orders = np.array([[0, 1, -1, -1], [1, 0, -1, -1], [0, -1, -1, 1], [-1, 0, 1, -1]])
    counts = np.array([9, 3, 4, 1])
    slope = np.array([1.0, 0.5, -1.0])  # positions 0, 1, then "not in the top K"
    with pm.Model():
        s = pm.Normal("s", 0.0, 1.0, shape=M)
        logits = s[:, None] * slope[None, :]
        pm_perm.TopKRanking("y", logits=logits, weights=counts, observed=orders)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            warnings.simplefilter("ignore", FutureWarning)
            idata = pm.sample(200, tune=200, chains=1, random_seed=3, progressbar=False,
                              nuts_sampler="numpyro", compute_convergence_checks=False)
    draws = idata.posterior["s"].values.reshape(-1, M)
    assert draws.shape == (200, M) and np.isfinite(draws).all()
    assert int(idata.sample_stats["diverging"].sum()) == 0
    assert np.argmax(draws.mean(axis=0)) == 0


SHARDING_SCRIPT = r"""
import json, numpy as np, jax, pymc as pm
jax.config.update("jax_enable_x64", True)
import pm_perm
from pm_perm.backends.jax.sharding import model_logp_fn, shard_observations

rng = np.random.default_rng(0)
M, K = 6, 3
order = [np.argsort(-rng.gumbel(size=M))[:K] for _ in range(64)]
y = np.full((64, M), -1)
for r, top in enumerate(order):
    y[r, top] = np.arange(K)
y = np.unique(y, axis=0)
y = y[: len(y) - len(y) % 2]
counts = rng.integers(1, 5, size=len(y))
with pm.Model() as model:
    yd = pm.Data("y", y)
    cd = pm.Data("c", counts)
    s = pm.Normal("s", 0.0, 1.0, shape=M)
    logits = s[:, None] * np.array([1.0, 0.6, 0.3, -0.5])[None, :]
    pm_perm.TopKRanking("obs", logits=logits, weights=cd, observed=yd)
params = {"s": rng.normal(size=M)}
logp = model_logp_fn(model, ["y", "c"])
vg = jax.jit(jax.value_and_grad(logp))
one_v, one_g = vg(params, y, counts)
mesh, (ys, cs) = shard_observations(y, counts)
two_v, two_g = vg(params, ys, cs)
ref = model.compile_logp()(params)
print(json.dumps({"devices": len(jax.devices()), "y_devices": len(ys.sharding.device_set),
                  "one": float(one_v), "two": float(two_v), "numba": float(ref),
                  "g_one": np.asarray(one_g["s"]).tolist(),
                  "g_two": np.asarray(two_g["s"]).tolist()}))
"""


@pytest.mark.slow  # about 50 s (a subprocess starting jax, pymc and numba)
def test_two_device_sharded_top_k_loglik_equals_one_device():
    """The sharding recipe on a TopKRanking model with the ballots and counts as pm.Data: on two
    forced host devices (data split across them) the value and gradient equal one device's to
    1e-10, and the numba path's value. (The custom call is not partitioned: XLA all-gathers the
    ballots and each device scores all of them; see pm_perm.backends.jax.sharding.)"""
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2",
               PYTHONPATH=str(Path(__file__).resolve().parents[3]))
    out = subprocess.run([sys.executable, "-c", SHARDING_SCRIPT], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["devices"] == 2 and r["y_devices"] == 2
    assert abs(r["two"] - r["one"]) <= TOL * max(1.0, abs(r["one"]))
    assert abs(r["one"] - r["numba"]) <= 1e-8 * max(1.0, abs(r["numba"]))
    np.testing.assert_allclose(r["g_two"], r["g_one"], rtol=TOL, atol=TOL)
