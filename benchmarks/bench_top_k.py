"""Top-k item-by-position model at 100 items (issue 50, item 1): speed, MAP, held-out fit.

Run (one thread): ``OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 .venv/bin/python
benchmarks/bench_top_k.py`` (``--ballots``, ``--heldout``, ``--seed``, ``--tau``); ``--nuts``
runs NUTS instead (below).

Data, generated (not Plackett-Luce): a 3-bloc mixture (weights 0.5, 0.3, 0.2) of top-10
item-by-position models over M = 100 items, bloc ``b`` with logits ``W_b[i, j] = 2 u_b[i] c_j
+ 0.7 e_b[i, j]`` (``u_b``, ``e_b`` standard normal, ``c`` the harmonic profile of the 100
positions) for positions ``j < 10`` and ``V_b[i] = 2 u_b[i] mean(c[10:])``, exact draws
(:mod:`pm_perm.kernels.top_k_sampler`); 5,000 training ballots and 2,000 held out.

Reported: (a) the time of the log-likelihood + gradient of all training ballots (distinct
orders with counts) under one logits matrix, as the compiled PyTensor Op the models use
(``top_k_loglik_sum``, one Op run for both; also its CPU time, which a loaded machine does not
inflate) and as the kernel's Python call (which also validates the orders), best of 20; (b) the
MAP time of ``models.top_k_model`` (K = 10, the deviation scale ``tau`` fixed) and of
``models.plackett_luce_model`` by ``fitting.fit_map`` (one start, compilation included); (c)
the held-out log-likelihood per ballot of both MAP fits, and their mean paired difference with
its standard error.

``--nuts``: NUTS on ``models.top_k_model`` (K = 10, ``tau ~ HalfNormal(1)``; centred, and
nutpie's diagonal mass-matrix adaptation: ``--parametrization``, ``--adaptation``; 1-chain
trials: non-centred with low-rank adaptation 131 leapfrog steps per draw, centred 31 with
either adaptation, the diagonal one the fewest CPU seconds) by ``fitting.fit_nuts``,
``--chains`` x (``--draws`` tuning + ``--draws`` kept), on 2 cores: wall and CPU time (build +
compile + sampling; CPU / 2 estimates the wall time on 2 idle cores), max r_hat and min bulk /
tail ESS over ``W`` and ``tau``, divergences, leapfrog steps per draw, the load average at the
start and the end, and the held-out log-likelihood per ballot at the posterior mean of ``W``;
``--save`` writes the posterior (netcdf).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import pytensor
import pytensor.tensor as pt
from _harness import best_time, check_output  # benchmarks/_harness.py

from pm_perm.kernels.plackett_luce import plackett_luce_loglik
from pm_perm.kernels.top_k import top_k_loglik, top_k_loglik_and_grad
from pm_perm.kernels.top_k_sampler import sample_top_k
from pm_perm.ops.top_k import top_k_loglik_sum
from pm_perm.preferences import RankingData, fitting, models

M, K = 100, 10


def generate(n_train, n_heldout, seed):
    """Training and held-out ballots (rank form) from the 3-bloc top-10 mixture."""
    rng = np.random.default_rng(seed)
    c = models.harmonic_positions(M)
    blocs = []
    for _ in range(3):
        u = rng.normal(size=M)
        W = 2.0 * u[:, None] * c[None, :K] + 0.7 * rng.normal(size=(M, K))
        blocs.append(np.concatenate([W, 2.0 * u[:, None] * c[K:].mean()], axis=1))
    n = n_train + n_heldout
    which = rng.choice(3, size=n, p=[0.5, 0.3, 0.2])
    orders = np.empty((n, M), dtype=np.int64)
    for b in range(3):
        orders[which == b] = sample_top_k(blocs[b], size=(int((which == b).sum()),), rng=rng)
    orders = orders[rng.permutation(n)]
    return RankingData.from_orders(orders[:n_train]), orders[n_train:]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ballots", type=int, default=5000)
    parser.add_argument("--heldout", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tau", type=float, default=1.0)
    parser.add_argument("--nuts", action="store_true", help="run NUTS (see above) instead")
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--save", help="with --nuts: write the posterior here (netcdf)")
    parser.add_argument("--parametrization", default="centered",
                        choices=["centered", "noncentered"], help="with --nuts")
    parser.add_argument("--adaptation", default="diag", choices=["diag", "low_rank"],
                        help="with --nuts: nutpie's mass-matrix adaptation")
    args = parser.parse_args(argv)
    if args.save:
        check_output(parser, "--save", args.save)
    train, heldout = generate(args.ballots, args.heldout, args.seed)
    print(f"data: M = {M}, top-{K}, {train.n_rankings} training ballots "
          f"({train.n_distinct} distinct), {len(heldout)} held out; 3-bloc top-k mixture")
    if args.nuts:
        return run_nuts(train, heldout, args)

    # (a) log-likelihood + gradient of all ballots under one logits matrix
    rng = np.random.default_rng(1)
    Lv = np.concatenate([rng.normal(size=(M, K)), np.zeros((M, 1))], axis=1)
    counts = train.counts.astype(np.float64)
    L = pt.matrix("L")
    tot = top_k_loglik_sum(L, train.orders, counts)
    f = pytensor.function([L], [tot, pt.grad(tot, L)])
    t_op = best_time(lambda: f(Lv), 20)
    t_kernel = best_time(lambda: top_k_loglik_and_grad(Lv, train.orders, counts), 20)
    cpu_op = best_time(lambda: f(Lv), 20, timer=time.process_time)
    print(f"(a) log-likelihood + gradient, {train.n_distinct} distinct ballots: compiled Op "
          f"{t_op * 1e3:.1f} ms (CPU {cpu_op * 1e3:.1f} ms), kernel from Python (with "
          f"validation) {t_kernel * 1e3:.1f} ms")

    # (b) MAP fits
    t = time.perf_counter()
    rm = models.top_k_model(train, K=K, tau=args.tau)
    point = fitting.fit_map(rm, seed=args.seed)
    t_topk = time.perf_counter() - t
    t = time.perf_counter()
    pl = models.plackett_luce_model(train)
    pl_point = fitting.fit_map(pl, seed=args.seed)
    t_pl = time.perf_counter() - t
    print(f"(b) MAP (one start, build + compile + fit): top-k (K = {K}, tau = {args.tau:g}) "
          f"{t_topk:.1f} s ({point['_optimizer']['n_iterations']} iterations), "
          f"Plackett-Luce {t_pl:.1f} s")

    # (c) held-out log-likelihood per ballot
    ll_topk = top_k_loglik(point["W"][0], heldout)
    ll_pl = plackett_luce_loglik(pl_point["u"][0], heldout)
    d = ll_topk - ll_pl
    se = d.std(ddof=1) / np.sqrt(len(d))
    print(f"(c) held-out log-likelihood per ballot ({len(d)} ballots): top-k "
          f"{ll_topk.mean():.3f}, Plackett-Luce {ll_pl.mean():.3f}; top-k - PL "
          f"{d.mean():+.3f} (se {se:.3f})")


def run_nuts(train, heldout, args):
    """NUTS on the top-k model (``--nuts``): timing and diagnostics, printed."""
    import arviz as az

    load0 = os.getloadavg()
    t, cpu = time.perf_counter(), time.process_time()
    rm = models.top_k_model(train, K=K, parametrization=args.parametrization)
    idata = fitting.fit_nuts(rm, draws=args.draws, tune=args.draws, chains=args.chains,
                             seed=args.seed, cores=2, progressbar=False,
                             nuts={"adaptation": args.adaptation})
    wall, cpu = time.perf_counter() - t, time.process_time() - cpu
    if args.save:
        from pm_perm._io import atomic_path

        with atomic_path(args.save) as tmp:
            idata.to_netcdf(tmp)
    summ = az.summary(idata, var_names=["W", "tau"], kind="diagnostics")
    st = idata["sample_stats"]
    W = idata["posterior"]["W"].values.mean(axis=(0, 1))[0]
    ll = top_k_loglik(W, heldout)
    print(f"NUTS ({idata.attrs.get('pm_perm_sampler')}, {args.parametrization}, "
          f"{args.adaptation}), {args.chains} x ({args.draws} + {args.draws}): {wall:.0f} s, CPU "
          f"{cpu:.0f} s (build + compile + sampling; CPU / 2 = {cpu / 2:.0f} s, an estimate of "
          f"the wall time on 2 idle cores); max r_hat "
          f"{np.nanmax(summ['r_hat']):.4f}, min ESS bulk {np.nanmin(summ['ess_bulk']):.0f}, "
          f"tail {np.nanmin(summ['ess_tail']):.0f}; divergences "
          f"{int(st['diverging'].values.sum())}; leapfrog steps per draw "
          f"{st['n_steps'].values.mean():.1f}; load average start "
          f"{load0[0]:.1f}, end {os.getloadavg()[0]:.1f}; held-out log-likelihood per ballot at "
          f"the posterior mean of W {ll.mean():.3f}")


if __name__ == "__main__":
    main()
