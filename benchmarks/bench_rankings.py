"""Held-out accuracy and speed of the ranking-data models (issue 18), side by side in one run.

Accuracy: 5-fold cross-validation over BALLOTS (each ballot falls in one fold: multinomial
thinning of each distinct order's count, seeded) on every PrefLib file given. Per fold, every
model is fitted by MAP (:func:`pm_perm.preferences.fitting.fit_map`) on four folds and scored on the
fifth: the mean natural-log likelihood per held-out ballot of its observed (partial) order,
ballot length excluded (the same constant for every model). Models: Plackett-Luce, rank-one,
full, mixtures of full models K = 2..``--max-k`` (K = 1 is the full model), and ``choix``'s
Plackett-Luce (I-LSR on the top-k choices of each ballot, ``alpha=1e-3``) as an outside
reference, scored with pm_perm's exact top-k PL likelihood.

Speed (``--speed FILE``): a K = 3 mixture of full models by MAP on the whole file, and, with
``--nuts``, NUTS on the full model (``--chains`` x ``--draws``, as many tuning steps) with
r_hat and divergences.

Run::

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 .venv/bin/python benchmarks/bench_rankings.py \\
        --files ../shared/data/preflib/apa/*.soi ../shared/data/preflib/irish/*.soi \\
        --out outputs/bench_rankings.json

The ``--out`` path is checked before the first fit (its folder is created if missing; it may
replace an older result file, never one of the ``--files`` or the ``--speed`` file). The JSON
(strict: non-finite values written as null, with a warning) is rewritten after every fit,
atomically, so an interrupted run keeps what finished and never leaves a partial file.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from pm_perm.preferences import fitting as rfit
from pm_perm.preferences import models as rmod
from pm_perm.preferences import posterior as rpost
from pm_perm.preferences.preflib import read_preflib

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import check_output  # noqa: E402
from _harness import write_result as checkpoint  # noqa: E402


def folds_over_ballots(data, n_folds, seed):
    """(n_distinct, n_folds) counts: each ballot of each order assigned to a fold uniformly."""
    rng = np.random.default_rng(seed)
    return np.stack([rng.multinomial(c, np.full(n_folds, 1.0 / n_folds)) for c in data.counts])


def heldout_loglik(point, family, test):
    post = rfit.posterior_params(point, family)
    ll = rpost.pointwise_loglik(post, family, test.orders)[0]
    return float(test.counts @ ll / test.n_rankings)


def choix_pl(train, test):
    """choix I-LSR Plackett-Luce on the top-k choices of each training ballot."""
    import choix

    from pm_perm.kernels.plackett_luce import plackett_luce_loglik

    M = train.n_items
    choices = []
    for order, count in zip(train.orders, train.counts, strict=True):
        if (np.bincount(order[order >= 0], minlength=M) > 1).any():
            raise ValueError("choix reference: ties are not supported")
        ranked = list(np.argsort(np.where(order < 0, M, order))[: int((order >= 0).sum())])
        rest = set(range(M))
        for item in ranked:
            rest.discard(int(item))
            if rest:
                choices.extend([(int(item), sorted(rest))] * int(count))
    u = choix.ilsr_top1(M, choices, alpha=1e-3)
    ll = plackett_luce_loglik(u, test.orders)
    return float(test.counts @ ll / test.n_rankings)


MODELS = [("plackett-luce", rmod.plackett_luce_model, 1), ("rank-one", rmod.rank_one_model, 1),
          ("full", rmod.full_model, 1)]


def run_accuracy(files, n_folds, max_k, seed, out, results):
    for path in files:
        data = read_preflib(path)
        name = Path(path).parent.name + "/" + Path(path).name
        entry = results.setdefault(name, {"n_items": data.n_items, "n_rankings": data.n_rankings,
                                          "n_distinct": data.n_distinct, "folds": {}})
        assign = folds_over_ballots(data, n_folds, seed)
        models = MODELS + [(f"full K={k}", rmod.full_model, k) for k in range(2, max_k + 1)]
        # each model is built once on all distinct orders; a fold only sets its counts
        # (rfit.set_counts), so the compiled functions are reused across folds
        for label, build, K in models + [("choix PL", None, 1)]:
            rm = None if build is None else build(data, components=K)
            for f in range(n_folds):
                train = data.with_counts(data.counts - assign[:, f])
                test = data.with_counts(assign[:, f])
                t0 = time.perf_counter()
                if build is None:
                    value = choix_pl(train, test)
                else:
                    family = label.split(" ")[0]
                    fold_model = rfit.set_counts(rm, data.counts - assign[:, f])
                    point = rfit.fit_map(fold_model, seed=seed + f)
                    value = heldout_loglik(point, family, test)
                secs = time.perf_counter() - t0
                entry["folds"].setdefault(label, []).append({"loglik": value, "seconds": secs})
                print(f"{name} fold {f} {label:>14}: {value:.4f} per ballot ({secs:.1f} s)",
                      flush=True)
                checkpoint(out, results)
    return results


def run_speed(path, nuts, chains, draws, seed, results, out):
    data = read_preflib(path)
    speed = results.setdefault("speed", {})
    t0 = time.perf_counter()
    point = rfit.fit_map(rmod.full_model(data, components=3), seed=seed)
    speed["mixture_K3_map_seconds"] = time.perf_counter() - t0
    speed["mixture_K3_map_iterations"] = point["_optimizer"]["n_iterations"]
    speed["mixture_K3_weights"] = np.asarray(point["mixture_weights"]).tolist()
    print(f"K=3 mixture MAP on {path}: {speed['mixture_K3_map_seconds']:.1f} s", flush=True)
    checkpoint(out, results)
    if nuts:
        import arviz as az

        t0 = time.perf_counter()
        idata = rfit.fit_nuts(rmod.full_model(data), draws=draws, tune=draws, chains=chains,
                              seed=seed)
        secs = time.perf_counter() - t0
        summ = az.summary(idata, var_names=["W"], kind="diagnostics")
        speed["nuts_full"] = {
            "seconds": secs, "chains": chains, "draws": draws,
            "max_r_hat": float(np.nanmax(summ["r_hat"])),
            "min_ess_bulk": float(np.nanmin(summ["ess_bulk"])),
            "divergences": int(idata["sample_stats"]["diverging"].values.sum())}
        print(f"NUTS full model: {speed['nuts_full']}", flush=True)
        checkpoint(out, results)


def summarise(results):
    lines = ["| file | M | ballots | model | held-out loglik / ballot (mean over folds) | "
             "seconds / fit |", "|---|---|---|---|---|---|"]
    for name, e in results.items():
        if name == "speed":
            continue
        for label, fl in e["folds"].items():
            ll = np.mean([x["loglik"] for x in fl])
            s = np.mean([x["seconds"] for x in fl])
            lines.append(f"| {name} | {e['n_items']} | {e['n_rankings']} | {label} | "
                         f"{ll:.4f} ({len(fl)} folds) | {s:.1f} |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--files", nargs="*", default=[])
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--max-k", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--speed", metavar="FILE")
    p.add_argument("--nuts", action="store_true")
    p.add_argument("--chains", type=int, default=4)
    p.add_argument("--draws", type=int, default=1000)
    p.add_argument("--out", default="outputs/bench_rankings.json")
    args = p.parse_args(argv)
    out = Path(args.out)
    check_output(p, "--out", out, [*args.files, args.speed])  # before the first fit
    results = {}
    if args.files:
        run_accuracy(args.files, args.folds, args.max_k, args.seed, out, results)
    if args.speed:
        run_speed(args.speed, args.nuts, args.chains, args.draws, args.seed, results, out)
    print(summarise(results))


if __name__ == "__main__":
    main()
