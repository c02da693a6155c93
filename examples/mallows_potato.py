"""A latent consensus on BayesMallows' potatoes: the figures and numbers of docs/guide/mallows.md.

12 assessors ranked 20 potatoes by their look (``potato_visual``, BayesMallows' example data).
BayesMallows' default model: ``R_j ~ Mallows(rho, alpha, "footrule")``, ``rho`` uniform over the
20! rankings, ``alpha ~ Exponential(rate 0.001)``; ``pm.sample`` assigns the compiled
``MallowsConsensusGibbs`` step to alpha and rho (4 chains, one process). Prints alpha's posterior
and diagnostics, the CP and MAP consensus, the 95 % rank intervals, and the distance of the CP
consensus to the true weight order (``potato_true_ranking``); writes the heat plot
``docs/guide/mallows_potato_heat.png`` (``plot_consensus_heat``). Needs
../shared/data/bayesmallows/; exits with a message when it is absent.

Run: ``OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 .venv/bin/python examples/mallows_potato.py``
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

import numpy as np

from pm_perm._io import save_figure
from pm_perm.datasets import data_home

ROOT = Path(__file__).resolve().parents[1]
DATA = data_home() / "bayesmallows"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--draws", type=int, default=2500)
    p.add_argument("--tune", type=int, default=1000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--figure", default=str(ROOT / "docs" / "guide" / "mallows_potato_heat.png"))
    args = p.parse_args(argv)
    if not (DATA / "potato_visual.csv").exists():
        sys.exit(f"needs {DATA}/potato_visual.csv (BayesMallows' example data; see "
                 "../shared/data/bayesmallows/PROVENANCE.txt)")
    import arviz as az
    import pymc as pm

    import pm_perm
    from pm_perm.preferences import read_rank_matrix
    from pm_perm.preferences.consensus import cp_consensus, map_consensus, rank_intervals
    from pm_perm.preferences.plots import plot_consensus_heat

    data = read_rank_matrix(DATA / "potato_visual.csv")
    R = np.repeat(data.orders, data.counts, axis=0)  # (12, 20) rank form, 0-based
    names = list(data.item_names)
    n = R.shape[1]
    with pm.Model():
        rho = pm_perm.PermutationExpFamily("rho", logits=np.zeros((n, n)))  # uniform
        alpha = pm.Exponential("alpha", 0.001)
        pm_perm.Mallows("R", rho=rho, alpha=alpha, distance="footrule", observed=R)
        t0 = time.perf_counter()
        idata = pm.sample(draws=args.draws, tune=args.tune, chains=4, cores=1,
                          random_seed=args.seed, progressbar=False)
        wall = time.perf_counter() - t0
    a = idata.posterior["alpha"].values
    r_hat = az.rhat(idata)
    print(f"pm.sample: 4 x ({args.tune} + {args.draws}) draws, {wall:.0f} s")
    print(f"alpha: mean {a.mean():.2f}, sd {a.std():.2f}, ESS {float(az.ess(a)):.0f}, "
          f"r_hat {float(r_hat['alpha']):.3f}; max r_hat over rho {float(r_hat['rho'].max()):.3f}")
    cp = cp_consensus(idata)
    print("CP consensus:", " > ".join(names[i] for i in cp.order))
    print("  P(rank <= r):", " ".join(f"{q:.2f}" for q in cp.probability))
    mp = map_consensus(idata)
    print(f"MAP consensus: frequency {mp.probability:.3f}; footrule to the CP consensus "
          f"{int(np.abs(mp.ranking - cp.ranking).sum())}")
    iv = rank_intervals(idata, 0.95)
    print("95 % rank intervals (1-based), CP order:",
          ", ".join(f"{names[i]} {iv[i, 0] + 1}-{iv[i, 1] + 1}" for i in cp.order))
    with open(DATA / "potato_true_ranking.csv", newline="") as f:
        truth_of = {row["potato"]: int(row["true_rank"]) - 1 for row in csv.DictReader(f)}
    truth = np.array([truth_of[name] for name in names])
    kendall = int(sum((cp.ranking[i] - cp.ranking[j]) * (truth[i] - truth[j]) < 0
                      for i in range(n) for j in range(i + 1, n)))
    print(f"CP consensus to the true weight order: footrule {int(np.abs(cp.ranking - truth).sum())}"
          f" (of at most {n * n // 2}), Kendall {kendall} (of {n * (n - 1) // 2} pairs)")
    fig, _ = plot_consensus_heat(idata, names)
    save_figure(fig, args.figure, dpi=110)
    print(f"wrote {args.figure}")


if __name__ == "__main__":
    main()
