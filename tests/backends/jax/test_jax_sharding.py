"""The data-parallel recipe of pm_perm.backends.jax.sharding on two (virtual) CPU devices, with a
PermutationExpFamily likelihood (graphs) and a PartialRanking likelihood (ballots).

Runs in a subprocess because the device count must be set (``XLA_FLAGS``) before jax starts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests._jax import require_jax

require_jax()

SCRIPT = r"""
import json, numpy as np, jax, pymc as pm
import pm_perm
from pm_perm.backends.jax.sharding import model_logp_fn, shard_observations

rng = np.random.default_rng(0)
G, M, d = 8, 5, 2
x = rng.normal(size=(G, M, M, d))
y = np.array([rng.permutation(M) for _ in range(G)])
k_theta = np.array([0.7, -0.3])
with pm.Model() as model:
    xd = pm.Data("x", x)
    yd = pm.Data("y", y)
    theta = pm.Normal("theta", 0.0, 1.0, shape=d)
    pm_perm.PermutationExpFamily("obs", logits=pm_perm.edge_logits(xd, theta), observed=yd)
logp = model_logp_fn(model, ["x", "y"])
params = {"theta": k_theta}
vg = jax.jit(jax.value_and_grad(logp))
one_v, one_g = vg(params, x, y)                     # one device (unsharded inputs)
mesh, (xs, ys) = shard_observations(x, y)
two_v, two_g = vg(params, xs, ys)
ref = model.compile_logp()({"theta": k_theta})      # the numba path
hlo = vg.lower(params, xs, ys).compile().as_text()  # the subset DP's table: one half per device
tables = {"half": hlo.count(f"f64[{G // 2},{2 ** M}]"),
          "whole": hlo.count(f"f64[{G},{2 ** M}]")}
print(json.dumps({
    "devices": len(jax.devices()),
    "x_devices": len(xs.sharding.device_set),
    "one": float(one_v), "two": float(two_v), "numba": float(ref),
    "tables": tables, "g_one": np.asarray(one_g["theta"]).tolist(),
    "g_two": np.asarray(two_g["theta"]).tolist(),
}))
"""


RANKINGS_SCRIPT = r"""
import json, numpy as np, jax, pymc as pm
import pm_perm
from pm_perm.backends.jax.sharding import model_logp_fn, shard_observations
from pm_perm.preferences.synthetic import simulate_rankings

M = 5
data = simulate_rankings(300, logits=np.outer(np.linspace(1, -1, M), np.linspace(1.5, -1.5, M)),
                         length_probs=[0, 0.3, 0.3, 0.2, 0.2, 0], rng=0)
ties = np.array([[0, 0, 2, 2, -1], [2, 0, 0, 3, -1]])  # weak orders: tie blocks of 2 items
orders = np.concatenate([data.orders, ties])
counts = np.concatenate([data.counts, [3, 2]]).astype(np.float64)
if len(orders) % 2:  # an even split: pad with a zero-count order
    orders, counts = np.concatenate([orders, orders[:1]]), np.concatenate([counts, [0.0]])
with pm.Model() as model:
    od = pm.Data("orders", orders)
    cd = pm.Data("counts", counts)
    W = pm.ZeroSumNormal("W", sigma=1.5, shape=(M, M), n_zerosum_axes=2)
    pm_perm.PartialRanking("y", logits=W, weights=cd, observed=od)
logp = model_logp_fn(model, ["orders", "counts"])
params = {"W_zerosum__": np.random.default_rng(1).normal(size=(M - 1, M - 1))}
vg = jax.jit(jax.value_and_grad(logp))
one_v, one_g = vg(params, orders, counts)
mesh, (os_, cs) = shard_observations(orders, counts)
two_v, two_g = vg(params, os_, cs)
ref = model.compile_logp()(params)
hlo = vg.lower(params, os_, cs).compile().as_text()
n = len(orders)
tables = {"half": hlo.count(f"s32[{n // 2},{M}]"), "whole": hlo.count(f"s32[{n},{M}]")}
print(json.dumps({
    "devices": len(jax.devices()), "x_devices": len(os_.sharding.device_set),
    "one": float(one_v), "two": float(two_v), "numba": float(ref), "tables": tables,
    "callbacks": hlo.count("custom_call_target=\"pm_perm") + hlo.count("callback"),
    "g_one": np.asarray(one_g["W_zerosum__"]).ravel().tolist(),
    "g_two": np.asarray(two_g["W_zerosum__"]).ravel().tolist(),
}))
"""


PLACKETT_LUCE_SCRIPT = r"""
import json, numpy as np, jax, pymc as pm
import pm_perm
from pm_perm.backends.jax.sharding import model_logp_fn, shard_observations
from pm_perm.preferences.synthetic import top_k_ballots

M = 7
data, _ = top_k_ballots(20_000, M, 4, lengths=[0, 0.4, 0.3, 0.2, 0.1], rng=0)
orders, counts = np.asarray(data.orders), data.counts.astype(np.float64)
assert counts.max() > 1  # distinct orders with counts, as the many-ballot data
if len(orders) % 2:  # an even split: pad with a zero-count order
    orders, counts = np.concatenate([orders, orders[:1]]), np.concatenate([counts, [0.0]])
with pm.Model() as model:
    od = pm.Data("orders", orders)
    cd = pm.Data("counts", counts)
    u = pm.ZeroSumNormal("u", sigma=1.5, shape=M)
    pm_perm.PlackettLuce("y", utilities=u, weights=cd, observed=od)
logp = model_logp_fn(model, ["orders", "counts"])
params = {"u_zerosum__": np.random.default_rng(1).normal(size=M - 1)}
vg = jax.jit(jax.value_and_grad(logp))
one_v, one_g = vg(params, orders, counts)
mesh, (os_, cs) = shard_observations(orders, counts)
two_v, two_g = vg(params, os_, cs)
ref = model.compile_logp()(params)
print(json.dumps({
    "devices": len(jax.devices()), "x_devices": len(os_.sharding.device_set),
    "one": float(one_v), "two": float(two_v), "numba": float(ref),
    "n_ballots": int(counts.sum()),
    "g_one": np.asarray(one_g["u_zerosum__"]).ravel().tolist(),
    "g_two": np.asarray(two_g["u_zerosum__"]).ravel().tolist(),
}))
"""


def _run(script):
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2",
               JAX_PLATFORMS="cpu")
    root = Path(__file__).resolve().parents[2]
    env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", script], env=env, cwd=root,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _same(res):
    assert abs(res["two"] - res["one"]) <= 1e-10 * abs(res["one"])
    assert abs(res["one"] - res["numba"]) <= 1e-10 * abs(res["numba"])
    for a, b in zip(res["g_one"], res["g_two"], strict=True):
        assert abs(a - b) <= 1e-10 * max(1.0, abs(a))


@pytest.mark.slow
def test_two_device_sharded_partial_ranking_loglik():
    """Ballots split over two devices: the partial-order likelihood is an XLA program (no custom
    call or host callback), each device parses and scores its half of the orders, and the
    log-likelihood and its gradient equal the one-device and numba values."""
    res = _run(RANKINGS_SCRIPT)
    assert res["devices"] == 2 and res["x_devices"] == 2
    assert res["callbacks"] == 0, res
    assert res["tables"]["half"] > 0 and res["tables"]["whole"] == 0, res["tables"]
    _same(res)


@pytest.mark.slow
def test_two_device_sharded_loglik_equals_one_device():
    res = _run(SCRIPT)
    assert res["devices"] == 2 and res["x_devices"] == 2  # data really split over two devices
    # the recipe traces the XLA DP (model_logp_fn(xla=True)), which XLA partitions: each device
    # fills the subset table of its G / 2 observations, never the whole batch
    assert res["tables"]["half"] > 0 and res["tables"]["whole"] == 0, res["tables"]
    _same(res)


@pytest.mark.slow
def test_two_device_sharded_plackett_luce_with_counts():
    """Distinct top-k orders with counts (the many-ballot data of issue 50) split over two
    devices: Plackett-Luce's log-likelihood and gradient equal the one-device and numba values
    to 1e-10.

    Not asserted (unlike the partial-order test): that each device holds only its half of the
    orders. On 2026-11-29 the compiled program held the whole (n, M) orders on each device
    (an all-gather inserted by XLA's partitioner before Plackett-Luce's per-order work), so the
    values agree but the split of the work is not shown; see issue 50's closing note."""
    res = _run(PLACKETT_LUCE_SCRIPT)
    assert res["devices"] == 2 and res["x_devices"] == 2 and res["n_ballots"] == 20_000
    _same(res)
