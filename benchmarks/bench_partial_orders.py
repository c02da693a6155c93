"""Speed of the exact partial-order likelihood on Meath-sized ballot data (issue 18).

Run::

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 .venv/bin/python benchmarks/bench_partial_orders.py

Data: the 2002 Meath election (PrefLib ED-00001-00000003, 64,081 top-k ballots over 14
candidates in 25,101 distinct orders) from ``../shared/data/preflib/irish/`` when present,
else 64,000 synthetic top-k ballots over 14 items (seed 0; the number of distinct orders is
printed). Logits: one full 14 x 14 matrix ``N(0, 1)`` (seed 0).

Timed on one thread, best of ``--repeats`` calls after a warm-up, side by side in one process:

* ``kernel core``: :func:`pm_perm.kernels.partial_orders.partial_orders_core`, the
  count-weighted log-likelihood of all ballots and its gradient; ``kernel API``: the same through
  :func:`~pm_perm.kernels.partial_orders.partial_order_loglik_and_grad`, which also validates
  the logits and every order on each call;
* ``op``: the compiled PyTensor function (numba backend) of ``partial_order_loglik_sum`` and its
  gradient (one ``PartialOrderLoglikSumAndGrad`` node);
* ``logp``: the compiled ``pm.logp`` of ``PartialRanking(logits=W, weights=counts)`` summed, and
  its gradient (per-order Op + the weighted gradient Op), what a PyMC model runs;
* reference: one exact ``log_permanent`` + marginals of the same W
  (:func:`pm_perm.kernels.permanent.log_permanent_and_marginals`).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import best_time  # noqa: E402

from pm_perm.datasets import data_home  # noqa: E402

MEATH = data_home() / "preflib" / "irish" / "00001-00000003.soi"


def read_current_preflib(path):
    """Minimal reader of a strict PrefLib file in the current layout (``count: a,b,c`` lines
    after ``#`` headers, 1-based ids) into aggregated rank-form orders and counts. For this
    benchmark only: the package reader is ``pm_perm.preferences.read_preflib``."""
    header, rows, counts = {}, [], []
    with open(path) as fh:
        for line in fh:
            if line.startswith("#"):
                key, _, val = line[1:].partition(":")
                header[key.strip()] = val.strip()
                continue
            count, _, items = line.partition(":")
            rows.append([int(t) - 1 for t in items.split(",")])
            counts.append(int(count))
    M = int(header["NUMBER ALTERNATIVES"])
    orders = np.full((len(rows), M), -1, dtype=np.int64)
    for r, items in enumerate(rows):
        orders[r, items] = np.arange(len(items))
    orders, inverse = np.unique(orders, axis=0, return_inverse=True)
    return orders, np.bincount(inverse.ravel(), weights=counts).astype(np.int64)


def synthetic_ballots(n=64_000, M=14, seed=0):
    """Top-k ballots from the permutation exponential family, ballot lengths 1..M skewed short
    (as in Irish STV elections), aggregated."""
    from pm_perm.kernels.permutation_sampler import sample_permutations

    rng = np.random.default_rng(seed)
    W = np.outer(np.linspace(1.5, -1.5, M), np.linspace(1, -1, M)) + rng.normal(size=(M, M))
    y = sample_permutations(W, size=(n,), rng=rng)
    pk = 0.75 ** np.arange(M)
    k = rng.choice(np.arange(1, M + 1), size=n, p=pk / pk.sum())
    y = np.where(y < k[:, None], y, -1)
    orders, inverse = np.unique(y, axis=0, return_inverse=True)
    return orders, np.bincount(inverse.ravel()).astype(np.int64)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args(argv)

    import pymc as pm
    import pytensor
    import pytensor.tensor as pt

    from pm_perm import PartialRanking
    from pm_perm.kernels.partial_orders import partial_order_loglik_and_grad, partial_orders_core
    from pm_perm.kernels.permanent import log_permanent_and_marginals
    from pm_perm.ops.partial_orders import partial_order_loglik_sum

    if MEATH.is_file():
        orders, counts = read_current_preflib(MEATH)
        source = f"Meath ({MEATH.name})"
    else:
        orders, counts = synthetic_ballots()
        source = "synthetic (Meath file absent)"
    M = orders.shape[1]
    print(f"data: {source}: {counts.sum():,} ballots, {orders.shape[0]:,} distinct orders, "
          f"M = {M}, longest ballot {int((orders >= 0).sum(1).max())}")
    Wv = np.random.default_rng(0).normal(size=(M, M))
    fcounts = counts.astype(np.float64)

    W = pt.matrix("W", dtype="float64")
    tot = partial_order_loglik_sum(W, orders, fcounts)
    f_op = pytensor.function([W], [tot, pt.grad(tot, W)])
    lp = pm.logp(PartialRanking.dist(logits=W, weights=counts), orders).sum()
    f_logp = pytensor.function([W], [lp, pt.grad(lp, W)])

    v_k, g_k = partial_order_loglik_and_grad(Wv, orders, fcounts)
    v_o, g_o = f_op(Wv)
    v_l, g_l = f_logp(Wv)
    assert np.allclose([v_o, v_l], v_k, rtol=1e-12) and np.allclose(g_o, g_k, atol=1e-8)
    assert np.allclose(g_l, g_k, atol=1e-8)
    print(f"log-likelihood of all ballots {float(v_k):.6f} (per ballot {v_k / counts.sum():.4f})")

    t_ref = best_time(lambda: log_permanent_and_marginals(Wv), args.repeats)
    values, grad = np.empty(orders.shape[0]), np.empty((M, M))
    rows = [
        ("kernel core value+grad", best_time(
            lambda: partial_orders_core(Wv, orders, fcounts, values, grad, True), args.repeats)),
        ("kernel API value+grad (+ input checks)", best_time(
            lambda: partial_order_loglik_and_grad(Wv, orders, fcounts), args.repeats)),
        ("op value+grad (PyTensor, numba)", best_time(lambda: f_op(Wv), args.repeats)),
        ("PartialRanking logp+grad (PyTensor)", best_time(lambda: f_logp(Wv), args.repeats)),
        ("reference: log_permanent + marginals", t_ref),
    ]
    print(f"best of {args.repeats}, one thread:")
    for name, t in rows:
        print(f"  {name:40s} {t * 1e3:8.3f} ms   ({t / t_ref:6.1f} x reference)")


if __name__ == "__main__":
    main()
