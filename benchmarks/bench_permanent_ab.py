"""A/B timing of the DP's value + marginals passes: this checkout against an older commit's
``pm_perm/kernels/permanent.py``, alternated in ONE process (so the machine's load hits both).

Run from the repository root (``PYTHONPATH=$PWD``, ``NUMBA_NUM_THREADS=1``):
``.venv/bin/python benchmarks/bench_permanent_ab.py --old 394dd01``

The old kernel file is taken with ``git show <old>:pm_perm/kernels/permanent.py`` into a temporary
folder and compiled without numba's cache; both versions run ``_forward`` then ``_backward`` with
marginals on the same dual-scaled ``N(0, 1)`` matrix, in alternating order. Prints the minimum and
median milliseconds of each and the share of pairs in which the new version was faster.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _ab import load_old  # benchmarks/_ab.py

from pm_perm.kernels import permanent as new_kernel
from pm_perm.kernels.assignment import dual_scaled


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--old", default="394dd01")
    args = p.parse_args(argv)
    old_kernel = load_old(args.old, "permanent")
    for M, n in ((20, 40), (24, 8)):
        B, _, _ = dual_scaled(np.random.default_rng(M).normal(size=(M, M)))
        work = np.empty(1 << M)
        P = np.zeros((M, M))

        def run(k, B=B, work=work, P=P):
            P[:] = 0.0
            k._forward(B, work)
            k._backward(B, work, work, P, True)

        run(old_kernel)
        run(new_kernel)
        times = {"old": [], "new": []}
        for i in range(n):
            order = (("old", old_kernel), ("new", new_kernel))
            for name, k in order if i % 2 == 0 else order[::-1]:
                t = time.perf_counter()
                run(k)
                times[name].append((time.perf_counter() - t) * 1e3)
        to, tn = np.array(times["old"]), np.array(times["new"])
        print(f"M = {M}: old ({args.old}) min {to.min():.2f} median {np.median(to):.2f} ms | "
              f"new min {tn.min():.2f} median {np.median(tn):.2f} ms | new faster in "
              f"{np.mean(tn < to):.0%} of {n} pairs")


if __name__ == "__main__":
    main()
