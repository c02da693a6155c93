"""Posterior predictive ballots with and without each ballot's pattern (issue 53, finding 5).

On APA 1998 (5 candidates, 18,723 ballots) with ties added to a share of the longer ballots
(``--tie-share``, default 0.15: one adjacent pair of ranked positions tied, uniformly chosen,
seeded), a Plackett-Luce model is fitted by MAP; replicated elections of as many ballots as
the data are drawn from the MAP point (:func:`pm_perm.preferences.analysis.posterior_predictive`)
with patterns kept (the default of ``ppc_summary`` and ``predictive_ballots``) and without
(lengths from ``length_probs``, no ties: the former behaviour). Printed per variant: the share
of replicated ballots with their own observed ballot's length, the replicated length
distribution and tie share (mean and 90% interval over replications) against the observed.

Run (45 s wall on the shared 2-core machine; figures in ``docs/benchmarks.md``)::

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 .venv/bin/python benchmarks/ppc_patterns.py \\
        --data ../shared/data/preflib/apa/ED-00028-00000001.soi
"""

from __future__ import annotations

import argparse

import numpy as np

from pm_perm.preferences import analysis
from pm_perm.preferences import fitting as rfit
from pm_perm.preferences import models as rmod
from pm_perm.preferences.data import RankingData
from pm_perm.preferences.preflib import read_preflib


def tie_pairs(data, share, rng):
    """Tie one adjacent pair of ranked positions in a ``share`` of the ballots ranking >= 3."""
    rows = np.repeat(np.asarray(data.orders), np.asarray(data.counts), axis=0)
    k = (rows >= 0).sum(axis=1)
    for r in np.flatnonzero((k >= 3) & (rng.random(rows.shape[0]) < share)):
        p = rng.integers(k[r] - 1)
        rows[r, rows[r] == p + 1] = p
    return RankingData.from_orders(rows, item_names=data.item_names)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="a PrefLib file (APA 1998)")
    ap.add_argument("--tie-share", type=float, default=0.15)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    data = tie_pairs(read_preflib(args.data), args.tie_share, rng)
    rm = rmod.plackett_luce_model(data)
    post = rfit.posterior_params(rfit.fit_map(rm, seed=args.seed), "plackett-luce")
    ballots = np.repeat(np.asarray(data.orders), np.asarray(data.counts), axis=0)
    obs = analysis.ballot_statistics(data.orders, data.counts)
    print(f"{data.n_rankings} ballots, {data.n_distinct} distinct orders, M = {data.n_items}")
    print(f"observed: lengths {np.round(obs['lengths'], 4).tolist()}, "
          f"tied {float(obs['tied']):.4f}")
    for keep in (False, True):
        own, stats = [], []
        for _ in range(args.reps):
            y = analysis.sample_rankings(post, "plackett-luce", data.n_rankings, rng=rng,
                                         length_probs=True, patterns=ballots if keep else None)
            own.append(np.mean((y >= 0).sum(1) == (ballots >= 0).sum(1)))
            stats.append(analysis.ballot_statistics(y))
        lengths = np.stack([s["lengths"] for s in stats])
        tied = np.array([float(s["tied"]) for s in stats])
        lo, hi = np.quantile(tied, [0.05, 0.95])
        print(f"keep_pattern={keep}: own length {np.mean(own):.4f}; lengths "
              f"{np.round(lengths.mean(0), 4).tolist()}; tied {tied.mean():.4f} "
              f"[{lo:.4f}, {hi:.4f}]")


if __name__ == "__main__":
    main()
