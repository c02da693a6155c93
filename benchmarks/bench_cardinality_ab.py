"""A/B of the count-label kernels: this checkout against an older commit's
``pm_perm/kernels/cardinality.py``, in ONE process (so the machine's load hits both).

Run from the repository root (``PYTHONPATH=$PWD``, ``NUMBA_NUM_THREADS=1``):
``.venv/bin/python benchmarks/bench_cardinality_ab.py --old 1e870d9``

The old kernel file is taken with ``git show <old>:pm_perm/kernels/cardinality.py`` into a
temporary folder and compiled without numba's cache. First both versions run on 20,000 random
logit vectors (D = 1..39, and 64..255 for one in 50, where value + marginals keep checkpoints
instead of the whole suffix table; scales 0.1 to 1,000, some ``-inf``; every count k):
``log e_k`` with and without the marginals, ``Cov(y | k) v``, every ``log e_j`` and
conditional-Bernoulli draws (same seeds); the script reports how many cases differ in any bit.
Then it times value + marginals and the value alone on the count-labels guide's shape (400
rows, D = 8, k = 1..4), and value + marginals at D = 100, k = 10 and at D = 1,000, k = 100 (20
rows each), alternating the two versions, best of 7, in nanoseconds per row.
"""

from __future__ import annotations

import argparse
import time

import numba
import numpy as np
from _ab import load_old  # benchmarks/_ab.py

from pm_perm.kernels import count_draws, esp, esp_all

# the kernels of the old single file pm_perm/kernels/cardinality.py, now in three modules
new = argparse.Namespace(**{name: getattr(module, name) for module in (esp, esp_all, count_draws)
                            for name in module.__all__})


def _same(a, b):
    return np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)


def count_differences(old, n_cases=20_000):
    rng = np.random.default_rng(0)
    differ = 0
    for case in range(n_cases):
        D = int(rng.integers(1, 40)) if case % 50 else int(rng.integers(64, 256))
        theta = rng.normal(size=D) * [0.1, 1, 5, 30, 1e3][case % 5]
        if case % 7 == 0:
            theta[rng.random(D) < 0.3] = -np.inf
        k = int(rng.integers(0, D + 1))
        v = rng.normal(size=D)
        a, b = old.log_esp_and_marginals_core(theta, k), new.log_esp_and_marginals_core(theta, k)
        same = (_same(a[0], b[0]) and _same(a[1], b[1])
                and _same(old.log_esp_core(theta, k), new.log_esp_core(theta, k))
                and _same(old.conditional_covariance_dot_core(theta, k, v),
                          new.conditional_covariance_dot_core(theta, k, v)))
        if case % 10 == 0:
            kf = min(k, int(np.isfinite(theta).sum()))
            same = (same and _same(old.log_esp_all_core(theta, D), new.log_esp_all_core(theta, D))
                    and _same(old.sample_conditional_bernoulli_core(np.random.default_rng(case),
                                                                    theta, kf),
                              new.sample_conditional_bernoulli_core(np.random.default_rng(case),
                                                                    theta, kf)))
        differ += not same
    return differ, n_cases


@numba.njit
def _value_and_marginals(core, theta, k, reps):
    s = 0.0
    for _ in range(reps):
        for i in range(theta.shape[0]):
            value, marginals = core(theta[i], k[i])
            s += value + marginals[0]
    return s


@numba.njit
def _value(core, theta, k, reps):
    s = 0.0
    for _ in range(reps):
        for i in range(theta.shape[0]):
            s += core(theta[i], k[i])
    return s


def _time(cases, run, theta, k, reps):
    """Best of 7 of ``run(core, ...)`` per version, alternating, in ns per row."""
    for core in cases.values():
        run(core, theta, k, 1)
    best = dict.fromkeys(cases, np.inf)
    for _ in range(7):
        for name, core in cases.items():
            t0 = time.perf_counter()
            run(core, theta, k, reps)
            best[name] = min(best[name], time.perf_counter() - t0)
    return {name: t / reps / theta.shape[0] * 1e9 for name, t in best.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--old", required=True, help="commit whose cardinality.py is the reference")
    args = parser.parse_args()
    old = load_old(args.old, "cardinality")
    differ, n = count_differences(old)
    print(f"cases that differ in any bit: {differ} of {n}")
    rng = np.random.default_rng(0)
    both = {"old": old.log_esp_and_marginals_core, "new": new.log_esp_and_marginals_core}
    values = {"old": old.log_esp_core, "new": new.log_esp_core}
    print(f"ns per row, best of 7; old = {args.old}, new = this checkout")
    print("| case | old | new | new / old |")
    print("|---|---|---|---|")
    theta = rng.normal(size=(400, 8))
    k = rng.integers(1, 5, size=400)
    rows = [("value + marginals, 400 x 8, k 1-4", _time(both, _value_and_marginals, theta, k, 200)),
            ("value, 400 x 8, k 1-4", _time(values, _value, theta, k, 200))]
    for D, kk in ((100, 10), (1000, 100)):
        theta = rng.normal(size=(20, D))
        k = np.full(20, kk)
        rows.append((f"value + marginals, 20 x {D}, k {kk}",
                     _time(both, _value_and_marginals, theta, k, max(1, 20_000 // D))))
    for label, t in rows:
        print(f"| {label} | {t['old']:.0f} | {t['new']:.0f} | {t['new'] / t['old']:.2f} |")

if __name__ == "__main__":
    main()
