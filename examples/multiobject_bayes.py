"""Bayesian workflow for the count prior on embedded digits: NUTS, diagnostics, count PPC.

Two models of the label vectors of ``--subset`` validation images (never used in training),
both on the same 10 per-image scores ``s(x)``: the logits of the logistic regression fitted by
MAP on the 10,000 training images (as in ``multiobject_digits.py``). Per class a scale and an
offset recalibrate the scores, ``theta_d = a_d s_d(x) + b_d``:

* ``logistic``: independent Bernoulli(sigmoid(theta_d)); its count distribution is the
  Poisson-binomial fixed by the logits;
* ``nchoosek``: ``NChooseK(theta, count_probs)`` with ``count_probs ~ Dirichlet(1, ..., 1)``
  over k = 0..10 (``b`` zero-sum: the likelihood does not see a common shift).

Both are sampled with NUTS (``pm.sample``, nutpie), checked with ArviZ (r_hat, ESS,
divergences) and with a posterior predictive check of the number of labels per image.

Writes ``outputs/multiobject_bayes/results.json``, ``ppc_counts.png`` (ArviZ rootogram)
and ``count_probs.png`` (ArviZ forest plot). Run::

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 .venv/bin/python examples/multiobject_bayes.py
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import arviz as az
import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pymc as pm  # noqa: E402
import xarray as xr  # noqa: E402

from pm_perm._io import save_figure, write_json  # noqa: E402
from pm_perm.classification.models import classifier_map, logistic_model  # noqa: E402
from pm_perm.datasets.embedded_digits import (  # noqa: E402
    MAX_COUNT,
    CellRBMFeatures,
    make_embedded_digits,
)
from pm_perm.distributions.n_choose_k import NChooseK  # noqa: E402


def calibrated_model(kind, S, Y):
    D = Y.shape[1]
    coords = {"image": range(len(Y)), "digit": range(D), "count": range(D + 1)}
    with pm.Model(coords=coords) as model:
        a = pm.Normal("a", 1.0, 0.5, dims="digit")
        if kind == "logistic":
            b = pm.Normal("b", 0.0, 2.0, dims="digit")
            pm.Bernoulli("y", logit_p=a * S + b, observed=Y, dims=("image", "digit"))
        else:
            b = pm.ZeroSumNormal("b", 2.0, dims="digit")
            count_probs = pm.Dirichlet("count_probs", np.ones(D + 1), dims="count")
            NChooseK("y", logits=a * S + b, count_probs=count_probs, observed=Y,
                     dims=("image", "digit"))
    return model


def diagnostics(idata, var_names):
    summ = az.summary(idata, var_names=var_names)
    return {
        "max_r_hat": float(summ["r_hat"].max()),
        "min_ess_bulk": float(summ["ess_bulk"].min()),
        "min_ess_tail": float(summ["ess_tail"].min()),
        "divergences": int(idata.sample_stats["diverging"].sum()),
    }


def count_check(idata, D):
    """Observed label-count histogram vs the posterior predictive one."""
    rep = idata.posterior_predictive["y"].sum("digit").values.reshape(-1, idata.observed_data[
        "y"].sizes["image"])
    obs = idata.observed_data["y"].sum("digit").values
    hist_rep = np.stack([np.bincount(r, minlength=D + 1) for r in rep])
    hist_obs = np.bincount(obs, minlength=D + 1)
    lo, hi = np.percentile(hist_rep, [5, 95], axis=0)
    impossible = (rep == 0) | (rep > MAX_COUNT)
    return {
        "observed_histogram": hist_obs.tolist(),
        "replicated_mean_histogram": hist_rep.mean(axis=0).round(2).tolist(),
        "bins_outside_90pct_interval": [int(k) for k in np.flatnonzero(
            (hist_obs < lo) | (hist_obs > hi))],
        "replicated_fraction_impossible_counts": float(impossible.mean()),
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=0, help="data-set seed")
    p.add_argument("--subset", type=int, default=300, help="validation images modelled")
    p.add_argument("--draws", type=int, default=1000)
    p.add_argument("--tune", type=int, default=1000)
    p.add_argument("--chains", type=int, default=4)
    p.add_argument("--out", default="outputs/multiobject_bayes")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    train, valid, _ = make_embedded_digits(10_000, args.subset, 0, seed=args.seed)
    feats = CellRBMFeatures(seed=args.seed).fit(train.images)
    F = feats.transform(train.images)
    lr = classifier_map(logistic_model(F, train.labels, sigma=1.0)).fit(maxiter=500)
    S = feats.transform(valid.images) @ lr["W"] + lr["b"]
    Y = valid.labels
    D = Y.shape[1]
    results = {"seed": args.seed, "subset": args.subset, "draws": args.draws,
               "tune": args.tune, "chains": args.chains,
               "seconds_scores": time.perf_counter() - t0, "models": {}}
    ppc = {}
    for kind in ("logistic", "nchoosek"):
        t1 = time.perf_counter()
        with calibrated_model(kind, S, Y):
            idata = pm.sample(args.draws, tune=args.tune, chains=args.chains,
                              target_accept=0.95, random_seed=args.seed, progressbar=False)
            pm.sample_posterior_predictive(idata, extend_inferencedata=True,
                                           random_seed=args.seed, progressbar=False)
        var_names = ["a", "b"] + (["count_probs"] if kind == "nchoosek" else [])
        res = {**diagnostics(idata, var_names), **count_check(idata, D)}
        res["seconds"] = time.perf_counter() - t1
        results["models"][kind] = res
        ppc[kind] = idata
        print(kind, json.dumps(res))
        if kind == "nchoosek":
            save_figure(az.plot_forest(idata, var_names=["count_probs"], backend="matplotlib"),
                        out / "count_probs.png")
    dt = xr.DataTree.from_dict({
        "posterior_predictive": xr.Dataset({
            f"n_labels_{k}": v.posterior_predictive["y"].sum("digit") for k, v in ppc.items()}),
        "observed_data": xr.Dataset({
            f"n_labels_{k}": v.observed_data["y"].sum("digit") for k, v in ppc.items()}),
    })
    save_figure(az.plot_ppc_rootogram(dt, backend="matplotlib"), out / "ppc_counts.png")
    results["seconds_total"] = time.perf_counter() - t0
    for problem in write_json(out / "results.json", results):
        print(f"warning: {out}/results.json: {problem}")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
