"""``pm.sample`` end to end with nutpie (PyMC's default when it is installed) and with PyMC's NUTS.

Run: ``.venv/bin/python benchmarks/bench_sampler_startup.py [--repeats 3]`` (about 2 minutes).

nutpie compiles its C callbacks (``numba.cfunc`` wrappers around the model's compiled log-density
and its gradient) in every ``pm.sample`` call; numba cannot cache them, so this cost returns in
every new process even when PyTensor's and numba's caches are warm. PyMC's own NUTS loads the
compiled gradient function from PyTensor's cache and runs its steps in Python. Which is faster
end to end depends on how long sampling takes against that fixed cost. This script times the
whole ``pm.sample`` call (compilation, tuning, draws, conversion to a ``DataTree``) for both
samplers on the two Getting started models, each in a FRESH Python subprocess:

* ``matching``: section 1, ``PermutationExpFamily`` over 40 matchings of M = 5 with two edge
  features, 2 chains x (500 tuning + 500 draws);
* ``count``: section 2, ``NChooseK`` with a Dirichlet count prior, 200 rows of 6 labels,
  2 chains x (1,000 + 1,000), ``target_accept=0.9``.

First a process compiles pm_perm's kernels into a new numba cache folder (with a PyTensor cache
of its own). Then, per model and
sampler, one ``cold`` process on a new empty PyTensor cache (the kernels are loaded, not
compiled) and ``--repeats`` ``warm`` processes on that cache, the two samplers alternating, so
that both see the same machine load. PyMC's NUTS runs its two chains in one process
(``cores=1``, PyMC's default on a 2-core machine); nutpie runs them in two threads. Wall and CPU
seconds (user + system of the process) of the ``pm.sample`` call are printed, with the ratio
nutpie / PyMC of the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile

from _harness import clock, run_child  # benchmarks/_harness.py

MODELS = ("matching", "count")
SAMPLERS = ("nutpie", "pymc")


def _build(name):
    import numpy as np
    import pymc as pm

    import pm_perm

    rng = np.random.default_rng(0)
    if name == "matching":
        x = rng.normal(size=(40, 5, 5, 2))
        x[:, range(5), range(5), 0] += 1.5
        y = pm.draw(pm_perm.PermutationExpFamily.dist(x @ [1.0, -0.5]), random_seed=1)
        with pm.Model() as model:
            theta = pm.Normal("theta", 0, 2, shape=2)
            pm_perm.PermutationExpFamily("y", logits=pm_perm.edge_logits(x, theta), observed=y)
        return model, {"draws": 500, "tune": 500}
    X = rng.normal(size=(200, 6, 2))
    Y = pm.draw(pm_perm.NChooseK.dist(X @ [1.0, -0.5], [0, 0.4, 0.4, 0.2, 0, 0, 0]),
                random_seed=1)
    with pm.Model() as model:
        theta = pm.Normal("theta", 0, 1, shape=2)
        count_probs = pm.Dirichlet("count_probs", a=np.ones(7))
        pm_perm.NChooseK("y", logits=pm.math.dot(X, theta), count_probs=count_probs, observed=Y)
    return model, {"draws": 1000, "tune": 1000, "target_accept": 0.9}


def child(name, sampler):
    import pymc as pm

    model, kwargs = _build(name)
    if sampler == "prime":  # compile pm_perm's kernels (logp, gradient, draws) into the cache
        model.compile_logp()(model.initial_point())
        model.compile_dlogp()(model.initial_point())
        print("RESULT {}")
        return
    extra = {"cores": 1} if sampler == "pymc" else {}
    with model:
        w0, c0 = clock()
        idata = pm.sample(chains=2, random_seed=2, progressbar=False, nuts_sampler=sampler,
                          **kwargs, **extra)
        w1, c1 = clock()
    theta = idata.posterior["theta"].mean(("chain", "draw")).values
    diverging = int(idata.sample_stats["diverging"].sum())
    print("RESULT " + json.dumps({"wall": w1 - w0, "cpu": c1 - c0,
                                  "theta": theta.round(3).tolist(), "divergences": diverging}))


def _run(env, *args):
    return run_child(__file__, ["--child", *args], env)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="warm processes per sampler")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    root = tempfile.mkdtemp(prefix="pm_perm-sampler-startup-")
    base = {k: v for k, v in os.environ.items() if k != "PYTENSOR_FLAGS"}
    base.update(NUMBA_CACHE_DIR=os.path.join(root, "numba"), PYTHONWARNINGS="ignore")
    print(f"caches in {root}; pm.sample wall / CPU seconds per fresh process")
    print(f"{'model':9s} {'sampler':7s} {'cold':>13s}   warm (each)")
    for name in MODELS:
        envs = {s: dict(base, PYTENSOR_FLAGS=f"base_compiledir={os.path.join(root, name, s)}")
                for s in SAMPLERS}
        _run(dict(base, PYTENSOR_FLAGS=f"base_compiledir={os.path.join(root, name, 'prime')}"),
             name, "prime")
        results = {s: {"cold": _run(envs[s], name, s), "warm": []} for s in SAMPLERS}
        for _ in range(args.repeats):
            for s in SAMPLERS:
                results[s]["warm"].append(_run(envs[s], name, s))
        for s in SAMPLERS:
            cold, warm = results[s]["cold"], results[s]["warm"]
            print(f"{name:9s} {s:7s} {cold['wall']:5.1f} / {cold['cpu']:5.1f}   "
                  + ", ".join(f"{r['wall']:.1f} / {r['cpu']:.1f}" for r in warm)
                  + f"   theta {warm[-1]['theta']}, divergences {warm[-1]['divergences']}")
        med = {s: statistics.median(r["wall"] for r in results[s]["warm"]) for s in SAMPLERS}
        cold_ratio = results["nutpie"]["cold"]["wall"] / results["pymc"]["cold"]["wall"]
        print(f"{name:9s} warm median wall: nutpie {med['nutpie']:.1f} s, PyMC NUTS "
              f"{med['pymc']:.1f} s, ratio nutpie / PyMC {med['nutpie'] / med['pymc']:.2f}x; "
              f"cold ratio {cold_ratio:.2f}x")


if __name__ == "__main__":
    main()
