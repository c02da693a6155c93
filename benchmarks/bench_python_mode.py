"""PYTHON_MODE with and without inlining PyTensor's symbolic Ops, side by side in one run.

PyTensor writes ``softmax`` and ``log_softmax`` as Ops holding an inner graph; without the fusion
pass (which ``pm_perm._modes.PYTHON_MODE`` leaves out) they stay Ops, and PyTensor links their
inner graphs with C thunks even under the Python linker, so the first MAP fit of a model with a
simplex (a Dirichlet) or mixture weights runs the C compiler on a new machine. PYTHON_MODE
inlines them (``pm_perm._modes``). This script measures both variants of the MAP functions of
``pm_perm.preferences.models.full_model`` (600 simulated partial ballots of 5 items, one and three
blocs):

* ``cold``: each variant in a FRESH subprocess with a NEW empty PyTensor cache and a warm numba
  cache (one earlier process compiled pm_perm's kernels into a folder made for this run, so
  their compilation is not counted): CPU time (the process and its children, i.e. the C
  compiler) of building the value-and-gradient function and the untransformed-values function
  (``FAST_COMPILE`` before the change, as ``pm.find_MAP`` does) and calling each once, and the
  number of C modules compiled;
* ``warm``: the value-and-gradient function of each variant built in this process, best of 7
  rounds of 200 calls each, the two variants alternating.

Run: ``OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 .venv/bin/python benchmarks/bench_python_mode.py``
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

from _timing import run_child  # benchmarks/_timing.py

VARIANTS = ("without inlining", "PYTHON_MODE")


def _modes(variant):
    """(value-and-gradient mode, untransformed-values mode) of a variant."""
    from pm_perm._modes import INLINE_SYMBOLIC_TAG, PYTHON_MODE

    if variant == "PYTHON_MODE":
        return PYTHON_MODE, PYTHON_MODE
    return PYTHON_MODE.excluding(INLINE_SYMBOLIC_TAG), "FAST_COMPILE"


def _model(components):
    import numpy as np

    from pm_perm.preferences import models as rmod
    from pm_perm.preferences.synthetic import rank_one_logits, simulate_rankings

    data = simulate_rankings(600, logits=rank_one_logits(np.array([1.0, 0.5, 0.0, -0.5, -1.0])),
                             length_probs=[0, .3, .3, .2, .1, .1], rng=0)
    return rmod.full_model(data, components=components).model


def _functions(model, variant):
    from pm_perm.inference import _grad_raveled

    vg_mode, values_mode = _modes(variant)
    vars_ = list(model.value_vars)
    loss = -model.logp(jacobian=False)
    f = model.compile_fn([loss, _grad_raveled(loss, vars_)], inputs=vars_, point_fn=False,
                         on_unused_input="ignore", mode=vg_mode)
    values = model.compile_fn(model.unobserved_value_vars, inputs=vars_, point_fn=False,
                              on_unused_input="ignore", mode=values_mode)
    ip = model.initial_point()
    return f, values, [ip[v.name] for v in vars_]


def _cpu():
    own, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF,
                                                 resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def child(variant, components):
    import json

    import pytensor

    model = _model(components)
    cpu0 = _cpu()
    f, values, args = _functions(model, variant)
    f(*args)
    values(*args)
    cpu = _cpu() - cpu0
    modules = sum(1 for _ in Path(pytensor.config.compiledir).glob("tmp*/*.so"))
    print("RESULT " + json.dumps({"cpu": cpu, "c_modules": modules}))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]))
        return
    import numpy as np

    root = Path(__file__).resolve().parents[1]
    work = Path(tempfile.mkdtemp(prefix="bench_python_mode-"))
    try:
        base = dict(os.environ, NUMBA_CACHE_DIR=str(work / "numba"),
                    PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))

        def env(name):
            return dict(base, PYTENSOR_FLAGS=f"base_compiledir={work / name}")

        run_child(__file__, ["--child", "PYTHON_MODE", "3"], env("prime"))  # numba kernels
        print("cold: build + one call of the MAP functions, empty PyTensor cache, warm numba "
              "cache, CPU s (with the C compiler's)")
        for components in (1, 3):
            for i, variant in enumerate(VARIANTS):
                r = run_child(__file__, ["--child", variant, str(components)],
                              env(f"cold-{components}-{i}"))
                print(f"  full model, {components} bloc(s), {variant:17s} {r['cpu']:6.2f} s  "
                      f"C modules compiled: {r['c_modules']}")
        print("warm: value and gradient per call, best of 7 x 200 calls")
        for components in (1, 3):
            model = _model(components)
            fns = {v: _functions(model, v) for v in VARIANTS}
            best = dict.fromkeys(VARIANTS, np.inf)
            for _ in range(7):
                for v, (f, _values, a) in fns.items():
                    f(*a)
                    t = time.perf_counter()
                    for _ in range(200):
                        f(*a)
                    best[v] = min(best[v], (time.perf_counter() - t) / 200)
            old, new = (best[v] * 1e6 for v in VARIANTS)
            print(f"  full model, {components} bloc(s): without inlining {old:6.0f} us, "
                  f"PYTHON_MODE {new:6.0f} us, ratio {new / old:.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
