"""What a JAX sampler compiles for a ranking model on a CPU, with and without the XLA branch
(run: python benchmarks/bench_jax_trace.py).

On a CPU the ranking likelihoods run pm_perm's numba kernels as FFI calls; the XLA programs are
what GPUs run. ``pm_perm.backends.jax.platform.on_platform`` used to trace both and let
``jax.lax.platform_dependent`` pick one when the program is lowered; where the CPU is JAX's only
backend it now traces the CPU branch alone. This script measures both ways side by side in one
process (the old way by making ``_cpu_only`` answer False): the CPU seconds to trace and lower,
and to compile, ``jax.jit(jax.value_and_grad(logp))`` of PyMC's jaxified logp (what numpyro and
blackjax compile) of a ``PlackettLuce`` and a ``PartialRanking`` model (ZeroSumNormal
parameters) of up to 300 distinct random weak orders of ``--items`` items (the tests' generator,
``pm_perm.reference.rankings.random_tie_orders``: blocks of random sizes, so with middle tie blocks)
or, with ``--no-ties``, 300 Plackett-Luce top-k ballots of every length
(``pm_perm.preferences.synthetic.draw_ballots``). Each case is built
anew (no trace cache shared), after a warm-up case of the same family, the old way first.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pm_perm.reference.rankings import random_tie_orders  # noqa: E402


def measure(family, orders, both):
    import jax
    import pymc as pm
    from pymc.sampling.jax import get_jaxified_logp

    from pm_perm import PartialRanking, PlackettLuce
    from pm_perm.backends.jax import platform

    M = orders.shape[1]
    with pm.Model() as model:
        if family == "PlackettLuce":
            u = pm.ZeroSumNormal("u", sigma=1.0, shape=M)
            PlackettLuce("y", utilities=u, observed=orders)
        else:
            W = pm.ZeroSumNormal("W", sigma=1.0, shape=(M, M), n_zerosum_axes=2)
            PartialRanking("y", logits=W, observed=orders)
    logp = get_jaxified_logp(model)
    point = model.initial_point()
    x0 = [np.zeros(point[v.name].shape) for v in model.value_vars]
    real = platform._cpu_only
    if both:
        platform._cpu_only = lambda: False
    try:
        t0 = time.process_time()
        lowered = jax.jit(jax.value_and_grad(logp)).lower(x0)
        t1 = time.process_time()
        lowered.compile()
        t2 = time.process_time()
    finally:
        platform._cpu_only = real
    return t1 - t0, t2 - t1


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--items", type=int, default=8)
    p.add_argument("--no-ties", action="store_true")
    args = p.parse_args(argv)
    import jax
    from jax.extend.backend import backends

    jax.config.update("jax_enable_x64", True)
    from pm_perm.preferences.synthetic import draw_ballots

    rng = np.random.default_rng(0)
    M = args.items
    if args.no_ties:  # Plackett-Luce ballots of every length 1..M
        orders = draw_ballots(300, utilities=rng.normal(size=M),
                              length_probs=np.r_[0.0, np.ones(M)], rng=rng)
    else:
        orders = random_tie_orders(rng, M, 300)
    print(f"JAX {jax.__version__}, backends: {sorted(backends())}; {len(orders)} "
          f"{'top-k' if args.no_ties else 'weak'} orders of {M} items; CPU seconds")
    print(f"{'model':16s} {'traced':22s} {'trace + lower':>14s} {'compile':>8s} {'total':>7s}")
    for family in ("PlackettLuce", "PartialRanking"):
        measure(family, orders[:50], True)  # warm-up: JAX's and PyTensor's first-call costs
        for both in (True, False):
            trace, comp = measure(family, orders, both)
            label = "both branches (before)" if both else "CPU branch alone"
            print(f"{family:16s} {label:22s} {trace:14.2f} {comp:8.2f} {trace + comp:7.2f}",
                  flush=True)


if __name__ == "__main__":
    main()
