"""pm_perm against BayesMallows itself, side by side (issue 51, the BayesMallows acceptance).

BayesMallows' default model on all 20 potatoes of ``potato_visual`` and ``potato_weighing``
(footrule, ``alpha ~ Exponential(rate 0.001)``, uniform ``rho``):

* BayesMallows (R; benchmark only, never a dependency): ``compute_mallows`` with its default
  options and ``nmc`` iterations in one chain, run through ``Rscript`` (the R script is written to
  a temporary file); its first ``burnin`` iterations are discarded (``burnin(fit) <- ...``, as its
  documentation recommends after ``assess_convergence``); its alpha and rho draws and its own CP
  consensus (``compute_consensus(type = "CP")``) are read back as CSV. Wall time: the
  ``compute_mallows`` call, timed inside R (R's start-up and the CSV output are not counted).
* pm_perm: ``rho = PermutationExpFamily(zero logits)``, ``Mallows(rho, alpha, "footrule",
  observed=ranks)``, ``alpha ~ Exponential(0.001)``; ``pm.sample`` with 4 chains and the step it
  assigns (``MallowsConsensusGibbs`` for both alpha and rho:
  :mod:`pm_perm.inference.mallows_consensus`; ``--generic``: NUTS for alpha and
  ``PermutationLeapShift`` for rho, the route before it), one process (``cores=1``). Wall time:
  the ``pm.sample`` call (set-up, tuning, draws and the InferenceData).

Printed per data set and seed (``--seeds``, the same for both): alpha's mean and sd with their
Monte Carlo errors (``arviz.mcse``), r_hat (pm_perm), alpha's ESS (``arviz.ess``, bulk) and ESS
per second of wall time, and each CP consensus with its footrule distance to
``potato_true_ranking``. ``z`` = difference / the two
MC errors combined. BayesMallows' ranks are 1-based, pm_perm's rank form 0-based.

Run from the repository root::

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 .venv/bin/python benchmarks/bench_bayesmallows.py
"""

from __future__ import annotations

import argparse
import csv
import itertools
import subprocess
import tempfile
import time
from pathlib import Path

import arviz as az
import numpy as np
import pymc as pm

import pm_perm
from pm_perm._io import write_text
from pm_perm.inference.step_methods import PermutationLeapShift
from pm_perm.preferences import read_rank_matrix
from pm_perm.preferences.consensus import cp_consensus, heat_matrix

RATE = 0.001  # BayesMallows' default prior on alpha: Exponential(rate 0.001)
DATA = Path("../shared/data/bayesmallows")

R_SCRIPT = r"""
suppressPackageStartupMessages(library(BayesMallows))
args <- commandArgs(trailingOnly = TRUE)
x <- read.csv(args[1], check.names = FALSE)
ranks <- as.matrix(x[, -1])
set.seed(as.integer(args[3]))
t <- system.time(fit <- compute_mallows(
  data = setup_rank_data(rankings = ranks),
  compute_options = set_compute_options(nmc = as.integer(args[2]))))[["elapsed"]]
burnin(fit) <- as.integer(args[4])
write.csv(fit$alpha[, c("chain", "iteration", "value")], args[5], row.names = FALSE)
rho <- fit$rho[fit$rho$iteration > as.integer(args[4]), c("iteration", "item", "value")]
write.csv(rho, args[6], row.names = FALSE)
cp <- compute_consensus(fit, type = "CP")
write.csv(cp[, c("item", "ranking")], args[7], row.names = FALSE)
cat(sprintf("WALL %.6f\n", t))
"""


def read_ranks(path):
    """Complete rankings in rank form (0-based), one row per assessor, and the item names."""
    data = read_rank_matrix(path)
    return np.repeat(data.orders, data.counts, axis=0), list(data.item_names)


def true_ranking(path, names):
    """``potato_true_ranking.csv`` (potato, 1-based rank) as a 0-based rank vector."""
    with open(path, newline="") as f:
        ranks = {row["potato"]: int(row["true_rank"]) - 1 for row in csv.DictReader(f)}
    return np.array([ranks[name] for name in names])


def run_bayesmallows(path, names, nmc, burnin, seed):
    """Run ``compute_mallows`` through Rscript: (alpha draws, rho draws (S, n) 0-based, its own CP
    consensus as a 0-based rank vector, wall seconds of the call)."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        script = tmp / "bm.R"
        write_text(script, R_SCRIPT)
        outs = [tmp / f"{k}.csv" for k in ("alpha", "rho", "cp")]
        proc = subprocess.run(["Rscript", str(script), str(path), str(nmc), str(seed),
                               str(burnin), *map(str, outs)],
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"BayesMallows failed (is R's BayesMallows installed? see "
                               f"../shared/peers/README.md):\n{proc.stderr[-2000:]}")
        wall = float(proc.stdout.split("WALL")[-1])
        with open(outs[0], newline="") as f:
            alpha = np.array([float(r["value"]) for r in csv.DictReader(f)
                              if int(float(r["iteration"])) > burnin])
        index = {name: i for i, name in enumerate(names)}
        with open(outs[1], newline="") as f:
            rows = list(csv.DictReader(f))
        iters = sorted({int(float(r["iteration"])) for r in rows})
        where = {it: k for k, it in enumerate(iters)}
        rho = np.empty((len(iters), len(names)), dtype=np.int64)
        for r in rows:
            rho[where[int(float(r["iteration"]))], index[r["item"]]] = int(r["value"]) - 1
        with open(outs[2], newline="") as f:
            cp = np.empty(len(names), dtype=np.int64)
            for r in csv.DictReader(f):
                cp[index[r["item"]]] = int(r["ranking"]) - 1
    return alpha, rho, cp, wall


def run_pm_perm(R, draws, tune, seed, generic=False):
    """The same model by ``pm.sample`` (4 chains, one process): (InferenceData, wall seconds).
    ``generic``: NUTS for alpha and ``PermutationLeapShift`` for rho instead of the step
    ``pm.sample`` assigns."""
    n = R.shape[1]
    with pm.Model():
        rho = pm_perm.PermutationExpFamily("rho", logits=np.zeros((n, n)))
        alpha = pm.Exponential("alpha", RATE)
        pm_perm.Mallows("R", rho=rho, alpha=alpha, distance="footrule", observed=R)
        start = time.perf_counter()
        step = [pm.NUTS([alpha]), PermutationLeapShift([rho])] if generic else None
        idata = pm.sample(draws=draws, tune=tune, chains=4, cores=1, random_seed=seed,
                          step=step, progressbar=False, compute_convergence_checks=False)
    return idata, time.perf_counter() - start


def alpha_summary(alpha, wall):
    """Mean, sd, their MC errors, bulk ESS and ESS per second of ``alpha`` (chain, draw)."""
    ess = float(az.ess(alpha))
    return {"mean": float(alpha.mean()), "mcse_mean": float(az.mcse(alpha, method="mean")),
            "sd": float(alpha.std()), "mcse_sd": float(az.mcse(alpha, method="sd")),
            "ess": ess, "ess_per_s": ess / wall, "wall_s": wall}


def footrule(a, b):
    return int(np.abs(np.asarray(a) - np.asarray(b)).sum())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", nargs="+", default=["potato_visual", "potato_weighing"])
    parser.add_argument("--nmc", type=int, default=20000, help="BayesMallows iterations")
    parser.add_argument("--burnin", type=int, default=2000, help="BayesMallows burn-in")
    parser.add_argument("--draws", type=int, default=2500, help="pm_perm draws per chain")
    parser.add_argument("--tune", type=int, default=1000, help="pm_perm tuning per chain")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--generic", action="store_true",
                        help="pm_perm with NUTS + PermutationLeapShift (the route before "
                             "MallowsConsensusGibbs)")
    args = parser.parse_args()
    for name, seed in itertools.product(args.data, args.seeds):
        path = DATA / f"{name}.csv"
        R, names = read_ranks(path)
        truth = true_ranking(DATA / "potato_true_ranking.csv", names)
        bm_alpha, bm_rho, bm_cp_r, bm_wall = run_bayesmallows(path, names, args.nmc,
                                                              args.burnin, seed)
        idata, wall = run_pm_perm(R, args.draws, args.tune, seed, args.generic)
        bm = alpha_summary(bm_alpha[None], bm_wall)
        pp = alpha_summary(idata.posterior["alpha"].values, wall)
        sampling = float(idata.posterior.attrs["sampling_time"])
        r_hat = float(az.rhat(idata, var_names=["alpha"])["alpha"])
        r_hat_rho = float(az.rhat(idata, var_names=["rho"])["rho"].max())
        cp_bm = cp_consensus(bm_rho).ranking
        cp_pp = cp_consensus(idata).ranking
        z_mean = (pp["mean"] - bm["mean"]) / np.hypot(pp["mcse_mean"], bm["mcse_mean"])
        z_sd = (pp["sd"] - bm["sd"]) / np.hypot(pp["mcse_sd"], bm["mcse_sd"])
        print(f"== {name}, seed {seed}: {R.shape[0]} assessors x {R.shape[1]} potatoes")
        for label, s in (("BayesMallows", bm), ("pm_perm", pp)):
            print(f"{label:13s} alpha mean {s['mean']:.3f} +- {s['mcse_mean']:.3f}, sd "
                  f"{s['sd']:.3f} +- {s['mcse_sd']:.3f}, ESS {s['ess']:.0f}, wall "
                  f"{s['wall_s']:.1f} s, ESS/s {s['ess_per_s']:.1f}")
        print(f"pm_perm without compilation and set-up: {sampling:.1f} s, ESS/s "
              f"{pp['ess'] / sampling:.1f}")
        print(f"z (pm_perm - BayesMallows): mean {z_mean:+.2f}, sd {z_sd:+.2f}; pm_perm r_hat "
              f"alpha {r_hat:.4f}, max over rho's ranks {r_hat_rho:.4f}")
        print(f"CP consensus (1-based ranks of P1..P{len(names)}):")
        print(f"  BayesMallows {(cp_bm + 1).tolist()} (its compute_consensus agrees: "
              f"{bool(np.array_equal(cp_bm, bm_cp_r))}), footrule to truth "
              f"{footrule(cp_bm, truth)}")
        print(f"  pm_perm      {(cp_pp + 1).tolist()}, footrule to truth "
              f"{footrule(cp_pp, truth)}; same as BayesMallows: "
              f"{bool(np.array_equal(cp_bm, cp_pp))} (footrule between them "
              f"{footrule(cp_bm, cp_pp)})")
        cum_bm, cum_pp = (np.cumsum(heat_matrix(x), axis=1) for x in (bm_rho, idata))
        for item in np.flatnonzero(cp_bm != cp_pp):
            r = min(cp_bm[item], cp_pp[item])
            print(f"  {names[item]}: P(rank <= {r + 1}) BayesMallows {cum_bm[item, r]:.3f}, "
                  f"pm_perm {cum_pp[item, r]:.3f}")
        met = (abs(z_mean) < 2 and abs(z_sd) < 2 and np.array_equal(cp_bm, cp_pp)
               and pp["ess_per_s"] >= bm["ess_per_s"] and max(r_hat, r_hat_rho) <= 1.01)
        print(f"goal (|z| < 2, same CP consensus, ESS/s >= BayesMallows', r_hat <= 1.01 for "
              f"alpha and every rank): "
              f"{'met' if met else 'NOT met'}", flush=True)


if __name__ == "__main__":
    main()
