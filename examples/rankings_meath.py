"""The 2002 Meath election (64,081 STV ballots over 14 candidates): consensus, blocs, PPCs.

Fits the full ranking model (one population) and a K-bloc mixture of full models by MAP, then
writes the figures of docs/guide/preferences.md and prints what the guide quotes. Needs
../shared/data/preflib/irish/00001-00000003.soi (PrefLib ED-00001); exits with a message when
it is absent.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python examples/rankings_meath.py [--components 3]``
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from pm_perm._io import save_figure
from pm_perm.datasets import data_home
from pm_perm.preferences import analysis, fitting, models, plots, posterior
from pm_perm.preferences.preflib import read_preflib

ROOT = Path(__file__).resolve().parents[1]
MEATH = data_home() / "preflib" / "irish" / "00001-00000003.soi"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=str(MEATH))
    p.add_argument("--components", type=int, default=3)
    p.add_argument("--out", default=str(ROOT / "docs" / "guide"))
    p.add_argument("--ppc-reps", type=int, default=50)
    args = p.parse_args(argv)
    if not Path(args.data).is_file():
        print(f"{args.data} not found (PrefLib ED-00001 Meath); nothing to do", file=sys.stderr)
        return 1
    data = read_preflib(args.data)
    names = list(data.item_names)
    print(f"{data.n_rankings} ballots, {data.n_distinct} distinct orders, {data.n_items} "
          f"candidates; ballot lengths: {np.bincount(data.ranked_lengths(), data.counts)}")
    out, report = Path(args.out), {}
    out.mkdir(parents=True, exist_ok=True)
    fits = {}
    for K in (1, args.components):
        t0 = time.perf_counter()
        point = fitting.fit_map(models.full_model(data, components=K), seed=0)
        secs = time.perf_counter() - t0
        post = fitting.posterior_params(point, "full")
        ll = posterior.pointwise_loglik(post, "full", data.orders)[0]
        fits[K] = post
        report[f"K={K}"] = {"seconds": round(secs, 1),
                            "loglik_per_ballot": float(data.counts @ ll / data.n_rankings),
                            "weights": post["weights"][0].round(3).tolist()}
        print(f"full model K={K}: MAP in {secs:.0f} s, log-likelihood per ballot "
              f"{report[f'K={K}']['loglik_per_ballot']:.4f}", flush=True)
    one, mix = fits[1], fits[args.components]
    marg = analysis.position_marginals(one, "full")
    consensus = analysis.consensus_posterior(one, "full")
    print("consensus (MAP mode):", " > ".join(names[i] for i in consensus[0][0]))
    top3 = analysis.top_k_probabilities(marg, 3)
    for i in np.argsort(-top3):
        print(f"  P(top 3) {top3[i]:.3f}  P(first) {marg[i, 0]:.3f}  {names[i]}")
    profiles = analysis.component_position_marginals(mix, "full")
    w = mix["weights"][0]
    member = posterior.membership_probabilities(mix, "full", data.orders)
    report["blocs"] = []
    for k in np.argsort(-w):
        t3 = profiles[k][:, :3].sum(axis=1)
        best = [names[i] for i in np.argsort(-t3)[:4]]
        share = float(data.counts @ member[:, k] / data.n_rankings)
        report["blocs"].append({"weight": float(w[k]), "ballot_share": share, "top": best})
        print(f"bloc weight {w[k]:.3f} (expected ballots {share:.3f}): "
              + ", ".join(f"{names[i]} {t3[i]:.2f}" for i in np.argsort(-t3)[:4]))
    for label, post in (("one", one), ("mix", mix)):
        ppc = analysis.ppc_summary(data, post, "full", n_reps=args.ppc_reps, rng=1)
        outside = {k: float(np.mean((v["observed"] < v["lower"]) | (v["observed"] > v["upper"])))
                   for k, v in ppc.items()}
        report[f"ppc_{label}_share_outside_90"] = outside
        print(f"PPC ({label}): share of statistics outside the 90% band {outside}")
        fig, _ = plots.plot_ppc(ppc, names)
        save_figure(fig, out / f"rankings_meath_ppc_{label}.png", dpi=100)
    fig, _ = plots.plot_position_heatmap(marg, names, title="Meath 2002: P(candidate at "
                                         "position), full model")
    save_figure(fig, out / "rankings_meath_positions.png", dpi=100)
    fig, _ = plots.plot_bloc_profiles(profiles, w, names)
    save_figure(fig, out / "rankings_meath_blocs.png", dpi=100)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
