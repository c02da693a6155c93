"""Consistency experiment (Petterson et al. 2009, Fig. 3 right) on MQ2008: MAP vs max-margin.

Usage::

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python examples/ranking_consistency.py \
        --folds 1 --sizes 10 30 100 300 0 --repeats 3 --out outputs/ranking_consistency

(size 0 = all training queries). For each fold, training-set size ``n`` (number of training
queries) and repeat, ``n`` queries are drawn at random (nested across sizes within a repeat)
from the fold's training split; RankMatch's bootstrap subsets (``M = 3``, ``0.4 D M`` per
query, :func:`pm_perm.learning_to_rank.rankmatch.sample_subsets`) are drawn once from them, and two
estimators are fitted on **the same subsets and features**:

* ``MAP``: RankMatch's exact (weak-label) likelihood with a Gaussian prior, L-BFGS-B (as
  ``find_MAP``; :func:`pm_perm.inference.map_path`);
* ``max-margin``: the structured hinge loss of DORM (Le & Smola 2007), the estimator the paper
  compares with:

      ``sum_s [max_y (sum_i c_{y_i} s_i + Delta_s(y)) - max_{y in C_s} sum_i c_{y_i} s_i]
      + |theta|^2 / (2 sigma^2)``

  with ``s_i = <psi_i, theta>``, ``c_j = M - j``, ``C_s`` the rankings consistent with the
  ratings and ``Delta_s(y) = 1 - NDCG_s(y)`` (gain ``2^r - 1``, discount ``1 / log2(1 + j)``)
  the subset's NDCG loss. ``Delta`` is linear in the assignment, so loss-augmented inference is
  a max-weight matching of ``W[i, j] = c_j s_i - g_i d_j / maxDCG``; with ``M = 3`` it is done
  exactly by enumerating the 6 permutations for all subsets at once (checked against
  ``scipy.optimize.linear_sum_assignment`` on the first subsets). The convex objective is
  minimised by full-batch Adam on its subgradient (2,000 steps of size ``1 / sqrt(t)``, best
  iterate kept; on fold 1 with all queries the objective is then within 0.02% of a 6,000-step
  run).

Both estimators choose their regularisation ``sigma`` from {0.1, 0.3, 1, 3, 10} on the fold's
full validation split (NDCG@5); the reported figure is test NDCG@1 (LETOR-4.0 convention, equal
to the standard one at k = 1), mean and standard deviation over the repeats. Writes
``<out>.json`` and ``<out>.png``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from scipy.optimize import linear_sum_assignment  # noqa: E402

from pm_perm._io import save_figure, write_json  # noqa: E402
from pm_perm.datasets.mq2008 import load_mq2008_fold  # noqa: E402
from pm_perm.inference import map_path  # noqa: E402
from pm_perm.learning_to_rank.metrics import evaluate_ranking  # noqa: E402
from pm_perm.learning_to_rank.rankmatch import (  # noqa: E402
    position_weights,
    rankmatch_model,
    sample_subsets,
    weak_label_mask,
)

SIGMAS = (0.1, 0.3, 1.0, 3.0, 10.0)
M = 3


def _validation_score(theta, valid):
    return evaluate_ranking(valid.X @ theta, valid.y, valid.group_ptr, ks=(5,))["ndcg@5"]


def fit_map(X, subsets, valid):
    """RankMatch MAP (L-BFGS-B, warm-started along the sigma grid); the sigma with the best
    validation NDCG@5."""
    sigma, theta, _, _ = map_path(rankmatch_model(X, subsets), SIGMAS,
                                  lambda s, t: _validation_score(t, valid))
    return theta, sigma


class StructuredHinge:
    """DORM's structured hinge loss on RankMatch subsets, with exact loss-augmented inference."""

    def __init__(self, X, subsets):
        self.Xs = X[subsets.docs]  # (S, M, F)
        self.c = position_weights(M)
        perms = np.array(list(itertools.permutations(range(M))))  # perms[p, i] = position of i
        self.perms = perms
        self.C = self.c[perms]  # (P, M): c_{y_i}
        r = subsets.ratings
        gain = 2.0 ** r - 1  # (S, M)
        disc = 1.0 / np.log2(2.0 + np.arange(M))
        dcg = (gain[:, None, :] * disc[perms][None]).sum(-1)  # (S, P)
        self.loss = 1.0 - dcg / dcg.max(axis=1, keepdims=True)  # Delta_s(y), (S, P)
        mask = weak_label_mask(r)  # (S, M, M) allowed (doc, position)
        self.consistent = np.all(mask[:, np.arange(M), perms], axis=-1)  # (S, P)
        self._check_loss_augmented_inference(gain, disc)

    def _check_loss_augmented_inference(self, gain, disc, n=20, seed=0):
        """Enumeration == max-weight matching (scipy) on the first subsets, random scores."""
        rng = np.random.default_rng(seed)
        for s in range(min(n, self.Xs.shape[0])):
            sc = rng.normal(size=M)
            max_dcg = np.sort(gain[s])[::-1] @ disc
            W = np.outer(sc, self.c) - np.outer(gain[s], disc) / max_dcg
            rows, cols = linear_sum_assignment(W, maximize=True)
            by_matching = W[rows, cols].sum() + 1.0
            by_enum = np.max(self.C @ sc + self.loss[s])
            assert np.isclose(by_matching, by_enum), (by_matching, by_enum)

    def objective_and_grad(self, theta, sigma):
        s = self.Xs @ theta  # (S, M)
        val = s @ self.C.T  # (S, P): sum_i c_{y_i} s_i
        aug = np.argmax(val + self.loss, axis=1)
        tgt = np.argmax(np.where(self.consistent, val, -np.inf), axis=1)
        rows = np.arange(s.shape[0])
        hinge = (val[rows, aug] + self.loss[rows, aug] - val[rows, tgt]).sum()
        coef = self.C[aug] - self.C[tgt]  # (S, M)
        grad = np.einsum("sm,smf->f", coef, self.Xs) + theta / sigma**2
        return hinge + 0.5 * theta @ theta / sigma**2, grad

    def fit(self, sigma, theta0=None, iters=2000, lr=1.0):
        theta = np.zeros(self.Xs.shape[2]) if theta0 is None else theta0.copy()
        m = np.zeros_like(theta)
        v = np.zeros_like(theta)
        best = (np.inf, theta.copy())
        for t in range(1, iters + 1):
            f, g = self.objective_and_grad(theta, sigma)
            if f < best[0]:
                best = (f, theta.copy())
            m = 0.9 * m + 0.1 * g
            v = 0.999 * v + 0.001 * g * g
            mh, vh = m / (1 - 0.9**t), v / (1 - 0.999**t)
            theta = theta - lr / np.sqrt(t) * mh / (np.sqrt(vh) + 1e-8)
        return best[1], best[0]


def fit_max_margin(X, subsets, valid):
    hinge = StructuredHinge(X, subsets)
    best, start = None, None
    for sigma in SIGMAS:
        theta, _ = hinge.fit(sigma, start)
        start = theta
        score = _validation_score(theta, valid)
        if best is None or score > best[0]:
            best = (score, sigma, theta)
    return best[2], best[1]


def run(folds, sizes, repeats, data_root=None, seed=0, partial=None):
    rows = []
    for fold in folds:
        train, valid, test = load_mq2008_fold(fold, data_root)
        for rep in range(repeats):
            order = np.random.default_rng([seed, fold, rep]).permutation(train.n_queries)
            for n in sizes:
                n_eff = train.n_queries if n in (0, None) or n >= train.n_queries else n
                if n_eff == train.n_queries and rep > 0:
                    continue  # the full training split is the same in every repeat
                part = train.take_queries(np.sort(order[:n_eff]))
                subsets = sample_subsets(part, M, rng=[seed, fold, rep, n_eff])
                row = {"fold": fold, "repeat": rep, "n_queries": int(n_eff),
                       "n_subsets": int(subsets.docs.shape[0])}
                for name, fit in (("MAP", fit_map), ("max-margin", fit_max_margin)):
                    t0 = time.perf_counter()
                    theta, sigma = fit(part.X, subsets, valid)
                    m = evaluate_ranking(test.X @ theta, test.y, test.group_ptr, ks=(1, 3, 5),
                                         convention="letor4")
                    row[name] = {"ndcg@1": float(m["ndcg@1"]), "ndcg@3": float(m["ndcg@3"]),
                                 "ndcg@5": float(m["ndcg@5"]), "sigma": sigma,
                                 "seconds": time.perf_counter() - t0}
                rows.append(row)
                if partial:  # progress, in case the run is stopped
                    for problem in write_json(partial, rows):
                        print(f"warning: {partial}: {problem}")
                print(f"fold {fold} repeat {rep} n={n_eff:>3} ({row['n_subsets']} subsets): "
                      f"NDCG@1 MAP {row['MAP']['ndcg@1']:.4f} (sigma {row['MAP']['sigma']}, "
                      f"{row['MAP']['seconds']:.0f} s) | max-margin "
                      f"{row['max-margin']['ndcg@1']:.4f} (sigma {row['max-margin']['sigma']}, "
                      f"{row['max-margin']['seconds']:.0f} s)", flush=True)
    return rows


def _size(row, sizes):
    """The requested size of a row: its number of queries, or "all" for a full training split
    (whose size differs between folds: 470 or 471 queries on MQ2008)."""
    return row["n_queries"] if row["n_queries"] in sizes else "all"


def summarise(rows, sizes):
    out = {}
    keys = sorted({_size(r, sizes) for r in rows}, key=lambda k: np.inf if k == "all" else k)
    for key in keys:
        rs = [r for r in rows if _size(r, sizes) == key]
        out[key] = {name: {k: (float(np.mean([r[name][k] for r in rs])),
                               float(np.std([r[name][k] for r in rs])))
                           for k in ("ndcg@1", "ndcg@3", "ndcg@5")} | {"runs": len(rs)}
                    for name in ("MAP", "max-margin")}
        out[key]["n_queries"] = float(np.mean([r["n_queries"] for r in rs]))
        diff = np.array([r["MAP"]["ndcg@1"] - r["max-margin"]["ndcg@1"] for r in rs])
        se = float(diff.std(ddof=1) / np.sqrt(diff.size)) if diff.size > 1 else float("nan")
        out[key]["paired_diff_ndcg@1"] = {"mean": float(diff.mean()), "se": se,
                                          "map_better": int(np.sum(diff > 0)),
                                          "max_margin_better": int(np.sum(diff < 0))}
    return out


def plot(summary, folds, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = list(summary)
    x = np.array([summary[k]["n_queries"] for k in keys])
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 3.8))
    for name, colour, shift in (("MAP", "C0", 0.97), ("max-margin", "C3", 1.03)):
        mean = np.array([summary[k][name]["ndcg@1"][0] for k in keys])
        sd = np.array([summary[k][name]["ndcg@1"][1] for k in keys])
        label = "RankMatch MAP" if name == "MAP" else "max-margin (DORM hinge)"
        ax.errorbar(x * shift, mean, yerr=sd, marker="o", capsize=3, color=colour, label=label)
    ax.set_xscale("log")
    ax.set(xlabel="number of training queries (mean ± sd over folds and repeats)",
           ylabel="test NDCG@1",
           title=f"MQ2008 fold {', '.join(map(str, folds))}: same features, same subsets (M = 3)")
    ax.title.set_fontsize(9)
    ax.legend()
    diff = [summary[k]["paired_diff_ndcg@1"] for k in keys]
    bx.errorbar(x, [d["mean"] for d in diff], yerr=[d["se"] for d in diff], marker="o",
                capsize=3, color="k")
    bx.axhline(0.0, color="grey", lw=0.8)
    bx.set_xscale("log")
    bx.set(xlabel="number of training queries", ylabel="NDCG@1: MAP - max-margin",
           title="paired difference (same fold, queries, subsets), mean ± 1 s.e.")
    bx.title.set_fontsize(9)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--folds", type=int, nargs="+", default=[1])
    p.add_argument("--sizes", type=int, nargs="+", default=[10, 30, 100, 300, 0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--data-root")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="outputs/ranking_consistency")
    p.add_argument("--replot", metavar="JSON", help="summarise and plot the rows of an earlier "
                   "run's <out>.json instead of fitting")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    if args.replot:
        with open(args.replot) as fh:
            old = json.load(fh)
        rows, args.folds = old["rows"], old["folds"]
    else:
        rows = run(args.folds, args.sizes, args.repeats, args.data_root, args.seed,
                   partial=args.out + ".partial.json")
    summary = summarise(rows, set(args.sizes))
    plot(summary, args.folds, args.out + ".png")
    result = {"folds": args.folds, "rows": rows,
              "summary": {str(k): v for k, v in summary.items()}}
    for problem in write_json(args.out + ".json", result):
        print(f"warning: {args.out}.json: {problem}")
    print("\n| training queries | runs | MAP NDCG@1 | max-margin NDCG@1 | paired difference "
          "(± s.e.) | runs MAP / max-margin better |\n|---|---|---|---|---|---|")
    for n, s in summary.items():
        n = f"all ({s['n_queries']:.1f})" if n == "all" else n
        d = s["paired_diff_ndcg@1"]
        print(f"| {n} | {s['MAP']['runs']} | {s['MAP']['ndcg@1'][0]:.4f} ± "
              f"{s['MAP']['ndcg@1'][1]:.4f} | {s['max-margin']['ndcg@1'][0]:.4f} ± "
              f"{s['max-margin']['ndcg@1'][1]:.4f} | {d['mean']:+.4f} ± {d['se']:.4f} | "
              f"{d['map_better']} / {d['max_margin_better']} |")
    print(f"\nwrote {args.out}.png and {args.out}.json; total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
