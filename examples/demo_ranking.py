"""Learning to rank in under a minute: RankMatch on generated LETOR-like data, no network.

Usage::

    python examples/demo_ranking.py          # MAP fit, Laplace posterior (seconds)
    python examples/demo_ranking.py --nuts   # short NUTS run instead (2 x 300 draws, ~25 s)

(times with warm numba / PyTensor caches; the first run on a machine also compiles).

or from Python: ``run_demo(nuts=False)`` after ``sys.path.insert(0, "examples")`` and
``from demo_ranking import run_demo`` (returns a dict of the printed figures).

Data: queries of 8 to 16 documents with 8 features each; within each query, label 2 goes to the
top 15% and label 1 to the next 25% (quantiles 0.6-0.85) of a linear score ``<psi, theta_true>``
plus Gumbel noise. RankMatch (``M = 3`` document subsets, exact likelihood, prior scale chosen on a
validation split) is fitted by MAP; the posterior of ``theta`` is its Laplace approximation
at the MAP (``N(theta_MAP, H^-1)``, ``H`` the exact Hessian of the negative log-posterior by
differences of the exact gradient) or, with ``--nuts``, 2 chains x 300 draws of whitened NUTS.
Printed: test NDCG@1/3/5/10 of the fitted ranker next to the ranker that knows ``theta_true``
(the score the labels were generated from) and a ranker that learns nothing
(random order, the expected NDCG), and, for one test query, each document's posterior
probability of being in the top 5 (posterior predictive: one exact draw of the whole ranking
per posterior draw of ``theta``).
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from pm_perm.learning_to_rank.data import RankingSplit  # noqa: E402
from pm_perm.learning_to_rank.metrics import evaluate_ranking  # noqa: E402
from pm_perm.learning_to_rank.rankmatch import RankMatch, ranking_predictive  # noqa: E402

THETA_TRUE = np.array([1.5, -1.0, 0.8, 0.5, 0.0, 0.0, -0.3, 0.2])
KS = (1, 3, 5, 10)


def make_split(n_queries, rng, theta=THETA_TRUE):
    """Generated LETOR-like split: labels from per-query quantiles of a noisy linear score."""
    sizes = rng.integers(8, 17, size=n_queries)
    X = rng.normal(size=(sizes.sum(), theta.size))
    s = X @ theta + rng.gumbel(size=sizes.sum())
    ptr = np.concatenate([[0], np.cumsum(sizes)])
    y = np.zeros(sizes.sum(), dtype=np.int64)
    for q in range(n_queries):
        rows = slice(ptr[q], ptr[q + 1])
        y[rows] = np.digitize(s[rows], np.quantile(s[rows], [0.6, 0.85]))
    return RankingSplit(X=X, y=y, group_ptr=ptr, qids=np.arange(n_queries))


def laplace_draws(rm, n_draws, rng):
    """Draws from the Laplace approximation N(theta_MAP, H^-1) of the posterior."""
    loc, L = rm._whitening(rm.prior_sigma_)
    return loc + rng.normal(size=(n_draws, loc.size)) @ L.T


def run_demo(nuts=False, seed=0, verbose=True):
    t0 = time.perf_counter()
    say = print if verbose else (lambda *a, **k: None)
    rng = np.random.default_rng(seed)
    train, valid, test = make_split(150, rng), make_split(50, rng), make_split(100, rng)
    say(f"generated data: {train.n_queries} training / {valid.n_queries} validation / "
        f"{test.n_queries} test queries, {train.n_features} features, labels 0-2")

    rm = RankMatch(M=3, prior_sigmas=(0.3, 1.0, 3.0, 10.0), seed=seed).fit_map(train, valid)
    say(f"RankMatch MAP: {rm.subsets_.docs.shape[0]} subsets of 3 documents, prior scale "
        f"{rm.prior_sigma_} (validation NDCG@5), {rm.timings_['map']:.1f} s")
    cos = rm.theta_ @ THETA_TRUE / np.linalg.norm(rm.theta_) / np.linalg.norm(THETA_TRUE)
    rankers = {
        "RankMatch (MAP)": evaluate_ranking(rm.decision_function(test.X), test.y,
                                            test.group_ptr, ks=KS),
        "true theta": evaluate_ranking(test.X @ THETA_TRUE, test.y, test.group_ptr, ks=KS),
        "no learning (random order)": evaluate_ranking(
            np.zeros(test.n_docs), test.y, test.group_ptr, ks=KS, ties="random", seed=seed),
    }
    if nuts:
        rm.fit_nuts(train, draws=300, tune=300, chains=2, random_seed=seed)
        draws = rm.theta_draws_
        kind = f"NUTS, 2 chains x 300 draws, {rm.timings_['nuts']:.1f} s"
        rankers["RankMatch (posterior mean)"] = evaluate_ranking(
            rm.decision_function(test.X), test.y, test.group_ptr, ks=KS)
    else:
        draws = laplace_draws(rm, 600, rng)
        kind = "Laplace approximation at the MAP, 600 draws"

    say(f"\ncosine(theta_MAP, theta_true) = {cos:.3f}\n")
    say(f"{'test NDCG':<28}" + "".join(f"{'@' + str(k):>8}" for k in KS))
    for name, m in rankers.items():
        say(f"{name:<28}" + "".join(f"{m[f'ndcg@{k}']:>8.4f}" for k in KS))

    q = int(np.flatnonzero((test.group_sizes <= 12) & (np.maximum.reduceat(
        test.y, test.group_ptr[:-1]) == 2))[0])
    rows = slice(test.group_ptr[q], test.group_ptr[q + 1])
    y = ranking_predictive(draws, test.X[rows], rng=rng)
    top5 = (y < 5).mean(axis=0)
    score = test.X[rows] @ rm.theta_
    say(f"\ntest query {test.qids[q]} ({y.shape[1]} documents), posterior from {kind}:")
    say(f"{'doc':>4} {'label':>6} {'score':>7} {'P(top 5)':>9}")
    for d in np.argsort(-top5, kind="stable"):
        say(f"{d:>4} {test.y[rows][d]:>6} {score[d]:>7.2f} {top5[d]:>9.3f}")
    total = time.perf_counter() - t0
    say(f"\ndemo took {total:.0f} s")
    return {"ndcg": {k: {m: float(v[m]) for m in v if m.startswith("ndcg")}
                     for k, v in rankers.items()},
            "cosine": float(cos), "top5": top5.tolist(), "labels": test.y[rows].tolist(),
            "seconds": total}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nuts", action="store_true", help="posterior by a short NUTS run instead "
                   "of the Laplace approximation (about 25 s once compiled)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    run_demo(nuts=args.nuts, seed=args.seed)


if __name__ == "__main__":
    main()
