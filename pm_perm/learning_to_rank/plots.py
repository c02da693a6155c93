"""Figures of fitted rankers: posterior shape functions of an additive (hinge-basis) score."""

from __future__ import annotations

import numpy as np

__all__ = ["plot_shape_functions", "shape_bands"]


def shape_bands(basis, draws, feature, x_train, n_grid=101, level=0.9):
    """Posterior summary of one feature's shape ``g_f(x) - g_f(min x)`` on a grid.

    Parameters
    ----------
    basis : HingeBasis
        Fitted :class:`~pm_perm.learning_to_rank.features.HingeBasis`.
    draws : ndarray, shape (n_draws, n_columns)
        Posterior draws of the coefficients (e.g. ``ranker.theta_draws_``); one row works as
        a point estimate.
    feature : int
        Input feature ``f``.
    x_train : ndarray, shape (n,)
        The feature's training values; the grid spans their range.
    n_grid : int, default 101
    level : float, default 0.9
        Probability of the central band.

    Returns
    -------
    (grid, mean, lo, hi) : ndarrays of shape (n_grid,)
        ``g_f`` relative to its value at the smallest training value (a constant cancels within
        a query), its posterior mean and the central ``level`` band over draws.
    """
    draws = np.atleast_2d(np.asarray(draws, dtype=np.float64))
    grid = np.linspace(np.min(x_train), np.max(x_train), n_grid)
    g = basis.shape_function(draws, feature, grid)
    g = g - g[:, :1]
    tail = (1.0 - level) / 2
    return grid, g.mean(axis=0), np.quantile(g, tail, axis=0), np.quantile(g, 1 - tail, axis=0)


def plot_shape_functions(basis, draws, X_train, *, top=6, seed=0, title=None):
    """Posterior shape functions of the ``top`` features whose mean shape varies most.

    Parameters
    ----------
    basis : HingeBasis
        Fitted on ``X_train``.
    draws : ndarray, shape (n_draws, n_columns)
        Posterior draws of the coefficients.
    X_train : ndarray, shape (n_docs, n_features_in)
        Raw training features (for the ranges, the choice of features and a rug of values).
    top : int, default 6
    seed : int, default 0
        Seed of the rug's subsample.
    title : str, optional

    Returns
    -------
    (fig, chosen) : (matplotlib.figure.Figure, list of int)
        The figure (posterior mean and 90% band of ``g_f(x) - g_f(min x)`` per panel, knots as
        dotted lines) and the 0-based features shown, most varying first.

    Notes
    -----
    Cost: one ``(n_draws, n_grid)`` evaluation per feature with a non-constant training range.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    X_train = np.asarray(X_train, dtype=np.float64)
    bands = {f: shape_bands(basis, draws, f, X_train[:, f])
             for f in range(X_train.shape[1]) if np.ptp(X_train[:, f]) > 0}
    chosen = sorted(bands, key=lambda f: (np.ptp(bands[f][1]), f), reverse=True)[:top]
    ncol = min(3, max(1, len(chosen)))
    nrow = max(1, -(-len(chosen) // ncol))
    fig, axes = plt.subplots(nrow, ncol, figsize=(4 * ncol, 3 * nrow), squeeze=False)
    rng = np.random.default_rng(seed)
    for ax, f in zip(axes.flat, chosen, strict=False):
        x = X_train[:, f]
        grid, mean, lo, hi = bands[f]
        ax.fill_between(grid, lo, hi, color="tab:blue", alpha=0.25, label="90% band")
        ax.plot(grid, mean, color="tab:blue", label="posterior mean")
        for kappa in basis.knots_[f]:
            ax.axvline(kappa, color="grey", lw=0.5, ls=":")
        rug = rng.choice(x, size=min(400, x.size), replace=False)
        ax.plot(rug, np.full(rug.size, ax.get_ylim()[0]), "|", color="k", alpha=0.3, ms=6)
        n_k = basis.knots_[f].size
        ax.set_title(f"feature {f + 1}: {n_k} knot{'' if n_k == 1 else 's'}")
        ax.set_xlabel("feature value")
        ax.set_ylabel("g_f(x) - g_f(min)")
    for ax in list(axes.flat)[len(chosen):]:
        ax.axis("off")
    if chosen:
        axes.flat[0].legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig, chosen
