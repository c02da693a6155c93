"""End-to-end demo: learned graph matching with PermutationExpFamily (the README's first command).

Simulates matching problems from a known parameter vector (Petterson et al. 2009, sec. 3:
``W = x . theta`` with edge features ``x``), fits ``theta`` by ``pm.find_MAP`` (the paper's MAP
estimator) and by NUTS, and reports: recovery of theta, ArviZ diagnostics (r_hat, ESS), the
held-out Hamming error of the predicted matchings (max-weight matching of ``x_test . theta``), and
a posterior predictive check. Writes ``trace.png``, ``ppc.png`` and ``results.json`` to the output
folder (default ``outputs/demo``). Both fits are checked: a MAP fit whose optimiser stopped early
(``pm_perm.check_find_map``) or incomplete or non-finite draws (``pm_perm.check_draws``) end the
demo with an error; divergences or r_hat above 1.01 are printed as warnings
(``pm_perm.sampler_warnings``) and recorded in ``results.json``. The output folder is checked
before any work (it is created with its parents; it must be writable, and its outputs must not
be folders); a run replaces the outputs of an earlier one, each file written atomically (a
complete new file or the old one, never half of one).

Run: ``bash scripts/demo.sh [--out DIR] [--graphs N] [--m M] [--seed S]``.
"""

from __future__ import annotations

import argparse
import os
import time

import matplotlib

matplotlib.use("Agg")
import arviz as az  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pymc as pm  # noqa: E402

import pm_perm  # noqa: E402
from pm_perm._io import check_outputs, make_folder, save_figure, write_json  # noqa: E402
from pm_perm.kernels.matching import max_weight_matching  # noqa: E402

OUTPUTS = ("trace.png", "ppc.png", "results.json")


def simulate(rng, n_graphs, M, theta):
    """Edge features and exact draws of the matchings from the model with the true theta."""
    d = theta.size
    x = rng.normal(size=(n_graphs, M, M, d))
    # a few informative "same point" features on the true-identity diagonal make it a matching
    # problem rather than noise: feature 0 is larger for the corresponding pair
    x[:, np.arange(M), np.arange(M), 0] += 1.5
    y = pm.draw(pm_perm.PermutationExpFamily.dist(logits=x @ theta), random_seed=rng)
    return x, y


def hamming(y_pred, y_true):
    """Mean fraction of rows matched to the wrong column."""
    return float(np.mean(y_pred != y_true))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="outputs/demo")
    p.add_argument("--graphs", type=int, default=200, help="training graphs")
    p.add_argument("--test-graphs", type=int, default=200)
    p.add_argument("--m", type=int, default=8, help="points per graph (M)")
    p.add_argument("--draws", type=int, default=1000)
    p.add_argument("--seed", type=int, default=2026)
    args = p.parse_args(argv)
    out = make_folder("--out", args.out)  # with its parents; a file in the way is an error
    check_outputs({}, directories={"--out": (out, OUTPUTS)}, overwrite=True)
    t_start = time.perf_counter()

    rng = np.random.default_rng(args.seed)
    theta_true = np.array([1.0, -0.7, 0.4, 0.0])
    d = theta_true.size
    x, y = simulate(rng, args.graphs, args.m, theta_true)
    x_test, y_test = simulate(rng, args.test_graphs, args.m, theta_true)
    print(f"data: {args.graphs} training / {args.test_graphs} test graphs, M = {args.m}, d = {d}")

    coords = {"feature": [f"x{k}" for k in range(d)], "graph": np.arange(args.graphs),
              "row": np.arange(args.m)}
    with pm.Model(coords=coords):
        theta = pm.Normal("theta", 0.0, 2.0, dims="feature")
        W = pm_perm.edge_logits(x, theta)
        pm_perm.PermutationExpFamily("y", logits=W, observed=y, dims=("graph", "row"))

        t0 = time.perf_counter()
        fit = pm.find_MAP(progressbar=False, return_inferencedata=True, jitter=False)
        pm_perm.check_find_map(fit)  # an optimiser that stopped early raises MapFitError
        t_map = time.perf_counter() - t0
        theta_map = fit.posterior["theta"].values.reshape(-1)

        t0 = time.perf_counter()
        # one process per core (PyMC's default assumes hyper-threading and would use
        # cpu_count() // 2, i.e. one job on a 2-core machine)
        chains = 4
        idata = pm.sample(args.draws, tune=1000, chains=chains, cores=min(4, os.cpu_count() or 1),
                          random_seed=args.seed, progressbar=False)
        t_nuts = time.perf_counter() - t0
        pm.sample_posterior_predictive(idata, extend_inferencedata=True,
                                       random_seed=args.seed, progressbar=False)

    # incomplete or non-finite draws raise SamplingError; divergences and r_hat are reported
    diagnostics = pm_perm.check_draws(idata, "theta", chains=chains, draws=args.draws)
    post = idata.posterior["theta"]
    mean, sd = post.mean(("chain", "draw")).values, post.std(("chain", "draw")).values
    summary = az.summary(idata, var_names=["theta"])
    print(f"\nfind_MAP ({t_map:.1f} s): theta_MAP = {np.round(theta_map, 3)}")
    print(f"NUTS ({t_nuts:.1f} s incl. compilation, sampler "
          f"{idata.posterior.attrs.get('inference_library', '?')}):")
    print(summary.to_string())
    z = (mean - theta_true) / sd
    n_div = diagnostics["divergences"]
    print(f"true theta = {theta_true}; z = (mean - true) / sd = {np.round(z, 2)}; "
          f"divergences = {n_div}")
    warnings = pm_perm.sampler_warnings(diagnostics)
    for w in warnings:
        print(f"WARNING: {w}")

    # held-out matching error: mode of the model at the estimated theta
    err = {
        "MAP": hamming(max_weight_matching(x_test @ theta_map), y_test),
        "posterior mean": hamming(max_weight_matching(x_test @ mean), y_test),
        "true theta (Bayes floor)": hamming(max_weight_matching(x_test @ theta_true),
                                            y_test),
        "no learning (theta = e_0)": hamming(
            max_weight_matching(x_test @ np.eye(d)[0]), y_test),
    }
    print("held-out Hamming error of the predicted matchings:")
    for k, v in err.items():
        print(f"  {k:28s} {v:.4f}")

    # posterior predictive check: mean Hamming distance of the matchings to the mode at the
    # posterior-mean theta, observed vs replicated data
    mode = max_weight_matching(x @ mean)
    y_rep = idata.posterior_predictive["y"].values.reshape(-1, args.graphs, args.m)
    t_rep = (y_rep != mode).mean(axis=(1, 2))
    t_obs = float((y != mode).mean())
    p_value = float(np.mean(t_rep >= t_obs))
    print(f"PPC: T(y) = mean distance to the mode; observed {t_obs:.4f}, replicated "
          f"{t_rep.mean():.4f} +- {t_rep.std():.4f}, posterior predictive p = {p_value:.2f}")

    pc = az.plot_trace_dist(idata, var_names=["theta"], backend="matplotlib")
    save_figure(pc, out / "trace.png")
    plt.close("all")
    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.hist(t_rep, bins=40, color="0.7", label="replicated data")
    ax.axvline(t_obs, color="C3", lw=2, label="observed data")
    ax.set_xlabel("mean Hamming distance to the max-weight matching")
    ax.set_ylabel("posterior predictive draws")
    ax.set_title(f"PPC, p = {p_value:.2f}")
    ax.legend()
    fig.tight_layout()
    save_figure(fig, out / "ppc.png", dpi=120)

    results = {
        "theta_true": theta_true.tolist(), "theta_map": theta_map.tolist(),
        "posterior_mean": mean.tolist(), "posterior_sd": sd.tolist(),
        "r_hat_max": float(summary["r_hat"].max()),
        "ess_bulk_min": float(summary["ess_bulk"].min()),
        "divergences": n_div, "warnings": warnings, "heldout_hamming": err,
        "ppc_p_value": p_value,
        "seconds": {"find_map": t_map, "nuts": t_nuts, "total": time.perf_counter() - t_start},
    }
    for problem in write_json(out / "results.json", results):
        print(f"warning: results.json: {problem}")
    print(f"wrote {out}/trace.png, {out}/ppc.png, {out}/results.json "
          f"({results['seconds']['total']:.0f} s in all)")
    return results


if __name__ == "__main__":
    main()
