"""Clusters of assessors on BayesMallows' ``cluster_data`` (issue 51, item 5 acceptance).

``cluster_data``: 60 simulated complete rankings of 5 items from three Mallows clusters. For
K = 1..4, :func:`pm_perm.preferences.mallows_clusters.mallows_mixture_model` (footrule,
BayesMallows' default priors: ``alpha_k ~ Exponential(0.001)``, ``w ~ Dirichlet(10)``, uniform
``rho_k``) is sampled by ``pm.sample`` (4 chains, one process; the leap-and-shift step for the
consensus rankings, NUTS for alpha and w; chains started from distinct random consensus rankings,
:func:`cluster_initvals`), relabelled (:func:`relabel_clusters`), and compared by LOO
(``az.compare`` on ``pm.compute_log_likelihood``, one term per assessor). Printed per K: elpd_loo
(se), p_loo, the largest Pareto k, the largest r_hat over alpha, w and every cluster's rank
probabilities ``P(item i at rank r)`` (after relabelling), wall time. For the K = 3 fit: each
cluster's CP consensus, the posterior mean of alpha and w, the cluster sizes by the largest
membership probability (:func:`cluster_memberships`), and, with ``--bayesmallows`` (R's
BayesMallows installed: ``../shared/peers/README.md``), BayesMallows' own 3-cluster fit
(``compute_mallows(n_clusters = 3)``, ``nmc`` 10,000, burn-in 2,000; ``assign_cluster``) and
the agreement of the two hard assignments (the fraction of assessors in the same cluster under
the best matching of the labels).

Run from the repository root::

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 .venv/bin/python benchmarks/mallows_clusters.py \
        --bayesmallows
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import tempfile
import time
from pathlib import Path

import arviz as az
import numpy as np
import pymc as pm
from scipy.optimize import linear_sum_assignment

from pm_perm._io import write_text
from pm_perm.preferences import read_rank_matrix
from pm_perm.preferences.consensus import cp_consensus
from pm_perm.preferences.mallows_clusters import (
    cluster_initvals,
    cluster_memberships,
    mallows_mixture_model,
    relabel_clusters,
)

R_SCRIPT = r"""
suppressPackageStartupMessages(library(BayesMallows))
args <- commandArgs(trailingOnly = TRUE)
x <- read.csv(args[1], check.names = FALSE)
set.seed(as.integer(args[2]))
fit <- compute_mallows(data = setup_rank_data(rankings = as.matrix(x[, -1])),
                       model_options = set_model_options(n_clusters = 3),
                       compute_options = set_compute_options(nmc = 10000))
burnin(fit) <- 2000
a <- assign_cluster(fit, soft = FALSE)
write.csv(a[, c("assessor", "map_cluster")], args[3], row.names = FALSE)
cp <- compute_consensus(fit, type = "CP")
write.csv(cp[, c("cluster", "ranking", "item")], args[4], row.names = FALSE)
al <- fit$alpha[fit$alpha$iteration > 2000, ]
write.csv(aggregate(value ~ cluster, data = al, FUN = mean), args[5], row.names = FALSE)
"""


def run_bayesmallows(path, seed):
    """BayesMallows' 3-cluster fit: (hard cluster per assessor, {cluster: CP order of item
    names}, {cluster: alpha mean})."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        write_text(tmp / "bm.R", R_SCRIPT)
        outs = [tmp / f"{k}.csv" for k in ("assign", "cp", "alpha")]
        proc = subprocess.run(["Rscript", str(tmp / "bm.R"), str(path), str(seed),
                               *map(str, outs)], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"BayesMallows failed (is R's BayesMallows installed? see "
                               f"../shared/peers/README.md):\n{proc.stderr[-2000:]}")
        with open(outs[0], newline="") as f:
            assign = [r["map_cluster"] for r in csv.DictReader(f)]
        cp = {}
        with open(outs[1], newline="") as f:
            for r in sorted(csv.DictReader(f), key=lambda r: int(r["ranking"])):
                cp.setdefault(r["cluster"], []).append(r["item"])
        with open(outs[2], newline="") as f:
            alpha = {r["cluster"]: float(r["value"]) for r in csv.DictReader(f)}
    return assign, cp, alpha


def read_assessors(path):
    """One complete ranking per assessor in the file's order (rank form, 0-based; checked by
    ``read_rank_matrix``, which aggregates repeated rankings and so loses the order) and the
    item names."""
    data = read_rank_matrix(path)
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    R = np.array([[int(c) - 1 for c in row[1:]] for row in rows[1:]], dtype=np.int64)
    return R, list(data.item_names)


def agreement(a, b):
    """Fraction of assessors with the same cluster in ``a`` and ``b`` under the best matching of
    the two labellings."""
    la, lb = sorted(set(a)), sorted(set(b))
    table = np.zeros((len(la), len(lb)))
    for x, y in zip(a, b, strict=True):
        table[la.index(x), lb.index(y)] += 1
    rows, cols = linear_sum_assignment(-table)
    return float(table[rows, cols].sum() / len(a))


def fit(R, names, K, draws, tune, seed, rate):
    model = mallows_mixture_model(R, K, item_names=names, alpha_rate=rate)
    start = time.perf_counter()
    with model:
        idata = pm.sample(draws=draws, tune=tune, chains=4, cores=1, random_seed=seed,
                          initvals=cluster_initvals(K, R.shape[1], 4, seed),
                          progressbar=False, compute_convergence_checks=False)
        pm.compute_log_likelihood(idata, progressbar=False)
    wall = time.perf_counter() - start
    relabel_clusters(idata)
    post = idata.posterior
    rho = post["rho"].values
    n = R.shape[1]
    rhats = {f"alpha[{k}]": float(az.rhat(post["alpha"].values[:, :, k])) for k in range(K)}
    if "w" in post:
        rhats |= {f"w[{k}]": float(az.rhat(post["w"].values[:, :, k])) for k in range(K)}
    for k in range(K):
        for i in range(n):
            for r in range(n):
                x = (rho[:, :, k, i] == r).astype(float)
                if x.std() > 0:
                    rhats[f"P(rho[{k}, {i}] = {r})"] = float(az.rhat(x))
    worst = max(rhats, key=rhats.get)
    return idata, wall, (rhats[worst], worst)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default="../shared/data/bayesmallows/cluster_data.csv")
    parser.add_argument("--clusters", type=int, nargs="+", default=[1, 2, 3, 4])
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--alpha-rate", type=float, default=0.001,
                        help="rate of alpha's Exponential prior (BayesMallows' default 0.001)")
    parser.add_argument("--bayesmallows", action="store_true",
                        help="also run R's BayesMallows (3 clusters) and compare assignments")
    args = parser.parse_args()
    R, names = read_assessors(args.data)
    fits = {}
    for K in args.clusters:
        idata, wall, rhat = fit(R, names, K, args.draws, args.tune, args.seed,
                                 args.alpha_rate)
        fits[f"K={K}"] = idata
        loo = az.loo(idata)
        print(f"K={K}: elpd_loo {loo.elpd:.2f} (se {loo.se:.2f}), p_loo {loo.p:.2f}, "
              f"max Pareto k {float(np.max(loo.pareto_k)):.2f}, "
              f"max r_hat {rhat[0]:.3f} ({rhat[1]}), wall {wall:.0f} s", flush=True)
    if len(fits) > 1:
        print(az.compare(fits).to_string())
    if "K=3" not in fits:
        return
    idata = fits["K=3"]
    post = idata.posterior
    probs = cluster_memberships(idata, R)
    hard = probs.argmax(axis=1)
    for k in range(3):
        cp = cp_consensus(post["rho"].values[:, :, k])
        print(f"cluster {k}: CP {[names[i] for i in cp.order]}, alpha "
              f"{float(post['alpha'].values[:, :, k].mean()):.2f}, w "
              f"{float(post['w'].values[:, :, k].mean()):.3f}, assessors {int((hard == k).sum())}"
              f", mean max membership {float(probs[hard == k, k].mean()):.3f}")
    if args.bayesmallows:
        assign, cps, alphas = run_bayesmallows(args.data, args.seed)
        for c in sorted(cps):
            print(f"BayesMallows {c}: CP {cps[c]}, alpha {alphas[c]:.2f}, assessors "
                  f"{assign.count(c)}")
        print(f"agreement of the hard assignments: {agreement(list(hard), assign):.3f}")


if __name__ == "__main__":
    main()
