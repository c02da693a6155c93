"""Ranking data with counts as one row per ballot: the cost of the summed log-likelihood and its
gradient (what pm.find_MAP and NUTS compile), and of the per-ballot LOO, on APA 1998.

Run::

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 .venv/bin/python benchmarks/bench_ballots.py

Data: APA 1998 (``../shared/data/preflib/apa/ED-00028-00000001.soi``, 18,723 ballots, 5
candidates) with 15 % of the ballots that rank 3 or more candidates given a tie of their 2nd
and 3rd (seed 0), as in issue 53. Families: ``PlackettLuce`` (utilities ``u`` (M,)) and
``PartialRanking`` (logits ``W`` (M, M)), each with ``length_probs``.

Variants of the ballots' likelihood (logp + gradient compiled on PyTensor's default numba
backend, the median of repeated calls at one random point):

* ``before``: the mechanism of main before issue 53: one row per DISTINCT order,
  ``weights=counts`` multiplying its log-probability (``pm.logp(Dist.dist(weights=counts),
  orders)``, summed);
* ``per ballot``: ``Dist("y", weights=counts, observed=orders)``: one row per ballot, the
  log-probabilities computed on the distinct orders and repeated
  (:mod:`pm_perm.distributions._ballots`), the sum rewritten to ``sum(counts * log p)``;
* ``per ballot, no rewrite``: the same with the rewrite ``sum_of_repeat_rows`` excluded;
* ``expanded by hand``: ``Dist("y", observed=<18,723 rows>)``.

Then ``az.loo`` on ``pm.compute_log_likelihood`` (per ballot) against
``loo_with_counts`` (PSIS per distinct order), for PL on 200 draws near the posterior
(``--loo-only``: this part alone).
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pymc as pm  # noqa: E402
import pytensor.tensor as pt  # noqa: E402
from pytensor.compile.mode import get_default_mode  # noqa: E402

from pm_perm import PartialRanking, PlackettLuce  # noqa: E402
from pm_perm.datasets import data_home  # noqa: E402
from pm_perm.preferences import read_preflib  # noqa: E402
from pm_perm.preferences.synthetic import add_ties  # noqa: E402

APA = data_home() / "preflib" / "apa" / "ED-00028-00000001.soi"


def build(family, data, variant):
    M = data.n_items
    with pm.Model() as model:
        if family == "PL":
            par = pm.Normal("u", 0.0, 3.0, shape=M)
            dist, key = PlackettLuce, "utilities"
        else:
            par = pm.Normal("W", 0.0, 3.0, shape=(M, M))
            dist, key = PartialRanking, "logits"
        lp = pm.Dirichlet("length_probs", a=np.ones(M + 1))
        kwargs = {key: par, "length_probs": lp}
        if variant == "before":
            d = dist.dist(weights=data.counts, **kwargs)
            pm.Potential("ballots", pt.sum(pm.logp(d, data.orders)))
        elif variant == "expanded":
            dist("ballots", observed=np.repeat(data.orders, data.counts, axis=0), **kwargs)
        else:
            dist("ballots", weights=data.counts, observed=data.orders, **kwargs)
    return model


def time_logp_and_grad(model, mode=None, repeats=200):
    logp = model.logp()
    fn = model.compile_fn([logp, *pt.grad(logp, model.value_vars)], mode=mode)
    rng = np.random.default_rng(0)
    point = {k: v + 0.3 * rng.normal(size=np.shape(v)) for k, v in
             model.initial_point().items()}
    value = fn(point)[0]
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn(point)
        times.append(time.perf_counter() - t)
    return float(value), float(np.median(times))


def loo_timings(data):
    import arviz as az
    import xarray as xr

    from pm_perm.preferences import fitting as rfit
    from pm_perm.preferences import models as rmod
    from pm_perm.preferences import posterior as rpost

    rm = rmod.plackett_luce_model(data)
    M, S = data.n_items, 200
    rng = np.random.default_rng(1)
    first = np.bincount(np.argmax(data.orders == 0, axis=1), weights=data.counts, minlength=M)
    u = np.log(first) - np.log(first).mean()
    u_raw = rmod.zero_sum_basis(M).T @ u + 0.01 * rng.normal(size=(1, S, 1, M - 1))
    lengths = np.bincount(data.ranked_lengths(), weights=data.counts, minlength=M + 1)
    lp = rng.dirichlet(lengths + 1, size=(1, S))
    draws = xr.DataTree.from_dict({"posterior": xr.Dataset({
        "u_raw": (("chain", "draw", "component", "item_basis"), u_raw),
        "length_probs": (("chain", "draw", "length"), lp),
        "u": (("chain", "draw", "component", "item"), u_raw @ rmod.zero_sum_basis(M).T)})})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = time.perf_counter()
        pm.compute_log_likelihood(draws, model=rm.model, progressbar=False)
        t_ll = time.perf_counter() - t
        t = time.perf_counter()
        plain = az.loo(draws, pointwise=True, reff=1.0)
        t_loo = time.perf_counter() - t
        post = rfit.posterior_params(draws, "plackett-luce")
        k = (data.orders >= 0).sum(axis=1)
        per_order = (rpost.pointwise_loglik(post, "plackett-luce", data.orders)
                     + np.log(post["length_probs"][:, k]))
        t = time.perf_counter()
        cheap = rpost.loo_with_counts(per_order, data.counts)
        t_cheap = time.perf_counter() - t
    print(f"\nLOO of PL on {S} draws near the posterior ({data.n_rankings} ballots):")
    print(f"  pm.compute_log_likelihood (per ballot): {t_ll:6.2f} s")
    print(f"  az.loo per ballot:   elpd {plain.elpd:.4f} se {plain.se:.3f} p {plain.p:.4f} "
          f"max k {float(np.max(plain.pareto_k)):.3f}  {t_loo:6.2f} s")
    print(f"  loo_with_counts:     elpd {cheap.elpd:.4f} se {cheap.se:.3f} p {cheap.p:.4f} "
          f"max k {float(np.max(cheap.pareto_k)):.3f}  {t_cheap:6.2f} s")
    print(f"  relative difference of elpd: {abs(plain.elpd - cheap.elpd) / abs(cheap.elpd):.1e}")


def main():
    if not Path(APA).exists():
        sys.exit(f"APA 1998 absent: {APA} (set PM_PERM_DATA or put it in ../shared/data)")
    data = add_ties(read_preflib(APA), 0.15, pair=1, rng=0)  # 2nd and 3rd tied
    print(f"APA 1998 with ties: {data.n_rankings} ballots, {data.n_distinct} distinct orders, "
          f"{data.n_items} items")
    no_rewrite = get_default_mode().excluding("sum_of_repeat_rows")
    print(f"\n{'family':14s} {'variant':26s} {'logp':>14s} {'logp+grad per call':>20s}")
    for family in () if "--loo-only" in sys.argv else ("PL", "PartialRanking"):
        for label, variant, mode in (("before (distinct, weights)", "before", None),
                                     ("per ballot", "ballots", None),
                                     ("per ballot, no rewrite", "ballots", no_rewrite),
                                     ("expanded by hand", "expanded", None)):
            value, t = time_logp_and_grad(build(family, data, variant), mode=mode)
            print(f"{family:14s} {label:26s} {value:14.4f} {t * 1e6:17.1f} us")
    loo_timings(data)


if __name__ == "__main__":
    main()
