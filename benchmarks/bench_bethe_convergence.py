"""Bethe fixed point at large weight spreads: convergence failures before and after damped BP.

Run::

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 .venv/bin/python benchmarks/bench_bethe_convergence.py

Two solvers on the same matrices, in one process, tolerance 1e-9 and 100,000 sweeps at most:

* ``plain BP + CCCP`` (the solver before the damped restart): 500 sweeps of loopy BP, then
  the CCCP fallback (``pm_perm.kernels.bethe._bp`` and ``_cccp`` on the rescaled weights);
* ``bethe_core`` (the current solver): the same 500 BP sweeps, then damped BP (up to 20,000
  sweeps), then CCCP; matrices whose weights underflow are rescaled by matching duals first.

Matrices:

* ``random``: 3,000 logit matrices ``s N(0, 1)`` with M uniform in 4..8 and s in
  {10, 30, 100} (seed 0);
* ``house gap g x s``: the CMU house training pairs of gap g (10, 50, 90) with the no-learning
  shape-context weights rescaled to a logit range of s nats (s = 10 ... 300), the matrices an
  L-BFGS fit with ``method="bethe"`` meets on its way to large weights. Needs
  ``../shared/data/cmu_house``; skipped with a message when it is absent.

A failure is a final residual above the tolerance, which ``bethe_log_permanent`` reports as
``BetheConvergenceError``.

``--house-fits`` instead runs what those failures stop: MAP fits of the house matcher with
``method="bethe"`` (gaps 10 and 50, prior scales 100 and 3,000, L-BFGS memory 50), and prints
the test Hamming error and time of each, or the error that stopped it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from pm_perm.datasets import data_home  # noqa: E402
from pm_perm.kernels.bethe import BetheConvergenceError, _bp, _cccp, bethe_core  # noqa: E402

TOL = 1e-9
MAX_ITER = 100_000


def _shifted(W):
    B = np.exp(W - W.max(1, keepdims=True))
    return B / B.max(0, keepdims=True)


def plain_bp_then_cccp(W):
    """The solver before acceleration: (n_sweeps, residual)."""
    B = _shifted(W)
    G = np.zeros_like(B)
    ok, n, err = _bp(B, TOL, 500, G)
    if ok:
        return n, err
    n2, err = _cccp(B, TOL, MAX_ITER, G)
    return n + n2, err


def current(W):
    _, _, n, err = bethe_core(np.ascontiguousarray(W), TOL, MAX_ITER)
    return n, err


def random_matrices(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        M = int(rng.integers(4, 9))
        out.append(rng.normal(size=(M, M)) * float(rng.choice([10.0, 30.0, 100.0])))
    return out


def house_matrices(data_root):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    from matching_house import split_features

    from pm_perm.datasets.cmu_house import load_house
    from pm_perm.matching.model import no_learning_theta

    _, scf = load_house(data_root)
    groups = {}
    for gap in (10, 50, 90):
        x, _ = split_features(data_root, scf, gap, "train")
        W0 = x @ no_learning_theta(x.shape[-1], scf.shape[-1])
        W0 = W0 / (W0.max(axis=(1, 2), keepdims=True) - W0.min(axis=(1, 2), keepdims=True))
        for s in (10, 30, 50, 100, 300):
            groups[f"house gap {gap} x {s}"] = list(W0 * s)
    return groups


def run(groups):
    rows = []
    for name, mats in groups.items():
        row = [name, len(mats)]
        for solver in (plain_bp_then_cccp, current):
            t0 = time.perf_counter()
            res = [solver(W) for W in mats]
            sweeps = np.array([r[0] for r in res])
            fails = sum(not (r[1] <= TOL) for r in res)
            row += [fails, int(sweeps.max()), time.perf_counter() - t0]
        rows.append(row)
        print(f"{name}: plain BP + CCCP {row[2]} failures (max {row[3]} sweeps, {row[4]:.1f} s); "
              f"current {row[5]} failures (max {row[6]} sweeps, {row[7]:.1f} s)", flush=True)
    return rows


def house_fits(data_root):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    from matching_house import split_features

    from pm_perm.datasets.cmu_house import load_house
    from pm_perm.matching.model import feature_scale, fit_map, hamming_error, predict

    _, scf = load_house(data_root)
    for gap in (10, 50):
        (xtr, ytr), (xte, yte) = (split_features(data_root, scf, gap, s)
                                  for s in ("train", "test"))
        scale = feature_scale(xtr)
        for sigma in (100.0, 3000.0):
            t0 = time.perf_counter()
            try:
                fit = fit_map(xtr / scale, ytr, prior_sigmas=(sigma,), method="bethe",
                              lbfgs_memory=50)
            except BetheConvergenceError as err:
                print(f"gap {gap}, prior scale {sigma:g}: stopped, {str(err).splitlines()[0]} "
                      f"({time.perf_counter() - t0:.1f} s)", flush=True)
                continue
            err = hamming_error(predict(xte / scale, fit.theta), yte)
            print(f"gap {gap}, prior scale {sigma:g}: Bethe MAP fit converged, test Hamming "
                  f"error {err:.4f}, {time.perf_counter() - t0:.1f} s", flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-root", default=str(data_home()))
    p.add_argument("--house-fits", action="store_true",
                   help="run Bethe MAP fits of the house matcher instead")
    args = p.parse_args(argv)
    if args.house_fits:
        house_fits(Path(args.data_root))
        return
    t0 = time.perf_counter()
    current(np.zeros((3, 3)))  # compile before timing
    plain_bp_then_cccp(np.zeros((3, 3)))
    groups = {"random (M 4-8, s 10/30/100)": random_matrices()}
    try:
        groups.update(house_matrices(args.data_root))
    except FileNotFoundError as err:
        print(f"CMU house data not found ({err}): random matrices only", file=sys.stderr)
    rows = run(groups)
    print("\n| matrices | n | plain BP + CCCP: failures | max sweeps | s | current: failures | "
          "max sweeps | s |\n|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]:.1f} | {r[5]} | {r[6]} | {r[7]:.1f} |")
    tot = [sum(r[k] for r in rows) for k in (1, 2, 5)]
    print(f"\nin all: {tot[1]} failures before, {tot[2]} after, of {tot[0]} matrices; "
          f"{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
