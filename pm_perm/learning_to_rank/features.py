"""Additive piecewise-linear scores for the linear rankers: a hinge basis per feature.

Both rankers score a document by ``<psi, theta>``, linear in ``theta``. Replacing the raw
features ``x`` by the basis

    ``psi(x) = (x_1, ..., x_F,  max(0, x_f - kappa_{f,t}) for every feature f and knot t)``

keeps the score linear in ``theta`` (so the exact likelihoods, MAP, NUTS and prediction by
sorting are unchanged) but makes it an additive model of the features,
``s(x) = sum_f g_f(x_f)`` with each ``g_f`` continuous and piecewise linear, with kinks at the
knots ``kappa_{f,t}``. This is the truncated-power (degree-1 spline) basis of a generalised
additive model; the Gaussian prior on the hinge coefficients is a prior on the changes of
slope of each ``g_f``, i.e. a smoothness prior. RankBoost's weak rankers (thresholds of single
features) are the step-function analogue.

Knots are the ``t / (n_knots + 1)`` quantiles (``t = 1 .. n_knots``) of each feature's values
on the training documents, fitted once by :meth:`HingeBasis.fit` and reused for validation and
test data. Repeated knots and knots at or outside the training range are dropped (a hinge at
the minimum is the linear term shifted; one at the maximum is 0 on the training data), so a
feature that is mostly one value gets fewer hinges, and ``n_knots=0`` is the identity.

Cost: :meth:`HingeBasis.fit` O(n_docs F log n_docs); :meth:`HingeBasis.transform` O(n_docs
n_columns) time and memory, ``n_columns <= F (1 + n_knots)``.
"""

from __future__ import annotations

import numpy as np

from pm_perm.learning_to_rank.data import RankingSplit

__all__ = ["HingeBasis"]


class HingeBasis:
    """Per-feature hinge basis ``x_f, max(0, x_f - kappa)`` with knots at training quantiles.

    Parameters
    ----------
    n_knots : int, default 4
        Candidate knots per feature, at the ``1/(n_knots+1), ..., n_knots/(n_knots+1)``
        quantiles of the training values (4: the quintiles). ``0`` gives the raw features.

    Attributes
    ----------
    knots_ : list of ndarray
        After :meth:`fit`: the knots of each input feature, increasing, strictly inside the
        training range.
    columns_ : ndarray, shape (n_columns, 2)
        Column ``c`` of the transformed matrix is input feature ``int(columns_[c, 0])`` when
        ``columns_[c, 1]`` is NaN, else ``max(0, x_f - columns_[c, 1])``. The first
        ``n_features_in_`` columns are the raw features, in order.
    n_features_in_ : int
        Number of input features.

    Examples
    --------
    >>> import numpy as np
    >>> from pm_perm.learning_to_rank.features import HingeBasis
    >>> X = np.arange(10.0).reshape(10, 1)
    >>> basis = HingeBasis(n_knots=1).fit(X)
    >>> basis.knots_[0]
    array([4.5])
    >>> basis.transform(np.array([[2.0], [7.0]]))
    array([[2. , 0. ],
           [7. , 2.5]])
    """

    def __init__(self, n_knots=4):
        if isinstance(n_knots, bool) or not isinstance(n_knots, (int, np.integer)) or n_knots < 0:
            raise ValueError(f"n_knots must be a non-negative integer, got {n_knots!r}")
        self.n_knots = int(n_knots)

    def fit(self, X):
        """Place the knots at quantiles of the columns of ``X`` (training documents).

        Parameters
        ----------
        X : array_like of float, shape (n_docs, n_features), or RankingSplit
            Finite training features.

        Returns
        -------
        self
        """
        X = self._as_matrix(X, "X")
        if X.shape[0] == 0:
            raise ValueError("X has no rows; fit the basis on the training documents")
        levels = np.arange(1, self.n_knots + 1) / (self.n_knots + 1)
        self.n_features_in_ = X.shape[1]
        self.knots_ = []
        cols = [(f, np.nan) for f in range(X.shape[1])]
        for f in range(X.shape[1]):
            x = X[:, f]
            k = np.unique(np.quantile(x, levels)) if self.n_knots else np.empty(0)
            k = k[(k > x.min()) & (k < x.max())]
            self.knots_.append(k)
            cols.extend((f, kappa) for kappa in k)
        self.columns_ = np.array(cols, dtype=np.float64).reshape(-1, 2)
        return self

    def transform(self, X):
        """The basis: raw features, then the hinges of feature 0, feature 1, ...

        Parameters
        ----------
        X : array_like of float, shape (n_docs, n_features_in_)

        Returns
        -------
        ndarray of float64, shape (n_docs, n_columns)
        """
        if not hasattr(self, "knots_"):
            raise ValueError("HingeBasis is not fitted: call fit(train.X) first")
        X = self._as_matrix(X, "X")
        if X.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {X.shape[1]} features but the basis was fitted on {self.n_features_in_}"
            )
        hinges = [np.maximum(X[:, [f]] - k[None, :], 0.0)
                  for f, k in enumerate(self.knots_) if k.size]
        return np.concatenate([X, *hinges], axis=1)

    def fit_transform(self, X):
        """``fit(X).transform(X)``."""
        return self.fit(X).transform(X)

    def transform_split(self, split):
        """The same :class:`~pm_perm.learning_to_rank.data.RankingSplit` with transformed
        features."""
        if not isinstance(split, RankingSplit):
            raise ValueError("split must be a pm_perm.learning_to_rank.data.RankingSplit")
        return RankingSplit(self.transform(split.X), split.y, split.group_ptr, split.qids,
                            split.n_dropped_queries)

    def shape_function(self, theta, feature, x):
        """The additive component ``g_f(x)`` of the score ``<psi(x), theta>`` for one feature.

        Parameters
        ----------
        theta : array_like, shape (n_columns,) or (n_draws, n_columns)
            Coefficients on the transformed features (e.g. ``ranker.theta_``), or one row per
            posterior draw (e.g. ``ranker.theta_draws_``).
        feature : int
            Input feature ``f``.
        x : array_like of float, shape (n,)
            Values of feature ``f``.

        Returns
        -------
        ndarray, shape (n,) or (n_draws, n)
            ``theta[f] x + sum_t theta[hinge t of f] max(0, x - kappa_t)``, per draw; the score
            of a document is the sum of these over features. Only differences of ``g_f``
            between documents of a query matter to the rankers (a constant cancels).
        """
        if not hasattr(self, "knots_"):
            raise ValueError("HingeBasis is not fitted: call fit(train.X) first")
        theta = np.asarray(theta, dtype=np.float64)
        n_cols = self.columns_.shape[0]
        if theta.ndim not in (1, 2) or theta.shape[-1] != n_cols:
            raise ValueError(
                f"theta must have one entry per basis column ({n_cols}), or one row of them per "
                f"draw; got shape {theta.shape}"
            )
        if not 0 <= int(feature) < self.n_features_in_:
            raise ValueError(f"feature must be in 0..{self.n_features_in_ - 1}, got {feature}")
        x = np.asarray(x, dtype=np.float64).reshape(-1)
        of_f = np.flatnonzero(self.columns_[:, 0] == int(feature))
        design = np.column_stack(
            [x] + [np.maximum(x - self.columns_[c, 1], 0.0) for c in of_f[1:]]
        )  # (n, 1 + hinges of f)
        return theta[..., of_f] @ design.T

    @staticmethod
    def _as_matrix(X, name):
        if isinstance(X, RankingSplit):
            X = X.X
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise ValueError(f"{name} must be a 2-D (n_docs, n_features) array, got {X.shape}")
        if not np.all(np.isfinite(X)):
            raise ValueError(f"{name} has NaN or infinite values; clean or impute them first")
        return X
