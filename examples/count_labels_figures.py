"""The two figures of the count-labels guide (docs/guide/count_labels.md, worked example).

Runs the guide's worked example exactly (400 rows, D = 8, one to four labels per row, NChooseK
with a Dirichlet count prior, NUTS 4 x 500 draws after 500 tuning steps, target_accept 0.95)
and saves the forest plot of ``count_probs`` and the rootogram of the number of labels per row.

Usage::

    python examples/count_labels_figures.py --out docs/guide     # about 30 s once compiled
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import arviz as az  # noqa: E402
import numpy as np  # noqa: E402
import pymc as pm  # noqa: E402
import xarray as xr  # noqa: E402

from pm_perm._io import save_figure  # noqa: E402
from pm_perm.distributions.n_choose_k import NChooseK  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="outputs/count_labels")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    rng = np.random.default_rng(0)
    n, D, d = 400, 8, 3
    X = rng.normal(size=(n, D, d))
    theta_true = np.array([1.0, -0.5, 0.25])
    count_true = np.array([0, 0.25, 0.25, 0.25, 0.25, 0, 0, 0, 0])
    Y = pm.draw(NChooseK.dist(X @ theta_true, count_true), random_seed=1)

    coords = {"obs": range(n), "item": range(D), "count": range(D + 1), "feature": range(d)}
    with pm.Model(coords=coords):
        theta = pm.Normal("theta", 0, 1, dims="feature")
        count_probs = pm.Dirichlet("count_probs", a=np.ones(D + 1), dims="count")
        logits = pm.math.dot(X, theta)
        NChooseK("y", logits=logits, count_probs=count_probs, observed=Y, dims=("obs", "item"))
        idata = pm.sample(500, tune=500, chains=4, target_accept=0.95, random_seed=2,
                          progressbar=False)
        pm.sample_posterior_predictive(idata, extend_inferencedata=True, random_seed=3,
                                       progressbar=False)
    print(az.summary(idata, var_names=["theta", "count_probs"], kind="all"))

    save_figure(az.plot_forest(idata, var_names=["count_probs"], backend="matplotlib"),
                out / "count_labels_count_probs.png")

    def n_labels(y):
        return y.sum("item")

    dt = xr.DataTree.from_dict({
        "posterior_predictive": xr.Dataset({"n_labels": n_labels(idata.posterior_predictive["y"])}),
        "observed_data": xr.Dataset({"n_labels": n_labels(idata.observed_data["y"])}),
    })
    save_figure(az.plot_ppc_rootogram(dt, backend="matplotlib"),
                out / "count_labels_ppc_counts.png")
    print(f"wrote {out}/count_labels_count_probs.png and {out}/count_labels_ppc_counts.png")


if __name__ == "__main__":
    main()
