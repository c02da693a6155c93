"""Multi-object classification on embedded digits: n-choose-k count prior vs logistic regression.

Swersky et al. (2012), sec. 5.1 and Fig. 1. Each image holds 1 to 4 distinct digit classes. Both
models are linear in the same features (:class:`pm_perm.datasets.embedded_digits.CellRBMFeatures`);
the n-choose-k model adds an input-dependent count prior ``p(k | x) = softmax(V x + c)``. Each
is fitted by MAP (L-BFGS-B on the PyMC log posterior,
:func:`~pm_perm.classification.models.classifier_map`) for every prior sd in ``--sigmas``; the
sd with the lowest validation NLL is reported on the test set.

Writes ``outputs/multiobject/results.json`` and ``fig1_count_distributions.png``.

Run::

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 .venv/bin/python examples/multiobject_digits.py
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from scipy.special import expit, softmax  # noqa: E402

from pm_perm._io import save_figure, write_json  # noqa: E402
from pm_perm.classification.metrics import (  # noqa: E402
    bernoulli_nll,
    nchoosek_nll,
    poisson_binomial_pmf,
)
from pm_perm.classification.models import (  # noqa: E402
    classifier_map,
    logistic_model,
    multiobject_nchoosek_model,
)
from pm_perm.datasets.embedded_digits import (  # noqa: E402
    MAX_COUNT,
    CellRBMFeatures,
    make_embedded_digits,
)


def nll(name, params, F, Y):
    logits = F @ params["W"] + params["b"]
    if name == "logistic":
        return bernoulli_nll(logits, Y)
    return nchoosek_nll(logits, F @ params["V"] + params["c"], Y)


def count_distributions(name, params, F):
    logits = F @ params["W"] + params["b"]
    if name == "logistic":
        return poisson_binomial_pmf(expit(logits))
    return softmax(F @ params["V"] + params["c"], axis=-1)


def fit_path(name, build, F, data, sigmas, maxiter):
    fitter = classifier_map(build(F[0], data[0].labels, sigma=sigmas[0]))
    path = []
    for s in sigmas:
        params = fitter.fit(maxiter=maxiter, sigma=s)
        path.append({
            "sigma": s,
            "valid_nll": float(nll(name, params, F[1], data[1].labels).mean()),
            "params": params,
        })
        print(f"{name:9s} sigma={s:<5g} valid NLL {path[-1]['valid_nll']:.4f} {params['_info']}")
    return path


def figure1(test, F_test, fits, out, n_show=4):
    fig, axes = plt.subplots(2, n_show, figsize=(3.2 * n_show, 6.0))
    ks = np.arange(test.labels.shape[1] + 1)
    for j in range(n_show):
        i = j * 7
        axes[0, j].imshow(test.images[i], cmap="gray_r")
        digits = ", ".join(str(d) for d in np.flatnonzero(test.labels[i]))
        axes[0, j].set_title(f"test image {i}: digits {digits}")
        axes[0, j].axis("off")
        ax = axes[1, j]
        ax.axvspan(-0.5, 0.5, color="red", alpha=0.15)
        ax.axvspan(MAX_COUNT + 0.5, ks[-1] + 0.5, color="red", alpha=0.15,
                   label="impossible counts")
        for off, (name, label) in zip((-0.2, 0.2), (("logistic", "logistic regression"),
                                                     ("nchoosek", "n-choose-k (learned)")),
                                      strict=True):
            pk = count_distributions(name, fits[name]["params"], F_test[i : i + 1])[0]
            ax.bar(ks + off, pk, width=0.4, label=label)
        ax.axvline(test.counts[i], color="k", ls=":", lw=1)
        ax.set_xticks(ks)
        ax.set_xlabel("number of digits k")
        ax.set_ylim(0, 1)
    axes[1, 0].set_ylabel("p(k | image)")
    axes[1, 0].legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    save_figure(fig, out, dpi=110)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=0, help="data-set seed")
    p.add_argument("--n", type=int, nargs=3, default=[10_000, 10_000, 10_000],
                   metavar=("TRAIN", "VALID", "TEST"))
    p.add_argument("--sigmas", type=float, nargs="+", default=[0.3, 1.0, 3.0, 10.0],
                   help="prior sd grid of the weights (fitted in this order, warm-started)")
    p.add_argument("--maxiter", type=int, default=500)
    p.add_argument("--out", default="outputs/multiobject")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    data = make_embedded_digits(*args.n, seed=args.seed)
    t_data = time.perf_counter() - t0
    feats = CellRBMFeatures(seed=args.seed).fit(data[0].images)
    F = [feats.transform(d.images) for d in data]
    t_feat = time.perf_counter() - t0 - t_data
    print(f"data {t_data:.1f} s, features {t_feat:.1f} s, F = {F[0].shape}")

    results = {"seed": args.seed, "n": args.n, "features": F[0].shape[1], "models": {}}
    fits = {}
    for name, build in (("logistic", logistic_model), ("nchoosek", multiobject_nchoosek_model)):
        t1 = time.perf_counter()
        path = fit_path(name, build, F, data, args.sigmas, args.maxiter)
        best = min(path, key=lambda r: r["valid_nll"])
        fits[name] = best
        test_nll = nll(name, best["params"], F[2], data[2].labels)
        pk = count_distributions(name, best["params"], F[2])
        results["models"][name] = {
            "sigma_path": [{k: r[k] for k in ("sigma", "valid_nll")} for r in path],
            "sigma": best["sigma"],
            "test_nll": float(test_nll.mean()),
            "test_nll_se": float(test_nll.std(ddof=1) / np.sqrt(len(test_nll))),
            "mean_mass_on_impossible_counts": float(
                (pk[:, 0] + pk[:, MAX_COUNT + 1 :].sum(axis=1)).mean()),
            "seconds": time.perf_counter() - t1,
        }
        print(name, results["models"][name])
    figure1(data[2], F[2], fits, out / "fig1_count_distributions.png")
    results["seconds_total"] = time.perf_counter() - t0
    for problem in write_json(out / "results.json", results):
        print(f"warning: {out}/results.json: {problem}")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
