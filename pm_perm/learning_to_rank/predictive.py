"""Posterior predictive rankings of the ordinal n-choose-k ranker (Plackett-Luce draws).

The ordinal n-choose-k model with one document per level (``n_levels = D``, every count 1)
is the Plackett-Luce model: the top document is drawn with probability proportional to
``exp(s_d)`` among all ``D``, the second among the rest, and so on (Swersky et al. 2012,
sec. 3; tested against :class:`pm_perm.distributions.ordinal_n_choose_k.OrdinalNChooseK`). It is the
ordinal ranker's own distribution over a query's whole ranking, and its draws are exact and
cheap by the Gumbel-max trick: sorting ``s_d + G_d`` with independent standard Gumbel ``G_d``
gives a Plackett-Luce ranking (Yellott 1977).

Value convention: as :func:`pm_perm.learning_to_rank.rankmatch.ranking_predictive`, ``y[t, d]``
is the 0-based rank position of document ``d`` in draw ``t`` (0 = top).
"""

from __future__ import annotations

import numpy as np

__all__ = ["plackett_luce_predictive"]


def check_draws_and_features(theta_draws, X):
    """``(theta, X)`` as float64 arrays of shapes (n_draws, n_features) and (D, n_features) (one
    draw may be a vector), else a ``ValueError``."""
    X = np.asarray(X, dtype=np.float64)
    theta = np.atleast_2d(np.asarray(theta_draws, dtype=np.float64))
    if X.ndim != 2 or theta.ndim != 2 or theta.shape[1] != X.shape[1]:
        raise ValueError(
            f"theta_draws (n_draws, n_features) and X (D, n_features) must share n_features; "
            f"got {theta.shape} and {X.shape}"
        )
    return theta, X


def plackett_luce_predictive(theta_draws, X, *, rng=None):
    """Draws of a whole query's ranking under the ordinal ranker, one per draw of ``theta``.

    For each posterior draw ``theta_t`` one exact Plackett-Luce draw with scores
    ``s_d = <psi_d, theta_t>``, so the draws mix the uncertainty of ``theta`` with the model's
    own ranking noise (the analogue of RankMatch's
    :func:`~pm_perm.learning_to_rank.rankmatch.ranking_predictive`).

    Parameters
    ----------
    theta_draws : array_like of float, shape (n_draws, n_features)
        Posterior draws (e.g. ``OrdinalRanker.theta_draws_``); finite.
    X : array_like of float, shape (D, n_features)
        Features of the query's documents (any ``D``).
    rng : int or numpy.random.Generator, optional

    Returns
    -------
    ndarray of int64, shape (n_draws, D)
        ``y[t, d]`` = 0-based rank position of document ``d`` in draw ``t``. Cost
        O(n_draws D (n_features + log D)).

    Examples
    --------
    >>> import numpy as np
    >>> from pm_perm.learning_to_rank.predictive import plackett_luce_predictive
    >>> y = plackett_luce_predictive(np.ones((400, 1)), [[4.0], [0.0], [-4.0]], rng=0)
    >>> y.shape, bool(np.mean(y[:, 0] == 0) > 0.9)
    ((400, 3), True)
    """
    theta, X = check_draws_and_features(theta_draws, X)
    scores = theta @ X.T
    if not np.all(np.isfinite(scores)):
        raise ValueError("theta_draws and X must give finite scores (NaN or inf found); "
                         "check the posterior draws and the features")
    rng = np.random.default_rng(rng)
    order = np.argsort(-(scores + rng.gumbel(size=scores.shape)), axis=1, kind="stable")
    y = np.empty_like(order)
    np.put_along_axis(y, order, np.arange(X.shape[0])[None, :], axis=1)
    return y.astype(np.int64)
