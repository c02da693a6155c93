"""Consensus summaries of a latent ranking's posterior draws against hand-computed cases."""

import arviz as az
import numpy as np
import pytest

from pm_perm.preferences.consensus import (
    cp_consensus,
    heat_matrix,
    map_consensus,
    rank_draws,
    rank_intervals,
)

# 3 items, 5 draws (rank form): item 0 is at rank 0 in 3 of 5, item 1 in 2 of 5
DRAWS = np.array([[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 0, 2], [0, 1, 2]])


def test_heat_matrix_by_hand():
    H = heat_matrix(DRAWS)
    np.testing.assert_allclose(H, [[0.6, 0.4, 0.0], [0.4, 0.4, 0.2], [0.0, 0.2, 0.8]])


def test_cp_consensus_by_hand():
    # rank 0: P(rank <= 0) = 0.6, 0.4, 0 -> item 0; rank 1 among items 1, 2: 0.8 vs 0.2 -> 1
    c = cp_consensus(DRAWS)
    assert c.order.tolist() == [0, 1, 2]
    assert c.ranking.tolist() == [0, 1, 2]
    np.testing.assert_allclose(c.probability, [0.6, 0.8, 1.0])


def test_cp_and_map_consensus_break_ties_as_documented():
    # P(rank 0) = 0.2, 0.4, 0.4: CP gives rank 0 to item 1 (tie with item 2 -> the lower index),
    # then rank 1 by P(rank <= 1) among items 0 and 2: 0.6 vs 0.4 -> item 0
    draws = np.array([[2, 1, 0], [2, 1, 0], [1, 0, 2], [0, 1, 2], [1, 0, 2]])
    H = heat_matrix(draws)
    np.testing.assert_allclose(H[:, 0], [0.2, 0.4, 0.4])
    c = cp_consensus(draws)
    assert c.order.tolist() == [1, 0, 2]
    np.testing.assert_allclose(c.probability, [0.4, 0.6, 1.0])
    m = map_consensus(draws)
    assert m.ranking.tolist() == [1, 0, 2] and m.probability == pytest.approx(0.4)
    # the tie between [1, 0, 2] and [2, 1, 0] (2 draws each) goes to the smaller rank vector
    assert m.order.tolist() == [1, 0, 2]


def test_map_consensus_by_hand():
    m = map_consensus(DRAWS)
    assert m.ranking.tolist() == [0, 1, 2]
    assert m.probability == pytest.approx(0.4)


def test_rank_intervals_by_hand():
    # item 2: ranks 2, 1, 2, 2, 2 -> P(<= 1) = 0.2, P(<= 2) = 1
    np.testing.assert_array_equal(rank_intervals(DRAWS, prob=0.5), [[0, 1], [0, 1], [2, 2]])
    np.testing.assert_array_equal(rank_intervals(DRAWS, prob=0.9), [[0, 1], [0, 2], [1, 2]])
    for prob in (0.0, 1.0, "0.9"):
        with pytest.raises(ValueError, match=r"prob must be a number in \(0, 1\)"):
            rank_intervals(DRAWS, prob=prob)


def test_from_inference_data_stacks_chains():
    posterior = DRAWS[None].repeat(2, axis=0)  # (chain, draw, n)
    idata = az.from_dict({"posterior": {"rho": posterior}})  # a DataTree, as pm.sample gives
    np.testing.assert_array_equal(rank_draws(idata), np.concatenate([DRAWS, DRAWS]))
    np.testing.assert_allclose(heat_matrix(idata), heat_matrix(DRAWS))
    with pytest.raises(ValueError, match="no variable 'tau'.*pass var_name="):
        rank_draws(idata, var_name="tau")


def test_bad_draws():
    with pytest.raises(ValueError, match=r"draw 1 = \[1, 2, 3\] is not a rank vector.*subtract"):
        rank_draws([[0, 1, 2], [1, 2, 3]])
    with pytest.raises(ValueError, match="no draws"):
        rank_draws(np.zeros((0, 3), dtype=int))
    with pytest.raises(ValueError, match="not a rank vector"):
        rank_draws([[0.5, 1, 2]])
