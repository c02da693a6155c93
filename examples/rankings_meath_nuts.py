"""The 2002 Meath election by NUTS: consensus with credible uncertainty and posterior predictive
checks from ``pm.sample_posterior_predictive`` ballots.

Fits the one-population full ranking model, centred (``full_model(...,
parametrization="auto")``), by NUTS (``fitting.fit_nuts``: nutpie with its low-rank mass matrix,
``--chains`` x ``--draws``, as many tuning steps, 2 chains in parallel) or reads a saved posterior
(``--idata FILE.nc``, as written by ``--save``), then writes the NUTS figures of
docs/guide/preferences.md and prints what the guide quotes: sampler diagnostics, the posterior of
the consensus order, P(in the top 3) with 90 % credible intervals, and the share of replicated
statistics outside their 90 % bands. Replicated elections have 64,081 ballots each
(``posterior.predictive_ballots``: ``pm.sample_posterior_predictive`` of the observed
``PartialRanking`` with the data resized to one row per ballot). Needs
../shared/data/preflib/irish/00001-00000003.soi; exits with a message when it is absent.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python examples/rankings_meath_nuts.py [--save post.nc]``
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from pm_perm._io import atomic_path, save_figure
from pm_perm.datasets import data_home
from pm_perm.preferences import analysis, fitting, models, plots, posterior
from pm_perm.preferences.preflib import read_preflib

ROOT = Path(__file__).resolve().parents[1]
MEATH = data_home() / "preflib" / "irish" / "00001-00000003.soi"


def _posterior(args, rm):
    """NUTS draws (run, or read from ``--idata``) and the diagnostics the guide quotes."""
    import arviz as az

    if args.idata:
        idata = az.from_netcdf(args.idata)
        secs = None
    else:
        t0 = time.perf_counter()
        idata = fitting.fit_nuts(rm, draws=args.draws, tune=args.draws, chains=args.chains,
                                seed=args.seed, cores=2)
        secs = time.perf_counter() - t0
        if args.save:
            with atomic_path(args.save) as tmp:
                idata.to_netcdf(tmp)
    summ = az.summary(idata, var_names=["W", "tau"], kind="diagnostics")
    st = idata["sample_stats"]
    diag = {"seconds": secs, "chains": int(st.sizes["chain"]), "draws": int(st.sizes["draw"]),
            "max_r_hat": float(np.nanmax(summ["r_hat"])),
            "min_ess_bulk": float(np.nanmin(summ["ess_bulk"])),
            "min_ess_tail": float(np.nanmin(summ["ess_tail"])),
            "divergences": int(st["diverging"].values.sum()),
            "mean_tree_size": float(st["n_steps"].values.mean())}
    return idata, diag


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=str(MEATH))
    p.add_argument("--idata", help="saved posterior (netcdf) instead of running NUTS")
    p.add_argument("--save", help="write the NUTS posterior here (netcdf)")
    p.add_argument("--chains", type=int, default=4)
    p.add_argument("--draws", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--thin", type=int, default=200, help="posterior draws used for the "
                   "consensus and the credible intervals")
    p.add_argument("--ppc-reps", type=int, default=100)
    p.add_argument("--out", default=str(ROOT / "docs" / "guide"))
    args = p.parse_args(argv)
    if not Path(args.data).is_file():
        print(f"{args.data} not found (PrefLib ED-00001 Meath); nothing to do", file=sys.stderr)
        return 1
    data = read_preflib(args.data)
    names = list(data.item_names)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rm = models.full_model(data, parametrization="auto")  # centred: many ballots per entry
    idata, diag = _posterior(args, rm)
    diag["parametrization"] = rm.parametrization
    diag["sampler"] = idata.attrs.get("pm_perm_sampler")
    report = {"nuts": diag}
    print("NUTS:", diag, flush=True)

    post = fitting.posterior_params(idata, "full")
    rng = np.random.default_rng(args.seed)
    keep = np.sort(rng.choice(post["params"].shape[0], min(args.thin, post["params"].shape[0]),
                              replace=False))
    thin = {k: v[keep] for k, v in post.items()}
    consensus = analysis.consensus_posterior(thin, "full", top=5)
    report["consensus"] = [{"order": [names[i] for i in o], "probability": pr}
                           for o, pr in consensus]
    for o, pr in consensus:
        print(f"consensus {pr:.3f}: " + " > ".join(names[i] for i in o))
    from pm_perm.kernels.permanent import permutation_marginals

    P = permutation_marginals(thin["params"][:, 0])  # (S, M, M), exact per draw
    top3 = P[:, :, :3].sum(axis=2)
    lo, hi = np.quantile(top3, [0.05, 0.95], axis=0)
    report["top3"] = {names[i]: [float(top3[:, i].mean()), float(lo[i]), float(hi[i])]
                      for i in np.argsort(-top3.mean(axis=0))}
    for name, (m, a, b) in report["top3"].items():
        print(f"  P(top 3) {m:.4f} [{a:.4f}, {b:.4f}]  {name}")

    t0 = time.perf_counter()
    ballots = posterior.predictive_ballots(rm, idata, draws=args.ppc_reps, seed=args.seed)
    ppc = analysis.ppc_summary(data, replicated=ballots)
    report["ppc_seconds"] = time.perf_counter() - t0
    report["ppc_share_outside_90"] = {
        k: float(np.mean(((v["observed"] < v["lower"]) | (v["observed"] > v["upper"]))[
            ~np.eye(data.n_items, dtype=bool)] if k == "pairwise" else
            (v["observed"] < v["lower"]) | (v["observed"] > v["upper"])))
        for k, v in ppc.items()}
    print("PPC share outside the 90% band:", report["ppc_share_outside_90"])
    fig, _ = plots.plot_ppc(ppc, names)
    save_figure(fig, out / "rankings_meath_nuts_ppc.png", dpi=100)
    # "Johnny Brady F.F." -> "Brady F.F."
    short = [n.split(" ", 1)[1] if " " in n else n for n in names]
    fig, _ = plots.plot_consensus(consensus, short, max_items=None)
    save_figure(fig, out / "rankings_meath_nuts_consensus.png", dpi=100, bbox_inches="tight")
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
