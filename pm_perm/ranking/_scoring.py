"""Linear scores ``X @ theta`` of a fitted ranker, with the checks both rankers share."""

from __future__ import annotations

import numpy as np

__all__ = ["FeatureScaling", "linear_scores"]


def linear_scores(ranker, X, draws=False):
    """Scores ``X @ theta`` of a fitted ranker (rank by decreasing score).

    Parameters
    ----------
    ranker : RankMatch or OrdinalRanker
        Fitted by ``fit_map`` (``theta_``) or ``fit_nuts`` (also ``theta_draws_``).
    X : array_like of float, shape (n_docs, n_features)
        Features in the same columns as the training split (for a ranker trained on a
        :class:`~pm_perm.ranking.features.HingeBasis`, ``basis.transform(X)``).
    draws : bool, default False
        One row of scores per posterior draw.

    Returns
    -------
    ndarray, shape (n_docs,) or (n_draws, n_docs)
    """
    name = type(ranker).__name__
    if not hasattr(ranker, "theta_"):
        raise ValueError(f"{name} is not fitted: call fit_map or fit_nuts first")
    if draws and getattr(ranker, "theta_draws_", None) is None:
        raise ValueError(f"draws=True needs posterior draws: call {name}.fit_nuts first")
    theta = ranker.theta_draws_ if draws else ranker.theta_
    X = np.asarray(X, dtype=np.float64)
    n_features = theta.shape[-1]
    if X.ndim != 2 or X.shape[1] != n_features:
        raise ValueError(
            f"X must be a 2-D (n_docs, {n_features}) array with the training split's feature "
            f"columns, got shape {X.shape} (for a ranker trained on a HingeBasis, pass "
            "basis.transform(X))"
        )
    return theta @ X.T


class FeatureScaling:
    """Per-feature standardisation fitted on the training features, stored with a ranker.

    ``z = (x - center) / scale`` with ``center`` the training mean and ``scale`` the training
    standard deviation (1 for a constant feature, and everything the identity when
    ``standardize=False``). The rankers fit ``theta_std`` on ``z``; the scores
    ``z @ theta_std = x @ theta - center @ theta`` with ``theta = theta_std / scale`` (the raw
    coefficients the rankers report as ``theta_``) differ from ``x @ theta`` by one constant,
    which neither ranking model nor any ranking metric can see. So the likelihood is exactly the
    same function of the scores; what changes is the prior, ``N(0, sigma^2)`` on each
    ``theta_std`` (i.e. on ``scale_f * theta_f``), which makes ``prior_sigma`` mean the same
    thing for every feature whatever its units, and keeps the optimiser well-conditioned when a
    feature has values like 1e6.
    """

    def __init__(self, X, standardize=True):
        X = np.asarray(X, dtype=np.float64)
        F = X.shape[1]
        self.center = np.zeros(F)
        self.scale = np.ones(F)
        if standardize and X.shape[0]:
            self.center = X.mean(axis=0)
            sd = X.std(axis=0)
            ok = np.isfinite(sd) & (sd > 0) & (sd > 1e-12 * np.maximum(1.0, np.abs(self.center)))
            self.scale = np.where(ok, sd, 1.0)
            self.center = np.where(ok, self.center, 0.0)

    def transform(self, X):
        """``(X - center) / scale``."""
        return (np.asarray(X, dtype=np.float64) - self.center) / self.scale

    def to_raw(self, theta_std):
        """Coefficients of the raw features (``theta_std / scale``, along the last axis)."""
        return np.asarray(theta_std) / self.scale

    def to_std(self, theta):
        """Inverse of :meth:`to_raw`."""
        return np.asarray(theta) * self.scale
