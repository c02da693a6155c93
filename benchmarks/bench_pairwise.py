"""Pairwise preferences: Bradley-Terry MAP against ``choix.opt_pairwise``, and recovery of a
consensus from per-assessor preference sets by the exact linear-extension likelihood.

Run::

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 .venv/bin/python benchmarks/bench_pairwise.py

Needs ``choix`` (the ``bench`` extra). Generated data (seed 0), no files.

1. ``BradleyTerry`` MAP vs choix. M = 20 items, utilities ~ Normal(0, 1), 600 comparisons of
   random pairs, aggregated into distinct (winner, loser) rows with counts
   (``weights=counts``). choix minimises ``sum -log sigmoid(u_w - u_l) + alpha * ||u||^2``
   (its code: the penalty is ``alpha`` times the squared norm), the MAP under independent
   ``Normal(0, sigma = 1 / sqrt(2 alpha))`` priors, which is the prior of the PyMC model. Both
   optimisers run to tight tolerances (choix Newton-CG ``tol=1e-12``; the model's log posterior
   by ``scipy.optimize.minimize`` BFGS, ``gtol=1e-10``, from the model's compiled logp/dlogp;
   and ``pm.find_MAP``). Reported: the largest absolute difference of the utilities.
2. Recovery. 60 assessors x 15 items, each a complete ranking from Plackett-Luce (utilities
   ``linspace(1.5, -1.5, 15)``, so the consensus is items 0, 1, ..., 14) of which 20-30 random
   pairs are observed (oriented by the ranking); ``PartialOrder(utilities=u)`` with
   ``u ~ Normal(0, 2)``: its MAP ranking (items by decreasing MAP utility) against the
   consensus (Kendall distance, of 105 pairs), beside ``BradleyTerry`` on the same pairs pooled
   (independent comparisons: the same pairs, but ignoring that an assessor's pairs come from one
   ranking). Also the DP's size (ideals per assessor) and the CPU time of one logp + gradient
   (``time.process_time``: the machine is shared, wall times are not reliable).
"""

from __future__ import annotations

import os
import time
import warnings

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pymc as pm  # noqa: E402
from scipy.optimize import minimize  # noqa: E402

from pm_perm import BradleyTerry, PartialOrder  # noqa: E402
from pm_perm.kernels.linear_extensions import count_ideals  # noqa: E402
from pm_perm.kernels.plackett_luce import sample_plackett_luce  # noqa: E402


def _map(model):
    """``(MAP, CPU seconds of the optimisation)``: BFGS on the model's compiled log posterior
    (free variables: one vector); compilation not counted."""
    (var,) = model.value_vars
    logp, dlogp = model.compile_logp(), model.compile_dlogp()
    name = var.name
    x0 = model.initial_point()[name]
    logp({name: x0}), dlogp({name: x0})
    t = time.process_time()
    res = minimize(lambda x: -logp({name: x}), x0, jac=lambda x: -dlogp({name: x}),
                   method="BFGS", options={"gtol": 1e-10, "maxiter": 10_000})
    return res.x, time.process_time() - t


def kendall_distance(a, b):
    """Discordant pairs between two score vectors (rankings by decreasing score)."""
    a, b = np.asarray(a), np.asarray(b)
    i, j = np.triu_indices(len(a), 1)
    return int(np.sum(np.sign(a[i] - a[j]) != np.sign(b[i] - b[j])))


def bench_choix(seed=0, M=20, n=600, alpha=0.5):
    import choix

    rng = np.random.default_rng(seed)
    u_true = rng.normal(size=M)
    rows = []
    for _ in range(n):
        i, j = rng.choice(M, 2, replace=False)
        p = 1 / (1 + np.exp(u_true[j] - u_true[i]))
        rows.append((i, j) if rng.random() < p else (j, i))
    rows = np.array(rows)
    pairs, counts = np.unique(rows, axis=0, return_counts=True)
    t = time.process_time()
    theirs = choix.opt_pairwise(M, [tuple(r) for r in rows], alpha=alpha, tol=1e-12)
    t_choix = time.process_time() - t
    sigma = 1 / np.sqrt(2 * alpha)
    with pm.Model() as model:
        u = pm.Normal("u", 0, sigma, shape=M)
        BradleyTerry("c", u, weights=counts, observed=pairs)
    ours, t_ours = _map(model)
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        fm = pm.find_MAP(progressbar=False)["u"]
    return {"M": M, "comparisons": n, "distinct rows": len(pairs), "alpha": alpha,
            "max |u_ours - u_choix|": float(np.abs(ours - theirs).max()),
            "max |find_MAP - choix|": float(np.abs(fm - theirs).max()),
            "choix CPU s": t_choix, "ours CPU s (BFGS, compiled)": t_ours}


def generate_preferences(seed=0, n_assessors=60, M=15, lo=20, hi=30):
    rng = np.random.default_rng(seed)
    u_true = np.linspace(1.5, -1.5, M)
    rankings = sample_plackett_luce(u_true, size=(n_assessors,), rng=rng)
    all_pairs = np.array([(i, j) for i in range(M) for j in range(i + 1, M)])
    prefs = np.full((n_assessors, hi, 2), -1, dtype=np.int64)
    for a in range(n_assessors):
        k = int(rng.integers(lo, hi + 1))
        pick = all_pairs[rng.choice(len(all_pairs), k, replace=False)]
        first = rankings[a, pick[:, 0]] < rankings[a, pick[:, 1]]
        prefs[a, :k] = np.where(first[:, None], pick, pick[:, ::-1])
    return u_true, prefs


def bench_recovery(seed=0):
    u_true, prefs = generate_preferences(seed)
    M = len(u_true)
    ideals = [count_ideals(p, M) for p in prefs]
    with pm.Model() as po:
        u = pm.Normal("u", 0, 2, shape=M)
        PartialOrder("prefs", utilities=u, observed=prefs)
    u_po, t_po = _map(po)
    fn = po.compile_logp()
    dfn = po.compile_dlogp()
    point = po.initial_point()
    fn(point), dfn(point)
    t = time.process_time()
    for _ in range(20):
        fn(point), dfn(point)
    per_eval = (time.process_time() - t) / 20
    pooled = prefs.reshape(-1, 2)
    pooled = pooled[pooled[:, 0] >= 0]
    pairs, counts = np.unique(pooled, axis=0, return_counts=True)
    with pm.Model() as bt:
        u = pm.Normal("u", 0, 2, shape=M)
        BradleyTerry("c", u, weights=counts, observed=pairs)
    u_bt, _ = _map(bt)
    return {"assessors": len(prefs), "items": M,
            "pairs per assessor": f"{int((prefs[:, :, 0] >= 0).sum(1).min())}-"
                                  f"{int((prefs[:, :, 0] >= 0).sum(1).max())}",
            "ideals per assessor (median, max)": (int(np.median(ideals)), int(max(ideals))),
            "Kendall(PartialOrder MAP, consensus)": kendall_distance(u_po, u_true),
            "Kendall(BradleyTerry MAP, consensus)": kendall_distance(u_bt, u_true),
            "logp+grad CPU ms": 1e3 * per_eval, "MAP CPU s (BFGS, compiled)": t_po}


def main():
    print("== BradleyTerry MAP vs choix.opt_pairwise")
    for k, v in bench_choix().items():
        print(f"  {k}: {v}")
    print("== consensus recovery from per-assessor preference sets")
    for k, v in bench_recovery().items():
        print(f"  {k}: {v}")


if __name__ == "__main__":
    main()
