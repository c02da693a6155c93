"""Posterior shape functions: the band summary and the figure."""

import numpy as np

from pm_perm.learning_to_rank.features import HingeBasis
from pm_perm.learning_to_rank.plots import plot_shape_functions, shape_bands


def _basis_and_draws(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(200, 4))
    X[:, 2] = 0.5  # constant: never plotted
    basis = HingeBasis(3).fit(X)
    draws = rng.normal(size=(500, basis.columns_.shape[0])) * 0.1
    draws[:, 1] += 5.0  # feature 1 (its linear term) varies most
    return X, basis, draws


def test_shape_bands_is_the_shape_relative_to_its_start():
    X, basis, draws = _basis_and_draws()
    grid, mean, lo, hi = shape_bands(basis, draws, 0, X[:, 0], n_grid=11)
    assert grid[0] == X[:, 0].min() and grid[-1] == X[:, 0].max() and grid.size == 11
    g = basis.shape_function(draws, 0, grid)
    g -= g[:, :1]
    np.testing.assert_allclose(mean, g.mean(axis=0))
    np.testing.assert_allclose(lo, np.quantile(g, 0.05, axis=0))
    np.testing.assert_allclose(hi, np.quantile(g, 0.95, axis=0))
    assert mean[0] == lo[0] == hi[0] == 0.0
    assert np.all(lo <= mean + 1e-12) and np.all(mean <= hi + 1e-12)
    # one draw: a point estimate, the band collapses onto it
    _, m1, l1, h1 = shape_bands(basis, draws[0], 0, X[:, 0])
    np.testing.assert_allclose(l1, m1)
    np.testing.assert_allclose(h1, m1)


def test_plot_picks_the_most_varying_features_and_skips_constant_ones(tmp_path):
    X, basis, draws = _basis_and_draws()
    fig, chosen = plot_shape_functions(basis, draws, X, top=2, title="t")
    assert chosen[0] == 1 and len(chosen) == 2 and 2 not in chosen
    fig.savefig(tmp_path / "s.png")
    assert (tmp_path / "s.png").stat().st_size > 5_000
    _, every = plot_shape_functions(basis, draws, X, top=10)
    assert sorted(every) == [0, 1, 3]
