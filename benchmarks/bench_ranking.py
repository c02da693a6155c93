"""Learning to rank on MQ2008: RankMatch, ordinal n-choose-k, ridge and LightGBM side by side.

Run::

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 .venv/bin/python benchmarks/bench_ranking.py \
        --folds 1 2 3 4 5 --json outputs/bench_ranking.json

(``--folds 1`` for a quick run; ``--lbfgs-memory 10 50`` fits RankMatch and ordinal once per
L-BFGS-B memory, side by side). Every model sees the same train / validation / test splits of
each fold (LETOR 4.0 rotation rebuilt by :func:`pm_perm.datasets.mq2008.load_mq2008_fold`),
and
every setting is chosen on the fold's validation split by NDCG@5 (standard discount,
pessimistic ties):

* ``RankMatch MAP (M=3)``: :class:`pm_perm.learning_to_rank.rankmatch.RankMatch`, prior scale from
  {0.1, 0.3, 1, 3, 10} (one MAP fit per scale);
* ``ordinal n-choose-k MAP``: :class:`pm_perm.learning_to_rank.ordinal.OrdinalRanker`, prior scale
from
  the same grid;
* ``ridge``: ridge regression on the labels, penalty from {0.01, ..., 1000};
* ``LightGBM lambdarank``: ``lightgbm.LGBMRanker(objective="lambdarank")`` (gain 2^r - 1),
  learning rate 0.05, ``num_leaves`` in {7, 15, 31} x ``min_child_samples`` in {20, 50}, and
  the number of trees (25, 50, ..., 500) read off each fit on validation; one thread. LightGBM
  is a benchmark-only extra (``pip install lightgbm``); it is skipped with a message when absent.

Reported per model, mean over the folds run: NDCG@1/3/5 and MAP under the LETOR-4.0 evaluation
script's discount (the published LETOR tables' convention; ``convention="letor4"`` of
:mod:`pm_perm.learning_to_rank.metrics`), standard NDCG@10, and the wall time per fold of the whole
fit
including the validation search (so RankMatch and ordinal are five MAP fits each; LightGBM six
boosting runs). Queries without a relevant document count as 0; ties are broken pessimistically.
The published LETOR 4.0 baselines are printed below for reference. Needs
``../shared/data/MQ2008_LETOR4`` (or ``--data-root``).
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

from pm_perm.cli.learning_to_rank import fit_and_evaluate  # noqa: E402
from pm_perm.datasets.mq2008 import load_mq2008_fold  # noqa: E402
from pm_perm.learning_to_rank.metrics import evaluate_ranking  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import check_output, mq2008_inputs, write_result  # noqa: E402

MODELS = ("rankmatch", "ordinal", "ridge", "lightgbm")
NAMES = {
    "rankmatch": "RankMatch MAP (M = 3)",
    "ordinal": "ordinal n-choose-k MAP",
    "ridge": "ridge regression on labels",
    "lightgbm": "LightGBM lambdarank",
}
# LETOR 4.0 official baselines on MQ2008, mean of 5 folds (../shared/data/README.md)
PUBLISHED = {
    "RankSVM-Struct": (0.3627, 0.4286, 0.4695, 0.4696),
    "RankBoost": (0.3856, 0.4288, 0.4666, 0.4775),
    "AdaRank-NDCG": (0.3826, 0.4420, 0.4821, 0.4824),
    "ListNet": (0.3754, 0.4324, 0.4747, float("nan")),
}
LGBM_GRID = [(leaves, child) for leaves in (7, 15, 31) for child in (20, 50)]
LGBM_TREES = tuple(range(25, 501, 25))



def fit_lightgbm(train, valid, test, seed=0):
    """LambdaMART with settings and tree count chosen on validation NDCG@5; test scores."""
    import lightgbm as lgb

    best = None
    for leaves, child in LGBM_GRID:
        model = lgb.LGBMRanker(objective="lambdarank", n_estimators=LGBM_TREES[-1],
                               learning_rate=0.05, num_leaves=leaves, min_child_samples=child,
                               n_jobs=1, random_state=seed, verbose=-1)
        model.fit(train.X, train.y, group=train.group_sizes)
        for trees in LGBM_TREES:
            s = model.predict(valid.X, num_iteration=trees)
            v = evaluate_ranking(s, valid.y, valid.group_ptr, ks=(5,))["ndcg@5"]
            if best is None or v > best[0]:
                best = (v, (leaves, child, trees), model)
    _, setting, model = best
    return model.predict(test.X, num_iteration=setting[2]), {
        "num_leaves": setting[0], "min_child_samples": setting[1], "n_trees": setting[2]}


def _runs(models, memories):
    """(model, L-BFGS memory, row name): one run per memory for the two MAP-fitted models."""
    for model in models:
        if model in ("rankmatch", "ordinal"):
            for m in memories:
                name = NAMES[model] if len(memories) == 1 else f"{NAMES[model]}, memory {m}"
                yield model, m, name
        else:
            yield model, None, NAMES[model]


def run_fold(fold, models, data_root=None, seed=0, memories=(10,)):
    train, valid, test = load_mq2008_fold(fold, data_root)
    rows = []
    for model, memory, name in _runs(models, memories):
        t0 = time.perf_counter()
        if model == "lightgbm":
            scores, setting = fit_lightgbm(train, valid, test, seed)
        else:
            kw = {} if memory is None else {"lbfgs_memory": memory}
            res = fit_and_evaluate(train, valid, test, model=model, subset_size=3, seed=seed,
                                   **kw)
            scores = res["scores"]
            setting = res.get("prior_sigma", res.get("ridge_alpha"))
            if memory is not None:  # L-BFGS iterations summed over the validation grid
                setting = {"prior_sigma": setting, "lbfgs_iterations": int(sum(
                    r.nit for r in res["ranker"].map_results_.values()))}
        seconds = time.perf_counter() - t0
        letor4 = evaluate_ranking(scores, test.y, test.group_ptr, ks=(1, 3, 5),
                                  convention="letor4")
        std = evaluate_ranking(scores, test.y, test.group_ptr, ks=(1, 3, 5, 10))
        row = {"fold": fold, "model": model, "name": name, "lbfgs_memory": memory,
               "seconds": seconds, "setting": setting,
               "letor4": {k: float(letor4[k]) for k in ("ndcg@1", "ndcg@3", "ndcg@5", "map")},
               "standard": {k: float(std[k]) for k in ("ndcg@1", "ndcg@3", "ndcg@5", "ndcg@10",
                                                       "map")}}
        rows.append(row)
        L = row["letor4"]
        print(f"fold {fold} {name:>28}: NDCG@1/3/5 {L['ndcg@1']:.4f} {L['ndcg@3']:.4f} "
              f"{L['ndcg@5']:.4f} MAP {L['map']:.4f} (letor4) | NDCG@10 "
              f"{row['standard']['ndcg@10']:.4f} | setting {setting} | {seconds:.1f} s",
              flush=True)
    return rows


def table(rows, folds):
    out = [f"MQ2008, mean over fold(s) {', '.join(map(str, folds))}: NDCG@1/3/5 and MAP with the "
           "LETOR-4.0 discount, NDCG@10 standard; pessimistic ties; settings chosen on "
           "validation NDCG@5", "",
           "| model | NDCG@1 | NDCG@3 | NDCG@5 | MAP | NDCG@10 (std) | wall s / fold |",
           "|---|---|---|---|---|---|---|"]
    for name in dict.fromkeys(r["name"] for r in rows):
        rs = [r for r in rows if r["name"] == name]
        L = {k: np.mean([r["letor4"][k] for r in rs]) for k in rs[0]["letor4"]}
        n10 = np.mean([r["standard"]["ndcg@10"] for r in rs])
        sec = np.mean([r["seconds"] for r in rs])
        out.append(f"| {name} | {L['ndcg@1']:.4f} | {L['ndcg@3']:.4f} | "
                   f"{L['ndcg@5']:.4f} | {L['map']:.4f} | {n10:.4f} | {sec:.1f} |")
    for name, m in PUBLISHED.items():
        mp = "—" if np.isnan(m[3]) else f"{m[3]:.4f}"
        out.append(f"| {name} (published, 5 folds) | {m[0]:.4f} | {m[1]:.4f} | {m[2]:.4f} | "
                   f"{mp} | | |")
    return "\n".join(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--folds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    p.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    p.add_argument("--data-root")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="write per-fold rows as JSON")
    p.add_argument("--lbfgs-memory", type=int, nargs="+", default=[10], metavar="K",
                   help="L-BFGS-B memory of the RankMatch and ordinal MAP fits; several values "
                   "run each model once per value, side by side (default 10)")
    args = p.parse_args(argv)
    check_output(p, "--json", args.json, mq2008_inputs(args.data_root))
    models = list(args.models)
    if "lightgbm" in models:
        try:
            import lightgbm  # noqa: F401
        except ImportError:
            print("lightgbm is not installed (pip install lightgbm): skipping it", file=sys.stderr)
            models.remove("lightgbm")
    t0 = time.perf_counter()
    rows = []
    for fold in args.folds:
        rows += run_fold(fold, models, args.data_root, args.seed, args.lbfgs_memory)
    print()
    print(table(rows, args.folds))
    print(f"\ntotal wall time {time.perf_counter() - t0:.0f} s")
    if args.json:
        write_result(args.json, rows)


if __name__ == "__main__":
    main()
