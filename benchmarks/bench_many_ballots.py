"""Ranking models on many ballots (issue 50, items 2 and 3): the cost of one log-likelihood +
gradient and of a MAP fit, for Plackett-Luce and the full item x position model, on generated
data of the sizes users hold.

Run::

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 .venv/bin/python benchmarks/bench_many_ballots.py \\
        [twenty [--old-full-fit]] [twenty-file PATH] [type2] [millions [--ballots N]
        [--top-k-maxiter N] [--skip-pl] [--old-new]] [anchored]

``twenty`` (default): 313,430 distinct top-5 ballots over 20 items
(:func:`~pm_perm.preferences.synthetic.distinct_top_k_ballots`, seed 0: utilities N(0, 1),
Gumbel top-5, ballots drawn until 313,430 distinct orders appeared). For Plackett-Luce, the
PL-anchored model (what ``pm-perm preferences --model full`` fits on these ballots,
:func:`~pm_perm.preferences.anchored.pl_anchored_model`) and the older full model, both at a
fixed ``tau = 0.5``: the model's build, the median CPU time of one ``-log p`` + gradient side by
side for an objective compiled on the ``pm.Data`` orders (every evaluation redoes the work that
depends on the orders alone: casts, ballot lengths, the orders' parse) and for the fits' engine
(``fitting._map_engine``: the orders compiled as a constant, that work done once), and one MAP fit
(``fit_map``) with its iterations (the older full model: no fit, ``--old-full-fit`` to fit it).

``type2``: the MAP of ``pm-perm preferences --model full --fit map`` on these ballots
(:func:`~pm_perm.preferences.fitting.fit_map_type2` of ``pl_anchored_model(data, tau=0.0)``: per
deviation scale ``tau`` of the grid, a MAP fit from the previous optimum and a Laplace Hessian by
forward differences, 19 + 1 gradients at ``tau = 0``, 380 + 1 at ``tau > 0``), with the CPU and
wall time of each fit and Hessian, the whole fit's, and the load average. The CLI itself (reading
the file, the reports) is timed with ``/usr/bin/time`` in ``docs/benchmarks.md``.

``twenty-file PATH``: writes those ballots as a PrefLib file (``.soi``) for the CLI::

    pm-perm preferences PATH --model full --fit map --json out.json

``millions``: 10^7 top-k ballots over 50 candidates (:func:`~pm_perm.preferences.synthetic.
top_k_ballots`, seed 0, lengths 1..10 with probabilities proportional to 0.6^(length - 1)), as
distinct orders with counts: the generator's time, Plackett-Luce's build and MAP time, and the
peak resident memory of the process (``resource.getrusage``) after each step. The top-k model
(issue 50, item 1) is fitted too when ``pm_perm.preferences.models`` has ``top_k_model``
(:data:`TOP_K_BUILDER`, the hook). ``millions --ballots N`` generates N ballots instead (the
profile at 10^5 and 10^6); ``--top-k-maxiter N`` caps the top-k model's L-BFGS-B fit at N
iterations, a fit stopped by the cap reported as not converged with its iterations and time;
``--skip-pl`` fits the top-k model only. With ``--old-new`` the top-k kernel alone is timed
too at the logits of the fit's last point (best of 3 -log p + gradient, CPU s), OLD and NEW
side by side in this process: one DP per short ballot (``top_k_core(..., fast=0)``) against
the shared tables of :mod:`pm_perm.kernels.top_k_ballots` (the default), with their largest
difference.

``anchored`` (issue 53): the type-II fit of the Plackett-Luce-anchored model (V3 of
``benchmarks/bench_small_data.py``: ``fit_map_type2(pl_anchored_model(train, tau=0.0),
patience=None)``, the whole grid) on that benchmark's data set of seed 4 (M = 19, n = 100,
complete, its training ballots), NEW PATH and OLD PATH side by side in this process: old =
central-difference Hessian (``fitting.HESSIAN_SCHEME = "central"``, ``2 n`` gradients) and an
engine compiled without the rewrite ``local_fuse_pl_tilted_loglik_and_grad`` (two tables per
evaluation); new = the defaults (forward differences, ``n + 1`` gradients; one table). Reports
CPU seconds, the ratio, the chosen ``tau``, the largest relative difference of the log evidence
over the grid and the largest difference of the MAP ``D`` and ``u``. ``anchored3``: the same on
the first three scales of the grid (0, 1/16, 1/8), for a loaded machine.

Every model observes ONE ROW PER BALLOT (``expand_counts``, :mod:`pm_perm.ops.ballots`) but the
MAP path never materialises those rows: the summed log-likelihood is rewritten to
``sum(counts * log p)`` over the distinct orders. ``pm.sample``'s ``observed_data`` group does
hold one row per ballot (N x M int64: 4 GB at 10^7 ballots over 50 items); the CLI and
:func:`~pm_perm.preferences.fitting.fit_nuts` are not run here.
"""

from __future__ import annotations

import os
import resource
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from pm_perm.inference import CompiledMAP, MapFitError  # noqa: E402
from pm_perm.preferences import fitting, models  # noqa: E402
from pm_perm.preferences.synthetic import distinct_top_k_ballots, top_k_ballots  # noqa: E402

#: the builder of the top-k model in pm_perm.preferences.models, fitted in ``millions`` when it
#: exists (issue 50, item 1)
TOP_K_BUILDER = "top_k_model"
#: the fixed deviation scale of the full model in ``twenty``
TAU = 0.5


def peak_gb():
    """Peak resident memory of this process so far, GB (Linux reports kB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


#: CPU seconds of this process (user + system) per step, next to the wall times: on a shared
#: machine the wall time of a step depends on the other processes, its CPU time much less
CPU = {}


def timed(fn, *args, **kwargs):
    """``(fn(...), wall seconds)``; the step's CPU seconds in ``CPU[fn.__name__]``."""
    t, c = time.perf_counter(), time.process_time()
    out = fn(*args, **kwargs)
    CPU[getattr(fn, "__name__", "?")] = time.process_time() - c
    return out, time.perf_counter() - t


def cpu_timed(fn, *args, **kwargs):
    """``(fn(...), CPU seconds of this process)``."""
    c = time.process_time()
    out = fn(*args, **kwargs)
    return out, time.process_time() - c


def eval_cost(rm, repeats=7, engine=None):
    """``(construction, first evaluation, median per -log p + gradient: CPU seconds, engine)``;
    ``engine`` (e.g. ``fitting._map_engine``'s) instead of a plain ``CompiledMAP`` of the model."""
    if engine is None:
        engine, t_build = cpu_timed(CompiledMAP, rm.model)
    else:
        engine, t_build = cpu_timed(engine, rm)
    x = engine.x
    _, t_first = cpu_timed(engine.value_and_grad, x)
    rng = np.random.default_rng(0)
    times = [cpu_timed(engine.value_and_grad, x + 0.1 * rng.standard_normal(x.size))[1]
             for _ in range(repeats)]
    return t_build, t_first, float(np.median(times)), engine


def _anchored(data, tau):
    from pm_perm.preferences.anchored import pl_anchored_model

    return pl_anchored_model(data, tau=tau)


def twenty():
    (data, _), _ = timed(distinct_top_k_ballots, 313_430, 20, 5, rng=0)
    print(f"## 20 items: {data.n_distinct} distinct top-5 orders, {data.n_rankings} ballots "
          f"(generated in {CPU['distinct_top_k_ballots']:.1f} CPU s); load average "
          f"{os.getloadavg()[0]:.1f}")
    print("CPU seconds of the process (wall seconds of the fit in brackets); -log p + grad: "
          "median CPU ms, objective on the pm.Data orders / the fits' engine (orders constant)")
    print("| model | build | -log p + grad (ms) | MAP fit (iterations) |")
    print("|---|---|---|---|")
    rows = (("Plackett-Luce", lambda: models.plackett_luce_model(data), True),
            (f"PL-anchored (tau = {TAU})", lambda: _anchored(data, TAU), True),
            (f"older full (tau = {TAU})", lambda: models.full_model(data, tau=TAU),
             "--old-full-fit" in sys.argv))
    for name, build, fit in rows:
        rm, t_model = cpu_timed(build)
        t_plain = eval_cost(rm)[2]
        t_eval = eval_cost(rm, engine=lambda r: fitting._map_engine(r, 10))[2]
        cell = "not run"
        if fit:
            point, t_fit = timed(fitting.fit_map, rm)
            cell = (f"{CPU['fit_map']:.1f} [{t_fit:.1f}] "
                    f"({point['_optimizer']['n_iterations']})")
        print(f"| {name} | {t_model:.2f} | {1e3 * t_plain:.0f} / {1e3 * t_eval:.0f} | {cell} |",
              flush=True)
    print(f"peak memory {peak_gb():.2f} GB; load average {os.getloadavg()[0]:.1f}")


def type2():
    import pm_perm.inference.laplace as laplace
    from pm_perm.inference import map as map_module

    data, _ = distinct_top_k_ballots(313_430, 20, 5, rng=0)
    rm = _anchored(data, 0.0)
    fit, hessian = map_module.CompiledMAP.fit, laplace.negative_hessian

    def fit_logged(self, *a, **k):
        out, t = timed(fit, self, *a, **k)
        print(f"  MAP fit: {out['_info']['iterations']} iterations, {CPU['fit']:.1f} CPU s "
              f"({t:.1f} s wall)", flush=True)
        return out

    def hessian_logged(grad, x, **k):
        H, t = timed(hessian, grad, x, **k)
        print(f"  Hessian over {x.size} coordinates ({x.size + 1} gradients): "
              f"{CPU['negative_hessian']:.1f} CPU s ({t:.1f} s wall)", flush=True)
        return H

    map_module.CompiledMAP.fit, laplace.negative_hessian = fit_logged, hessian_logged
    load = os.getloadavg()[0]
    point, t = timed(fitting.fit_map_type2, rm)
    opt = point["_optimizer"]
    print(f"## PL-anchored model, type-II MAP (the CLI's): {CPU['fit_map_type2']:.1f} CPU s "
          f"({t:.1f} s wall, load average {load:.1f} -> {os.getloadavg()[0]:.1f}); tau = "
          f"{opt['tau']}; evidence " + ", ".join(f"{k:g}: {v:.1f}"
                                                for k, v in opt["log_evidence"].items()))


def _option(name, default):
    """The integer after ``name`` on the command line (``--ballots 1000000``), else default."""
    args = sys.argv[1:]
    return int(float(args[args.index(name) + 1])) if name in args else default


def _fit_row(rm, maxiter):
    """``fit_map(rm)``'s cell of the table: CPU [wall] seconds and iterations (and the
    optimiser's message), or, when the iteration cap stopped it, the same marked "not
    converged"."""
    t, c = time.perf_counter(), time.process_time()
    try:
        point = fitting.fit_map(rm, maxiter=maxiter)
        opt = point["_optimizer"]
        done = f"({opt['n_iterations']}: {opt['message']})"
    except MapFitError as err:
        nit = fitting._COMPILED_MAP[rm.model].result.nit
        why = f"stopped at maxiter = {maxiter}" if nit >= maxiter else str(err)[:200]
        done = f"(**not converged** after {nit} iterations: {why})"
    return f"{time.process_time() - c:.0f} [{time.perf_counter() - t:.0f}] {done}"


def _top_k_kernel_old_new(engine, data):
    """One line: the top-k kernel's -log p + gradient at the engine's point (the logits ``W``),
    one DP per short ballot (old) and from the shared tables (new), best of 3 CPU s, and their
    differences."""
    from pm_perm.kernels.top_k import top_k_core

    point = engine.unravel()
    W = dict(zip(engine._out_names, engine._values(*(point[n] for n in engine._names)),
                 strict=True))["W"][0]
    orders, counts = np.ascontiguousarray(data.orders, np.int64), data.counts.astype(np.float64)
    out = {}
    for fast in (0, -1):
        values, grad = np.empty(len(orders)), np.empty(W.shape)
        runs = [cpu_timed(top_k_core, W, orders, counts, values, grad, True, fast)
                for _ in range(3)]
        out[fast] = (min(t for _, t in runs), runs[0][0], grad.copy())
    (t0, v0, g0), (t1, v1, g1) = out[0], out[-1]
    print(f"top-k kernel -log p + grad (CPU s, best of 3): one DP per short ballot {t0:.2f}, "
          f"shared tables {t1:.2f} ({t0 / t1:.0f}x); |difference| total {abs(v1 - v0):.1e} "
          f"(relative {abs(v1 - v0) / abs(v0):.1e}), gradient {np.abs(g1 - g0).max():.1e} "
          f"(largest entry {np.abs(g0).max():.1e})", flush=True)


def millions():
    n_ballots = _option("--ballots", 10_000_000)
    print(f"## {n_ballots:,} ballots over 50 candidates (peak memory after imports "
          f"{peak_gb():.2f} GB)")
    lengths = np.r_[0.0, 0.6 ** np.arange(10)]
    (data, _), t_gen = timed(top_k_ballots, n_ballots, 50, 10, lengths=lengths, rng=0)
    print(f"generated {data.n_rankings} ballots, {data.n_distinct} distinct orders, in "
          f"{CPU['top_k_ballots']:.0f} CPU s ({t_gen:.0f} s wall); peak memory "
          f"{peak_gb():.2f} GB", flush=True)
    builders = [] if "--skip-pl" in sys.argv else [("Plackett-Luce",
                                                    models.plackett_luce_model)]
    if hasattr(models, TOP_K_BUILDER):
        builders.append(("top-k", getattr(models, TOP_K_BUILDER)))
    else:
        print(f"(no models.{TOP_K_BUILDER} yet: the top-k model is not run)")
    print("CPU seconds of the process (wall seconds of the fit in brackets)")
    print("| model | build | CompiledMAP | -log p + grad | MAP fit (iterations) | "
          "peak memory GB |")
    print("|---|---|---|---|---|---|")
    for name, build in builders:
        rm, t_model = cpu_timed(build, data)
        t_engine, _, t_eval, _ = eval_cost(rm, repeats=3)
        maxiter = _option("--top-k-maxiter", 20_000) if name == "top-k" else 20_000
        print(f"| {name} | {t_model:.1f} | {t_engine:.1f} | {t_eval:.2f} | "
              f"{_fit_row(rm, maxiter)} | {peak_gb():.2f} |", flush=True)
        if name == "top-k" and "--old-new" in sys.argv:
            _top_k_kernel_old_new(fitting._COMPILED_MAP[rm.model], data)


def anchored(grid=None):
    from pathlib import Path

    from pm_perm._modes import PYTHON_MODE
    from pm_perm.preferences.anchored import pl_anchored_model

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_small_data import small_data_set

    train, _ = small_data_set(4, "complete")
    print(f"## PL-anchored (V3) type-II fit, M = {train.n_items}, {train.n_rankings} ballots "
          f"(small-data seed 4, complete), grid {'TAU_GRID' if grid is None else grid}")
    old_mode = PYTHON_MODE.excluding("local_fuse_pl_tilted_loglik_and_grad")
    print("| path | CPU s (wall) | tau | log evidence at tau |")
    print("|---|---|---|---|")
    out = {}
    for label, scheme, mode in (("new", "forward", None), ("old", "central", old_mode)):
        fitting.HESSIAN_SCHEME = scheme
        rm = pl_anchored_model(train, tau=0.0)
        if mode is not None:  # the engine fit_map_type2 will use, compiled the old way
            fitting._COMPILED_MAP[rm.model] = CompiledMAP(rm.model, mode=mode)
        point, wall = timed(fitting.fit_map_type2, rm, seed=4, patience=None, grid=grid)
        out[label] = (point, CPU["fit_map_type2"])
        t = point["_optimizer"]["tau"]
        print(f"| {label} | {out[label][1]:.1f} ({wall:.1f}) | {t:g} | "
              f"{point['_optimizer']['log_evidence'][t]:.6f} |", flush=True)
    fitting.HESSIAN_SCHEME = "forward"
    (pn, cn), (po, co) = out["new"], out["old"]
    eo, en = po["_optimizer"]["log_evidence"], pn["_optimizer"]["log_evidence"]
    rel = max(abs(en[t] - eo[t]) / abs(eo[t]) for t in eo)
    print(f"old / new CPU: {co / cn:.1f}x; largest relative difference of the log evidence over "
          f"the grid {rel:.1e}; MAP D, u differ by at most "
          f"{np.abs(pn['D'] - po['D']).max():.1e}, {np.abs(pn['u'] - po['u']).max():.1e}",
          flush=True)


def twenty_file():
    from pm_perm.preferences.preflib import write_preflib

    path = sys.argv[sys.argv.index("twenty-file") + 1]
    data, _ = distinct_top_k_ballots(313_430, 20, 5, rng=0)
    print(f"wrote {write_preflib(data, path, title='twenty')}: {data.n_distinct} orders, "
          f"{data.n_rankings} ballots")


if __name__ == "__main__":
    PARTS = {"twenty-file": twenty_file, "twenty": twenty, "type2": type2, "millions": millions,
             "anchored": anchored, "anchored3": lambda: anchored(grid=fitting.TAU_GRID[:3])}
    for part in [a for a in sys.argv[1:] if a in PARTS] or ["twenty"]:
        PARTS[part]()
