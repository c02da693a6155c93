"""Held-out fit of the top-k model on real elections next to Plackett-Luce and the full model.

Issue 50 (acceptance: "the top-k model's 5-fold held-out log-likelihood next to PL and full").
The folds are :mod:`bench_rankings`'s (each ballot of each distinct order falls in one of
``--folds`` folds, seeded multinomial thinning; each model is built once on all distinct orders
and a fold only sets its training counts). Per fold, on the other folds: Plackett-Luce by
:func:`~pm_perm.preferences.fitting.fit_map`; the full model and the top-k model (K = the
longest ballot of the file, as the CLI's default) each built with a fixed ``tau`` and fitted by
:func:`~pm_perm.preferences.fitting.fit_map_type2` (``tau`` chosen by the Laplace evidence, as
``pm-perm preferences --model full|top-k`` fits them). Scored on the held-out fold: the
natural-log likelihood of each held-out ballot's observed order (ballot length excluded, the
same for every model). Reported per file: the mean per held-out ballot over all folds run, and
the mean paired difference to Plackett-Luce over the held-out ballots with its standard error
(the standard deviation of the per-ballot differences over the square root of their number).
``--max-folds N`` runs only the first N of the ``--folds`` folds (for the largest files on a
loaded machine; the table says how many ran). ``--cut K`` first cuts every ballot to its first
K ranked items (strict ballots only), so that the top-k model has K < M (the elections hold
complete ballots, so their longest ballot is M: the top-k model's likelihood is then the full
model's and only the priors differ).

Run::

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 .venv/bin/python benchmarks/bench_top_k_elections.py \\
        --files ../shared/data/preflib/apa/ED-00028-00000001.soi \\
        ../shared/data/preflib/irish/*.soi --out outputs/bench_top_k_elections.json

The JSON is rewritten after every fit (an interrupted run keeps what finished);
``--table-from FILE...`` prints the table of earlier runs without fitting.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from pm_perm.preferences import RankingData
from pm_perm.preferences import fitting as rfit
from pm_perm.preferences import models as rmod
from pm_perm.preferences import posterior as rpost
from pm_perm.preferences.preflib import read_preflib

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import check_output  # noqa: E402
from _harness import write_result as checkpoint  # noqa: E402
from bench_rankings import folds_over_ballots  # noqa: E402

MODELS = ("plackett-luce", "full", "top-k")


def build(label, data):
    """The model of ``label`` on all distinct orders, and its fitter (as the CLI's MAP)."""
    if label == "plackett-luce":
        return rmod.plackett_luce_model(data), rfit.fit_map
    if label == "full":
        return rmod.full_model(data, tau=0.0), rfit.fit_map_type2
    return rmod.top_k_model(data, tau=0.0), rfit.fit_map_type2


def heldout_orders_loglik(point, family, orders):
    """Log-likelihood of each of ``orders`` under a MAP point (one value per distinct order)."""
    return rpost.pointwise_loglik(rfit.posterior_params(point, family), family, orders)[0]


def cut_ballots(data, K):
    """``data`` with every ballot cut to its first ``K`` ranked items (distinct orders merged)."""
    if data.has_ties:
        raise ValueError("--cut: the file has tied ballots; cut strict ballots only")
    orders = np.asarray(data.orders)
    return RankingData.from_orders(np.where(orders >= K, -1, orders), data.counts,
                                   item_names=data.item_names)


def run_file(path, n_folds, max_folds, seed, out, results, cut=None):
    data = read_preflib(path)
    name = Path(path).parent.name + "/" + Path(path).name
    if cut is not None:
        data, name = cut_ballots(data, cut), f"{name} cut to top {cut}"
    assign = folds_over_ballots(data, n_folds, seed)
    longest = int((np.asarray(data.orders) >= 0).sum(axis=1).max())
    entry = results.setdefault(name, {"n_items": data.n_items, "n_rankings": data.n_rankings,
                                      "n_distinct": data.n_distinct, "top_k_K": longest,
                                      "n_folds": n_folds, "folds": {}})
    for label in MODELS:
        rm, fit = build(label, data)
        for f in range(min(n_folds, max_folds)):
            test = assign[:, f] > 0
            t0 = time.perf_counter()
            point = fit(rfit.set_counts(rm, data.counts - assign[:, f]), seed=seed + f)
            ll = heldout_orders_loglik(point, label, data.orders[test])
            secs = time.perf_counter() - t0
            tau = point.get("tau")
            entry["folds"].setdefault(label, []).append({
                "loglik": ll.tolist(), "counts": assign[test, f].tolist(),
                "test_index": np.flatnonzero(test).tolist(), "seconds": secs,
                "tau": None if tau is None else float(tau)})
            per_ballot = float(assign[test, f] @ ll / assign[test, f].sum())
            print(f"{name} fold {f} {label:>13}: {per_ballot:.4f} per ballot ({secs:.1f} s"
                  f"{'' if tau is None else f', tau {float(tau):g}'})", flush=True)
            checkpoint(out, results)
    return results


def paired(fold_a, fold_b):
    """Mean per held-out ballot of ``a - b`` over the folds both ran, and its standard error."""
    d, w = [], []
    for fa, fb in zip(fold_a, fold_b, strict=False):
        d.append(np.asarray(fa["loglik"]) - np.asarray(fb["loglik"]))
        w.append(np.asarray(fa["counts"], dtype=float))
    d, w = np.concatenate(d), np.concatenate(w)
    mean = float(w @ d / w.sum())
    var = float(w @ (d - mean) ** 2 / (w.sum() - 1))
    return mean, float(np.sqrt(var / w.sum()))


def summarise(results):
    """Markdown table; each difference over the folds both models ran (folds: PL, full, top-k)."""
    lines = ["| file | M, ballots, K | folds | PL per ballot | full - PL (tau) | "
             "top-k - PL (tau) | s / fit (PL, full, top-k) |", "|---|---|---|---|---|---|---|"]
    for name, e in results.items():
        folds = e["folds"]
        pl = folds.get("plackett-luce", [])
        if not pl:
            continue
        w = np.concatenate([x["counts"] for x in pl]).astype(float)
        ll = np.concatenate([x["loglik"] for x in pl])
        cells = []
        for label in ("full", "top-k"):
            if not folds.get(label):
                cells.append("not run")
                continue
            m, se = paired(folds[label], pl)
            taus = "/".join(f"{t:g}" for t in sorted({x["tau"] for x in folds[label]}))
            cells.append(f"{m:+.3f} +- {se:.3f} ({taus})")
        runs = "/".join(str(len(folds.get(k, []))) for k in MODELS)
        secs = ", ".join(f"{np.mean([x['seconds'] for x in folds[k]]):.0f}" if folds.get(k)
                         else "-" for k in MODELS)
        lines.append(f"| {name} | {e['n_items']}, {e['n_rankings']}, {e['top_k_K']} | "
                     f"{runs} of {e['n_folds']} | {w @ ll / w.sum():.3f} | {cells[0]} | "
                     f"{cells[1]} | {secs} |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--files", nargs="*", default=[])
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--max-folds", type=int, default=None,
                   help="run only the first N folds (default all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cut", type=int, default=None, metavar="K",
                   help="cut every ballot to its first K ranked items first")
    p.add_argument("--out", default="outputs/bench_top_k_elections.json")
    p.add_argument("--table-from", nargs="+", metavar="FILE",
                   help="print the table of earlier result files and exit")
    args = p.parse_args(argv)
    if args.table_from:
        results = {}
        for path in args.table_from:
            results.update(json.loads(Path(path).read_text()))
        print(summarise(results))
        return
    out = Path(args.out)
    check_output(p, "--out", out, args.files)  # before the first fit
    results = {}
    for path in args.files:
        run_file(path, args.folds, args.max_folds or args.folds, args.seed, out, results,
                 args.cut)
    print(summarise(results))


if __name__ == "__main__":
    main()
