"""PSIS-LOO per ballot on APA 1998 with ties, the plain PyMC / ArviZ route (issue 53).

On APA 1998 (5 candidates, 18,723 ballots) with the issue's tie pattern
(:func:`pm_perm.preferences.synthetic.add_ties` with share 0.15, ``pair="last"``, seed 0), for
Plackett-Luce (``models.plackett_luce_model``), the full model (``models.full_model``) and a
2-component mixture (``--mixture-family``: ``full`` or ``plackett-luce`` components): a NUTS
posterior (:func:`pm_perm.preferences.fitting.fit_nuts`), ``pm.compute_log_likelihood``,
``az.loo`` on it, and the same ``az.loo`` on a log-likelihood computed apart from the model
(the numba kernels per distinct order plus ``log length_probs[k]``, expanded by hand to one row
per ballot). Printed per model: elpd, se, p_loo, the largest Pareto k and the number above 0.7,
and the differences to the expanded reference (relative elpd, p_loo, largest |k difference|);
then ``az.compare`` of the three against the order of the reference elpds.

Run (the figures and wall times in ``docs/benchmarks.md``)::

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 .venv/bin/python benchmarks/apa_loo.py \\
        --data ../shared/data/preflib/apa/ED-00028-00000001.soi
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import check_output, clock, write_result  # noqa: E402  (benchmarks/_harness.py)


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # Pareto k: reported in the table
        return fn(*args, **kwargs)


def expanded_reference(rm, idata):
    """``az.loo`` input computed apart from the model: per distinct order by the numba kernels
    (:func:`~pm_perm.preferences.posterior.pointwise_loglik`) plus ``log length_probs[k]``,
    repeated to one row per ballot, with the same posterior group (same relative efficiency)."""
    import xarray as xr

    from pm_perm.preferences import fitting as rfit
    from pm_perm.preferences import posterior as rpost

    data = rm.data
    post = rfit.posterior_params(idata, rm.family)
    k = (data.orders >= 0).sum(axis=1)
    per_order = (rpost.pointwise_loglik(post, rm.family, data.orders)
                 + np.log(post["length_probs"][:, k]))
    C, D = idata["posterior"].sizes["chain"], idata["posterior"].sizes["draw"]
    hand = np.repeat(per_order, data.counts, axis=1).reshape(C, D, -1)
    posterior = idata["posterior"]
    posterior = posterior.to_dataset() if hasattr(posterior, "to_dataset") else posterior
    return xr.DataTree.from_dict({
        "posterior": posterior,
        "log_likelihood": xr.Dataset({"ballots": (("chain", "draw", "ballot"), hand)})})


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="a PrefLib file (APA 1998)")
    ap.add_argument("--draws", type=int, default=500)
    ap.add_argument("--tune", type=int, default=500)
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--mixture-family", choices=("full", "plackett-luce"), default="full")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="also write the table as JSON to this path")
    args = ap.parse_args(argv)
    if args.json:
        check_output(ap, "--json", args.json, inputs=[args.data])

    import arviz as az
    import pymc as pm

    from pm_perm.preferences import fitting as rfit
    from pm_perm.preferences import models as rmod
    from pm_perm.preferences.preflib import read_preflib
    from pm_perm.preferences.synthetic import add_ties

    data = add_ties(read_preflib(args.data), 0.15, pair="last", rng=0)
    print(f"{data.n_rankings} ballots, {data.n_distinct} distinct orders, M = {data.n_items}; "
          f"NUTS {args.chains} chains x {args.draws} draws ({args.tune} tuning)")
    mix_builder = rmod.full_model if args.mixture_family == "full" else rmod.plackett_luce_model
    specs = {"plackett-luce": lambda: rmod.plackett_luce_model(data),
             "full": lambda: rmod.full_model(data),
             f"mixture K=2 ({args.mixture_family})": lambda: mix_builder(data, components=2)}
    rows, loos = [], {}
    for name, build in specs.items():
        rm = build()
        w0, c0 = clock()
        idata = _quiet(rfit.fit_nuts, rm, draws=args.draws, tune=args.tune, chains=args.chains,
                       seed=args.seed)
        w1, c1 = clock()
        _quiet(pm.compute_log_likelihood, idata, model=rm.model, var_names=["ballots"],
               progressbar=False)
        n_ll = idata["log_likelihood"]["ballots"].shape[-1]  # one entry per ballot
        loo = _quiet(az.loo, idata, var_name="ballots", pointwise=True)
        ref = _quiet(az.loo, expanded_reference(rm, idata), var_name="ballots", pointwise=True)
        w2, _ = clock()
        k, k_ref = np.asarray(loo.pareto_k).ravel(), np.asarray(ref.pareto_k).ravel()
        loos[name] = (loo, ref)
        rows.append({
            "model": name, "n_loglik": int(n_ll), "elpd": float(loo.elpd), "se": float(loo.se),
            "p_loo": float(loo.p), "k_max": float(k.max()), "k_gt_07": int((k > 0.7).sum()),
            "rel_elpd_diff": abs(float(loo.elpd) / float(ref.elpd) - 1.0),
            "p_loo_diff": abs(float(loo.p) - float(ref.p)),
            "k_max_diff": float(np.max(np.abs(k - k_ref))),
            "nuts_wall_s": w1 - w0, "nuts_cpu_s": c1 - c0, "loo_wall_s": w2 - w1})
        r = rows[-1]
        print(f"{name}: elpd {r['elpd']:.1f} ± {r['se']:.1f}, p_loo {r['p_loo']:.2f}, max k "
              f"{r['k_max']:.3f}; vs expanded: rel elpd {r['rel_elpd_diff']:.1e}, p_loo "
              f"{r['p_loo_diff']:.1e}, k {r['k_max_diff']:.1e}; NUTS {r['nuts_wall_s']:.0f} s",
              flush=True)
    plain = _quiet(az.compare, {name: pair[0] for name, pair in loos.items()})
    reference_order = sorted(loos, key=lambda n: -float(loos[n][1].elpd))
    print()
    print("| model | pointwise rows | elpd ± se | p_loo | max k (> 0.7) | rel. elpd diff | "
          "p_loo diff | max k diff | NUTS wall s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['n_loglik']} | {r['elpd']:.1f} ± {r['se']:.1f} | "
              f"{r['p_loo']:.2f} | {r['k_max']:.3f} ({r['k_gt_07']}) | "
              f"{r['rel_elpd_diff']:.1e} | {r['p_loo_diff']:.1e} | {r['k_max_diff']:.1e} | "
              f"{r['nuts_wall_s']:.0f} |")
    print()
    print("az.compare (per ballot):")
    print(plain[["rank", "elpd", "p", "elpd_diff", "dse", "weight"]].to_string())
    same = list(plain.index) == reference_order
    print(f"az.compare order {list(plain.index)}; expanded-reference order {reference_order}: "
          f"{'same' if same else 'DIFFERENT'}")
    if args.json:
        write_result(args.json, {"rows": rows, "compare_order": list(plain.index),
                                 "reference_order": reference_order, "args": vars(args)})


if __name__ == "__main__":
    main()
