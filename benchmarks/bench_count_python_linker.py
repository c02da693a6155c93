"""The count Ops on PyTensor's Python linker: one compiled loop per batch against per-row calls.

PyTensor's ``Blockwise`` runs a core Op's ``perform`` once per row on its Python linker (the linker
of pm_perm's MAP fits and of ``FAST_COMPILE``). The count Ops (``pm_perm.ops.cardinality``) name a
batched function in their ``gufunc_spec`` instead, which runs the whole batch in one compiled
loop over the C kernel. This script times both, side by side in one process, on the same
batches: the per-row variant is the same core Op with ``gufunc_spec`` removed. Functions timed:
``LogESPAndMarginals`` (value and marginals: what logp + gradient evaluate), ``LogESP`` (value
only) and ``ConditionalCovarianceDot`` (Hessian-vector products), logits N(0, 1), k uniform in
1..D-1; best of 7 rounds, the two variants alternating; the results are checked equal.

Run (from the project root)::

    NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_count_python_linker.py
"""

from __future__ import annotations

import argparse

import numpy as np
from _timing import best_time  # benchmarks/_timing.py


def _functions(per_row):
    import pytensor
    import pytensor.tensor as pt

    from pm_perm._modes import PYTHON_MODE
    from pm_perm.ops import cardinality as C
    from pm_perm.ops._blockwise import EmptyBatchBlockwise

    def op(cls):
        if not per_row:
            return EmptyBatchBlockwise(cls())
        variant = type(f"{cls.__name__}PerRow", (cls,), {"gufunc_spec": None})
        return EmptyBatchBlockwise(variant())

    th, k, v = pt.matrix("th"), pt.lvector("k"), pt.matrix("v")
    make = {
        "value + marginals": ([th, k], op(C.LogESPAndMarginals)(th, k)),
        "value": ([th, k], [op(C.LogESP)(th, k)]),
        "Hessian-vector": ([th, k, v], [op(C.ConditionalCovarianceDot)(th, k, v)]),
    }
    return {name: pytensor.function(inputs, outputs, mode=PYTHON_MODE)
            for name, (inputs, outputs) in make.items()}


def _best(f, args, repeats):
    """Best seconds per call over 7 rounds of ``repeats`` calls (after a warm-up call)."""
    return best_time(lambda: [f(*args) for _ in range(repeats)], 7) / repeats


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="100x8,1000x10,5000x10", help="rows x D, comma separated")
    args = p.parse_args()
    rows_fn, batched_fn = _functions(per_row=True), _functions(per_row=False)
    rng = np.random.default_rng(0)
    print("| function | rows x D | per row (ms) | batched (ms) | per-row / batched |")
    print("|---|---|---|---|---|")
    for size in args.sizes.split(","):
        n, D = (int(s) for s in size.split("x"))
        data = {"th": rng.normal(size=(n, D)), "k": rng.integers(1, D, size=n),
                "v": rng.normal(size=(n, D))}
        for name in rows_fn:
            inputs = [data["th"], data["k"]] + ([data["v"]] if name == "Hessian-vector" else [])
            for a, b in zip(rows_fn[name](*inputs), batched_fn[name](*inputs), strict=True):
                np.testing.assert_array_equal(a, b)
            repeats = max(3, 20_000 // n)
            t_rows = t_batched = np.inf
            for _ in range(2):  # alternate the variants
                t_rows = min(t_rows, _best(rows_fn[name], inputs, repeats))
                t_batched = min(t_batched, _best(batched_fn[name], inputs, repeats))
            print(f"| {name} | {n} x {D} | {1e3 * t_rows:.2f} | {1e3 * t_batched:.2f} "
                  f"| {t_rows / t_batched:.1f}x |")


if __name__ == "__main__":
    main()
