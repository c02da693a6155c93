"""Plackett-Luce: speed on Meath-sized data and agreement with ``choix``, in one process.

Run (one thread, as the target is stated):
``OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 .venv/bin/python benchmarks/bench_plackett_luce.py``
(``--data-root DIR`` for the shared data folder, default ``../shared/data``; needs the ``bench``
extra for ``choix``).

(a) Speed: log-likelihood + gradient of ALL ballots of Meath 2002 (the real PrefLib file when
present, else 64,000 generated top-k ballots over 14 items) as compiled PyTensor functions:
``plackett_luce_loglik_sum`` (one Op for value and gradient) and ``pm.logp`` of the
``PlackettLuce`` distribution with ``weights=counts`` (summed). Reference in the same run: a
vectorised NumPy value (no gradient) of the same likelihood on the padded orders. Best of
several repeats; target <= 20 ms for value + gradient.

(b) Agreement with ``choix`` on APA 1998 and Meath: every top-k ballot decomposed into its
top-1 choice events (item chosen, items still available), ``choix.ilsr_top1`` maximum
likelihood vs our MAP (``PlackettLuce`` with ``weights=counts``, ``ZeroSumNormal(sigma=100)``
prior, ``pm.find_MAP``). Reported: max |difference| of the centred utilities, and both
estimates' log-likelihoods of the ballots (ours by our kernel, choix's by
``choix.log_likelihood_top1`` on the events; the decomposition is exact, so the two
log-likelihood functions agree).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
from _harness import best_time  # benchmarks/_harness.py

import pm_perm
from pm_perm.datasets import data_home
from pm_perm.kernels.plackett_luce import plackett_luce_loglik_and_grad, sample_plackett_luce
from pm_perm.ops.plackett_luce import plackett_luce_loglik_sum
from pm_perm.preferences import RankingData, read_preflib

ROOT = data_home()
MEATH = "preflib/irish/00001-00000003.soi"
APA98 = "preflib/apa/ED-00028-00000001.soi"


def meath_or_generated(root):
    path = root / MEATH
    if path.exists():
        return read_preflib(path), f"Meath 2002 ({path})"
    rng = np.random.default_rng(2002)
    lengths = np.r_[0.0, np.full(14, 1.0)] / 14   # k = 1..14 equally likely
    draws = sample_plackett_luce(rng.normal(size=14), size=(64_000,), rng=rng,
                                 length_probs=lengths)
    return RankingData.from_orders(draws), "generated (64,000 ballots, 14 items; Meath absent)"


def numpy_value(u, data):
    """Reference: the PL log-likelihood of strict top-k orders, vectorised NumPy, value only."""
    order = np.argsort(np.where(data.orders < 0, data.n_items, data.orders), axis=1,
                       kind="stable")
    k = data.ranked_lengths()
    uo = u[order]
    tail = np.logaddexp.accumulate(uo[:, ::-1], axis=1)[:, ::-1]
    terms = np.where(np.arange(data.n_items) < np.minimum(k, data.n_items - 1)[:, None],
                     uo - tail, 0.0)
    return float(data.counts @ terms.sum(axis=1))


def speed(data, label):
    print(f"(a) speed, {label}: {data.n_rankings:,} ballots, {data.n_distinct:,} distinct "
          f"orders, {data.n_items} items")
    u0 = np.random.default_rng(0).normal(size=data.n_items)
    u = pt.vector("u")
    total = plackett_luce_loglik_sum(u, data.orders, data.counts)
    f_op = pytensor.function([u], [total, pt.grad(total, u)])
    y = pm_perm.PlackettLuce.dist(utilities=u, weights=data.counts)
    lp = pm.logp(y, data.orders).sum()
    f_dist = pytensor.function([u], [lp, pt.grad(lp, u)])
    v_op, g_op = f_op(u0)
    v_dist, g_dist = f_dist(u0)
    v_np = numpy_value(u0, data)
    assert np.isclose(v_op, v_np, rtol=1e-10) and np.isclose(v_dist, v_np, rtol=1e-10)
    assert np.allclose(g_op, g_dist, rtol=1e-9, atol=1e-9)
    t_op = best_time(lambda: f_op(u0), 30)
    t_dist = best_time(lambda: f_dist(u0), 30)
    t_np = best_time(lambda: numpy_value(u0, data), 10)
    print(f"  plackett_luce_loglik_sum, value + gradient: {t_op * 1e3:7.2f} ms")
    print(f"  PlackettLuce logp (weights=counts), value + gradient: {t_dist * 1e3:7.2f} ms")
    print(f"  reference: vectorised NumPy, value only: {t_np * 1e3:7.2f} ms "
          f"(ratio NumPy / ours (Op) {t_np / t_op:.1f})")
    print(f"  log-likelihood at u ~ N(0, 1): {v_op:.3f} (NumPy {v_np:.3f})")


def top1_events(data):
    """choix's top-1 data: one (winner, losers) event per choice of every ballot."""
    events = []
    for row, count in zip(data.orders, data.counts, strict=True):
        ranked = np.argsort(np.where(row < 0, data.n_items, row), kind="stable")[:(row >= 0).sum()]
        unranked = np.flatnonzero(row < 0).tolist()
        for t, item in enumerate(ranked):
            losers = tuple(ranked[t + 1:].tolist() + unranked)
            if losers:
                events.extend([(int(item), losers)] * int(count))
    return events


def compare_choix(data, label):
    import choix

    print(f"(b) {label}: {data.n_rankings:,} ballots, {data.n_items} items")
    events = top1_events(data)
    t = time.perf_counter()
    u_choix = choix.ilsr_top1(data.n_items, events, max_iter=1000, tol=1e-10)
    t_choix = time.perf_counter() - t
    t = time.perf_counter()
    with pm.Model():
        u = pm.ZeroSumNormal("u", sigma=100.0, shape=data.n_items)
        pm_perm.PlackettLuce("ballots", utilities=u, weights=data.counts, observed=data.orders)
        fit = pm.find_MAP(progressbar=False, return_inferencedata=True, jitter=False)
    u_ours = np.asarray(fit.posterior["u"]).reshape(-1)
    t_ours = time.perf_counter() - t
    a, b = u_ours - u_ours.mean(), u_choix - u_choix.mean()
    ll_ours = float(plackett_luce_loglik_and_grad(u_ours, data.orders, data.counts)[0])
    ll_choix_ours = float(plackett_luce_loglik_and_grad(u_choix, data.orders, data.counts)[0])
    ll_choix = choix.log_likelihood_top1(events, u_choix)
    print(f"  {len(events):,} top-1 events; choix ilsr_top1 {t_choix:.1f} s, ours MAP "
          f"(find_MAP incl. compilation) {t_ours:.1f} s")
    print(f"  max |centred utility difference|: {np.abs(a - b).max():.2e}")
    print(f"  log-likelihood, ours at our MAP: {ll_ours:.4f}; at choix's estimate: "
          f"{ll_choix_ours:.4f} (choix's own log_likelihood_top1: {ll_choix:.4f})")
    print(f"  per ballot: {ll_ours / data.n_rankings:.5f} vs {ll_choix / data.n_rankings:.5f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-root", type=Path, default=ROOT)
    args = parser.parse_args()
    meath, label = meath_or_generated(args.data_root)
    speed(meath, label)
    apa = args.data_root / APA98
    if apa.exists():
        compare_choix(read_preflib(apa), f"APA 1998 ({apa})")
    else:
        print(f"(b) APA 1998 absent ({apa}): skipped")
    compare_choix(meath, label)


if __name__ == "__main__":
    main()
