"""A/B timing of the Huber-Law accept-reject loop: this checkout against an older commit's
``pm_perm/kernels/huber_law.py``, alternated in ONE process (so the machine's load hits both).

Run from the repository root (``PYTHONPATH=$PWD``, ``NUMBA_NUM_THREADS=1``):
``.venv/bin/python benchmarks/bench_huber_law_ab.py --old e11de50``

The old kernel file is taken with ``git show <old>:pm_perm/kernels/huber_law.py`` into a
temporary folder and compiled without numba's cache. First both versions draw from 60 random
matrices (M = 1..29, some forbidden edges) with the same seeds, and the draws, accepted counts and
trial counts must be identical; then both draw 4 samples for the first 4 matchings of the
M = 40 example of docs/howto/beyond_exact_limit.md (same seed, so the same trials), in alternating
order, best of ``--repeats``. Prints microseconds per trial and the ratio new / old.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _ab import load_old  # benchmarks/_ab.py

from pm_perm.kernels import huber_law as new


def check_identical(old):
    rng = np.random.default_rng(5)
    for case in range(60):
        M = int(rng.integers(1, 30))
        W = rng.normal(scale=rng.uniform(0.1, 3), size=(M, M))
        if case % 5 == 0:
            W[rng.random((M, M)) < 0.2] = -np.inf
            W[range(M), range(M)] = 0.0
        A, _ = new.huber_law_scale(W)
        a = old.huber_law_sample_core(np.random.default_rng(case), A, 5, 10**6)
        b = new.huber_law_sample_core(np.random.default_rng(case), A, 5, 10**6)
        if not (np.array_equal(a[0], b[0]) and a[1:] == b[1:]):
            raise SystemExit(f"matrix {case} (M = {M}): the draws differ: {a[1:]} vs {b[1:]}")
    print("draws, accepted and trial counts identical on 60 random matrices")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--old", required=True, help="commit whose huber_law.py is the reference")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    old = load_old(args.old, "huber_law")
    check_identical(old)
    x = np.random.default_rng(0).normal(size=(4, 40, 40, 2))
    x[:, range(40), range(40), 0] += 2.0
    W = x @ [1.0, -0.5]
    best = {"old": np.inf, "new": np.inf}
    trials = {}
    for _ in range(args.repeats):
        for name, module in (("old", old), ("new", new)):
            t0 = time.perf_counter()
            _, (_, n_trials) = module.huber_law_sample(W, rng=1, return_stats=True)
            best[name] = min(best[name], time.perf_counter() - t0)
            trials[name] = n_trials
    assert trials["old"] == trials["new"], trials
    for name in ("old", "new"):
        print(f"{name} ({args.old if name == 'old' else 'this checkout'}): {best[name]:.3f} s for "
              f"4 draws, {trials[name]} trials, {best[name] / trials[name] * 1e6:.2f} us per trial")
    print(f"new / old: {best['new'] / best['old']:.2f}")


if __name__ == "__main__":
    main()
