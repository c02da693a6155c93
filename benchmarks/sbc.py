"""Simulation-based calibration (Talts et al. 2018) of pm_perm's likelihoods with NUTS.

For each model: draw the parameters from the prior, data from the model, fit by NUTS (nutpie,
the model compiled once and re-used with new data), and record the rank of each true parameter
among ``L`` thinned posterior draws. If the likelihood, its gradient and the sampler are right,
every rank is uniform on ``0..L``. Reported per parameter: a chi-square uniformity test over
``B`` equal bins (p-value) and a rank histogram (PNG).

Models (small, so that hundreds of replications run in minutes):

* ``matching``: ``theta ~ N(0, 1)`` (d = 3), 20 graphs of M = 6, ``W = x . theta``,
  ``y ~ PermutationExpFamily(W)``;
* ``ranking``: RankMatch-style ``W[i, j] = c_j <psi_i, theta>``, ``c_j = (M - j) / M``, d = 2,
  15 queries of M = 5 documents, full observed rankings;
* ``nchoosek``: ``theta ~ N(0, 1)`` (d = 2), ``count_probs ~ Dirichlet(1)`` over 0..D (D = 6),
  40 rows, ``y ~ NChooseK(X . theta, count_probs)``;
* ``ordinal``: ``theta ~ N(0, 1)`` (d = 2), 30 rows of D = 5 items with R = 3 levels and fixed
  counts (2, 2, 1), ``y ~ OrdinalNChooseK(X . theta, counts)``;
* ``rankings_full``: the full ranking model of :mod:`pm_perm.preferences.models` on top-k ballots:
  ``W = u c^T + tau delta_raw`` (M = 4, ``u ~ ZeroSumNormal(1)``, ``tau ~ HalfNormal(1)``,
  ``delta_raw ~ ZeroSumNormal(1)`` over rows and columns), 40 ballots ranking 1, 2 or all 4
  items (probabilities 0.3, 0.3, 0.4), exact partial-order likelihood.

Run: ``.venv/bin/python benchmarks/sbc.py --models matching ranking nchoosek ordinal --reps 200``
(``--out DIR`` for the figures and a JSON of ranks and p-values). The output folder is checked
before any work (created with its parents if missing; a file in the way, or an output that is a
folder, is refused); a run replaces an earlier run's outputs, each written atomically.

The SBC machinery (replications, ranks, the uniformity test, the histograms) is
:mod:`pm_perm.testing.sbc`; this file holds the five models and the command line.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from pm_perm import PermutationExpFamily, edge_logits
from pm_perm._io import OutputPathError, check_outputs, make_folder, save_figure
from pm_perm.testing.sbc import SBCModel, plot_rank_histograms, uniformity_pvalue
from pm_perm.testing.sbc import run_sbc as run_sbc_model

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import write_result  # noqa: E402


def _matching(rng):
    x = rng.normal(size=(20, 6, 6, 3))

    def build(y_obs):
        with pm.Model() as model:
            theta = pm.Normal("theta", 0.0, 1.0, shape=3)
            y = pm.Data("y_obs", y_obs)
            PermutationExpFamily("y", logits=edge_logits(x, theta), observed=y)
        return model

    def simulate(theta_sym):
        return PermutationExpFamily.dist(logits=edge_logits(x, theta_sym))

    return SBCModel({"theta": (3,)}, {"theta": lambda r: r.normal(size=3)}, build, simulate)


def _ranking(rng):
    M, d = 5, 2
    psi = rng.normal(size=(15, M, d))
    c = (M - np.arange(M)) / M

    def logits(theta):
        return pt.dot(psi, theta)[..., :, None] * c[None, None, :]

    def build(y_obs):
        with pm.Model() as model:
            theta = pm.Normal("theta", 0.0, 1.0, shape=d)
            y = pm.Data("y_obs", y_obs)
            PermutationExpFamily("y", logits=logits(theta), observed=y)
        return model

    def simulate(theta_sym):
        return PermutationExpFamily.dist(logits=logits(theta_sym))

    return SBCModel({"theta": (d,)}, {"theta": lambda r: r.normal(size=d)}, build, simulate)


def _nchoosek(rng):
    from pm_perm.distributions.n_choose_k import NChooseK

    D, d = 6, 2
    X = rng.normal(size=(40, D, d))

    def build(y_obs):
        with pm.Model() as model:
            theta = pm.Normal("theta", 0.0, 1.0, shape=d)
            pk = pm.Dirichlet("count_probs", a=np.ones(D + 1))
            y = pm.Data("y_obs", y_obs)
            NChooseK("y", logits=pt.dot(X, theta), count_probs=pk, observed=y)
        return model

    def simulate(theta_sym, pk_sym):
        return NChooseK.dist(logits=pt.dot(X, theta_sym), count_probs=pk_sym)

    priors = {"theta": lambda r: r.normal(size=d),
              "count_probs": lambda r: r.dirichlet(np.ones(D + 1))}
    return SBCModel({"theta": (d,), "count_probs": (D + 1,)}, priors, build, simulate)


def _ordinal(rng):
    from pm_perm.distributions.ordinal_n_choose_k import OrdinalNChooseK

    D, d, counts = 5, 2, np.array([2, 2, 1])
    X = rng.normal(size=(30, D, d))

    def build(y_obs):
        with pm.Model() as model:
            theta = pm.Normal("theta", 0.0, 1.0, shape=d)
            y = pm.Data("y_obs", y_obs)
            OrdinalNChooseK("y", logits=pt.dot(X, theta), counts=counts, observed=y)
        return model

    def simulate(theta_sym):
        return OrdinalNChooseK.dist(logits=pt.dot(X, theta_sym), counts=counts)

    return SBCModel({"theta": (d,)}, {"theta": lambda r: r.normal(size=d)}, build, simulate)


def _zero_sum(r, shape):
    """A ``pm.ZeroSumNormal(1)`` draw: iid normals centred along every axis."""
    x = r.normal(size=shape)
    for axis in range(len(shape)):
        x = x - x.mean(axis=axis, keepdims=True)
    return x


def _rankings_full(rng):
    from pm_perm.ops.partial_orders import partial_order_loglik_sum
    from pm_perm.preferences.synthetic import default_positions, draw_ballots

    M, n = 4, 40
    c = default_positions(M)
    length_probs = np.array([0.0, 0.3, 0.3, 0.0, 0.4])

    def logits(u, tau, delta):
        return u[:, None] * c[None, :] + tau * delta

    def build(y_obs):
        with pm.Model() as model:
            u = pm.ZeroSumNormal("u", sigma=1.0, shape=M)
            tau = pm.HalfNormal("tau", 1.0)
            delta = pm.ZeroSumNormal("delta_raw", sigma=1.0, n_zerosum_axes=2, shape=(M, M))
            y = pm.Data("y_obs", y_obs)
            pm.Potential("ballots", partial_order_loglik_sum(logits(u, tau, delta), y,
                                                             np.ones(n)))
        return model

    def simulate(u, tau, delta, rng):
        return draw_ballots(n, logits=logits(u, tau, delta), length_probs=length_probs, rng=rng)

    priors = {"u": lambda r: _zero_sum(r, (M,)), "tau": lambda r: np.abs(r.normal()),
              "delta_raw": lambda r: _zero_sum(r, (M, M))}
    # a NumPy simulator (exact draws), not a PyMC distribution
    return SBCModel({"u": (M,), "tau": (), "delta_raw": (M, M)}, priors, build, simulate,
                    numpy_simulator=True)


MODELS = {"matching": _matching, "ranking": _ranking, "nchoosek": _nchoosek, "ordinal": _ordinal,
          "rankings_full": _rankings_full}


def run_sbc(name, reps, n_thin=99, draws=500, tune=500, seed=0, progress=False):
    """Run ``reps`` SBC replications of model ``name`` with nutpie; returns ``{param[i]: ranks}``
    (:func:`pm_perm.testing.sbc.run_sbc`; the model's covariates drawn from ``seed`` first)."""
    rng = np.random.default_rng(seed)
    spec = MODELS[name](rng)

    def report(done, total):
        if progress and done % 20 == 0:
            print(f"  {name}: {done}/{total}", flush=True)

    return run_sbc_model(spec, reps, n_thin=n_thin, draws=draws, tune=tune, chains=2,
                         sampler="nutpie", seed=seed, rng=rng, progress=report)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    p.add_argument("--reps", type=int, default=200)
    p.add_argument("--out", default="outputs/sbc")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    out = Path(args.out)
    outputs = [f"sbc_{name}.png" for name in dict.fromkeys(args.models)] + ["sbc.json"]
    try:  # before any work: the folder and its parents are created; a file in the way is an error
        make_folder("--out", out)
        check_outputs({}, directories={"--out": (out, outputs)}, overwrite=True)
    except OutputPathError as err:
        p.error(str(err))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = {}
    for name in args.models:
        t0 = time.perf_counter()
        ranks = run_sbc(name, args.reps, seed=args.seed, progress=True)
        secs = time.perf_counter() - t0
        results[name] = {"seconds": secs, "reps": args.reps, "params": {}}
        print(f"\n### {name}: {args.reps} replications, {secs:.0f} s\n")
        print("| parameter | chi-square p (10 bins) | bin counts |")
        print("|---|---|---|")
        for param, rk in ranks.items():
            pval, counts = uniformity_pvalue(rk)
            results[name]["params"][param] = {"p_value": pval, "bins": counts, "ranks": rk}
            print(f"| {param} | {pval:.3f} | {counts} |")
        fig = plot_rank_histograms(ranks, title=f"SBC rank histograms: {name} ({args.reps} "
                                   "replications; band: 99% binomial interval per bin)")
        save_figure(fig, out / f"sbc_{name}.png", dpi=110)
        plt.close(fig)
    write_result(out / "sbc.json", results)
    print(f"\nwrote {out}/sbc_*.png and {out}/sbc.json")


if __name__ == "__main__":
    main()
