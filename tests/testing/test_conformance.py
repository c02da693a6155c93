"""pm_perm.testing.conformance: chi-square of draws against exact probabilities."""

import numpy as np
import pymc as pm
import pytest
from scipy import stats

from pm_perm import PermutationExpFamily
from pm_perm.reference.permutations import all_permutations, permutation_probabilities_enum
from pm_perm.testing import check_draws_match_logp, chi_square_pvalue, count_draws

PERMS = all_permutations(3)
W = np.array([[1.0, 0.0, -0.5], [0.2, 0.7, 0.0], [-1.0, 0.3, 0.4]])


def test_count_draws():
    counts, outside = count_draws(np.array([[0, 1, 2], [2, 1, 0], [0, 1, 2], [5, 5, 5]]), PERMS)
    assert counts.tolist() == [2, 0, 0, 0, 0, 1] and outside == 1
    counts, outside = count_draws(np.array([3, 1, 1]), np.array([1, 2, 3]))  # scalar events
    assert counts.tolist() == [2, 0, 1] and outside == 0
    with pytest.raises(ValueError, match="distinct"):
        count_draws(PERMS, np.concatenate([PERMS, PERMS[:1]]))
    with pytest.raises(TypeError, match="integer"):
        count_draws(PERMS.astype(float), PERMS)


def test_right_and_wrong_probabilities():
    """20,000 exact draws: the true probabilities pass (fixed seed; false-failure rate 1e-3),
    probabilities off by 0.02 in two cells fail at p < 1e-6."""
    _, p = permutation_probabilities_enum(W)
    rng = np.random.default_rng(0)
    draws = PERMS[rng.choice(6, size=20_000, p=p)]
    assert chi_square_pvalue(draws, PERMS, p) > 1e-3
    wrong = p + np.array([0.02, -0.02, 0, 0, 0, 0])
    assert chi_square_pvalue(draws, PERMS, wrong) < 1e-6


def test_impossible_draws_give_zero():
    p = np.array([0.5, 0.5, 0, 0, 0, 0])
    assert chi_square_pvalue(PERMS[[0, 1, 2]], PERMS, p) == 0.0  # a draw of probability 0
    assert chi_square_pvalue(np.array([[0, 1, 2], [0, 0, 0]]), PERMS[:2], [0.5, 0.5]) == 0.0


def test_small_cells_are_pooled():
    """Cells expected below ``min_expected`` are one cell (cells of probability 0 drop out)."""
    p = np.array([0.49, 0.49, 0.01, 0.005, 0.005, 0.0])  # 400 draws: expected 196, 196, 4, 2, 2
    draws = PERMS[np.repeat([0, 1, 2, 3, 4], [190, 195, 4, 9, 2])]
    pooled = stats.chisquare([190, 195, 15], [196, 196, 8]).pvalue
    unpooled = stats.chisquare([190, 195, 4, 9, 2], [196, 196, 4, 2, 2]).pvalue
    assert pooled > 0.01 > unpooled  # the pooling is what decides here
    assert chi_square_pvalue(draws, PERMS, p) == pytest.approx(pooled, rel=1e-12)
    assert chi_square_pvalue(draws, PERMS, p, min_expected=0) == pytest.approx(unpooled,
                                                                                rel=1e-12)
    assert chi_square_pvalue(PERMS[[0, 0]], PERMS, [1.0, 0, 0, 0, 0, 0]) == 1.0  # one cell


def test_probabilities_must_be_a_distribution():
    with pytest.raises(ValueError, match="sum to"):
        chi_square_pvalue(PERMS, PERMS, np.full(6, 0.1))
    with pytest.raises(ValueError, match="non-negative"):
        chi_square_pvalue(PERMS, PERMS, [0.5, 0.7, -0.2, 0, 0, 0])
    with pytest.raises(ValueError, match="rows"):
        chi_square_pvalue(PERMS, PERMS, [1.0])


def test_check_draws_match_logp():
    """The exact family passes (fixed seed; false-failure rate 1e-3); an incomplete support is
    refused; a distribution whose logp is not its draws' law fails."""
    assert check_draws_match_logp(PermutationExpFamily.dist(W), PERMS, 4000, seed=1) > 1e-3
    with pytest.raises(ValueError, match="sum to"):
        check_draws_match_logp(PermutationExpFamily.dist(W), PERMS[:5], 100, seed=1)
    # draws of W against the logp of W.T: a different distribution (4,000 draws: p < 1e-6)
    rv = PermutationExpFamily.dist(W)
    logp_of_other = PermutationExpFamily.dist(W.T)
    draws = pm.draw(rv, draws=4000, random_seed=1)
    probs = np.exp(pm.logp(logp_of_other, PERMS).eval())
    assert chi_square_pvalue(draws, PERMS, probs) < 1e-6
