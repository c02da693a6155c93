"""HingeBasis: knots, columns, shape functions, errors, and an end-to-end nonlinear fit."""

import numpy as np
import pytest

from pm_perm.learning_to_rank.data import RankingSplit
from pm_perm.learning_to_rank.features import HingeBasis
from pm_perm.learning_to_rank.metrics import evaluate_ranking
from pm_perm.learning_to_rank.ordinal import OrdinalRanker


def test_knots_are_interior_distinct_training_quantiles():
    X = np.column_stack([
        np.arange(11.0),                      # quintiles 2, 4, 6, 8
        np.r_[np.zeros(9), 1.0, 2.0],         # quantiles all 0 = min: no knot
        np.full(11, 3.0),                     # constant: no knot
        np.r_[np.zeros(5), np.arange(1.0, 7.0)],  # 0 (= min, dropped), then 1.0, 3.0, 5.0
    ])
    b = HingeBasis(n_knots=4).fit(X)
    np.testing.assert_allclose(b.knots_[0], [2.0, 4.0, 6.0, 8.0])
    assert b.knots_[1].size == 0 and b.knots_[2].size == 0
    expected = np.quantile(X[:, 3], [0.2, 0.4, 0.6, 0.8])
    expected = np.unique(expected[(expected > 0) & (expected < 6)])
    np.testing.assert_allclose(b.knots_[3], expected)
    assert b.columns_.shape == (4 + 4 + expected.size, 2)
    np.testing.assert_array_equal(b.columns_[:4, 0], [0, 1, 2, 3])
    assert np.all(np.isnan(b.columns_[:4, 1]))


def test_transform_matches_hand_computation():
    X = np.column_stack([np.arange(11.0), np.linspace(0, 1, 11)])
    b = HingeBasis(n_knots=1).fit(X)           # medians 5.0 and 0.5
    Z = b.transform(np.array([[3.0, 0.9], [7.0, 0.2]]))
    np.testing.assert_allclose(Z, [[3.0, 0.9, 0.0, 0.4], [7.0, 0.2, 2.0, 0.0]])
    np.testing.assert_allclose(b.columns_[2:], [[0, 5.0], [1, 0.5]])


def test_zero_knots_is_the_identity():
    X = np.random.default_rng(0).normal(size=(20, 3))
    np.testing.assert_array_equal(HingeBasis(0).fit_transform(X), X)


def test_shape_functions_add_up_to_the_score():
    rng = np.random.default_rng(1)
    X = rng.uniform(size=(50, 4))
    b = HingeBasis(5).fit(X)
    theta = rng.normal(size=b.columns_.shape[0])
    Xt = rng.uniform(-0.5, 1.5, size=(30, 4))   # also outside the training range
    total = sum(b.shape_function(theta, f, Xt[:, f]) for f in range(4))
    np.testing.assert_allclose(total, b.transform(Xt) @ theta, atol=1e-12)
    # continuous and piecewise linear: slope changes by theta[hinge] at each knot
    f, kappa = 2, b.knots_[2][1]
    c = int(np.flatnonzero((b.columns_[:, 0] == f) & (b.columns_[:, 1] == kappa))[0])
    h = 1e-6
    left = (b.shape_function(theta, f, [kappa]) - b.shape_function(theta, f, [kappa - h])) / h
    right = (b.shape_function(theta, f, [kappa + h]) - b.shape_function(theta, f, [kappa])) / h
    assert right[0] - left[0] == pytest.approx(theta[c], abs=1e-5)
    # one row per draw
    draws = rng.normal(size=(7, theta.size))
    per_draw = b.shape_function(draws, f, Xt[:, f])
    assert per_draw.shape == (7, 30)
    np.testing.assert_allclose(per_draw[3], b.shape_function(draws[3], f, Xt[:, f]))


def test_transform_split_keeps_the_queries():
    rng = np.random.default_rng(2)
    split = RankingSplit(rng.uniform(size=(12, 2)), rng.integers(0, 3, 12),
                         np.array([0, 5, 12]), np.array([7, 9]), n_dropped_queries=1)
    b = HingeBasis(2).fit(split)
    out = b.transform_split(split)
    np.testing.assert_array_equal(out.X, b.transform(split.X))
    np.testing.assert_array_equal(out.y, split.y)
    np.testing.assert_array_equal(out.group_ptr, split.group_ptr)
    np.testing.assert_array_equal(out.qids, split.qids)
    assert out.n_dropped_queries == 1


@pytest.mark.parametrize("n_knots", [-1, 1.5, "4", True, None])
def test_bad_n_knots(n_knots):
    with pytest.raises(ValueError, match="n_knots must be a non-negative integer"):
        HingeBasis(n_knots)


def test_clear_errors():
    b = HingeBasis(2)
    with pytest.raises(ValueError, match="not fitted"):
        b.transform(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="not fitted"):
        b.shape_function(np.zeros(2), 0, [0.5])
    with pytest.raises(ValueError, match="2-D"):
        b.fit(np.zeros(5))
    with pytest.raises(ValueError, match="NaN or infinite"):
        b.fit(np.array([[0.0], [np.nan]]))
    with pytest.raises(ValueError, match="no rows"):
        b.fit(np.zeros((0, 3)))
    b.fit(np.random.default_rng(0).uniform(size=(10, 2)))
    with pytest.raises(ValueError, match="3 features but the basis was fitted on 2"):
        b.transform(np.zeros((4, 3)))
    with pytest.raises(ValueError, match="one entry per basis column"):
        b.shape_function(np.zeros(3), 0, [0.5])
    with pytest.raises(ValueError, match="one entry per basis column"):
        b.shape_function(np.zeros((2, 2, b.columns_.shape[0])), 0, [0.5])
    with pytest.raises(ValueError, match="feature must be in 0..1"):
        b.shape_function(np.zeros(b.columns_.shape[0]), 2, [0.5])
    with pytest.raises(ValueError, match="RankingSplit"):
        b.transform_split(np.zeros((4, 2)))


def _queries(rng, n_queries, n_docs=12):
    """Documents whose relevance is a non-monotone function of feature 0 (a bump at 0.5)."""
    X = rng.uniform(size=(n_queries * n_docs, 3))
    s = 4.0 * np.exp(-((X[:, 0] - 0.5) / 0.12) ** 2) + X[:, 1]
    noisy = s + rng.gumbel(size=s.size) * 0.5
    y = (noisy > 1.5).astype(np.int64) + (noisy > 3.0)
    ptr = np.arange(0, X.shape[0] + 1, n_docs)
    return RankingSplit(X, y, ptr, np.arange(n_queries))


def test_hinge_basis_learns_a_nonlinear_score_the_raw_features_cannot():
    # A linear score of x0 cannot rank a bump; the hinge basis can. Seeded, deterministic.
    rng = np.random.default_rng(3)
    train, test = _queries(rng, 60), _queries(rng, 60)
    basis = HingeBasis(8).fit(train)
    raw = OrdinalRanker(prior_sigmas=(3.0,)).fit_map(train)
    hinge = OrdinalRanker(prior_sigmas=(3.0,)).fit_map(basis.transform_split(train))
    ndcg_raw = evaluate_ranking(raw.decision_function(test.X), test.y, test.group_ptr)["ndcg@5"]
    ndcg_hinge = evaluate_ranking(hinge.decision_function(basis.transform(test.X)), test.y,
                                  test.group_ptr)["ndcg@5"]
    assert ndcg_hinge > ndcg_raw + 0.1, (ndcg_raw, ndcg_hinge)
    g = basis.shape_function(hinge.theta_, 0, np.array([0.1, 0.5, 0.9]))
    assert g[1] > g[0] + 1 and g[1] > g[2] + 1      # the learned shape is the bump


@pytest.mark.slow
@pytest.mark.data
def test_ranking_shapes_example_runs(shared_data, tmp_path, capsys):
    """examples/ranking_shapes.py end to end on MQ2008 fold 1 with a very short NUTS run."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "ranking_shapes.py"
    spec = importlib.util.spec_from_file_location("ranking_shapes", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    out = tmp_path / "shapes.png"
    example.main(["--fold", "1", "--draws", "30", "--tune", "30", "--chains", "2", "--top", "3",
                  "--data-root", str(shared_data), "--out", str(out)])
    printed = capsys.readouterr().out
    assert "46 features -> 143 columns" in printed and "features plotted" in printed
    assert out.stat().st_size > 10_000
