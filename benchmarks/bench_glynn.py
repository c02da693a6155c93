"""Glynn's formula (``method="glynn"``, pm_perm.kernels.glynn): accuracy against the subset DP and
enumeration, and time at M = 20..27 (more with ``--max-m``), for the sizes past the DP's limit.

Run:
``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_glynn.py`` (``--quick``: accuracy up to
M = 20 and times up to M = 24; ``--max-m 28``: also time M = 28 once).

Accuracy: for each M and logit matrix family, the relative error of ``perm`` (``|exp(a - b) - 1|``
of the log-permanents) and the largest absolute and relative error of the marginals (relative
over entries >= 1e-6), against the float64 subset DP (itself within a few ulps of a long-double
reference, see bench_permanent.py) for M >= 8 and against enumeration for M <= 7. Families:
``W = s N(0, 1)`` for s = 0.1, 1, 3, 10; "uniform" ``W = 0`` (``perm = M!``: the worst
cancellation of Glynn's sum); "peaked" ``W = 20 I + N(0, 1)`` (one dominant permutation).
The reference Ryser loop of pm_perm.reference (row-max scaling, plain float64 sum) is shown for
comparison at M <= 16.

Past the DP (``--beyond M``, default 28): the uniform matrix (``perm = M!``) and a block-diagonal
matrix of two (M/2, M/2) ``N(0, 1)`` blocks with ``-inf`` elsewhere (``perm`` = the product of the
blocks' DP permanents, marginals = the blocks' DP marginals) are exact references at any M.

Time: CPU seconds of one call (process time, so a loaded machine inflates it less than wall
time) of the value and of value + marginals, with 1 numba thread, and wall seconds with 2 threads
(``numba.set_num_threads``), on ``W = N(0, 1)``; the DP's value + marginals in the same process
where its table fits.
"""

from __future__ import annotations

import argparse
import math
import os
import time

import numba
import numpy as np

from pm_perm.kernels.glynn import glynn_log_permanent, glynn_log_permanent_and_marginals
from pm_perm.kernels.permanent import log_permanent_and_marginals
from pm_perm.reference.permutations import (
    log_permanent_enum,
    log_permanent_ryser,
    permutation_marginals_enum,
)


def families(M, rng):
    for s in (0.1, 1.0, 3.0, 10.0):
        yield f"s={s:g}", s * rng.normal(size=(M, M))
    yield "uniform", np.zeros((M, M))
    yield "peaked", 20.0 * np.eye(M) + rng.normal(size=(M, M))


def accuracy(sizes, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for M in sizes:
        for name, W in families(M, rng):
            v, P = glynn_log_permanent_and_marginals(W)
            if M <= 7:
                v_ref, P_ref = float(log_permanent_enum(W)), permutation_marginals_enum(W)
            else:
                v_ref, P_ref = log_permanent_and_marginals(W)
            big = P_ref >= 1e-6
            rel_p = float((np.abs(P - P_ref)[big] / P_ref[big]).max())
            ry = abs(math.expm1(log_permanent_ryser(W) - v_ref)) if M <= 16 else math.nan
            rows.append((M, name, abs(math.expm1(float(v) - float(v_ref))),
                         float(np.abs(P - P_ref).max()), rel_p, ry))
    return rows


def beyond_dp(M, seed=2):
    rng = np.random.default_rng(seed)
    h = M // 2
    rows = []
    v, P = glynn_log_permanent_and_marginals(np.zeros((M, M)))
    rows.append(("uniform", abs(math.expm1(float(v) - math.lgamma(M + 1))),
                 float(np.abs(P - 1.0 / M).max()), float(np.abs(P * M - 1.0).max())))
    W = np.full((M, M), -np.inf)
    blocks = [rng.normal(size=(h, h)), rng.normal(size=(M - h, M - h))]
    W[:h, :h], W[h:, h:] = blocks
    refs = [log_permanent_and_marginals(b) for b in blocks]
    P_ref = np.zeros((M, M))
    P_ref[:h, :h], P_ref[h:, h:] = refs[0][1], refs[1][1]
    v, P = glynn_log_permanent_and_marginals(W)
    big = P_ref >= 1e-6
    rows.append(("two N(0, 1) blocks", abs(math.expm1(float(v) - refs[0][0] - refs[1][0])),
                 float(np.abs(P - P_ref).max()),
                 float((np.abs(P - P_ref)[big] / P_ref[big]).max())))
    return rows


def cpu_time(fn):
    """CPU seconds of one call (everything is compiled by the accuracy section before)."""
    t = time.process_time()
    fn()
    return time.process_time() - t


def wall_time(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def timing(sizes, seed=1):
    rng = np.random.default_rng(seed)
    threads = numba.get_num_threads()
    rows = []
    for M in sizes:
        W = rng.normal(size=(M, M))
        numba.set_num_threads(1)
        t_v = cpu_time(lambda W=W: glynn_log_permanent(W))
        t_vg = cpu_time(lambda W=W: glynn_log_permanent_and_marginals(W))
        t_dp = cpu_time(lambda W=W: log_permanent_and_marginals(W)) if M <= 24 else math.nan
        w2 = math.nan
        if threads >= 2:
            numba.set_num_threads(2)
            w2 = wall_time(lambda W=W: glynn_log_permanent_and_marginals(W))
            numba.set_num_threads(threads)
        rows.append((M, t_v, t_vg, t_vg / (M * 2.0 ** (M - 1)) * 1e9, w2, t_dp))
    return rows


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--max-m", type=int, default=27)
    p.add_argument("--beyond", type=int, default=28)
    p.add_argument("--beyond-only", action="store_true")
    args = p.parse_args(argv)
    print(f"load average at start: {os.getloadavg()}", flush=True)
    if not args.quick:
        print(f"\n## Accuracy past the DP, M = {args.beyond} (exact references)\n")
        print("| W | rel. error of perm | max abs error of P | max rel error of P (P >= 1e-6) |")
        print("|---|---|---|---|")
        for name, e_v, e_pa, e_pr in beyond_dp(args.beyond):
            print(f"| {name} | {e_v:.1e} | {e_pa:.1e} | {e_pr:.1e} |", flush=True)
    if args.beyond_only:
        return
    acc_sizes = list(range(1, 8)) + [12, 16, 20] + ([] if args.quick else [22, 24])
    print("\n## Accuracy of method='glynn' (vs enumeration for M <= 7, else the float64 DP)\n")
    print("| M | W | rel. error of perm | max abs error of P | max rel error of P (P >= 1e-6) "
          "| reference Ryser loop: rel. error of perm |")
    print("|---|---|---|---|---|---|")
    for M, name, e_v, e_pa, e_pr, e_ry in accuracy(acc_sizes):
        ry = "" if math.isnan(e_ry) else f"{e_ry:.1e}"
        print(f"| {M} | {name} | {e_v:.1e} | {e_pa:.1e} | {e_pr:.1e} | {ry} |")
    top = 24 if args.quick else args.max_m
    print("\n## Time of method='glynn' (W = N(0, 1); CPU s, 1 thread; wall s, 2 threads)\n")
    print("| M | value (CPU s) | value + marginals (CPU s) | ns per term per row "
          "| value + marginals, 2 threads (wall s) | DP value + marginals (CPU s) |")
    print("|---|---|---|---|---|---|")
    for M, t_v, t_vg, per, w2, t_dp in timing(range(20, top + 1)):
        dp = "" if math.isnan(t_dp) else f"{t_dp:.3g}"
        print(f"| {M} | {t_v:.3g} | {t_vg:.3g} | {per:.2f} | {w2:.3g} | {dp} |")
    print(f"\nload average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
