"""RankMatch: learning to rank as exponential-family bipartite matching (Petterson et al. 2009).

A query's documents are matched to rank positions. For a subset of ``M`` documents with
features ``psi_i`` the edge logits are

    ``W[i, j] = c_j <psi_i, theta>``,  row ``i`` = document, column ``j`` = rank position,

with a non-increasing position weight ``c`` (default ``c_j = M - j`` for positions
``j = 1..M``, i.e. ``c = (M - 1, ..., 1, 0)``), so ``y[i]`` is the rank position of document
``i`` and the mode of ``p(y) = exp(sum_i W[i, y[i]]) / perm(exp W)`` sorts the documents by the
score ``<psi_i, theta>`` (Hardy-Littlewood-Polya). Prediction is that sort; it needs no
permanent.

Weak labels (ties)
    Relevance ratings only say that a document of a higher rating precedes one of a lower
    rating; documents of equal rating may come in any order. The likelihood of a subset is
    therefore the probability of the set ``C`` of permutations consistent with the ratings,

        ``log p(C) = log sum_{y in C} exp(sum_i W[i, y[i]]) - log perm(exp W)``.

    ``C`` is a product of independent choices, one per rating block (the documents of rating
    ``r`` fill the positions after all documents of higher rating), so the first term is the sum
    over blocks of ``log perm`` of the block's sub-matrix. It is computed here as ONE
    ``log perm`` of the (M, M) matrix equal to ``W`` on the block-diagonal allowed pattern and
    ``-inf`` elsewhere (:func:`weak_label_mask`), so every subset of every query goes through a
    single batched :func:`pm_perm.ops.permanent.log_permanent` call for the numerator and one for
    the denominator. With ``M`` equal to the number of ratings and one document of each rating
    the weak label is the strict ranking.

Training subsets (:func:`sample_subsets`)
    Per query, ``round(subsets_per_doc * D * M)`` subsets (at least one) of ``M`` distinct
    documents, drawn independently (so the same subset may recur: bootstrap), each uniformly
    among the subsets containing at least one document of every rating present in the query.
    Queries whose documents all share one rating carry no ranking information and are skipped;
    so are queries with fewer than ``M`` documents.

Cost
    Two exact permanents of M x M per subset and likelihood evaluation, O(S M 2^M) time for S
    subsets, and O(S M^2) memory for the logits.

References
----------
Petterson, J., Caetano, T., McAuley, J. & Yu, J. (2009). Exponential family graph matching and
ranking. NIPS 22, sec. 5.1.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from itertools import product
from math import comb

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from pm_perm.inference import whitened_normal
from pm_perm.kernels.permutation_sampler import sample_permutations
from pm_perm.learning_to_rank._scoring import FeatureScaling, LinearRanker
from pm_perm.learning_to_rank.data import RankingSplit
from pm_perm.learning_to_rank.predictive import check_draws_and_features
from pm_perm.ops.permanent import exact_max_m, log_permanent

__all__ = [
    "RankMatch",
    "RankMatchSubsets",
    "position_weights",
    "ranking_predictive",
    "rankmatch_model",
    "sample_subsets",
    "weak_label_log_likelihood",
    "weak_label_mask",
]


def position_weights(M, c=None):
    """Validated position weights ``c`` of length ``M`` (default ``c_j = M - j``, j = 1..M).

    Parameters
    ----------
    M : int
        Subset size, at least 1 and at most the exact permanent limit.
    c : array_like of float, shape (M,), optional
        Finite, non-increasing weights (position 1 first). A non-increasing ``c`` makes sorting
        by score the mode of every subset's distribution.

    Returns
    -------
    ndarray of float64, shape (M,)
    """
    if isinstance(M, bool) or not isinstance(M, int | np.integer) or not 1 <= M <= exact_max_m():
        raise ValueError(f"M must be an integer from 1 to {exact_max_m()}, got {M!r}")
    if c is None:
        return np.arange(M - 1, -1, -1, dtype=np.float64)
    c = np.asarray(c, dtype=np.float64)
    if c.shape != (M,) or not np.all(np.isfinite(c)):
        raise ValueError(f"c must be {M} finite position weights, got shape {c.shape}")
    if np.any(np.diff(c) > 0):
        raise ValueError("c must be non-increasing (position 1 first), e.g. c_j = M - j")
    return c


def weak_label_mask(ratings):
    """Allowed (document, position) pairs under the weak label of each subset.

    Parameters
    ----------
    ratings : array_like of int, shape (..., M)
        Rating of each document (row) of a subset, in any order.

    Returns
    -------
    ndarray of bool, shape (..., M, M)
        ``mask[..., i, j]`` is True when position ``j`` (0-based) lies in the block of rating
        ``ratings[..., i]``: ``n_higher <= j < n_higher + n_equal``, with ``n_higher`` the number
        of documents of higher rating in the subset and ``n_equal`` of equal rating. O(M^2).
    """
    r = np.asarray(ratings)
    if r.ndim < 1 or r.dtype.kind not in "iu":
        raise ValueError(f"ratings must be integers of shape (..., M), got {r.dtype} {r.shape}")
    higher = (r[..., None, :] > r[..., :, None]).sum(-1)
    equal = (r[..., None, :] == r[..., :, None]).sum(-1)
    j = np.arange(r.shape[-1])
    return (j >= higher[..., None]) & (j < (higher + equal)[..., None])


def weak_label_log_likelihood(scores, mask, c):
    """Symbolic weak-label log-likelihood of each subset, shape (S,).

    Parameters
    ----------
    scores : tensor_like of float, shape (S, M)
        ``<psi_i, theta>`` of the documents (rows) of each subset.
    mask : tensor_like of bool, shape (S, M, M)
        :func:`weak_label_mask` of the subsets' ratings.
    c : tensor_like of float, shape (M,)
        Position weights (:func:`position_weights`; not checked here).

    Returns
    -------
    TensorVariable, shape (S,)
        ``log perm(exp W_C) - log perm(exp W)`` with ``W = scores[:, :, None] * c`` and ``W_C``
        equal to ``W`` where ``mask`` and ``-inf`` elsewhere: the log-probability of the set of
        rankings consistent with the ratings. Two batched exact permanents, O(S M 2^M).
    """
    scores = pt.as_tensor_variable(scores)
    W = scores[:, :, None] * pt.as_tensor_variable(c)
    W_consistent = pt.where(pt.as_tensor_variable(mask), W, -np.inf)
    return log_permanent(W_consistent) - log_permanent(W)


@dataclass(frozen=True, eq=False)
class RankMatchSubsets:
    """Training subsets: ``docs[s]`` are row indices (into the split) of subset ``s``.

    Attributes
    ----------
    docs : ndarray of int64, shape (S, M)
        Documents of each subset, sorted by decreasing rating.
    ratings : ndarray of int64, shape (S, M)
        Their ratings.
    query : ndarray of int64, shape (S,)
        Query position (in the split) of each subset.
    n_skipped_queries : int
        Queries without ranking information (a single rating) or with fewer than M documents.
    """

    docs: np.ndarray
    ratings: np.ndarray
    query: np.ndarray
    n_skipped_queries: int

    @property
    def M(self) -> int:
        """Subset size."""
        return self.docs.shape[1]

    @property
    def mask(self) -> np.ndarray:
        """:func:`weak_label_mask` of the ratings, shape (S, M, M)."""
        return weak_label_mask(self.ratings)


def sample_subsets(split, M, *, subsets_per_doc=0.4, rng=None):
    """Bootstrap training subsets of ``M`` documents with every rating of their query.

    Each subset is uniform among the M-document subsets of its query that contain every rating
    present in the query: the number of documents of each rating is drawn from its exact
    (multivariate hypergeometric, conditioned on >= 1 of each) law, then the documents of each
    rating uniformly without replacement.

    Parameters
    ----------
    split : RankingSplit
    M : int
        Subset size, at least 2.
    subsets_per_doc : float, default 0.4
        Query ``k`` with ``D`` documents gets ``max(1, round(subsets_per_doc * D * M))`` subsets
        (0.4 as in the paper).
    rng : int or numpy.random.Generator, optional

    Returns
    -------
    RankMatchSubsets

    Raises
    ------
    ValueError
        ``M < 2``, a query needing more ratings than ``M``, or no usable query.
    """
    if not isinstance(split, RankingSplit):
        raise ValueError("split must be a pm_perm.learning_to_rank.data.RankingSplit "
                         "(see read_letor)")
    position_weights(M)
    if M < 2:
        raise ValueError("M must be at least 2: a single document has no ranking")
    if not np.isfinite(subsets_per_doc) or subsets_per_doc <= 0:
        raise ValueError(f"subsets_per_doc must be positive, got {subsets_per_doc!r}")
    rng = np.random.default_rng(rng)
    docs, query, skipped = [], [], 0
    for q in range(split.n_queries):
        lo, hi = split.group_ptr[q], split.group_ptr[q + 1]
        labels = split.y[lo:hi]
        levels = np.unique(labels)[::-1]
        if levels.size < 2 or hi - lo < M:
            skipped += 1
            continue
        if levels.size > M:
            raise ValueError(
                f"query {split.qids[q]} has {levels.size} distinct ratings but M = {M}: every "
                f"subset must hold one document of each rating, so use M >= {levels.size}"
            )
        n = round(subsets_per_doc * (hi - lo) * M)
        rows = [lo + np.flatnonzero(labels == r) for r in levels]
        counts = _draw_rating_counts([len(x) for x in rows], M, max(1, n), rng)
        for cnt in counts:
            picks = [rng.choice(x, m, replace=False) for x, m in zip(rows, cnt, strict=True)]
            docs.append(np.concatenate(picks))
            query.append(q)
    if not docs:
        raise ValueError(
            f"no query has two ratings and at least M = {M} documents; nothing to train on"
        )
    docs = np.asarray(docs, dtype=np.int64)
    return RankMatchSubsets(docs, split.y[docs], np.asarray(query, dtype=np.int64), skipped)


def _draw_rating_counts(sizes, M, n, rng):
    """``n`` draws of (m_1..m_R), m_r >= 1, sum M, with probability prop. to prod C(n_r, m_r)."""
    R = len(sizes)
    options = [
        m
        for m in product(range(1, M - R + 2), repeat=R)
        if sum(m) == M and all(mi <= s for mi, s in zip(m, sizes, strict=True))
    ]
    weights = np.array(
        [np.prod([comb(s, mi) for s, mi in zip(sizes, m, strict=True)], dtype=float)
         for m in options]
    )
    pick = rng.choice(len(options), size=n, p=weights / weights.sum())
    return [options[i] for i in pick]


def ranking_predictive(theta_draws, X, *, c=None, rng=None):
    """Draws of a whole query's ranking, one per posterior draw of ``theta``.

    The matching model applied to all ``D`` documents of one query: for each draw ``theta_t``
    an exact draw ``y_t`` from ``p(y) = exp(sum_i c_{y[i]} <psi_i, theta_t>) / perm``, so the
    draws mix the uncertainty of ``theta`` with the model's own ranking noise.

    Parameters
    ----------
    theta_draws : array_like of float, shape (n_draws, n_features)
    X : array_like of float, shape (D, n_features)
        Features of the query's documents; ``D`` up to the exact limit (26).
    c : array_like of float, shape (D,), optional
        Position weights; default ``c_j = D - j``.
    rng : int or numpy.random.Generator, optional

    Returns
    -------
    ndarray of int64, shape (n_draws, D)
        ``y[t, i]`` = 0-based rank position of document ``i`` in draw ``t``. Cost O(D 2^D) per
        draw (one table per draw of theta).

    Examples
    --------
    >>> import numpy as np
    >>> from pm_perm.learning_to_rank.rankmatch import ranking_predictive
    >>> y = ranking_predictive(np.ones((200, 1)), [[3.0], [0.0], [-3.0]], rng=0)
    >>> y.shape, bool(np.mean(y[:, 0] == 0) > 0.9)
    ((200, 3), True)
    """
    theta, X = check_draws_and_features(theta_draws, X)
    c = position_weights(X.shape[0], c)
    W = (theta @ X.T)[:, :, None] * c  # (n_draws, D, D)
    return sample_permutations(W, rng=rng)


def rankmatch_model(X, subsets, *, c=None, prior_sigma=1.0, whitening=None):
    """PyMC model of RankMatch with a Gaussian prior ``theta ~ N(0, prior_sigma^2 I)``.

    Parameters
    ----------
    X : array_like of float, shape (n_docs, n_features)
        Features of the split the subsets index.
    subsets : RankMatchSubsets
    c : array_like of float, shape (M,), optional
        Position weights (:func:`position_weights`).
    prior_sigma : float, default 1.0
        Prior scale, held in the ``pm.Data`` container ``"prior_sigma"`` so it can be changed
        with ``pm.set_data`` without rebuilding the model.
    whitening : tuple (loc, L), optional
        Sample ``theta = loc + L z`` through a free variable ``z`` (dims ``"feature"``, flat
        prior; the Gaussian prior on ``theta`` becomes the ``pm.Potential`` ``"theta_prior"``)
        instead of ``theta`` directly. The posterior of ``theta`` is the same (a linear map has a
        constant Jacobian); with ``loc`` the MAP and ``L L^T`` the inverse Hessian there, the
        posterior of ``z`` is close to standard normal, which NUTS explores with short
        trajectories however correlated the features are (see :meth:`RankMatch.fit_nuts`).

    Returns
    -------
    pymc.Model
        ``theta`` (dims ``"feature"``; free, or a ``pm.Deterministic`` under ``whitening``) and
        one ``pm.Potential`` ``"weak_label_loglik"`` summing :func:`weak_label_log_likelihood`
        over all subsets.
    """
    X = np.asarray(X, dtype=np.float64)
    c = position_weights(subsets.M, c)
    Xs = X[subsets.docs]  # (S, M, F): only the rows the subsets use
    with pm.Model(coords={"feature": np.arange(X.shape[1])}) as model:
        sigma = pm.Data("prior_sigma", float(prior_sigma))
        theta = whitened_normal("theta", 0.0, sigma, dims="feature", whitening=whitening)
        loglik = weak_label_log_likelihood(pt.dot(Xs, theta), subsets.mask, c)
        pm.Potential("weak_label_loglik", loglik.sum())
    return model


class RankMatch(LinearRanker):
    """RankMatch ranker: fit ``theta`` on bootstrap subsets, rank by ``<psi, theta>``.

    Parameters
    ----------
    M : int, default 3
        Subset size (the paper uses the number of ratings; larger M uses the weak label).
    c : array_like of float, optional
        Non-increasing position weights; default ``c_j = M - j``.
    subsets_per_doc : float, default 0.4
        See :func:`sample_subsets`.
    prior_sigmas : sequence of float, default (0.1, 0.3, 1, 3, 10)
        Candidate prior scales; :meth:`fit_map` with a validation split keeps the one with the
        best validation NDCG@5 (the paper chooses its lambda = 1 / sigma^2 the same way).
    seed : int, default 0
        Seed of the subset sampling.
    lbfgs_memory : int, default 10
        L-BFGS-B memory (``maxcor``) of :meth:`fit_map`. On MQ2008 50 needs about half the
        iterations of 10 for the same test NDCG (``benchmarks/bench_ranking.py --lbfgs-memory
        10 50``); 10, scipy's default, stays the default because the recorded benchmarks use
        it.
    standardize, maxiter : bool, int, default True, 50000
        As for every linear ranker (:class:`~pm_perm.learning_to_rank._scoring.LinearRanker`).

    Attributes
    ----------
    subsets_ : RankMatchSubsets
        The training subsets; the fitted attributes and methods are
        :class:`~pm_perm.learning_to_rank._scoring.LinearRanker`'s.

    Notes
    -----
    With strict labels (``M`` = number of ratings in every subset) the log-posterior is concave
    (linear minus a log-sum-exp of linear functions), so the warm starts of ``fit_map``'s path
    of prior scales do not change its optima; the weak-label likelihood with ties is a
    difference of two such log-sum-exps and need not be concave.
    """

    def __init__(self, M=3, c=None, subsets_per_doc=0.4, prior_sigmas=(0.1, 0.3, 1.0, 3.0, 10.0),
                 seed=0, lbfgs_memory=10, standardize=True, maxiter=50_000):
        super().__init__(prior_sigmas, lbfgs_memory, standardize, maxiter)
        self.c = position_weights(M, c)
        self.M = M
        self.subsets_per_doc = subsets_per_doc
        self.seed = seed

    def _build(self, train):
        t0 = time.perf_counter()
        self.subsets_ = sample_subsets(
            train, self.M, subsets_per_doc=self.subsets_per_doc, rng=self.seed
        )
        self.scaling_ = FeatureScaling(train.X, self.standardize)
        self._train, self._X = train, self.scaling_.transform(train.X)
        self.model_ = rankmatch_model(self._X, self.subsets_, c=self.c,
                                      prior_sigma=self.prior_sigmas[0])
        self.timings_["build"] = time.perf_counter() - t0

    def _model(self, sigma, whitening):
        return rankmatch_model(self._X, self.subsets_, c=self.c, prior_sigma=sigma,
                               whitening=whitening)
