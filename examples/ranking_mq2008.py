"""RankMatch on MQ2008 (LETOR 4.0) next to a ridge-regression baseline, fold by fold.

Usage::

    python examples/ranking_mq2008.py --folds 1 2 3 4 5 --subset-sizes 3 5 --json mq2008.json

Every model sees the same train / validation / test splits (LETOR 4.0 rotation rebuilt by
:func:`pm_perm.datasets.mq2008.load_mq2008_fold`); settings (RankMatch prior scale, ridge
penalty)
are chosen on validation NDCG@5. Test metrics are printed per fold and as the mean over the
folds run, with NDCG under both conventions of :mod:`pm_perm.learning_to_rank.metrics` (``letor4``
is
the one of LETOR's published tables; at k <= 5 on MQ2008 only the discount differs). Ties in
the scores are broken pessimistically. Needs ``../shared/data/MQ2008_LETOR4`` (or
``--data-root``).

Data: Qin & Liu (2013), "Introducing LETOR 4.0 Datasets", arXiv:1306.2597.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from pm_perm._io import write_json  # noqa: E402
from pm_perm.cli.learning_to_rank import fit_and_evaluate  # noqa: E402
from pm_perm.datasets.mq2008 import load_mq2008_fold  # noqa: E402
from pm_perm.learning_to_rank.metrics import evaluate_ranking  # noqa: E402

# LETOR 4.0 official baselines on MQ2008, mean of 5 folds (../shared/data/README.md)
PUBLISHED = {
    "RankSVM-Struct": {"ndcg@1": 0.3627, "ndcg@3": 0.4286, "ndcg@5": 0.4695, "map": 0.4696},
    "RankBoost": {"ndcg@1": 0.3856, "ndcg@3": 0.4288, "ndcg@5": 0.4666, "map": 0.4775},
    "AdaRank-NDCG": {"ndcg@1": 0.3826, "ndcg@3": 0.4420, "ndcg@5": 0.4821, "map": 0.4824},
    "ListNet": {"ndcg@1": 0.3754, "ndcg@3": 0.4324, "ndcg@5": 0.4747, "map": float("nan")},
}
KEYS = ("ndcg@1", "ndcg@3", "ndcg@5", "ndcg@10", "map")


def run(folds, subset_sizes, data_root=None, seed=0):
    rows = []
    for fold in folds:
        train, valid, test = load_mq2008_fold(fold, data_root)
        configs = [("ridge", {"model": "ridge"})] + [
            (f"RankMatch M={m}", {"model": "rankmatch", "subset_size": m}) for m in subset_sizes
        ]
        for name, cfg in configs:
            res = fit_and_evaluate(train, valid, test, seed=seed, **cfg)
            letor4 = evaluate_ranking(res["scores"], test.y, test.group_ptr, ks=(1, 3, 5),
                                      convention="letor4")
            row = {"fold": fold, "model": name, "seconds": res["timings"]["total"],
                   "standard": {k: res["test"][k] for k in KEYS},
                   "letor4": {k: letor4[k] for k in ("ndcg@1", "ndcg@3", "ndcg@5", "map")},
                   "setting": res.get("prior_sigma", res.get("ridge_alpha"))}
            rows.append(row)
            print(f"fold {fold} {name:>14}: " + " ".join(
                f"{k}={v:.4f}" for k, v in row["standard"].items())
                + " | letor4 ndcg@1,3,5 = " + " ".join(
                f"{row['letor4'][k]:.4f}" for k in ("ndcg@1", "ndcg@3", "ndcg@5"))
                + f" | setting {row['setting']} | {row['seconds']:.1f} s", flush=True)
    return rows


def summary_table(rows, folds):
    names = list(dict.fromkeys(r["model"] for r in rows))
    out = [f"Mean over MQ2008 fold(s) {', '.join(map(str, folds))}; NDCG@1/3/5 and MAP under "
           "the LETOR-4.0 discount, NDCG@10 under the standard one (pessimistic ties)", "",
           "| model | NDCG@1 | @3 | @5 | MAP | NDCG@10 (std) | NDCG@1/3/5 (std) | s/fold |",
           "|---|---|---|---|---|---|---|---|"]
    for name in names:
        rs = [r for r in rows if r["model"] == name]
        L = {k: np.mean([r["letor4"][k] for r in rs]) for k in rs[0]["letor4"]}
        S = {k: np.mean([r["standard"][k] for r in rs]) for k in KEYS}
        sec = np.mean([r["seconds"] for r in rs])
        out.append(f"| {name} (measured) | {L['ndcg@1']:.4f} | {L['ndcg@3']:.4f} | "
                   f"{L['ndcg@5']:.4f} | {L['map']:.4f} | {S['ndcg@10']:.4f} | "
                   f"{S['ndcg@1']:.4f} / {S['ndcg@3']:.4f} / {S['ndcg@5']:.4f} | {sec:.0f} |")
    for name, m in PUBLISHED.items():
        out.append(f"| {name} (published, 5 folds) | {m['ndcg@1']:.4f} | {m['ndcg@3']:.4f} | "
                   f"{m['ndcg@5']:.4f} | {m['map']:.4f} | | | |")
    return "\n".join(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--folds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    p.add_argument("--subset-sizes", type=int, nargs="+", default=[3])
    p.add_argument("--data-root")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json")
    args = p.parse_args(argv)
    rows = run(args.folds, args.subset_sizes, args.data_root, args.seed)
    print()
    print(summary_table(rows, args.folds))
    if args.json:
        for problem in write_json(args.json, rows):
            print(f"warning: {args.json}: {problem}")


if __name__ == "__main__":
    main()
