"""Learned matching on the CMU house sequence: no learning, max-margin and MAP by frame gap.

Usage::

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python examples/matching_house.py \
        --gaps 10 30 50 70 90 --out outputs/matching_house

Data: the 111 frames of the CMU house sequence with 30 hand-labelled landmarks each and the
supplied 60-bin shape contexts (``../shared/data/cmu_house``, Caetano et al. 2009); ground
truth between two frames is the identity. For each frame gap the supplied train / validate /
test frame-pair lists are used (``houses{gap}_{split}.txt``).

Features: ``x_ij = (psi_i - psi'_j)^2`` of the supplied shape contexts (60 features), each
divided by its training mean. Methods, all evaluated on the full 30 x 30 problems with the
max-weight matching of ``x . theta``:

* ``no learning``: ``theta = -1`` on the unscaled features (plain shape-context matching);
* ``max-margin``: structured SVM with Hamming loss on the full 30 x 30 training pairs (BCFW
  until the duality-gap estimate is <= 1e-3 or 300 epochs; loss-augmented inference is a
  Hungarian call, so M = 30 is no problem),
  ``lambda`` chosen on the validation pairs from 1000 .. 1e-6;
* ``MAP``: Gaussian prior centred on the no-learning weights times their maximum-likelihood
  scale (:func:`pm_perm.matching.baseline_prior_mean`; ``--prior zero`` centres it on 0),
  prior scale chosen on the validation pairs from 0.03 .. 3000.
  M = 30 is beyond what the exact engine trains on at scale, so the likelihood is a
  **composite likelihood**: ``--n-sub`` = 6 random sub-matchings of ``--sub-size`` = 15
  landmarks per training pair, each an exact conditional likelihood
  (:func:`pm_perm.matching.sub_matchings`). Ties in the validation error (common: at small
  gaps several scales make no validation error) are broken by the exact composite
  log-likelihood of the validation pairs' sub-matchings (same size and number);
  ``--no-tiebreak`` takes the smallest tied scale instead.

Writes ``results.json`` and ``error_by_gap.png`` to ``--out``.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from pm_perm._io import save_figure, write_json  # noqa: E402
from pm_perm.datasets import data_home  # noqa: E402
from pm_perm.datasets.cmu_house import house_pairs, load_house  # noqa: E402
from pm_perm.matching import (  # noqa: E402
    baseline_prior_mean,
    edge_features,
    feature_scale,
    fit_map,
    fit_max_margin,
    hamming_error,
    no_learning_theta,
    predict,
    sub_matchings,
)

DATA = data_home()
SIGMAS = (0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0, 3000.0)
LAMBDAS = (1000.0, 100.0, 10.0, 1.0, 1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6)


def split_features(data, scf, gap, split, points=None):
    frames = house_pairs(gap, split, data) - 1
    if points is None:
        x = edge_features(scf[frames[:, 0]], scf[frames[:, 1]])
    else:
        x = edge_features(scf[frames[:, 0]], scf[frames[:, 1]],
                          points[frames[:, 0]], points[frames[:, 1]])
    return x, np.tile(np.arange(scf.shape[1]), (len(frames), 1))


def run_gap(data, scf, gap, args, points=None):
    (xtr, ytr), (xva, yva), (xte, yte) = (split_features(data, scf, gap, s, points)
                                          for s in ("train", "validate", "test"))
    row = {"gap": gap, "n_train": len(ytr), "n_validate": len(yva), "n_test": len(yte)}
    # plain shape-context matching: unweighted squared distance of the raw histograms
    theta0 = no_learning_theta(xte.shape[-1], scf.shape[-1])  # 0 on the position feature
    row["no_learning"] = hamming_error(predict(xte, theta0), yte)
    scale = feature_scale(xtr)
    xtr, xva, xte = xtr / scale, xva / scale, xte / scale
    t0 = time.perf_counter()
    best = None
    for lam in LAMBDAS:
        w, info = fit_max_margin(xtr, ytr, lam=lam, seed=args.seed, return_info=True)
        err = hamming_error(predict(xva, w), yva)
        row.setdefault("max_margin_val", {})[str(lam)] = {"val": err, **info}
        if best is None or err < best[0]:
            best = (err, lam, w)
    row["max_margin"] = hamming_error(predict(xte, best[2]), yte)
    row["max_margin_lambda"], row["max_margin_seconds"] = best[1], time.perf_counter() - t0
    t0 = time.perf_counter()
    xs, ys = sub_matchings(xtr, ytr, args.sub_size, n_sub=args.n_sub, seed=args.seed)
    tiebreak = None
    if not args.no_tiebreak:  # validation sub-matchings, scored by their exact likelihood
        tiebreak = sub_matchings(xva, yva, args.sub_size, n_sub=args.n_sub, seed=args.seed + 1)
    mean = None
    if args.prior == "baseline":  # centre the prior on plain shape-context matching
        mean = baseline_prior_mean(xs, ys, theta0 * scale)
        row["map_prior_mean_alpha"] = float(mean[0] / (theta0[0] * scale[0]))
    fit = fit_map(xs, ys, SIGMAS, validation=(xva, yva), tiebreak=tiebreak, prior_mean=mean,
                  lbfgs_memory=50)
    row["map"] = hamming_error(predict(xte, fit.theta), yte)
    row["map_sigma"], row["map_seconds"] = fit.prior_sigma, time.perf_counter() - t0
    row["map_val"] = {str(k): v for k, v in fit.val_errors.items()}
    row["map_val_loglik"] = {str(k): v for k, v in fit.tiebreak_loglik.items()}
    row["map_beats_no_learning"] = row["map"] < row["no_learning"]
    row["map_at_most_no_learning"] = row["map"] <= row["no_learning"]
    print(f"gap {gap:2d} ({len(ytr)} train / {len(yva)} val / {len(yte)} test pairs): no learning "
          f"{row['no_learning']:.4f}, max-margin {row['max_margin']:.4f} (lambda {best[1]:g}, "
          f"{row['max_margin_seconds']:.1f} s), MAP {row['map']:.4f} (sigma "
          f"{fit.prior_sigma:g}, {row['map_seconds']:.1f} s)", flush=True)
    return row


def plot(rows, path):
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    gaps = [r["gap"] for r in rows]
    for key, label, style in (("no_learning", "no learning", "k--"),
                              ("max_margin", "max-margin", "s-"), ("map", "MAP (composite)", "o-")):
        ax.plot(gaps, [r[key] for r in rows], style, label=label)
    ax.set_xlabel("frame gap")
    ax.set_ylabel("test Hamming error (30 x 30)")
    ax.set_title("CMU house")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gaps", type=int, nargs="+", default=[10, 30, 50, 70, 90])
    ap.add_argument("--sub-size", type=int, default=15)
    ap.add_argument("--n-sub", type=int, default=6)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--out", default="outputs/matching_house")
    ap.add_argument("--prior", choices=("baseline", "zero"), default="baseline",
                    help="prior mean of theta: baseline = the no-learning weights times their "
                         "maximum-likelihood scale (baseline_prior_mean); zero = 0")
    ap.add_argument("--no-tiebreak", action="store_true",
                    help="break ties in the MAP's validation error by the earliest (smallest) "
                         "prior scale instead of by the validation composite log-likelihood")
    ap.add_argument("--features", choices=("sc", "sc+pos"), default="sc",
                    help="sc: the 60 shape-context features; sc+pos: plus the squared distance "
                         "of the normalised landmark positions (as for the silhouettes)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    points, scf = load_house(args.data)
    points = points if args.features == "sc+pos" else None
    rows = [run_gap(args.data, scf, gap, args, points) for gap in args.gaps]
    plot(rows, out / "error_by_gap.png")
    result = {"args": vars(args), "rows": rows, "seconds_total": time.perf_counter() - t_start}
    for problem in write_json(out / "results.json", result):
        print(f"warning: {out}/results.json: {problem}")
    beats = [r["gap"] for r in rows if r["map_beats_no_learning"]]
    ties = [r["gap"] for r in rows if r["map"] == r["no_learning"]]
    worse = [r["gap"] for r in rows if not r["map_at_most_no_learning"]]
    print(f"MAP below no learning at gaps {beats}, equal at {ties}, above at {worse}; "
          f"total {result['seconds_total']:.0f} s; wrote {out}")


if __name__ == "__main__":
    main()
