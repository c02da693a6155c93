"""Ordinal n-choose-k ranker: whole query lists under ``OrdinalNChooseK`` (Swersky et al. 2012).

Each training query is one observation: the relevance labels ``y`` (0 = least relevant,
``R - 1`` = most relevant) of all ``D`` of its documents, with item logits the linear scores

    ``theta_d = <psi_d, theta>``.

The likelihood is the ordinal n-choose-k model conditioned on the query's label counts
(Swersky et al., NIPS 2012, sec. 3 and 5.2): for ``r = R - 1`` down to 1 the ``k_r`` documents
of label ``r`` are a conditional-Bernoulli choice among the documents of label ``<= r``,

    ``log p(y | k) = sum_{r >= 1} [sum_{y_d = r} theta_d - log e_{k_r}(exp theta_d : y_d <= r)]``

(:class:`pm_perm.distributions.ordinal_n_choose_k.OrdinalNChooseK` with ``n_levels=R``, exact
elementary symmetric polynomials; the count prior, which does not depend on ``theta``, is left
out). A constant added to every logit of a query cancels, so no intercept is needed and
features constant within a query do not matter. Prediction sorts the documents by
``<psi, theta>``, which the paper's Theorem 1 shows to be optimal in expectation for every
monotonic ranking gain (NDCG, Precision@K).

One batched likelihood term
    Queries have different lengths. They are padded to the longest training query with
    documents whose logit is ``-inf`` and label 0: such a document can never be chosen at any
    level and adds ``exp(-inf) = 0`` to every elementary symmetric polynomial, so the padded
    likelihood and its gradient equal the unpadded ones exactly (tested). All queries then form
    one ``(Q, D_max)`` observation of a single ``OrdinalNChooseK`` variable. Queries whose
    documents all share one label carry no ranking information (their likelihood is 1 for every
    ``theta``) and are skipped.

Cost
    Log-likelihood and gradient O(sum_q D_max k_q) for ``k_q`` the number of documents above
    label 0 (one O(D k) dynamic program per level and query), plus the ``(Q, D_max, F)`` matrix
    product for the scores; memory O(Q D_max F) for the padded features.

References
----------
Swersky, K., Tarlow, D., Adams, R. P., Zemel, R. S. & Frey, B. J. (2012). Probabilistic
n-choose-k models for classification and ranking. NIPS 25, sec. 5.2.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from pm_perm.distributions.ordinal_n_choose_k import OrdinalNChooseK
from pm_perm.inference import whitened_normal
from pm_perm.learning_to_rank._scoring import FeatureScaling, LinearRanker
from pm_perm.learning_to_rank.data import RankingSplit
from pm_perm.learning_to_rank.metrics import MAX_LABEL

__all__ = [
    "OrdinalRanker",
    "PaddedQueries",
    "ordinal_model",
    "pad_queries",
]


@dataclass(frozen=True, eq=False)
class PaddedQueries:
    """Training queries padded to a common length.

    Attributes
    ----------
    X : ndarray of float64, shape (Q, D_max, n_features)
        Features; padded rows are 0.
    labels : ndarray of int64, shape (Q, D_max)
        Labels (0 = least relevant); padded entries are 0.
    mask : ndarray of bool, shape (Q, D_max)
        True for real documents, False for padding.
    query : ndarray of int64, shape (Q,)
        Position in the split of each kept query.
    n_levels : int
        R: labels lie in ``0..R-1``.
    n_skipped_queries : int
        Queries whose documents all share one label (no ranking information).
    """

    X: np.ndarray
    labels: np.ndarray
    mask: np.ndarray
    query: np.ndarray
    n_levels: int
    n_skipped_queries: int

    @property
    def n_queries(self) -> int:
        """Number of kept queries Q."""
        return self.labels.shape[0]


def pad_queries(split, *, n_levels=None):
    """Pad the informative queries of ``split`` to the length of the longest one.

    Parameters
    ----------
    split : RankingSplit
    n_levels : int, optional
        R; default ``max label + 1`` of the split. Must exceed every label and be at most
        ``MAX_LABEL + 1`` (101).

    Returns
    -------
    PaddedQueries

    Raises
    ------
    ValueError
        A label >= ``n_levels``, ``n_levels`` above ``MAX_LABEL + 1``, or no query with two
        different labels.
    """
    if not isinstance(split, RankingSplit):
        raise ValueError("split must be a pm_perm.learning_to_rank.data.RankingSplit "
                         "(see read_letor)")
    top = int(split.y.max())
    if top == int(split.y.min()):
        raise ValueError(f"every document of the split has label {top}: no query has documents "
                         "of two different labels; nothing to train on")
    R = top + 1 if n_levels is None else int(n_levels)
    if R < 2 or top >= R or R > MAX_LABEL + 1:
        raise ValueError(
            f"n_levels must be at least 2, exceed every label (labels go up to {top}) and be at "
            f"most MAX_LABEL + 1 = {MAX_LABEL + 1}; got {n_levels!r}"
        )
    ptr, y = split.group_ptr, split.y
    keep = [
        q for q in range(split.n_queries)
        if y[ptr[q]:ptr[q + 1]].min() < y[ptr[q]:ptr[q + 1]].max()
    ]
    if not keep:
        raise ValueError("no query has documents of two different labels; nothing to train on")
    sizes = np.diff(ptr)[keep]
    Q, D, F = len(keep), int(sizes.max()), split.n_features
    X = np.zeros((Q, D, F))
    labels = np.zeros((Q, D), dtype=np.int64)
    mask = np.zeros((Q, D), dtype=bool)
    for i, q in enumerate(keep):
        n = sizes[i]
        X[i, :n] = split.X[ptr[q]:ptr[q + 1]]
        labels[i, :n] = y[ptr[q]:ptr[q + 1]]
        mask[i, :n] = True
    return PaddedQueries(X, labels, mask, np.asarray(keep, dtype=np.int64), R,
                         split.n_queries - Q)


def ordinal_model(padded, *, prior_sigma=1.0, whitening=None):
    """PyMC model of the ordinal n-choose-k ranker, ``theta ~ N(0, prior_sigma^2 I)``.

    Parameters
    ----------
    padded : PaddedQueries
        From :func:`pad_queries`.
    prior_sigma : float, default 1.0
        Prior scale, in the ``pm.Data`` container ``"prior_sigma"`` (change it with
        ``pm.set_data`` without rebuilding the model).
    whitening : tuple (loc, L), optional
        Sample ``theta = loc + L z`` through a free ``z`` (flat prior; the Gaussian prior on
        ``theta`` becomes the ``pm.Potential`` ``"theta_prior"``). Same posterior of ``theta``;
        with ``loc`` the MAP and ``L L^T`` the inverse Hessian there, ``z`` is close to standard
        normal (see :meth:`OrdinalRanker.fit_nuts`).

    Returns
    -------
    pymc.Model
        ``theta`` (dims ``"feature"``) and one observed ``OrdinalNChooseK`` variable ``"labels"``
        of shape ``(Q, D_max)`` (dims ``("query", "doc")``) whose logits are ``X @ theta`` on
        real documents and ``-inf`` on padding; ``n_levels=R`` (conditioned on the counts).
    """
    if not isinstance(padded, PaddedQueries):
        raise ValueError("padded must be a PaddedQueries (see pad_queries)")
    Q, D, F = padded.X.shape
    coords = {"feature": np.arange(F), "query": padded.query, "doc": np.arange(D)}
    with pm.Model(coords=coords) as model:
        sigma = pm.Data("prior_sigma", float(prior_sigma))
        theta = whitened_normal("theta", 0.0, sigma, dims="feature", whitening=whitening)
        logits = pt.where(padded.mask, pt.dot(padded.X, theta), -np.inf)
        OrdinalNChooseK("labels", logits=logits, n_levels=padded.n_levels,
                        observed=padded.labels, dims=("query", "doc"))
    return model


class OrdinalRanker(LinearRanker):
    """Ordinal n-choose-k ranker: fit ``theta`` on whole query lists, rank by ``<psi, theta>``.

    The interface mirrors :class:`pm_perm.learning_to_rank.rankmatch.RankMatch`.

    Parameters
    ----------
    n_levels : int, optional
        R; default ``max training label + 1``.
    prior_sigmas : sequence of float, default (0.1, 0.3, 1, 3, 10)
        Candidate prior scales; :meth:`fit_map` with a validation split keeps the one with the
        best validation NDCG@5 (the paper tunes its l2 strength on validation).
    lbfgs_memory, standardize, maxiter : int, bool, int, default 10, True, 50000
        As for every linear ranker (:class:`~pm_perm.learning_to_rank._scoring.LinearRanker`).

    Attributes
    ----------
    padded_ : PaddedQueries
        The training queries; the fitted attributes and methods are
        :class:`~pm_perm.learning_to_rank._scoring.LinearRanker`'s.

    Notes
    -----
    The log-posterior is strictly concave (every level term is linear minus a log-partition
    function), so the warm starts of ``fit_map``'s path of prior scales do not change its optima.

    Examples
    --------
    >>> import numpy as np
    >>> from pm_perm.learning_to_rank.data import RankingSplit
    >>> from pm_perm.learning_to_rank.ordinal import OrdinalRanker
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 2))
    >>> y = (X @ [2.0, -1.0] > 0.5).astype(int) + (X @ [2.0, -1.0] > 2.0)
    >>> split = RankingSplit(X, y, np.arange(0, 61, 6), np.arange(10))
    >>> theta = OrdinalRanker(prior_sigmas=(3.0,)).fit_map(split).theta_
    >>> bool(theta[0] > 0 > theta[1])
    True
    """

    def __init__(self, n_levels=None, prior_sigmas=(0.1, 0.3, 1.0, 3.0, 10.0), lbfgs_memory=10,
                 standardize=True, maxiter=50_000):
        super().__init__(prior_sigmas, lbfgs_memory, standardize, maxiter)
        self.n_levels = n_levels

    def _build(self, train):
        t0 = time.perf_counter()
        if not isinstance(train, RankingSplit):
            raise ValueError("train must be a pm_perm.learning_to_rank.data.RankingSplit "
                             "(see read_letor)")
        self.scaling_ = FeatureScaling(train.X, self.standardize)
        self.padded_ = pad_queries(replace(train, X=self.scaling_.transform(train.X)),
                                   n_levels=self.n_levels)
        self._train = train
        self.model_ = ordinal_model(self.padded_, prior_sigma=self.prior_sigmas[0])
        self.timings_["build"] = time.perf_counter() - t0

    def _model(self, sigma, whitening):
        return ordinal_model(self.padded_, prior_sigma=sigma, whitening=whitening)
