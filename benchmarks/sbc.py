"""Simulation-based calibration (Talts et al. 2018) of pm_perm's likelihoods with NUTS.

For each model: draw the parameters from the prior, data from the model, fit by NUTS (nutpie,
the model compiled once and re-used with new data), and record the rank of each true parameter
among ``L`` thinned posterior draws. If the likelihood, its gradient and the sampler are right,
every rank is uniform on ``0..L``. Reported per parameter: a chi-square uniformity test over
``B`` equal bins (p-value) and a rank histogram (PNG).

Models (small, so that hundreds of replications run in minutes):

* ``matching``: ``theta ~ N(0, 1)`` (d = 3), 20 graphs of M = 6, ``W = x . theta``,
  ``y ~ PermutationExpFamily(W)``;
* ``ranking``: RankMatch-style ``W[i, j] = c_j <psi_i, theta>``, ``c_j = (M - j) / M``, d = 2,
  15 queries of M = 5 documents, full observed rankings;
* ``nchoosek``: ``theta ~ N(0, 1)`` (d = 2), ``count_probs ~ Dirichlet(1)`` over 0..D (D = 6),
  40 rows, ``y ~ NChooseK(X . theta, count_probs)``;
* ``ordinal``: ``theta ~ N(0, 1)`` (d = 2), 30 rows of D = 5 items with R = 3 levels and fixed
  counts (2, 2, 1), ``y ~ OrdinalNChooseK(X . theta, counts)``;
* ``rankings_full``: the full ranking model of :mod:`pm_perm.preferences.models` on top-k ballots:
  ``W = u c^T + tau delta_raw`` (M = 4, ``u ~ ZeroSumNormal(1)``, ``tau ~ HalfNormal(1)``,
  ``delta_raw ~ ZeroSumNormal(1)`` over rows and columns), 40 ballots ranking 1, 2 or all 4
  items (probabilities 0.3, 0.3, 0.4), exact partial-order likelihood;
* ``mallows_latent``: the footrule Mallows model with a latent consensus (BayesMallows' model):
  ``rho`` uniform over the 720 rankings of n = 6 items, ``alpha ~ Gamma(2, rate 0.5)``, 10
  complete rankings ``R ~ Mallows(rho, alpha, "footrule")``; nutpie cannot sample a discrete
  rho, so ``pm.sample`` (NUTS for alpha, ``PermutationLeapShift`` for rho; 2 x (300 + 500)
  draws); rho's entries (the rank of each item) are ranked with randomised ties.

Run: ``.venv/bin/python benchmarks/sbc.py --models matching ranking nchoosek ordinal --reps 200``
(``--models mallows_latent``: the Mallows SBC; ``--out DIR`` for the figures and a JSON of ranks
and p-values; ``--merge A/sbc.json B/sbc.json ...`` pools the ranks of runs made side by side with
different ``--seed``). The output folder is checked
before any work (created with its parents if missing; a file in the way, or an output that is a
folder, is refused); a run replaces an earlier run's outputs, each written atomically.

The SBC machinery (replications, ranks, the uniformity test, the histograms) is
:mod:`pm_perm.testing.sbc`, the five models :mod:`pm_perm.testing.sbc_models`; this file is the
command line.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from pm_perm._io import OutputPathError, check_outputs, make_folder, save_figure
from pm_perm.testing.sbc import plot_rank_histograms, uniformity_pvalue
from pm_perm.testing.sbc import run_sbc as run_sbc_model
from pm_perm.testing.sbc_models import MODELS, SETTINGS

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import write_result  # noqa: E402


def run_sbc(name, reps, n_thin=99, draws=500, tune=500, seed=0, progress=False):
    """Run ``reps`` SBC replications of model ``name`` with nutpie (or the sampler and draws of
    ``SETTINGS[name]``); returns ``{param[i]: ranks}`` (:func:`pm_perm.testing.sbc.run_sbc`; the
    model's covariates drawn from ``seed`` first)."""
    rng = np.random.default_rng(seed)
    spec = MODELS[name](rng)

    def report(done, total):
        if progress and done % 20 == 0:
            print(f"  {name}: {done}/{total}", flush=True)

    kwargs = {"draws": draws, "tune": tune, "sampler": "nutpie", **SETTINGS.get(name, {})}
    return run_sbc_model(spec, reps, n_thin=n_thin, chains=2, seed=seed, rng=rng,
                         progress=report, **kwargs)


def _pooled(paths):
    """``{model: (ranks, seconds)}``: the ranks of several runs' sbc.json, concatenated, and
    their seconds summed."""
    import json

    pooled = {}
    for path in paths:
        with open(path) as f:
            for name, res in json.load(f).items():
                ranks, secs = pooled.setdefault(name, ({}, [0.0]))
                secs[0] += res["seconds"]
                for param, entry in res["params"].items():
                    ranks.setdefault(param, []).extend(entry["ranks"])
    return {name: (ranks, secs[0]) for name, (ranks, secs) in pooled.items()}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    p.add_argument("--reps", type=int, default=200)
    p.add_argument("--out", default="outputs/sbc")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--merge", nargs="+", metavar="JSON", default=None,
                   help="no new replications: pool the ranks of earlier runs' sbc.json (e.g. "
                        "runs with different --seed side by side) into one table and figure")
    args = p.parse_args(argv)
    out = Path(args.out)
    outputs = [f"sbc_{name}.png" for name in dict.fromkeys(args.models)] + ["sbc.json"]
    try:  # before any work: the folder and its parents are created; a file in the way is an error
        make_folder("--out", out)
        check_outputs({}, directories={"--out": (out, outputs)}, overwrite=True)
    except OutputPathError as err:
        p.error(str(err))
    import logging

    import matplotlib

    matplotlib.use("Agg")
    logging.getLogger("pymc").setLevel(logging.WARNING)  # pm.sample's per-fit messages
    import matplotlib.pyplot as plt

    results = {}
    pooled = _pooled(args.merge) if args.merge else {}
    for name in args.models:
        t0 = time.perf_counter()
        if args.merge:
            if name not in pooled:
                p.error(f"--merge: no run of {name} in {args.merge}")
            ranks, secs = pooled[name]
        else:
            ranks = run_sbc(name, args.reps, seed=args.seed, progress=True)
            secs = time.perf_counter() - t0
        reps = len(next(iter(ranks.values())))
        results[name] = {"seconds": secs, "reps": reps, "params": {}}
        print(f"\n### {name}: {reps} replications, {secs:.0f} s\n")
        print("| parameter | chi-square p (10 bins) | bin counts |")
        print("|---|---|---|")
        for param, rk in ranks.items():
            pval, counts = uniformity_pvalue(rk)
            results[name]["params"][param] = {"p_value": pval, "bins": counts, "ranks": rk}
            print(f"| {param} | {pval:.3f} | {counts} |")
        fig = plot_rank_histograms(ranks, title=f"SBC rank histograms: {name} ({reps} "
                                   "replications; band: 99% binomial interval per bin)")
        save_figure(fig, out / f"sbc_{name}.png", dpi=110)
        plt.close(fig)
    write_result(out / "sbc.json", results)
    print(f"\nwrote {out}/sbc_*.png and {out}/sbc.json")


if __name__ == "__main__":
    main()
