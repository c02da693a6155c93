"""JAX path vs numba path, side by side in one process (run: python benchmarks/bench_jax.py).

1. Value + gradient of the exact log-permanent (M = 5 with a batch of 1,000 matrices; M = 10,
   15, 20 single matrices) and of the conditional-Bernoulli normaliser (D = 1,000 and 10,000,
   k = D / 10): the same PyTensor graph compiled with the default (numba) linker and twice with
   ``mode="JAX"``: with the CPU path (host callbacks into the numba kernels, the default on
   CPU) and with the XLA DPs (what GPUs run; forced on CPU by ``xla_only``); best of a few calls
   after a warm-up (compilation excluded). Run with one thread
   (``OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1``).
2. Sampling wall time on the demo model (examples/demo.py: 200 graphs, M = 8, d = 4; 4 chains x
   (1,000 tune + 1,000 draws)), including compilation: default sampler (nutpie, numba), nutpie's
   JAX backend, numpyro.
3. float32 accuracy of the JAX kernels: relative error of log perm at M = 8..20 and of log e_k
   at D = 1,000 (float32 inputs, float64 reference); of the partial-order and Plackett-Luce
   log-likelihoods of all Meath-sized orders and of their gradients.
4. Ranking data: value + gradient of the count-weighted log-likelihood of ALL orders of a
   Meath-sized data set (the Meath file ``--meath``, PrefLib ED-00001-00000003, 25,101 distinct
   top-k orders of M = 14, where present; else 25,000 distinct generated top-k orders of M = 14)
   under the partial-order likelihood (one 14 x 14 ``W``) and Plackett-Luce (14 utilities),
   numba vs the JAX CPU path vs the XLA program, with the orders as constants of the graph (as
   ``pm.sample(nuts_sampler="numpyro" / "blackjax")`` compiles observed data) and as inputs of
   the compiled function (as nutpie's JAX backend passes ``pm.Data``); and the ``pm.logp`` of
   ``PartialRanking`` / ``PlackettLuce`` with counts, summed, and its gradient.

Prints the JAX device; runs unchanged on a GPU (``pip install jax[cuda12]``).
Options: ``--skip-sampling``, ``--skip-kernels``, ``--skip-rankings``, ``--max-m``, ``--meath``.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import best_time  # noqa: E402

from pm_perm.datasets import data_home  # noqa: E402


def _blocking(*fns):
    """Calls that wait for the result (JAX dispatches asynchronously)."""
    import jax

    return [lambda *a, f=f: jax.block_until_ready(f(*a)) for f in fns]


def _compiled(inputs, outputs, values, xla):
    """The graph compiled with ``mode="JAX"`` and traced (first call) with the CPU host kernels
    or, with ``xla``, the XLA DPs (what GPUs run)."""
    import pytensor

    from pm_perm.backends.jax.platform import xla_only

    (fn,) = _blocking(pytensor.function(inputs, outputs, mode="JAX"))
    with xla_only() if xla else contextlib.nullcontext():
        fn(*values)
    return fn


def kernels(max_m):
    import pytensor
    import pytensor.tensor as pt

    from pm_perm.ops.cardinality import log_esp
    from pm_perm.ops.permanent import log_permanent

    rng = np.random.default_rng(0)
    print("value + gradient, seconds per call (best of several); ratios to numba")
    print(f"{'case':32s} {'numba':>10s} {'JAX cpu-kernel':>15s} {'JAX XLA':>10s} "
          f"{'cpu-kernel/numba':>17s} {'XLA/numba':>10s}")

    def row(label, inputs, outs, values, reps):
        (numba,) = _blocking(pytensor.function(inputs, outs))
        fns = [numba] + [_compiled(inputs, outs, values, xla) for xla in (False, True)]
        t = [best_time(lambda f=f: f(*values), reps) for f in fns]
        print(f"{label:32s} {t[0]:10.3g} {t[1]:15.3g} {t[2]:10.3g} {t[1] / t[0]:17.2f} "
              f"{t[2] / t[0]:10.2f}", flush=True)

    cases = [("M = 5, batch 1,000", (1000, 5, 5))] + [
        (f"M = {m}", (m, m)) for m in (10, 15, 20) if m <= max_m]
    for label, shape in cases:
        W = pt.tensor("W", shape=(None,) * len(shape))
        v = log_permanent(W)
        row(f"log_perm {label}", [W], [v, pt.grad(pt.sum(v), W)], [rng.normal(size=shape)],
            10 if shape[-1] >= 15 else 50)
    for D in (1000, 10000):
        th, k = pt.vector("th"), pt.lscalar("k")
        v = log_esp(th, k)
        row(f"log_esp D = {D}, k = {D // 10}", [th, k], [v, pt.grad(v, th)],
            [rng.normal(size=D), np.int64(D // 10)], 10)


MEATH = data_home() / "preflib" / "irish" / "00001-00000003.soi"


def meath_orders(path):
    """``(orders, counts, source)``: the distinct orders of the Meath file, or 25,000 distinct
    generated top-k orders of M = 14 (full-model draws, ballot lengths skewed short, seed 0)."""
    from pm_perm.preferences import read_preflib

    if path is not None and Path(path).is_file():
        data = read_preflib(path)
        return (np.asarray(data.orders), np.asarray(data.counts, dtype=np.float64),
                f"{Path(path).name}: {int(data.counts.sum()):,} ballots")
    from pm_perm.preferences.synthetic import draw_ballots

    rng = np.random.default_rng(0)
    M = 14
    W = np.outer(np.linspace(1.5, -1.5, M), np.linspace(1, -1, M)) + rng.normal(size=(M, M))
    pk = np.r_[0.0, 0.75 ** np.arange(M)]
    seen, counts = {}, []
    while len(seen) < 25_000:
        for y in draw_ballots(20_000, logits=W, length_probs=pk / pk.sum(), rng=rng):
            key = y.tobytes()
            if key in seen:
                counts[seen[key]] += 1
            elif len(seen) < 25_000:
                seen[key] = len(counts)
                counts.append(1)
    orders = np.frombuffer(b"".join(seen), dtype=np.int64).reshape(-1, M).copy()
    return orders, np.asarray(counts, dtype=np.float64), "generated (Meath file absent)"


def rankings(meath):
    import pymc as pm
    import pytensor
    import pytensor.tensor as pt

    from pm_perm import PartialRanking, PlackettLuce
    from pm_perm.ops.partial_orders import partial_order_loglik_sum
    from pm_perm.ops.plackett_luce import plackett_luce_loglik_sum

    orders, counts, source = meath_orders(meath)
    n, M = orders.shape
    print(f"ranking data: {source}, {n:,} distinct orders, M = {M}")
    print("value + gradient of all orders, seconds per call (best of 20); ratios to numba")
    print(f"{'case':52s} {'numba':>9s} {'JAX cpu':>9s} {'JAX XLA':>9s} {'cpu/numba':>10s} "
          f"{'XLA/numba':>10s}")
    rng = np.random.default_rng(3)
    # static shapes, as in a model (a W of unknown shape would keep the logp's reshape of the
    # observed orders symbolic: the orders would not be constants of the compiled graph)
    W, u = pt.tensor("W", shape=(M, M)), pt.tensor("u", shape=(M,))
    o, c = pt.lmatrix("o"), pt.vector("c")
    Wv, uv = rng.normal(size=(M, M)), rng.normal(size=M)

    def row(label, inputs, out, x, *data):
        outs = [out, pt.grad(out, inputs[0])]
        values = [x, *data]
        (numba,) = _blocking(pytensor.function(inputs, outs))
        fns = [numba] + [_compiled(inputs, outs, values, xla) for xla in (False, True)]
        ref = numba(*values)
        for f in fns[1:]:  # the same value and gradient (not timed)
            got = f(*values)
            assert np.allclose(got[0], ref[0], rtol=1e-10), (label, got[0], ref[0])
            assert np.allclose(got[1], ref[1], rtol=1e-8, atol=1e-8 * np.abs(ref[1]).max())
        t = [best_time(lambda f=f: f(*values), 20) for f in fns]
        print(f"{label:52s} {t[0]:9.3g} {t[1]:9.3g} {t[2]:9.3g} {t[1] / t[0]:10.2f} "
              f"{t[2] / t[0]:10.2f}", flush=True)

    for name, x, xv, sum_op, dist in [
        ("partial orders", W, Wv, partial_order_loglik_sum,
         lambda x: PartialRanking.dist(logits=x, weights=counts)),
        ("Plackett-Luce", u, uv, plackett_luce_loglik_sum,
         lambda x: PlackettLuce.dist(utilities=x, weights=counts)),
    ]:
        row(f"{name}: loglik_sum, orders constant", [x], sum_op(x, orders, counts), xv)
        row(f"{name}: loglik_sum, orders as inputs", [x, o, c], sum_op(x, o, c), xv, orders,
            counts)
        with warnings.catch_warnings():  # "Skipping Check{...} Op": no parameter checks in JAX
            warnings.simplefilter("ignore", UserWarning)
            row(f"{name}: pm.logp(counts) summed", [x], pm.logp(dist(x), orders).sum(), xv)


def float32_accuracy(meath):
    """The float32 accuracy of the XLA DPs (traced inside ``xla_only``: what a GPU runs; the
    CPU path computes in float64 whatever the input dtype)."""
    from pm_perm.backends.jax.platform import xla_only

    with xla_only():
        _float32_errors()
        _float32_ranking_errors(meath)


def _float32_ranking_errors(meath):
    import jax
    import jax.numpy as jnp

    from pm_perm.backends.jax import partial_orders, plackett_luce
    from pm_perm.kernels.partial_orders import partial_order_loglik_and_grad
    from pm_perm.kernels.plackett_luce import plackett_luce_loglik_and_grad

    orders, counts, source = meath_orders(meath)
    M = orders.shape[1]
    rng = np.random.default_rng(4)
    print(f"float32 (XLA), all orders of {source}: relative error of the count-weighted "
          "log-likelihood and max |gradient error| / max |gradient| (3 draws; max)")
    for name, fns, ref, shape in [
        ("partial orders", partial_orders.loglik_fns(26, orders)[1],
         partial_order_loglik_and_grad, (M, M)),
        ("Plackett-Luce", plackett_luce.loglik_fns(orders)[1], plackett_luce_loglik_and_grad,
         (M,)),
    ]:
        f = jax.jit(lambda x, w, fns=fns: fns(x, orders, w))
        for scale in (1.0, 3.0):
            ev, eg = [], []
            for _ in range(3):
                x = rng.normal(size=shape) * scale
                rv, rg = ref(x, orders, counts)
                v, g = f(jnp.asarray(x, jnp.float32), jnp.asarray(counts, jnp.float32))
                ev.append(abs(float(v) - rv) / abs(rv))
                eg.append(float(np.max(np.abs(np.asarray(g, np.float64) - rg)) / np.abs(rg).max()))
            print(f"  {name}, parameters N(0, {scale:g}^2): value {max(ev):.1e}, "
                  f"gradient {max(eg):.1e}")


def _float32_errors():
    import jax
    import jax.numpy as jnp

    from pm_perm.backends.jax.cardinality import log_esp
    from pm_perm.backends.jax.permanent import log_permanent
    from pm_perm.kernels.esp import log_esp_core
    from pm_perm.kernels.permanent import log_permanent as lp64

    rng = np.random.default_rng(1)
    f = jax.jit(log_permanent)
    print("float32 (the XLA DPs, as on a GPU; the CPU path computes in float64): relative error "
          "of log perm (logits N(0, 1); 3 matrices per M; max)")
    for M in range(8, 21, 2):
        errs = []
        for _ in range(3):
            W = rng.normal(size=(M, M))
            ref = lp64(W)
            errs.append(abs(float(f(jnp.asarray(W, jnp.float32))) - ref) / abs(ref))
        print(f"  M = {M:2d}: {max(errs):.2e}")
    g = jax.jit(log_esp)
    for k in (10, 100, 500):
        errs = []
        for _ in range(3):
            th = rng.normal(size=1000)
            ref = log_esp_core(th, k)
            errs.append(abs(float(g(jnp.asarray(th, jnp.float32), k)) - ref) / abs(ref))
        print(f"float32: relative error of log e_k, D = 1,000, k = {k}: {max(errs):.2e}")


def sampling():
    import nutpie
    import pymc as pm

    import pm_perm

    rng = np.random.default_rng(2026)
    theta_true = np.array([1.0, -0.7, 0.4, 0.0])
    G, M, d = 200, 8, 4
    x = rng.normal(size=(G, M, M, d))
    x[:, np.arange(M), np.arange(M), 0] += 1.5
    y = pm.draw(pm_perm.PermutationExpFamily.dist(logits=x @ theta_true), random_seed=rng)
    with pm.Model() as model:
        theta = pm.Normal("theta", 0.0, 2.0, shape=d)
        pm_perm.PermutationExpFamily("y", logits=pm_perm.edge_logits(x, theta), observed=y)
    kw = dict(draws=1000, tune=1000, chains=4, random_seed=1, progressbar=False)
    print("sampling the demo model (4 x (1,000 + 1,000)), wall time incl. compilation:")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for label, run in [
            ("default (nutpie, numba)", lambda: pm.sample(model=model, **kw)),
            ("nutpie, JAX backend", lambda: nutpie.sample(
                nutpie.compile_pymc_model(model, backend="jax"), draws=1000, tune=1000,
                chains=4, seed=1, progress_bar=False)),
            ("numpyro", lambda: pm.sample(model=model, nuts_sampler="numpyro",
                                          nuts={"chain_method": "vectorized"}, **kw)),
        ]:
            t = time.perf_counter()
            idata = run()
            dt = time.perf_counter() - t
            mean = idata.posterior["theta"].mean(("chain", "draw")).values
            print(f"  {label:26s} {dt:8.1f} s   posterior mean theta {np.round(mean, 3)}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--skip-sampling", action="store_true")
    p.add_argument("--skip-kernels", action="store_true",
                   help="skip parts 1 and 3 (kernel timings, float32 accuracy)")
    p.add_argument("--skip-rankings", action="store_true", help="skip part 4 (ranking data)")
    p.add_argument("--max-m", type=int, default=20)
    p.add_argument("--meath", default=str(MEATH),
                   help="PrefLib Meath file (ED-00001-00000003.soi); generated orders if absent")
    args = p.parse_args(argv)
    import jax
    import pytensor.link.jax.dispatch  # noqa: F401  (turns on float64 with floatX = float64)

    import pm_perm  # noqa: F401  (registers the JAX implementations)

    # (printed after PyTensor's JAX linker is imported: before, x64 reads False though every
    # graph below is compiled in float64)
    print(f"JAX devices: {jax.devices()}  (x64: {jax.config.jax_enable_x64})")
    if not args.skip_kernels:
        kernels(args.max_m)
        float32_accuracy(args.meath)
    if not args.skip_rankings:
        rankings(args.meath)
    if not args.skip_sampling:
        sampling()


if __name__ == "__main__":
    main()
