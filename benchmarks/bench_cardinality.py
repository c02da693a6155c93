"""Benchmarks for the conditional-Bernoulli normaliser (issue 3): speed and accuracy.

Run: ``NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_cardinality.py``
(``--quick`` skips D = 10,000). Prints Markdown tables. All timings are best of several runs,
measured side by side in one process:

* ``tilted``: the njit cores ``log_esp_core`` (value) and ``log_esp_and_marginals_core``
  (value + marginals) of :mod:`pm_perm.kernels.esp`, called directly like the
  reference (the public wrappers add ~15 us of input validation per call);
* ``log-space``: the textbook log-space DP (``logaddexp`` recursion), defined here in numba;
  value O(D k), value + marginals by forward and backward log tables (O(D k) memory);
* ``scipy``: ``scipy.stats.poisson_binom(sigmoid(theta)).pmf(k)`` turned into ``log e_k``;
* ``op``: value alone, and value + gradient (one Op run), through the PyTensor Ops compiled
  with the default numba backend;
* all k at once: guarded tilted DP, log-space DP and the FFT product tree.

Accuracy: relative error of ``log e_k`` and max abs error of the marginals against an mpmath
reference (60 significant digits) at D = 100 and 1,000; at D = 10,000 against a long-double
(64-bit mantissa) tilted DP for the value and six marginals.
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from _harness import best_time  # benchmarks/_harness.py
from numba import njit
from scipy import stats

from pm_perm.kernels.esp import log_esp_and_marginals, log_esp_and_marginals_core, log_esp_core
from pm_perm.kernels.esp_all import (
    _log_esp_all_tilted,
    _logaddexp,
    log_esp_all,
    log_esp_all_logspace,
)
from pm_perm.kernels.esp_fft import log_esp_all_fft


@njit(cache=True)
def logspace_value(theta, k):
    f = np.full(k + 1, -np.inf)
    f[0] = 0.0
    for d in range(theta.shape[0]):
        t = theta[d]
        for j in range(min(d + 1, k), 0, -1):
            f[j] = _logaddexp(f[j], f[j - 1] + t)
    return f[k]


@njit(cache=True)
def logspace_value_and_marginals(theta, k):
    D = theta.shape[0]
    F = np.full((D + 1, k + 1), -np.inf)  # F[d] = prefix of items < d
    G = np.full((D + 2, k + 1), -np.inf)  # G[d] = suffix of items >= d
    F[0, 0] = 0.0
    for d in range(D):
        F[d + 1] = F[d]
        for j in range(1, k + 1):
            F[d + 1, j] = _logaddexp(F[d, j], F[d, j - 1] + theta[d])
    G[D, 0] = 0.0
    for d in range(D - 1, -1, -1):
        G[d] = G[d + 1]
        for j in range(1, k + 1):
            G[d, j] = _logaddexp(G[d + 1, j], G[d + 1, j - 1] + theta[d])
    logz = F[D, k]
    marg = np.empty(D)
    for d in range(D):
        s = -np.inf
        for j in range(k):
            s = _logaddexp(s, F[d, j] + G[d + 1, k - 1 - j])
        marg[d] = math.exp(theta[d] + s - logz)
    return logz, marg


def scipy_log_esp(theta, k):
    p = 1.0 / (1.0 + np.exp(-theta))
    with np.errstate(divide="ignore"):  # the pmf underflows to 0 for spread logits
        return float(np.log(stats.poisson_binom(p).pmf(k)) + np.logaddexp(0.0, theta).sum())


def mp_log_esp_and_marginals(theta, k, dps=60):
    """High-precision reference in mpmath: prefix and suffix tables of e_j (positive sums
    only, no cancellation), value ``e_k``, marginals ``w_d sum_j F_{<d}[j] G_{>d}[k-1-j] / e_k``."""
    import mpmath  # the `bench` extra; imported here so that --help works without it

    with mpmath.workdps(dps):
        w = [mpmath.exp(mpmath.mpf(float(t))) for t in theta]
        D = len(w)

        def table(order):
            rows = [None] * (D + 1)
            e = [mpmath.mpf(1)] + [mpmath.mpf(0)] * k
            rows[0] = list(e)
            for i, d in enumerate(order):
                for j in range(k, 0, -1):
                    e[j] += w[d] * e[j - 1]
                rows[i + 1] = list(e)
            return rows

        F = table(range(D))  # F[d] = items < d
        Gr = table(range(D - 1, -1, -1))  # Gr[i] = the last i items
        ek = F[D][k]
        marg = np.empty(D)
        for d in range(D):
            g = Gr[D - d - 1]  # items > d
            s = mpmath.fsum(F[d][j] * g[k - 1 - j] for j in range(k))
            marg[d] = float(w[d] * s / ek)
        return float(mpmath.log(ek)), marg


def longdouble_reference(theta, k, items):
    """Extended-precision (x87 long double, 64-bit mantissa) reference for large D:
    ``log e_k`` and the marginals of ``items``, each by a full tilted probability DP (positive
    sums only) in long double; rounding error ~ D * 1e-19."""
    ld = np.longdouble
    from scipy.optimize import brentq
    from scipy.special import expit

    # the shift that puts the tilted pmf's mean at k (any shift is exact; this one is accurate)
    c = ld(brentq(lambda c: expit(theta - c).sum() - k, theta.min() - 50, theta.max() + 50))
    x = theta.astype(ld) - c
    p = 1 / (1 + np.exp(-x))
    r = 1 / (1 + np.exp(x))

    def pmf(skip):
        q = np.zeros(k + 1, dtype=ld)
        q[0] = 1
        for d in range(theta.shape[0]):
            if d != skip:
                q[1:] = q[1:] * r[d] + q[:-1] * p[d]
                q[0] *= r[d]
        return q

    qk = pmf(-1)[k]
    const = k * c + np.sum(np.logaddexp(ld(0), x))
    value = float(const + np.log(qk))
    marg = np.array([float(p[d] * pmf(d)[k - 1] / qk) for d in items])
    return value, marg




def speed_table(sizes, rng):
    import pytensor
    import pytensor.tensor as pt

    from pm_perm.ops.cardinality import log_esp as op_log_esp

    th_var = pt.vector("theta")
    k_var = pt.lscalar("k")
    v = op_log_esp(th_var, k_var)
    f_op = pytensor.function([th_var, k_var], [v, pt.grad(v, th_var)])
    f_val = pytensor.function([th_var, k_var], v)  # rewritten to the value-only Op

    print("| D | k | tilted value (ms) | log-space value (ms) | speed-up "
          "| tilted value+marginals (ms) | log-space value+marginals (ms) | speed-up "
          "| Op value (ms) | Op value+grad (ms) | scipy poisson_binom (ms) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for D in sizes:
        k = D // 10
        theta = rng.normal(size=D)
        rep = 20 if D <= 1000 else 5
        args = (theta, k)
        t_v = best_time(lambda: log_esp_core(*args), rep)  # noqa: B023 (called right away)
        t_lv = best_time(lambda: logspace_value(*args), rep)  # noqa: B023
        t_m = best_time(lambda: log_esp_and_marginals_core(*args), rep)  # noqa: B023
        t_lm = best_time(lambda: logspace_value_and_marginals(*args), max(2, rep // 4))  # noqa: B023
        t_op = best_time(lambda: f_op(*args), rep)  # noqa: B023
        t_opv = best_time(lambda: f_val(*args), rep)  # noqa: B023
        t_sp = best_time(lambda: scipy_log_esp(*args), 3)  # noqa: B023
        print(f"| {D:,} | {k:,} | {1e3 * t_v:.3f} | {1e3 * t_lv:.3f} | {t_lv / t_v:.1f}x "
              f"| {1e3 * t_m:.3f} | {1e3 * t_lm:.3f} | {t_lm / t_m:.1f}x | {1e3 * t_opv:.3f} "
              f"| {1e3 * t_op:.3f} "
              f"| {1e3 * t_sp:.3f} |")


def accuracy_table(sizes, rng):
    print("| D | k | logit scale | tilted rel. err. | log-space rel. err. | scipy rel. err. "
          "| tilted marginals max abs err. | log-space marginals max abs err. | reference |")
    print("|---|---|---|---|---|---|---|---|---|")
    for D in sizes:
        k = D // 10
        for scale in (1.0, 10.0, 50.0):
            theta = rng.normal(size=D) * scale
            v, m = log_esp_and_marginals(theta, k)
            lv, lm = logspace_value_and_marginals(theta, k)
            sv = scipy_log_esp(theta, k)
            if D <= 1000:
                rv, rm = mp_log_esp_and_marginals(theta, k)
                ref = "mpmath 60 digits"
            else:  # mpmath is too slow here: long double, 6 items (3 largest marginals)
                items = np.concatenate([np.argsort(-m)[:3], rng.choice(D, 3, replace=False)])
                rv, rm = longdouble_reference(theta, k, items)
                m, lm = m[items], lm[items]
                ref = "long double, 6 items"

            def rel(x, rv=rv):
                return f"{abs(x - rv) / abs(rv):.1e}" if np.isfinite(x) else "pmf underflow"

            print(f"| {D:,} | {k:,} | {scale:g} | {rel(v)} | {rel(lv)} | {rel(sv)} "
                  f"| {np.abs(m - rm).max():.1e} | {np.abs(lm - rm).max():.1e} | {ref} |")


def all_k_table(sizes, rng):
    print("| D | logit scale | guarded tilted DP (ms) | its path | log-space DP (ms) "
          "| FFT product tree (ms) | FFT passes | max abs. diff. of log e_j, FFT vs log-space |")
    print("|---|---|---|---|---|---|---|---|")
    for D in sizes:
        for scale in (0.3, 3.0):
            theta = rng.normal(size=D) * scale
            rep = 3 if D <= 1000 else 1
            t_a = best_time(lambda: log_esp_all(theta), rep)  # noqa: B023 (called right away)
            t_l = best_time(lambda: log_esp_all_logspace(theta), rep)  # noqa: B023
            t_f = best_time(lambda: log_esp_all_fft(theta), rep)  # noqa: B023
            f, passes = log_esp_all_fft(theta, return_passes=True)
            b = log_esp_all_logspace(theta)
            path = "tilted" if _log_esp_all_tilted(theta, D)[1] else "fell back to log-space"
            print(f"| {D:,} | {scale:g} | {1e3 * t_a:.2f} | {path} | {1e3 * t_l:.2f} "
                  f"| {1e3 * t_f:.2f} | {int(passes)} | {np.max(np.abs(f - b)):.1e} |")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="skip D = 10,000")
    args = parser.parse_args()
    sizes = [100, 1000] if args.quick else [100, 1000, 10000]
    rng = np.random.default_rng(0)
    print("## Speed (one thread, best of several runs; k = D/10, logits N(0, 1))\n")
    speed_table(sizes, rng)
    print("\n## Accuracy of log e_k and of the marginals (k = D/10)\n")
    accuracy_table(sizes, rng)
    print("\n## All k at once (log e_j for j = 0..D; FFT rtol 1e-8)\n")
    all_k_table(sizes, rng)


if __name__ == "__main__":
    main()
