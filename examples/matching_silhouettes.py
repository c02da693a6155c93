"""Learned matching of sheared silhouettes (Petterson et al. 2009, sec. 5.2 and Fig. 3 left).

Usage::

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python examples/matching_silhouettes.py \
        --sizes 10 30 100 300 500 --out outputs/matching_silhouettes

Data: 20 points drawn at random on the MPEG-7 "horse" contour (``../shared/data/shapes``), 200
copies each sheared by ``[[1, s_x], [s_y, 1]]`` with ``s_x, s_y ~ U(-0.5, 0.5)`` and noised
(Gaussian, 2% of the mean pairwise distance); random pairs of copies with the second copy's
points shuffled (:func:`pm_perm.matching.make_silhouette_pairs`). For each number ``N`` of
training pairs the first ``N`` of 500 training pairs and of 500 validation pairs are used (N for
validation, as in the paper); the test set is 500 other pairs.

Features: shape contexts (5 x 12 log-polar bins) and ``x_ij = (psi_i - psi'_j)^2`` (eq. 19),
each feature divided by its training mean; two feature sets: ``sc`` (the paper's 60 features)
and ``sc+pos`` (plus the squared distance of the normalised positions).

Methods, all predicting with the max-weight matching of ``x . theta``:

* ``no learning``: ``theta = -1`` on the 60 unscaled shape-context features (plain
  shape-context matching: the squared Euclidean distance of the histograms);
* ``max-margin``: structured SVM with Hamming loss (BCFW until the duality-gap estimate is
  <= 1e-3 or 300 epochs), ``lambda`` chosen on validation from 1000 .. 1e-6;
* ``MAP``: Gaussian prior, prior scale chosen on validation from 0.03 .. 3000; the likelihood is
  the exact composite likelihood of 4 random sub-matchings of 10 points per pair (exact
  conditionals, :func:`pm_perm.matching.sub_matchings`).

Then NUTS (``--nuts-pairs`` = 50 training pairs, ``sc+pos`` features, prior scale
``--nuts-sigma`` = 10, the likelihood of 2 disjoint sub-matchings of 10 points per pair so that
no point counts twice, Laplace-whitened, 4 chains x (1000 tuning + 1000 draws)): r_hat, ESS,
divergences; exact posterior matching
marginals (full 20 x 20) on ``--marginal-pairs`` test pairs from 100 draws; a calibration
table; the marginals of one test pair drawn over the two point sets.

With ``--exact``, MAP is also fitted on the exact full 20 x 20 likelihood at the prior scale
the composite fit chose (a check of the composite likelihood; 10 ms per pair per gradient).

Writes ``results.json`` (curves), ``hamming_vs_pairs.png``, ``nuts.json`` and ``marginals.png``
to ``--out`` (``--nuts-pairs 0`` runs the curves only and leaves ``nuts.json`` alone).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import arviz as az  # noqa: E402
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from pm_perm._io import save_figure, write_json  # noqa: E402
from pm_perm.datasets import data_home  # noqa: E402
from pm_perm.datasets.mpeg7 import load_mpeg7_contour  # noqa: E402
from pm_perm.inference import laplace_whitening  # noqa: E402
from pm_perm.matching import (  # noqa: E402
    calibration_table,
    edge_features,
    feature_scale,
    fit_map,
    fit_max_margin,
    fit_nuts,
    hamming_error,
    make_silhouette_pairs,
    matching_model,
    no_learning_theta,
    posterior_matching_marginals,
    predict,
    shape_context,
    sub_matchings,
)

DATA = data_home()
SIGMAS = (0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0, 3000.0)
LAMBDAS = (1000.0, 100.0, 10.0, 1.0, 1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6)
FEATURE_SETS = ("sc", "sc+pos")


def features(split, with_pos):
    a, b = split["points_a"], split["points_b"]
    if with_pos:
        return edge_features(shape_context(a), shape_context(b), a, b)
    return edge_features(shape_context(a), shape_context(b))


def max_margin_select(xtr, ytr, xva, yva, seed):
    best = None
    errors = {}
    for lam in LAMBDAS:
        w, info = fit_max_margin(xtr, ytr, lam=lam, seed=seed, return_info=True)
        errors[lam] = {"val": hamming_error(predict(xva, w), yva), **info}
        if best is None or errors[lam]["val"] < best[0]:
            best = (errors[lam]["val"], lam, w)
    return best[2], best[1], errors


def learning_curve(splits, sizes, with_pos, args):
    feats = {k: features(v, with_pos) for k, v in splits.items()}
    y = {k: v["y"] for k, v in splits.items()}
    out = []
    for n in sizes:
        scale = feature_scale(feats["train"][:n])
        xtr, xva, xte = (feats[k][:n] / scale if k != "test" else feats[k] / scale
                         for k in ("train", "validate", "test"))
        ytr, yva, yte = y["train"][:n], y["validate"][:n], y["test"]
        row = {"n_train": n, "n_validate": n, "n_test": len(yte)}
        # plain shape-context matching: unweighted squared distance of the raw histograms
        raw = feats["test"]
        row["no_learning"] = hamming_error(predict(raw, no_learning_theta(raw.shape[-1], 60)), yte)
        t0 = time.perf_counter()
        w, lam, errs = max_margin_select(xtr, ytr, xva, yva, args.seed)
        row["max_margin"] = hamming_error(predict(xte, w), yte)
        row["max_margin_lambda"], row["max_margin_seconds"] = lam, time.perf_counter() - t0
        row["max_margin_val"] = {str(k): v for k, v in errs.items()}
        t0 = time.perf_counter()
        xs, ys = sub_matchings(xtr, ytr, args.sub_size, n_sub=args.n_sub, seed=args.seed)
        fit = fit_map(xs, ys, SIGMAS, validation=(xva, yva))
        row["map"] = hamming_error(predict(xte, fit.theta), yte)
        row["map_sigma"], row["map_seconds"] = fit.prior_sigma, time.perf_counter() - t0
        row["map_val"] = {str(k): v for k, v in fit.val_errors.items()}
        if args.exact:
            t0 = time.perf_counter()
            exact = fit_map(xtr, ytr, fit.prior_sigma)  # full 20 x 20 likelihood, same sigma
            row["map_exact"] = hamming_error(predict(xte, exact.theta), yte)
            row["map_exact_seconds"] = time.perf_counter() - t0
            print(f"    exact-likelihood MAP (sigma {fit.prior_sigma:g}): {row['map_exact']:.4f}"
                  f" ({row['map_exact_seconds']:.1f} s)", flush=True)
        print(f"  [{'sc+pos' if with_pos else 'sc'}] N = {n}: no learning {row['no_learning']:.4f}"
              f", max-margin {row['max_margin']:.4f} (lambda {lam:g}, "
              f"{row['max_margin_seconds']:.1f} s), MAP {row['map']:.4f} (sigma "
              f"{fit.prior_sigma:g}, {row['map_seconds']:.1f} s)", flush=True)
        out.append(row)
    return out


def plot_curves(curves, path):
    fig, axes = plt.subplots(1, len(curves), figsize=(5.2 * len(curves), 3.8), sharey=True)
    for ax, (name, rows) in zip(np.atleast_1d(axes), curves.items(), strict=True):
        n = [r["n_train"] for r in rows]
        for key, label, style in (("no_learning", "no learning", "k--"),
                                  ("max_margin", "max-margin", "s-"), ("map", "MAP", "o-")):
            ax.plot(n, [r[key] for r in rows], style, label=label)
        ax.set_xscale("log")
        ax.set_xlabel("training pairs")
        ax.set_title(f"features: {name}")
        ax.grid(alpha=0.3)
    np.atleast_1d(axes)[0].set_ylabel("test Hamming error (500 pairs)")
    np.atleast_1d(axes)[0].legend()
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)


def plot_marginals(pa, pb, P, y_true, path):
    """Both point sets side by side; segment i -> j coloured by P[i, j] (drawn if > 0.02)."""
    za = (pa - pa.mean(0)) / np.ptp(pa, axis=0).max()
    zb = (pb - pb.mean(0)) / np.ptp(pb, axis=0).max() + np.array([1.4, 0.0])
    fig, ax = plt.subplots(figsize=(8, 4.2))
    cmap = plt.get_cmap("viridis")
    order = np.argsort(P, axis=None)
    for flat in order:
        i, j = np.unravel_index(flat, P.shape)
        if P[i, j] > 0.02:
            ax.plot([za[i, 0], zb[j, 0]], [za[i, 1], zb[j, 1]], color=cmap(P[i, j]),
                    lw=0.6 + 2 * P[i, j], alpha=0.3 + 0.7 * P[i, j])
    ax.scatter(*za.T, c="k", s=12, zorder=3)
    ax.scatter(*zb.T, c="k", s=12, zorder=3)
    wrong = np.flatnonzero(P.argmax(1) != y_true)
    ax.scatter(*za[wrong].T, facecolors="none", edgecolors="r", s=80, zorder=4,
               label="row mode wrong")
    sm = plt.cm.ScalarMappable(cmap=cmap, norm=plt.Normalize(0, 1))
    fig.colorbar(sm, ax=ax, label="posterior P[i, j]")
    ax.set_aspect("equal")
    ax.set_axis_off()
    ax.set_title("posterior matching marginals, one test pair (left: points_a, right: points_b)")
    if len(wrong):
        ax.legend(loc="upper left", bbox_to_anchor=(0.0, 0.0), frameon=False)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)


def run_nuts(splits, args):
    n = args.nuts_pairs
    feats = {k: features(v, True) for k, v in splits.items()}
    scale = feature_scale(feats["train"][:n])
    xtr, ytr = feats["train"][:n] / scale, splits["train"]["y"][:n]
    n_test = args.marginal_pairs
    xte, yte = feats["test"][:n_test] / scale, splits["test"]["y"][:n_test]
    sigma = args.nuts_sigma
    xs, ys = sub_matchings(xtr, ytr, args.sub_size, n_sub=20 // args.sub_size, seed=args.seed,
                           disjoint=True)
    t0 = time.perf_counter()
    fit = fit_map(xs, ys, sigma)
    white = laplace_whitening(matching_model(xs, ys, sigma), fit.theta)
    t_white = time.perf_counter() - t0
    t0 = time.perf_counter()
    idata = fit_nuts(xs, ys, sigma, draws=args.draws, tune=args.draws, chains=4,
                     seed=args.seed, whitening=white)
    t_nuts = time.perf_counter() - t0
    rhat = az.rhat(idata, var_names=["theta"])["theta"].values
    ess = az.ess(idata, var_names=["theta"])["theta"].values
    ess_tail = az.ess(idata, var_names=["theta"], method="tail")["theta"].values
    div = int(idata.sample_stats["diverging"].sum())
    steps = np.asarray(idata.sample_stats["n_steps"]).mean() if "n_steps" in \
        idata.sample_stats else float("nan")
    draws = np.asarray(idata.posterior["theta"]).reshape(-1, xs.shape[-1])
    thin = draws[np.linspace(0, len(draws) - 1, 100).astype(int)]
    t0 = time.perf_counter()
    P = posterior_matching_marginals(xte, thin)
    t_marg = time.perf_counter() - t0
    P_map = posterior_matching_marginals(xte, fit.theta[None])
    yhat = predict(P[..., None], np.ones(1))
    res = {
        "n_train_pairs": n, "sub_size": args.sub_size, "n_sub_per_pair": 20 // args.sub_size,
        "prior_sigma": sigma, "chains": 4, "draws": args.draws, "tune": args.draws,
        "rhat_max": float(rhat.max()), "ess_bulk_min": float(ess.min()),
        "ess_tail_min": float(ess_tail.min()), "divergences": div,
        "mean_leapfrog_steps": float(steps),
        "seconds_map_and_whitening": t_white, "seconds_nuts": t_nuts,
        "seconds_marginals": t_marg, "n_marginal_pairs": n_test, "n_marginal_draws": 100,
        "test_hamming_posterior_bayes": hamming_error(yhat, yte),
        "test_hamming_map_same_likelihood": hamming_error(predict(xte, fit.theta), yte),
        "calibration_posterior": calibration_table(P, yte),
        "calibration_posterior_all_cells": calibration_table(
            P, yte, edges=(0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0), entries="all"),
        "calibration_map_plugin": calibration_table(P_map, yte),
    }
    pair = int(np.argmax(np.sort(P, axis=-1)[..., -1].min(-1) < 0.9))  # an uncertain pair
    plot_marginals(splits["test"]["points_a"][pair], splits["test"]["points_b"][pair], P[pair],
                   yte[pair], Path(args.out) / "marginals.png")
    res["plotted_test_pair"] = pair
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 30, 100, 300, 500])
    ap.add_argument("--features", nargs="+", default=list(FEATURE_SETS), choices=FEATURE_SETS)
    ap.add_argument("--sub-size", type=int, default=10)
    ap.add_argument("--n-sub", type=int, default=4)
    ap.add_argument("--nuts-pairs", type=int, default=50, help="0 skips NUTS")
    ap.add_argument("--nuts-sigma", type=float, default=10.0)
    ap.add_argument("--draws", type=int, default=1000, help="NUTS draws (and as many tuning)")
    ap.add_argument("--marginal-pairs", type=int, default=100)
    ap.add_argument("--exact", action="store_true",
                    help="also fit MAP on the full 20 x 20 likelihood at the composite's sigma")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--out", default="outputs/matching_silhouettes")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    contour = load_mpeg7_contour("horse", 0, args.data)
    n_max = max(args.sizes + [args.nuts_pairs])
    _, splits = make_silhouette_pairs(
        contour, n_points=20, n_copies=200, shear=0.5, noise=0.02, seed=args.seed,
        n_pairs={"train": max(n_max, 500), "validate": max(n_max, 500), "test": 500})
    result = {"args": vars(args), "curves": {}}
    for name in args.features:
        result["curves"][name] = learning_curve(splits, args.sizes, name == "sc+pos", args)
    plot_curves(result["curves"], out / "hamming_vs_pairs.png")
    result["seconds_curves"] = time.perf_counter() - t_start
    for problem in write_json(out / "results.json", result):
        print(f"warning: {out}/results.json: {problem}")
    if args.nuts_pairs:
        nuts = run_nuts(splits, args)
        for problem in write_json(out / "nuts.json", nuts):
            print(f"warning: {out}/nuts.json: {problem}")
        print(f"NUTS: r_hat max {nuts['rhat_max']:.4f}, ESS bulk min {nuts['ess_bulk_min']:.0f}, "
              f"tail min {nuts['ess_tail_min']:.0f}, divergences {nuts['divergences']}, "
              f"{nuts['seconds_nuts']:.0f} s; posterior Bayes Hamming "
              f"{nuts['test_hamming_posterior_bayes']:.4f}")
        for row in nuts["calibration_posterior"]:
            print(f"  P in [{row['lo']:.2f}, {row['hi']:.2f}]: n {row['n']:5d}, mean "
                  f"{row['mean_prob']:.3f}, correct {row['frac_correct']:.3f}")
    print(f"total {time.perf_counter() - t_start:.0f} s; wrote {out}")


if __name__ == "__main__":
    main()
