"""Top-K classification: train on the expected top-K gain (Swersky et al. 2012, sec. 5.3, Table 1).

Linear classifiers on the pixels, one target class per image, trained four ways: softmax
(expected top-1 gain), expected top-3 and top-5 gain (``log_expected_topk_gain``: the log of
p(y_target = 1 | K items on) under the conditional Bernoulli), and logistic regression on the
one-hot target (independent Bernoulli). Every model is a PyMC model fitted by MAP (L-BFGS-B on
its log posterior, :func:`~pm_perm.classification.models.classifier_map`, warm-started along the
prior-sd path). Prediction: the K largest logits. For each (training criterion, test
criterion) cell the prior sd with the best validation accuracy is chosen, separately within a
strong-L2 grid and a weak-L2 grid, and its test accuracy is reported (the paper's protocol).

Data sets: ``caltech`` (Caltech-101 Silhouettes, 101 classes, seeded split 4100/2264/2307) and
``digits`` (embedded digits with all but one label removed at random, 10 classes, 1600 pixels).

Writes ``outputs/topk/<dataset>/results.json``. Run::

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 .venv/bin/python examples/topk_classification.py caltech
    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 .venv/bin/python examples/topk_classification.py digits
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from pm_perm._io import write_json
from pm_perm.classification.metrics import topk_accuracy
from pm_perm.classification.models import classifier_map, logistic_model, topk_gain_model
from pm_perm.datasets.caltech_silhouettes import load_caltech101_silhouettes
from pm_perm.datasets.embedded_digits import make_embedded_digits, single_label

CRITERIA = ("LR", "top-1", "top-3", "top-5")
TEST_K = (1, 3, 5)
# Prior sd of the weights; L2 strength lambda = 1 / (2 sd^2) on the summed log-likelihood.
GRIDS = {
    "caltech": {"strong": [0.1, 0.2, 0.3], "weak": [1.0]},
    "digits": {"strong": [0.2, 0.5, 1.0], "weak": [10.0]},
}


def load(name, data_dir, seed):
    if name == "caltech":
        splits, _ = load_caltech101_silhouettes(data_dir, seed=seed)
        return [splits[k] for k in ("train", "valid", "test")], 101
    data = make_embedded_digits(seed=seed)
    return [(d.X, single_label(d.labels, seed=seed + i)) for i, d in enumerate(data)], 10


def build(criterion, X, y, D, sigma):
    if criterion == "LR":
        return logistic_model(X, np.eye(D, dtype=np.int64)[y], sigma=sigma)
    return topk_gain_model(X, y, D, K=int(criterion.split("-")[1]), sigma=sigma)


def accuracies(params, X, y):
    scores = X @ params["W"] + params["b"]
    return [topk_accuracy(scores, y, K) for K in TEST_K]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dataset", choices=sorted(GRIDS))
    p.add_argument("--data-dir", default=None,
                   help="shared data folder (default: $PM_PERM_DATA, else ../shared/data)")
    p.add_argument("--seed", type=int, default=0, help="split / data-set seed")
    p.add_argument("--maxiter", type=int, default=200)
    p.add_argument("--out", default="outputs/topk")
    args = p.parse_args(argv)
    out = Path(args.out) / args.dataset
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    (tr, va, te), D = load(args.dataset, args.data_dir, args.seed)
    grid = GRIDS[args.dataset]
    sigmas = sorted(grid["strong"] + grid["weak"])
    path = {}
    for crit in CRITERIA:
        t1 = time.perf_counter()
        fitter = classifier_map(build(crit, *tr, D, sigmas[0]))
        path[crit] = []
        for s in sigmas:
            params = fitter.fit(maxiter=args.maxiter, sigma=s)
            path[crit].append({"sigma": s, "valid": accuracies(params, *va),
                               "test": accuracies(params, *te), "fit": params["_info"]})
            print(f"{crit:6s} sd={s:<5g} valid {path[crit][-1]['valid']} "
                  f"test {path[crit][-1]['test']} ({params['_info']['iterations']} it, "
                  f"{params['_info']['seconds']:.1f} s)", flush=True)
        print(f"{crit}: {time.perf_counter() - t1:.0f} s", flush=True)
    tables = {}
    for setting, sds in grid.items():
        table = {}
        for crit in CRITERIA:
            cells = [r for r in path[crit] if r["sigma"] in sds]
            row = []
            for j, K in enumerate(TEST_K):
                best = max(cells, key=lambda r, j=j: r["valid"][j])
                row.append({"K": K, "test": best["test"][j], "sigma": best["sigma"],
                            "lambda": 1.0 / (2 * best["sigma"] ** 2)})
            table[crit] = row
        tables[setting] = table
        print(f"\n{args.dataset}, {setting} L2 (test top-1 / top-3 / top-5, chosen sd):")
        for crit, row in table.items():
            print(f"  {crit:6s} " + " / ".join(f"{c['test']:.3f}" for c in row)
                  + "   sd " + ", ".join(f"{c['sigma']:g}" for c in row))
    results = {"dataset": args.dataset, "seed": args.seed, "classes": D,
               "n": [len(tr[1]), len(va[1]), len(te[1])], "grids": grid, "path": path,
               "tables": tables, "seconds_total": time.perf_counter() - t0}
    for problem in write_json(out / "results.json", results):
        print(f"warning: {out}/results.json: {problem}")
    print(f"total {results['seconds_total']:.0f} s -> {out / 'results.json'}")


if __name__ == "__main__":
    main()
