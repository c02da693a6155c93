"""Exact permanent engine: speed and accuracy side by side with thewalrus, in one process.

Run (one thread, as the targets are stated):
``NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_permanent.py``
(``--quick`` skips M = 24 and the long-double references above M = 20; ``--profile`` prints only
the split of value + gradient into the kernel's passes at M = 20).

For each M it times, on the same random matrices ``A = exp(W)``, ``W = s N(0, 1)``:
pm_perm's value (``log_permanent``), value + gradient (``log_permanent_and_marginals``, the
public NumPy API including input validation), the same through the PyTensor Ops as a compiled
``value + grad`` function, and ``thewalrus.perm(A, method="bbfg")`` (value only, linear space;
Glynn's formula with Gray code). Times are the best of several repeats; the ratio column is
thewalrus time / pm_perm value+gradient time measured in the same run. Accuracy: relative error
of the permanent against an independent extended-precision reference
(``pm_perm.reference.permutations.log_permanent_dp_longdouble``), and against enumeration for
M <= 8.
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import pytensor
import pytensor.tensor as pt
from _harness import best_time  # benchmarks/_harness.py

from pm_perm.kernels.permanent import log_permanent, log_permanent_and_marginals
from pm_perm.ops.permanent import log_permanent as log_permanent_op
from pm_perm.reference.permutations import log_permanent_dp_longdouble, log_permanent_enum


def compiled_value_and_grad(ndim):
    W = pt.tensor("W", shape=(None,) * ndim, dtype="float64")
    lp = log_permanent_op(W).sum()
    return pytensor.function([W], [lp, pt.grad(lp, W)])


def rel_err_log(a, b):
    """Relative error of perm = exp(a) against exp(b): |exp(a - b) - 1|."""
    return abs(math.expm1(a - b))


def speed_table(sizes, repeats, seed=0):
    from thewalrus import perm as tw_perm

    rng = np.random.default_rng(seed)
    rows = []
    for M in sizes:
        batch = 10000 if M <= 5 else 1
        W = rng.normal(size=(batch, M, M))
        A = np.exp(W)
        reps = repeats if M < 22 else max(2, repeats // 3)
        t_val = best_time(lambda W=W: log_permanent(W), reps) / batch
        t_vg = best_time(lambda W=W: log_permanent_and_marginals(W), reps) / batch
        f = compiled_value_and_grad(3)
        t_op = best_time(lambda f=f, W=W: f(W), reps) / batch
        t_tw = best_time(lambda A=A: [tw_perm(a, method="bbfg") for a in A], reps) / batch
        rows.append((M, batch, t_val, t_vg, t_op, t_tw, t_tw / t_vg))
    return rows


def accuracy_table(sizes, spreads, seed=1):
    from thewalrus import perm as tw_perm

    rng = np.random.default_rng(seed)
    rows = []
    for s in spreads:
        for M in sizes:
            W = s * rng.normal(size=(M, M))
            ours = float(log_permanent(W))
            ref = float(log_permanent_enum(W)) if M <= 8 else log_permanent_dp_longdouble(W)
            shift = W.max(axis=1)  # thewalrus works in linear space: give it row-scaled input
            tw = tw_perm(np.exp(W - shift[:, None]), method="bbfg")
            tw_log = math.log(tw) + shift.sum() if tw > 0 else -math.inf
            tw_err = rel_err_log(tw_log, ref) if np.isfinite(tw_log) else math.inf
            rows.append((s, M, rel_err_log(ours, ref), tw_err))
    return rows


def profile_passes(M=20, repeats=15, seed=0):
    """Best times of the DP's passes on one scaled matrix: forward, backward without marginals,
    forward + backward with marginals (the kernel functions called directly)."""
    from pm_perm.kernels.assignment import dual_scaled
    from pm_perm.kernels.subset_dp import backward as _backward
    from pm_perm.kernels.subset_dp import forward as _forward

    B, _, _ = dual_scaled(np.random.default_rng(seed).normal(size=(M, M)))
    work = np.empty(1 << M)
    P = np.zeros((M, M))

    def both():
        P[:] = 0.0
        _forward(B, work)
        _backward(B, work, work, P, True)

    return (best_time(lambda: _forward(B, work), repeats),
            best_time(lambda: _backward(B, work, work, P, False), repeats),
            best_time(both, repeats))


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--profile", action="store_true")
    p.add_argument("--repeats", type=int, default=7)
    args = p.parse_args(argv)
    if args.profile:
        for _ in range(3):
            t_f, t_b, t_fb = profile_passes()
            print(f"M = 20: forward {t_f * 1e3:.2f} ms, backward without marginals "
                  f"{t_b * 1e3:.2f} ms, forward + backward with marginals {t_fb * 1e3:.2f} ms")
        return
    sizes = [3, 4, 5, 10, 15, 20, 22] + ([] if args.quick else [24])
    print("## Speed (seconds per matrix; best of repeats; one thread)\n")
    print("| M | batch | value | value+grad | value+grad (PyTensor Op) | thewalrus bbfg (value) "
          "| thewalrus / our value+grad |")
    print("|---|---|---|---|---|---|---|")
    for M, b, tv, tvg, top, ttw, ratio in speed_table(sizes, args.repeats):
        print(f"| {M} | {b} | {tv:.3g} | {tvg:.3g} | {top:.3g} | {ttw:.3g} | {ratio:.2f} |")
    acc_sizes = [6, 8, 12, 16, 20] + ([] if args.quick else [22, 24])
    print("\n## Accuracy (relative error of perm vs enumeration (M <= 8) or long-double DP)\n")
    print("| spread s | M | pm_perm | thewalrus bbfg |")
    print("|---|---|---|---|")
    for s, M, e_ours, e_tw in accuracy_table(acc_sizes, [1.0, 3.0]):
        print(f"| {s:g} | {M} | {e_ours:.1e} | {e_tw:.1e} |")


if __name__ == "__main__":
    main()
