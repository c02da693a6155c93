"""Linear scores ``X @ theta`` of a fitted ranker, with the checks both rankers share."""

from __future__ import annotations

import numpy as np

__all__ = ["linear_scores"]


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
