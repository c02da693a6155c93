"""LETOR's own baselines (AdaRank, RankBoost; :mod:`pm_perm.learning_to_rank.baselines`)
against pm_perm's rankers on the same MQ2008 folds, side by side in one process, with a paired
bootstrap interval of the per-query differences.

Run::

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 .venv/bin/python benchmarks/bench_letor_baselines.py \
        --folds 1 2 3 4 5 --json outputs/letor_baselines.json

The ``--json`` path is checked before any work (its folder is created if missing; it may
replace an older result file, never an MQ2008 data file) and written atomically as strict
JSON (non-finite values as null, with a warning).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from pm_perm.learning_to_rank.baselines import (  # noqa: E402
    KS,
    fit_adarank,
    fit_rankboost,
    paired_bootstrap,
    per_query,
)
from pm_perm.learning_to_rank.metrics import ndcg_at_k  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import check_output, mq2008_inputs, write_result  # noqa: E402

# LETOR 4.0 official baselines on MQ2008, mean of 5 folds (../shared/data/README.md)
PUBLISHED = {
    "RankBoost": (0.3856, 0.4288, 0.4666, 0.4775),
    "AdaRank-NDCG": (0.3826, 0.4420, 0.4821, 0.4824),
}


ADARANK_VARIANTS = {
    "E = NDCG@k, k in {1, 3, 5, 10} on validation (the benchmark's AdaRank)": {},
    "E = NDCG@5": {"ks": (5,)},
    "E = NDCG@10": {"ks": (10,)},
    "E = NDCG of the whole list": {"ks": (10_000,)},
    "k on validation, queries without a relevant document kept": {"keep_uninformative": True},
}


def adarank_sensitivity(folds, data_root=None, seed=0):
    """Test NDCG@1/3/5 (LETOR-4.0 discount, pessimistic ties) of AdaRank variants per fold."""
    from pm_perm.datasets.mq2008 import load_mq2008_fold

    out = {v: [] for v in ADARANK_VARIANTS}
    for fold in folds:
        train, valid, test = load_mq2008_fold(fold, data_root)
        for name, kw in ADARANK_VARIANTS.items():
            w, _ = fit_adarank(train, valid, seed=seed, **kw)
            out[name].append([float(ndcg_at_k(test.X @ w, test.y, test.group_ptr, k,
                                              convention="letor4").mean()) for k in KS])
    return out


def run_fold(fold, models, data_root=None, seed=0):
    from pm_perm.cli.learning_to_rank import fit_and_evaluate
    from pm_perm.datasets.mq2008 import load_mq2008_fold

    train, valid, test = load_mq2008_fold(fold, data_root)
    out = {}
    for model in models:
        t0 = time.perf_counter()
        if model == "adarank":
            w, setting = fit_adarank(train, valid, seed=seed)
            scores = test.X @ w
        elif model == "rankboost":
            score, setting = fit_rankboost(train, valid)
            scores = score(test.X)
        else:
            res = fit_and_evaluate(train, valid, test, model=model, subset_size=3, seed=seed)
            scores = res["scores"]
            setting = res.get("prior_sigma", res.get("ridge_alpha"))
        sec = time.perf_counter() - t0
        pq = per_query(scores, test)
        out[model] = {"seconds": sec, "setting": setting,
                      "per_query": {r: v.tolist() for r, v in pq.items()}}
        m = pq["pessimistic"].mean(-1)
        mr = pq["random"].mean(-1)
        print(f"fold {fold} {model:>10}: NDCG@1/3/5 {m[0]:.4f} {m[1]:.4f} {m[2]:.4f} "
              f"(random ties {mr[0]:.4f} {mr[1]:.4f} {mr[2]:.4f}) | {setting} | {sec:.1f} s",
              flush=True)
    return out


def report(folds_out, models, reference="ordinal"):
    lines = ["MQ2008, test NDCG@1/3/5, LETOR-4.0 discount, mean of the fold means",
             "", "| model | ties | NDCG@1 | NDCG@3 | NDCG@5 | s / fold |",
             "|---|---|---|---|---|---|"]
    pooled = {}
    for model in models:
        for rule in ("pessimistic", "random"):
            pooled[model, rule] = np.concatenate(
                [np.asarray(f[model]["per_query"][rule]) for f in folds_out], axis=-1)
        sec = np.mean([f[model]["seconds"] for f in folds_out])
        for rule in ("pessimistic", "random"):
            m = np.mean([np.asarray(f[model]["per_query"][rule]).mean(-1) for f in folds_out],
                        axis=0)
            lines.append(f"| {model} | {rule} | {m[0]:.4f} | {m[1]:.4f} | {m[2]:.4f} | "
                         f"{sec:.1f} |")
    for name, v in PUBLISHED.items():
        lines.append(f"| {name} (published) | file order | {v[0]:.4f} | {v[1]:.4f} | "
                     f"{v[2]:.4f} | |")
    if reference in models:
        lines += ["", f"Paired differences {reference} - model over the same test queries "
                  "of all folds run (mean over queries and 90% bootstrap interval, 10,000 "
                  "resamples of queries):", "",
                  "| model | ties | NDCG@1 | NDCG@3 | NDCG@5 |", "|---|---|---|---|---|"]
        for model in models:
            if model == reference:
                continue
            for rule in ("pessimistic", "random"):
                mean, lo, hi = paired_bootstrap(pooled[reference, rule] - pooled[model, rule])
                cells = " | ".join(f"{m:+.4f} [{a:+.4f}, {b:+.4f}]"
                                   for m, a, b in zip(mean, lo, hi, strict=True))
                lines.append(f"| {model} | {rule} | {cells} |")
    return "\n".join(lines)



def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--folds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    p.add_argument("--models", nargs="+", default=["ordinal", "adarank", "rankboost", "ridge"],
                   choices=("ordinal", "rankmatch", "ridge", "adarank", "rankboost"))
    p.add_argument("--data-root")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="write per-fold, per-query results as JSON")
    p.add_argument("--adarank-sensitivity", action="store_true",
                   help="instead: AdaRank's test figures under other training measures")
    args = p.parse_args(argv)
    # --json is written by the main comparison only (not by --adarank-sensitivity)
    check_output(p, "--json", None if args.adarank_sensitivity else args.json,
                 mq2008_inputs(args.data_root))
    t0 = time.perf_counter()
    if args.adarank_sensitivity:
        out = adarank_sensitivity(args.folds, args.data_root, args.seed)
        print("| AdaRank variant | NDCG@1 | NDCG@3 | NDCG@5 |\n|---|---|---|---|")
        for name, rows in out.items():
            m = np.mean(rows, axis=0)
            print(f"| {name} | {m[0]:.4f} | {m[1]:.4f} | {m[2]:.4f} |")
        print(f"\ntotal wall time {time.perf_counter() - t0:.0f} s")
        return
    folds_out = [run_fold(f, args.models, args.data_root, args.seed) for f in args.folds]
    print()
    print(report(folds_out, args.models))
    print(f"\ntotal wall time {time.perf_counter() - t0:.0f} s")
    if args.json:
        write_result(args.json, {"folds": args.folds, "results": folds_out})


if __name__ == "__main__":
    main()
