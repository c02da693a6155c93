"""Posterior shape functions of an additive ordinal ranker on MQ2008 (hinge basis + NUTS).

Usage::

    python examples/ranking_shapes.py --fold 1 --out docs/guide/ranking_shapes.png

The ordinal n-choose-k ranker on :class:`pm_perm.learning_to_rank.features.HingeBasis` features
scores a
document by ``s(x) = sum_f g_f(x_f)``, each ``g_f`` piecewise linear with kinks at the training
quantiles of feature ``f``. The prior scale is chosen on the fold's validation NDCG@5 (MAP
fits), then NUTS draws the posterior of all coefficients at that scale (whitened by the Laplace
approximation, as :meth:`pm_perm.learning_to_rank.ordinal.OrdinalRanker.fit_nuts` does). The figure
shows, for the features whose posterior-mean ``g_f`` varies most over the training values, the
posterior mean of ``g_f(x) - g_f(min x)`` (a constant cancels within a query) and its 90% band
over draws, with the training documents' values as a rug. Printed: the chosen scale, NUTS
diagnostics (max r_hat, min bulk ESS, divergences), timings, and the test metrics as posterior
means with 90% intervals over draws (standard discount).

Needs ``../shared/data/MQ2008_LETOR4`` (or ``--data-root``). Data: Qin & Liu (2013),
"Introducing LETOR 4.0 Datasets", arXiv:1306.2597.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from pm_perm._io import save_figure  # noqa: E402
from pm_perm.datasets.mq2008 import load_mq2008_fold  # noqa: E402
from pm_perm.learning_to_rank.features import HingeBasis  # noqa: E402
from pm_perm.learning_to_rank.metrics import evaluate_ranking  # noqa: E402
from pm_perm.learning_to_rank.ordinal import OrdinalRanker  # noqa: E402
from pm_perm.learning_to_rank.plots import plot_shape_functions  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fold", type=int, default=1)
    p.add_argument("--knots", type=int, default=4)
    p.add_argument("--draws", type=int, default=1000)
    p.add_argument("--tune", type=int, default=1000)
    p.add_argument("--chains", type=int, default=4)
    p.add_argument("--top", type=int, default=6, help="number of features to plot")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-root")
    p.add_argument("--out", default="outputs/ranking_shapes/shapes.png")
    args = p.parse_args(argv)

    t0 = time.perf_counter()
    train, valid, test = load_mq2008_fold(args.fold, args.data_root)
    basis = HingeBasis(args.knots).fit(train)
    h_train, h_valid = basis.transform_split(train), basis.transform_split(valid)
    h_test = basis.transform(test.X)
    print(f"fold {args.fold}: {train.n_features} features -> {basis.columns_.shape[0]} columns")
    ranker = OrdinalRanker().fit_map(h_train, h_valid)
    print(f"MAP: prior scale {ranker.prior_sigma_} chosen on validation NDCG@5 "
          f"({ranker.timings_['map']:.0f} s for the grid)")
    ranker.fit_nuts(h_train, draws=args.draws, tune=args.tune, chains=args.chains,
                    random_seed=args.seed)
    import arviz as az

    summary = az.summary(ranker.idata_, var_names=["theta"])
    div = int(np.sum(ranker.idata_.sample_stats["diverging"]))
    print(f"NUTS: {args.chains} chains x ({args.tune} tune + {args.draws} draws) in "
          f"{ranker.timings_['nuts']:.0f} s; max r_hat {summary['r_hat'].max():.3f}, "
          f"min bulk ESS {summary['ess_bulk'].min():.0f}, {div} divergences")
    per_draw = evaluate_ranking(ranker.decision_function(h_test, draws=True), test.y,
                                test.group_ptr, ks=(1, 3, 5, 10))
    for k in ("ndcg@1", "ndcg@3", "ndcg@5", "ndcg@10", "map"):
        lo, hi = np.quantile(per_draw[k], [0.05, 0.95])
        print(f"test {k}: {np.mean(per_draw[k]):.4f} [{lo:.4f}, {hi:.4f}]")

    fig, chosen = plot_shape_functions(
        basis, ranker.theta_draws_, train.X, top=args.top, seed=args.seed,
        title=f"MQ2008 fold {args.fold}: posterior shape functions of the additive ordinal "
              f"ranker (prior scale {ranker.prior_sigma_})")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    save_figure(fig, args.out, dpi=110)
    print(f"features plotted (1-based): {[f + 1 for f in chosen]}; figure: {args.out}")
    print(f"total wall time {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
