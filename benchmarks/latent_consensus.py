"""Latent consensus by pm.sample against the exact posterior (issue 51, item 2 acceptance).

The footrule Mallows model of BayesMallows (alpha ~ Exponential(rate 0.001), rho uniform,
``p(R | rho, alpha) = exp(-(alpha / n) d(R, rho)) / Z_n(alpha)``) on 8 potatoes of
``potato_visual`` (P1..P8, each assessor's ranks re-ranked among them): ``pm.sample`` (NUTS for
alpha, the automatically assigned ``PermutationLeapShift`` for rho; 4 chains) against
``pm_perm.reference.mallows_posterior`` (all 8! consensus rankings, alpha on a grid). The
model is written by hand with the exact normaliser ``log Z_8(alpha)`` from the footrule
distance counts (a function of alpha only); ``--model mallows`` writes it with
``pm_perm.Mallows`` instead, for which ``pm.sample`` assigns ``MallowsConsensusGibbs`` (compiled
slice updates of alpha and leap-and-shift moves of rho: :mod:`pm_perm.inference.mallows_consensus`)
to both variables. Monte Carlo errors: from each quantity's effective
sample size (``arviz.ess``); ``z`` = difference / MC error.

Run from the repository root (72 s wall, 3 ms per iteration, on the shared 2-core machine)::

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 .venv/bin/python benchmarks/latent_consensus.py \
        --data ../shared/data/bayesmallows/potato_visual.csv
"""

from __future__ import annotations

import argparse
import time

import arviz as az
import numpy as np
import pymc as pm
import pytensor.tensor as pt
from _harness import check_output, write_result

import pm_perm
from pm_perm.preferences import read_rank_matrix
from pm_perm.preferences.consensus import cp_consensus, heat_matrix
from pm_perm.reference.mallows_posterior import footrule_mallows_posterior
from pm_perm.reference.permutations import all_permutations

RATE = 0.001  # BayesMallows' default prior on alpha


def potato_subset(path, n_items):
    """Complete rankings of the first ``n_items`` potatoes, re-ranked among them (0-based)."""
    data = read_rank_matrix(path)
    orders = np.repeat(data.orders, data.counts, axis=0)[:, :n_items]
    return np.argsort(np.argsort(orders, axis=1), axis=1), data.item_names[:n_items]


def model_for(R, kind="potential"):
    N, n = R.shape
    if kind == "mallows":
        with pm.Model() as model:
            rho = pm_perm.PermutationExpFamily("rho", logits=np.zeros((n, n)))
            alpha = pm.Exponential("alpha", RATE)
            pm_perm.Mallows("R", rho=rho, alpha=alpha, distance="footrule", observed=R)
        return model
    d = np.abs(all_permutations(n) - np.arange(n)).sum(axis=1)
    values, counts = np.unique(d, return_counts=True)
    with pm.Model() as model:
        rho = pm_perm.PermutationExpFamily("rho", logits=np.zeros((n, n)))
        alpha = pm.Exponential("alpha", RATE)
        log_z = pt.logsumexp(np.log(counts) - alpha * values / n)
        pm.Potential("lik", -(alpha / n) * pt.abs(R - rho[None]).sum() - N * log_z)
    return model


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default="../shared/data/bayesmallows/potato_visual.csv")
    parser.add_argument("--items", type=int, default=8)
    parser.add_argument("--draws", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--model", choices=("potential", "mallows"), default="potential",
                        help="the likelihood as a Potential written by hand (NUTS + "
                             "PermutationLeapShift) or as pm_perm.Mallows (MallowsConsensusGibbs)")
    parser.add_argument("--out", default=None, help="JSON file for the figures")
    args = parser.parse_args()
    if args.out:
        check_output(parser, "--out", args.out, [args.data])
    R, names = potato_subset(args.data, args.items)
    grid = np.linspace(0.0, 80.0, 16001)
    exact = footrule_mallows_posterior(R, grid, np.log(RATE) - RATE * grid)
    tail = float(exact.alpha_density[grid > 60].sum() * (grid[1] - grid[0]))
    start = time.perf_counter()
    with model_for(R, args.model):
        idata = pm.sample(draws=args.draws, tune=1000, chains=4, cores=1,
                          random_seed=args.seed, progressbar=False)
    wall = time.perf_counter() - start
    post = idata.posterior
    rho = post["rho"].values  # (chain, draw, n)
    is_map = (rho == exact.map_rank).all(axis=-1).astype(float)
    p_map = is_map.mean()
    se_map = float(is_map.std() / np.sqrt(float(az.ess(is_map))))
    H = heat_matrix(idata)
    onehot = (rho[..., None] == np.arange(args.items)).astype(float)
    z_heat = 0.0
    for i in range(args.items):
        for r in range(args.items):
            x = onehot[:, :, i, r]
            if x.std() > 0:
                se = x.std() / np.sqrt(float(az.ess(x)))
                z_heat = max(z_heat, float(abs(H[i, r] - exact.heat[i, r]) / se))
    alpha = post["alpha"].values
    mcse_mean = float(az.mcse(alpha, method="mean"))
    mcse_sd = float(az.mcse(alpha, method="sd"))
    cp = cp_consensus(idata)
    result = {
        "items": list(names), "assessors": int(R.shape[0]), "draws": 4 * args.draws,
        "wall_s": wall, "per_iteration_ms": 1e3 * wall / (4 * (args.draws + 1000)),
        "p_map": {"exact": exact.map_prob, "sampled": float(p_map), "mc_error": se_map},
        "heat": {"max_abs_diff": float(np.abs(H - exact.heat).max()), "max_z": z_heat},
        "alpha_mean": {"exact": exact.alpha_mean, "sampled": float(alpha.mean()),
                       "mc_error": mcse_mean},
        "alpha_sd": {"exact": exact.alpha_sd, "sampled": float(alpha.std()), "mc_error": mcse_sd},
        "alpha_grid_mass_beyond_60": tail,
        "map_rank": exact.map_rank.tolist(), "cp_rank": cp.ranking.tolist(),
        "r_hat_alpha": float(az.rhat(idata, var_names=["alpha"])["alpha"]),
    }
    for key, value in result.items():
        print(f"{key}: {value}")
    if args.out:
        write_result(args.out, result)


if __name__ == "__main__":
    main()
