"""MAP fits on PyTensor's Python linker (pm_perm's default) against numba, warm, side by side.

``pm_perm.inference.map_path`` and ``CompiledMAP`` compile the log-posterior and gradient on the
Python linker (``pm_perm._modes.PYTHON_MODE``) unless given ``mode=None`` (PyTensor's default
backend, numba). On a new machine that saves numba's compilation of the graph (10-30 s for a
ranking model; see docs/benchmarks.md, "First use"). This script measures what it costs once the
caches are warm: the wall time of whole fits (building the function included, which is loading
it from PyTensor's cache for numba), each model fitted with both backends in turn in one
process, best of ``--repeats`` after a warm-up, and the two optima compared.

Run (one thread; ``--letor`` adds the MQ2008 fold-1 rankers, about 3 minutes, needs
``../shared/data/MQ2008_LETOR4``)::

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 .venv/bin/python benchmarks/bench_map_backend.py --letor

Models: the ranking-data models of :mod:`pm_perm.preferences.models` (Plackett-Luce, full, a
3-bloc mixture) on 600 simulated partial ballots of 5 items (the rankings guide's example);
the learned matching model (200 graphs of M = 8, d = 4, as the demo) at one prior scale and at
five with validation; with ``--letor`` ``OrdinalRanker`` and ``RankMatch(M=3)`` on MQ2008 fold 1
(five prior scales; RankMatch one: about 10^4 small permanents per evaluation, which the Python
linker runs in one compiled loop over the kernel, ``pm_perm.ops.permanent._KernelBlockwise``).
"""

from __future__ import annotations

import argparse
import contextlib
import functools

import numpy as np
import pymc as pm
from _timing import best_time  # benchmarks/_timing.py

import pm_perm
from pm_perm import _map
from pm_perm._modes import PYTHON_MODE

BACKENDS = {"python": PYTHON_MODE, "numba": None}


@contextlib.contextmanager
def _forced(module, mode):
    """``module.map_path`` forced to ``mode`` inside the block (the fitting code calls
    ``map_path`` by name; a ``mode`` it passes itself is overridden), restored after it."""
    original = module.map_path

    def forced(*args, **kwargs):
        return original(*args, **{**kwargs, "mode": mode})

    module.map_path = forced
    try:
        yield
    finally:
        module.map_path = original


def compare(label, fit, repeats):
    """``fit(mode) -> objective`` (the minimised negative log-posterior at the optimum; for the
    matching model the negative log-likelihood at the chosen ``theta``) timed
    for both backends; prints the time ratio and the objectives' relative gap (the optimiser's
    tolerance, not the backends' arithmetic, sets it)."""
    times, outs = {}, {}
    for name, mode in BACKENDS.items():
        runs = []  # the objective of every call (warm-up included); best_time keeps only times
        times[name] = best_time(lambda mode=mode, runs=runs: runs.append(fit(mode)), repeats)
        outs[name] = runs[-1]
    gap = abs(outs["python"] - outs["numba"]) / max(1.0, abs(outs["numba"]))
    print(f"{label:40s} python {times['python']:7.2f} s  numba {times['numba']:7.2f} s  "
          f"ratio {times['python'] / times['numba']:5.2f}  objective gap {gap:.0e}", flush=True)


def rankings_models(repeats):
    from pm_perm.preferences import models
    from pm_perm.preferences.synthetic import simulate_rankings

    sim = simulate_rankings(600, utilities=np.array([1.0, 0.6, 0.2, -0.3, -0.8]),
                            length_probs=[0, 0, 0.4, 0.3, 0, 0.3], rng=0)
    for label, build in [("rankings: Plackett-Luce", models.plackett_luce_model),
                         ("rankings: full", models.full_model),
                         ("rankings: full, 3 blocs",
                          functools.partial(models.full_model, components=3))]:
        def fit(mode, build=build):
            rm = build(sim)
            _, res = _map.CompiledMAP(rm.model, mode=mode).fit(seed=0)
            return float(_map.check_optimum(res).fun)
        compare(label, fit, repeats)


def matching(repeats):
    from pm_perm.matching import model as matching_module

    rng = np.random.default_rng(0)
    theta = np.array([1.0, -0.5, 0.3, 0.2])
    x = rng.normal(size=(200, 8, 8, 4))
    x[:, np.arange(8), np.arange(8), 0] += 1.5
    y = pm.draw(pm_perm.PermutationExpFamily.dist(logits=x @ theta), random_seed=rng)
    for label, kwargs in [("matching M=8, 200 graphs, 1 scale", {}),
                          ("matching M=8, 200 graphs, 5 scales", {
                              "prior_sigmas": (0.1, 0.3, 1.0, 3.0, 10.0),
                              "validation": (x[:50], y[:50])})]:
        def fit(mode, kwargs=kwargs):
            with _forced(matching_module, mode):
                theta = matching_module.fit_map(x, y, **kwargs).theta
            return -float(matching_module.log_likelihood(x, y, theta))
        compare(label, fit, repeats)


def letor(repeats, data_root):
    from pm_perm.datasets.mq2008 import load_mq2008_fold
    from pm_perm.learning_to_rank import ordinal, rankmatch

    train, valid, _ = load_mq2008_fold(1, data_root)

    def fit_ordinal(mode):
        with _forced(ordinal, mode):
            r = ordinal.OrdinalRanker().fit_map(train, valid)
        return float(r.map_results_[r.prior_sigma_].fun)

    def fit_rankmatch(mode):
        with _forced(rankmatch, mode):
            r = rankmatch.RankMatch(M=3, seed=0, prior_sigmas=(1.0,)).fit_map(train, valid)
        return float(r.map_results_[r.prior_sigma_].fun)

    compare("ordinal, MQ2008 fold 1, 5 scales", fit_ordinal, repeats)
    compare("RankMatch M=3, MQ2008 fold 1, 1 scale", fit_rankmatch, 1)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--letor", action="store_true", help="also the MQ2008 rankers")
    parser.add_argument("--data-root", default=None)
    args = parser.parse_args(argv)
    rankings_models(args.repeats)
    matching(args.repeats)
    if args.letor:
        letor(args.repeats, args.data_root)


if __name__ == "__main__":
    main()
