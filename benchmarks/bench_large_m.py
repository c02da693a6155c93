"""Benchmarks for the large-M methods (issue 6): Bethe accuracy and speed, Huber-Law speed and
acceptance, swap-MCMC throughput.

Run: ``.venv/bin/python benchmarks/bench_large_m.py [--quick]`` (one thread:
``NUMBA_NUM_THREADS=1``). Prints Markdown tables. The exact reference for M <= 24 is
pm_perm's exact engine (``pm_perm.kernels.permanent.log_permanent_and_marginals``).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from pm_perm.kernels.bethe import bethe_core, bethe_log_permanent_and_marginals
from pm_perm.kernels.huber_law import huber_law_sample_core, huber_law_scale
from pm_perm.kernels.permanent import log_permanent_and_marginals
from pm_perm.kernels.swap_mcmc import swap_mcmc_core


def bethe_accuracy(sizes, spreads, seed=0):
    print("\n### Bethe vs exact (one random Gaussian logit matrix W = s * N(0, 1) per cell)\n")
    print("| M | s | log perm (exact) | log perm_B - log perm | max abs marginal error | sweeps |")
    print("|---|---|---|---|---|---|")
    rng = np.random.default_rng(seed)
    for M in sizes:
        for s in spreads:
            W = rng.normal(size=(M, M)) * s
            lz, mar = log_permanent_and_marginals(W)
            vb, gb, n_iter, err = bethe_core(W, 1e-9, 100_000)
            assert err <= 1e-9
            err_m = np.abs(gb - mar).max()
            print(f"| {M} | {s} | {lz:.4f} | {vb - lz:.4f} | {err_m:.4f} | {n_iter} |")


def bethe_speed(M, spreads, seed=1, reps=3):
    print(f"\n### Bethe value + gradient at M = {M} (one call returns both; best of {reps})\n")
    print("| s | time (s) | sweeps |")
    print("|---|---|---|")
    rng = np.random.default_rng(seed)
    bethe_log_permanent_and_marginals(rng.normal(size=(8, 8)))  # compile
    for s in spreads:
        W = rng.normal(size=(M, M)) * s
        best = np.inf
        for _ in range(reps):
            t = time.perf_counter()
            _, _, n_iter, err = bethe_core(W, 1e-9, 100_000)
            best = min(best, time.perf_counter() - t)
        print(f"| {s} | {best:.3f} | {n_iter} |")


def huber_law_speed(sizes, spreads, budget_s, seed=2):
    print(f"\n### Huber-Law exact sampler (time budget {budget_s} s per cell)\n")
    print(
        "| M | s | samples | trials | acceptance rate | time per trial (ms) "
        "| time per sample (s) |"
    )
    print("|---|---|---|---|---|---|---|")
    rng = np.random.default_rng(seed)
    huber_law_sample_core(np.random.default_rng(0), huber_law_scale(np.zeros((3, 3)))[0], 1, 10)
    for M in sizes:
        for s in spreads:
            W = rng.normal(size=(M, M)) * s
            A, _ = huber_law_scale(W)
            g = np.random.default_rng(seed + M)
            acc = trials = 0
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < budget_s and acc < 200:
                _, a, tr, status = huber_law_sample_core(g, A, 1, 2000)
                assert status in (0, 1)
                acc += a
                trials += tr
            el = time.perf_counter() - t0
            per_sample = f"{el / acc:.3g}" if acc else f"> {el:.0f} (none accepted)"
            print(
                f"| {M} | {s} | {acc} | {trials} | {acc / trials:.3g} | "
                f"{1e3 * el / trials:.3g} | {per_sample} |"
            )


def swap_speed(M, seed=3):
    print(f"\n### Swap Metropolis throughput at M = {M}\n")
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(M, M))
    y = np.arange(M, dtype=np.int64)
    swap_mcmc_core(np.random.default_rng(0), W, y.copy(), 1, 10)
    n = 2_000_000
    t = time.perf_counter()
    _, acc = swap_mcmc_core(np.random.default_rng(0), W, y, 1, n)
    el = time.perf_counter() - t
    print(f"{n} proposals in {el:.3f} s ({1e9 * el / n:.1f} ns/proposal), acceptance {acc / n:.3f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="small sizes only")
    args = ap.parse_args()
    spreads = [0.1, 1.0, 3.0]
    if args.quick:
        bethe_accuracy([8, 12], spreads)
        bethe_speed(300, spreads, reps=1)
        huber_law_speed([20], spreads, 2.0)
        swap_speed(100)
    else:
        bethe_accuracy([8, 12, 16, 20, 24], spreads)
        bethe_speed(1000, spreads)
        huber_law_speed([20, 50, 100], spreads, 20.0)
        swap_speed(1000)


if __name__ == "__main__":
    main()
