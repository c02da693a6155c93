"""numpyro, blackjax and nutpie's JAX backend against the default sampler, on pm_perm models.

For each model of ``tests/backends/jax/test_jax_samplers.py`` (small generated data; the task
models:
learned matching, RankMatch, the ordinal ranker, NChooseK with a Dirichlet count prior; and
ConditionalBernoulli, PermutationExpFamily exact / Bethe, OrdinalNChooseK, PartialRanking and
PlackettLuce on top-k ballots), samples with the default sampler (nutpie on numba) and with
each JAX sampler, 4 chains x (1,000 tune + 1,000 draws),
and prints one row per model and sampler: wall time (including compilation), max r_hat over all
scalars, divergences, and max |posterior mean - default's| / MC standard error of the
difference. The acceptance bounds (the slow tests) are r_hat <= 1.01, no divergences, and
``|difference| / se <= 5``.

Run from the repository root:
``OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/bench_jax_samplers.py [--models ...]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.backends.jax.test_jax_samplers import (  # noqa: E402
    CHAINS,
    DRAWS,
    FAST,
    SAMPLERS,
    SLOW,
    TUNE,
    compare,
    sample,
)

MODELS = {**FAST, **SLOW}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    p.add_argument("--samplers", nargs="*", default=SAMPLERS, choices=SAMPLERS)
    args = p.parse_args(argv)
    import jax

    print(f"JAX devices: {jax.devices()}; {CHAINS} chains x ({TUNE} tune + {DRAWS} draws)")
    print(f"{'model':22s} {'sampler':10s} {'wall (s)':>9s} {'max r_hat':>10s} "
          f"{'diverg.':>8s} {'max |diff|/se':>14s}", flush=True)
    for name in args.models:
        model = MODELS[name]()
        t = time.perf_counter()
        ref = sample(model, "default")
        dt = time.perf_counter() - t
        r, d, _ = compare(model, ref, ref)
        print(f"{name:22s} {'default':10s} {dt:9.1f} {r:10.4f} {d:8d} {'-':>14s}", flush=True)
        for sampler in args.samplers:
            t = time.perf_counter()
            try:
                idata = sample(model, sampler)
            except Exception as e:  # report and go on: the table shows every failure
                print(f"{name:22s} {sampler:10s} FAILED: {type(e).__name__}: {e}"[:300],
                      flush=True)
                continue
            dt = time.perf_counter() - t
            r, d, z = compare(model, idata, ref)
            print(f"{name:22s} {sampler:10s} {dt:9.1f} {r:10.4f} {d:8d} {z:14.2f}", flush=True)


if __name__ == "__main__":
    main()
