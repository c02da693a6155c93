"""Baseline rankers: ridge regression, and LETOR's own AdaRank and RankBoost.

Linear (ridge, AdaRank) and boosted-threshold (RankBoost) rankers fitted on a LETOR split
(:mod:`pm_perm.learning_to_rank.data`); ``benchmarks/bench_letor_baselines.py`` compares them
with pm_perm's rankers on MQ2008.

* **Ridge** (:func:`fit_ridge`): pointwise least squares on the labels with an L2 penalty on
  the weights (not the intercept), the penalty chosen on validation NDCG@5.

Algorithms (every setting chosen on the fold's validation split by NDCG@5, as everywhere else):

* **AdaRank** (Xu & Li, SIGIR 2007, Fig. 1): weak rankers are single features; round ``t``
  picks the feature with the best ``P_t``-weighted training performance ``E`` (per-query
  NDCG@k), ``alpha_t = 1/2 log(sum P_t (1 + E) / sum P_t (1 - E))``, and re-weights queries by
  ``P_{t+1}(q) ~ exp(-E(f_t, q))``. The training measure ``E`` is NDCG@k with ``k`` in
  {1, 3, 5, 10} and the number of rounds in 1..``max_rounds``, both chosen on validation.
* **RankBoost** (Freund, Iyer, Schapire & Singer, JMLR 2003, sec. 3 and 4.2): a distribution
  ``D`` over the training pairs (documents of one query with different labels); weak rankers
  are thresholds ``h(d) = [x_j(d) > b]`` over up to ``n_thresholds`` quantiles of each
  feature; round ``t`` picks the ``h`` of largest ``|r|``, ``r = sum_p D(p) (h(hi) - h(lo))``,
  with ``alpha = 1/2 log((1 + r) / (1 - r))``, then ``D(p) ~ D(p) exp(alpha (h(lo) - h(hi)))``.
  ``r`` of every candidate is one matrix product with the document potentials
  ``pi(d) = sum_{p: hi = d} D(p) - sum_{p: lo = d} D(p)`` (the paper's sec. 3.2 trick).

Training queries without a relevant document carry no ranking information (AdaRank's ``E`` is 0
for every ranker; they have no pairs) and are left out of training, as the ordinal ranker does.
Weak-ranker performance uses random tie order (fixed seed): single features tie often.

Evaluation: the LETOR-4.0 script's discount (``convention="letor4"``), queries without a relevant
document count as 0, and two tie rules: pessimistic (our benchmarks' default) and the mean over
20 random tie orders (what an evaluation in file order gives in expectation when file order
carries no label information; MQ2008's does not, its within-query correlation of position and
label is between -0.06 and 0.03). RankBoost's scores are sums of steps and AdaRank's combine a
few features, so both tie often and the two rules differ for them; the dense linear models
(ordinal, RankMatch, ridge) have almost no ties.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pm_perm.learning_to_rank.metrics import evaluate_ranking, ndcg_at_k

__all__ = ["RIDGE_ALPHAS", "RidgeRanker", "fit_adarank", "fit_rankboost", "fit_ridge",
           "paired_bootstrap", "per_query", "adarank_path", "rankboost_path",
           "informative_queries"]

KS = (1, 3, 5)
N_RANDOM_TIES = 20
#: Penalties :func:`fit_ridge` chooses from on the validation split (1.0 without one).
RIDGE_ALPHAS = (0.01, 0.1, 1.0, 10.0, 100.0, 1000.0)


@dataclass(frozen=True)
class RidgeRanker:
    """A fitted ridge regression: scores ``X @ coef + intercept``.

    Attributes
    ----------
    coef : ndarray of float64, shape (n_features,)
    intercept : float
    alpha : float
        The penalty it was fitted with.
    """

    coef: np.ndarray
    intercept: float
    alpha: float

    def predict(self, X):
        """Scores of the rows of ``X`` (n_docs, n_features), shape (n_docs,)."""
        return np.asarray(X, dtype=np.float64) @ self.coef + self.intercept


def fit_ridge(train, valid=None, alphas=RIDGE_ALPHAS):
    """Ridge regression on the relevance labels; the penalty chosen on validation NDCG@5.

    Minimises ``||y - X w - b||^2 + alpha ||w||^2`` (the intercept ``b`` unpenalised, the
    convention of ``sklearn.linear_model.Ridge``) in closed form: with ``Xc``, ``yc`` the
    centred features and labels, ``w = (Xc'Xc + alpha I)^{-1} Xc'yc`` and
    ``b = mean(y) - mean(X) w``.

    Parameters
    ----------
    train : RankingSplit
    valid : RankingSplit, optional
        Each penalty of ``alphas`` is fitted and the one of best validation NDCG@5 kept (the
        first of equal ones). Without it the penalty is 1.0.
    alphas : sequence of float, default :data:`RIDGE_ALPHAS`
        Positive penalties.

    Returns
    -------
    RidgeRanker

    Notes
    -----
    One Gram matrix, O(n_docs n_features^2), then one O(n_features^3) solve per penalty.
    """
    alphas = tuple(float(a) for a in alphas) if valid is not None else (1.0,)
    if not alphas or min(alphas) <= 0:
        raise ValueError(f"alphas must be positive penalties; got {alphas!r}")
    X = np.asarray(train.X, dtype=np.float64)
    y = np.asarray(train.y, dtype=np.float64)
    x_mean, y_mean = X.mean(axis=0), y.mean()
    Xc = X - x_mean
    gram, xty = Xc.T @ Xc, Xc.T @ (y - y_mean)
    best = None
    for alpha in alphas:
        coef = np.linalg.solve(gram + alpha * np.eye(gram.shape[0]), xty)
        ranker = RidgeRanker(coef, float(y_mean - x_mean @ coef), alpha)
        score = -np.inf
        if valid is not None:
            score = evaluate_ranking(ranker.predict(valid.X), valid.y, valid.group_ptr,
                                     ks=(5,))["ndcg@5"]
        if best is None or score > best[0]:
            best = (score, ranker)
    return best[1]


def informative_queries(split):
    """The queries of ``split`` that have at least one document with a label above 0."""
    keep = [q for q in range(split.n_queries)
            if split.y[split.group_ptr[q]:split.group_ptr[q + 1]].max() > 0]
    if not keep:
        raise ValueError("no query has a relevant document (label > 0): nothing to train on")
    return split.take_queries(keep)


def _validation_choice(path, valid):
    """Index of the best row of ``path`` (rounds x features weights) on validation NDCG@5.

    Ties go to the earliest round (the smaller model).
    """
    v = ndcg_at_k(path @ valid.X.T, valid.y, valid.group_ptr, 5).mean(axis=-1)
    return int(np.argmax(v)), float(v.max())


# ---------------------------------------------------------------------------------------------
# AdaRank


def adarank_path(train, k, max_rounds=300, seed=0):
    """AdaRank weights after each round, trained with per-query NDCG@k as the measure E.

    Parameters
    ----------
    train : RankingSplit
        Training queries, each with at least one relevant document.
    k : int
        Cut-off of the training measure.
    max_rounds : int
        Number of boosting rounds T.
    seed : int
        Seed of the random tie order used when measuring single features and ``f_t``.

    Returns
    -------
    path : ndarray of float64, shape (max_rounds, n_features)
        ``path[t]`` are the linear weights of ``f_{t+1} = sum_{s <= t+1} alpha_s x_{j_s}``.
    chosen : ndarray of int64, shape (max_rounds,)
        The feature chosen in each round.

    Notes
    -----
    Cost: one ranking of every feature, O(F N log N), then O(F Q + N log N) per round.
    """
    n_features = train.X.shape[1]
    # E(pi(q, x_j), y_q) does not change across rounds: measure every feature once
    e_feat = ndcg_at_k(train.X.T, train.y, train.group_ptr, k, ties="random", seed=seed)
    p = np.full(train.n_queries, 1.0 / train.n_queries)
    w = np.zeros(n_features)
    path = np.empty((max_rounds, n_features))
    chosen = np.empty(max_rounds, dtype=np.int64)
    for t in range(max_rounds):
        j = int(np.argmax(e_feat @ p))
        e = e_feat[j]
        num, den = p @ (1.0 + e), p @ (1.0 - e)
        alpha = 0.5 * np.log(num / max(den, 1e-12 * num))
        w[j] += alpha
        path[t], chosen[t] = w, j
        e_f = ndcg_at_k(train.X @ w, train.y, train.group_ptr, k, ties="random", seed=seed)
        p = np.exp(-(e_f - e_f.min()))
        p /= p.sum()
    return path, chosen


def fit_adarank(train, valid, ks=(1, 3, 5, 10), max_rounds=300, seed=0,
                keep_uninformative=False):
    """AdaRank with the training cut-off and the number of rounds chosen on validation.

    ``keep_uninformative=True`` also trains on queries without a relevant document (their
    ``E`` is 0 for every ranker, so they only dilute the query weights).
    Returns the weights (n_features,) and the setting ``{"train_k", "rounds", "valid_ndcg@5"}``.
    """
    if not keep_uninformative:
        train = informative_queries(train)
    best = None
    for k in ks:
        path, _ = adarank_path(train, k, max_rounds, seed)
        t, v = _validation_choice(path, valid)
        if best is None or v > best[0]:
            best = (v, path[t], {"train_k": k, "rounds": t + 1, "valid_ndcg@5": v})
    return best[1], best[2]


# ---------------------------------------------------------------------------------------------
# RankBoost


def training_pairs(split):
    """All (hi, lo) document pairs of one query with ``y[hi] > y[lo]``: two int64 arrays."""
    his, los = [], []
    for q in range(split.n_queries):
        a, b = split.group_ptr[q], split.group_ptr[q + 1]
        y = split.y[a:b]
        hi, lo = np.nonzero(y[:, None] > y[None, :])
        his.append(hi + a)
        los.append(lo + a)
    return np.concatenate(his), np.concatenate(los)


def threshold_candidates(X, n_thresholds):
    """Per feature, up to ``n_thresholds`` distinct cut points below the feature's maximum.

    Returns ``(feature, threshold)`` arrays; a weak ranker is ``x[:, feature] > threshold``.
    Cut points are quantiles of the training values, so every one splits the documents.
    """
    feats, cuts = [], []
    qs = np.linspace(0.0, 1.0, n_thresholds + 2)[1:-1]
    for j in range(X.shape[1]):
        col = X[:, j]
        c = np.unique(np.quantile(col, qs, method="lower"))
        c = c[c < col.max()]
        feats.append(np.full(c.size, j))
        cuts.append(c)
    return np.concatenate(feats), np.concatenate(cuts)


def rankboost_path(train, max_rounds=300, n_thresholds=16):
    """RankBoost weak rankers and weights after each round.

    Parameters
    ----------
    train : RankingSplit
        Training queries.
    max_rounds : int
        Number of boosting rounds T.
    n_thresholds : int
        Candidate thresholds per feature (quantiles of its training values).

    Returns
    -------
    feature, threshold, alpha : ndarrays of shape (max_rounds,)
        Round ``t`` adds ``alpha[t] * [x_feature[t] > threshold[t]]`` to the score.

    Notes
    -----
    Cost: O(N C) per round for C candidate weak rankers (one matrix-vector product with the
    potentials) plus O(P) for the pair distribution, P the number of training pairs.
    """
    hi, lo = training_pairs(train)
    if hi.size == 0:
        raise ValueError("no training pair: every query has a single label")
    feat, cut = threshold_candidates(train.X, n_thresholds)
    H = (train.X[:, feat] > cut).astype(np.float64)  # (N, C) weak-ranker outputs
    d = np.full(hi.size, 1.0 / hi.size)
    out_f = np.empty(max_rounds, dtype=np.int64)
    out_c = np.empty(max_rounds)
    out_a = np.empty(max_rounds)
    for t in range(max_rounds):
        c, out_a[t], d = rankboost_round(d, H, hi, lo)
        out_f[t], out_c[t] = feat[c], cut[c]
    return out_f, out_c, out_a


def rankboost_round(d, H, hi, lo):
    """One RankBoost round: the best weak ranker, its weight and the re-weighted pairs.

    Parameters
    ----------
    d : ndarray of float64, shape (P,)
        Distribution over the training pairs (sums to 1).
    H : ndarray of float64, shape (N, C)
        Outputs in {0, 1} of the C candidate weak rankers on the N training documents.
    hi, lo : ndarrays of int64, shape (P,)
        The more and the less relevant document of each pair.

    Returns
    -------
    c : int
        Column of ``H`` with the largest ``|r|``.
    alpha : float
        ``1/2 log((1 + r) / (1 - r))``, the paper's choice for rankers with values in [0, 1]
        (sec. 3.2), which guarantees the normaliser ``Z <= sqrt(1 - r^2)``.
    d_new : ndarray of float64, shape (P,)
        ``d * exp(alpha (h(lo) - h(hi)))``, normalised.
    """
    n = H.shape[0]
    pot = np.bincount(hi, d, minlength=n) - np.bincount(lo, d, minlength=n)
    r = pot @ H
    c = int(np.argmax(np.abs(r)))
    rc = float(np.clip(r[c], -1 + 1e-12, 1 - 1e-12))
    alpha = 0.5 * np.log((1.0 + rc) / (1.0 - rc))
    h = H[:, c]
    d_new = d * np.exp(alpha * (h[lo] - h[hi]))
    return c, alpha, d_new / d_new.sum()


def rankboost_scores(X, feature, threshold, alpha):
    """Scores after each round: array (rounds, n_docs), row t = sum_{s <= t} alpha_s h_s(x)."""
    steps = (X[:, feature] > threshold).astype(np.float64) * alpha  # (N, T)
    return np.cumsum(steps, axis=1).T


def fit_rankboost(train, valid, max_rounds=300, n_thresholds=16):
    """RankBoost with the number of rounds chosen on validation NDCG@5 (pessimistic ties).

    Returns a scoring function ``X -> scores`` and the setting ``{"rounds", "valid_ndcg@5"}``.
    """
    f, c, a = rankboost_path(train, max_rounds, n_thresholds)
    v = ndcg_at_k(rankboost_scores(valid.X, f, c, a), valid.y, valid.group_ptr, 5).mean(-1)
    t = int(np.argmax(v))

    def score(X):
        return rankboost_scores(X, f[: t + 1], c[: t + 1], a[: t + 1])[-1]

    return score, {"rounds": t + 1, "valid_ndcg@5": float(v[t])}


# ---------------------------------------------------------------------------------------------
# Evaluation


def per_query(scores, split):
    """Per-query NDCG@1/3/5 (LETOR-4.0 discount): dict rule -> array (3, Q).

    Rules: ``"pessimistic"`` and ``"random"`` (mean over ``N_RANDOM_TIES`` tie orders).
    """
    pess = np.stack([ndcg_at_k(scores, split.y, split.group_ptr, k, convention="letor4")
                     for k in KS])
    rand = np.mean([[ndcg_at_k(scores, split.y, split.group_ptr, k, convention="letor4",
                               ties="random", seed=s) for k in KS]
                    for s in range(N_RANDOM_TIES)], axis=0)
    return {"pessimistic": pess, "random": rand}


def paired_bootstrap(diff, n_boot=10_000, seed=0, level=0.9):
    """Mean of per-query differences ``diff`` (..., Q) and its percentile bootstrap interval."""
    rng = np.random.default_rng(seed)
    q = diff.shape[-1]
    idx = rng.integers(0, q, size=(n_boot, q))
    means = diff[..., idx].mean(axis=-1)  # (..., n_boot)
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2], axis=-1)
    return diff.mean(axis=-1), lo, hi
