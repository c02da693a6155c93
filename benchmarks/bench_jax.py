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
   at D = 1,000 (float32 inputs, float64 reference).

Prints the JAX device; runs unchanged on a GPU (``pip install jax[cuda12]``).
Options: ``--skip-sampling``, ``--skip-kernels``, ``--max-m``.
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
from _timing import best_time  # noqa: E402


def _blocking(*fns):
    """Calls that wait for the result (JAX dispatches asynchronously)."""
    import jax

    return [lambda *a, f=f: jax.block_until_ready(f(*a)) for f in fns]


def _compiled(inputs, outputs, values, xla):
    """The graph compiled with ``mode="JAX"`` and traced (first call) with the CPU host kernels
    or, with ``xla``, the XLA DPs (what GPUs run)."""
    import pytensor

    from pm_perm.jax_backend.platform import xla_only

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


def float32_accuracy():
    """The float32 accuracy of the XLA DPs (traced inside ``xla_only``: what a GPU runs; the
    CPU path computes in float64 whatever the input dtype)."""
    from pm_perm.jax_backend.platform import xla_only

    with xla_only():
        _float32_errors()


def _float32_errors():
    import jax
    import jax.numpy as jnp

    from pm_perm.jax_backend.cardinality import log_esp
    from pm_perm.jax_backend.permanent import log_permanent
    from pm_perm.kernels.cardinality import log_esp_core
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
    p.add_argument("--max-m", type=int, default=20)
    args = p.parse_args(argv)
    import jax

    import pm_perm  # noqa: F401  (registers the JAX implementations)

    print(f"JAX devices: {jax.devices()}  (x64: {jax.config.jax_enable_x64})")
    if not args.skip_kernels:
        kernels(args.max_m)
        float32_accuracy()
    if not args.skip_sampling:
        sampling()


if __name__ == "__main__":
    main()
