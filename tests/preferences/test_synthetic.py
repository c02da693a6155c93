"""Synthetic ranking data: exact draws checked against enumerated probabilities."""

import numpy as np
import pytest
from scipy import stats

from pm_perm.preferences.synthetic import (
    default_positions,
    draw_ballots,
    rank_one_logits,
    simulate_rankings,
)
from pm_perm.reference.permutations import all_permutations
from pm_perm.reference.rankings import permutation_complete_logp, plackett_luce_complete_logp
from pm_perm.testing import chi_square_pvalue

# Each chi-square test below rejects a correct sampler with probability 1e-3 (fixed seeds, so
# a given run either always passes or always fails; 5 such tests: false-failure rate < 0.5 %).
ALPHA = 1e-3


def _gof(orders, logp, perms):
    return chi_square_pvalue(orders, perms, np.exp(logp))


def test_permutation_family_draws_match_enumeration():
    rng = np.random.default_rng(0)
    W = rng.normal(size=(4, 4))
    perms = all_permutations(4)
    y = draw_ballots(20_000, logits=W, rng=1)
    assert _gof(y, permutation_complete_logp(W, perms), perms) > ALPHA


def test_plackett_luce_draws_match_enumeration():
    u = np.array([1.0, 0.3, -0.2, -1.1])
    perms = all_permutations(4)
    y = draw_ballots(20_000, utilities=u, rng=2)
    assert _gof(y, plackett_luce_complete_logp(u, perms), perms) > ALPHA


def test_mixture_draws_match_enumeration():
    rng = np.random.default_rng(3)
    W = rng.normal(size=(2, 3, 3))
    w = np.array([0.3, 0.7])
    perms = all_permutations(3)
    y, comp = draw_ballots(20_000, logits=W, mixture_weights=w, rng=4, return_components=True)
    mix = np.logaddexp(np.log(w[0]) + permutation_complete_logp(W[0], perms),
                       np.log(w[1]) + permutation_complete_logp(W[1], perms))
    assert _gof(y, mix, perms) > ALPHA
    assert stats.binomtest(int((comp == 0).sum()), comp.size, 0.3).pvalue > ALPHA


def test_ballot_lengths_and_truncation():
    rng = np.random.default_rng(5)
    W = rng.normal(size=(5, 5))
    probs = np.array([0.0, 0.4, 0.1, 0.2, 0.0, 0.3])
    y = draw_ballots(10_000, logits=W, length_probs=probs, rng=6)
    k = (y >= 0).sum(axis=1)
    counts = np.bincount(k, minlength=6)
    assert counts[0] == counts[4] == 0
    assert stats.chisquare(counts[probs > 0], probs[probs > 0] * y.shape[0]).pvalue > ALPHA
    # the ranked items hold exactly positions 0..k-1 (top-k rank form)
    for row, kk in zip(y, k, strict=True):
        assert sorted(row[row >= 0]) == list(range(kk))


def test_simulate_rankings_aggregates():
    data = simulate_rankings(3000, logits=rank_one_logits([2.0, 0.0, -2.0]),
                             length_probs=[0, 0.5, 0, 0.5], rng=7, item_names="abc")
    assert data.n_rankings == 3000 and data.n_items == 3 and data.item_names == ("a", "b", "c")
    assert len({tuple(o) for o in data.orders}) == data.n_distinct  # rows are distinct
    assert data.kind == "soi"
    full = simulate_rankings(50, utilities=[0.0, 1.0], rng=0)
    assert full.kind == "soc" and full.n_rankings == 50


def test_rank_one_and_positions():
    np.testing.assert_allclose(default_positions(3), [1.0, 0.5, 0.0])
    np.testing.assert_allclose(rank_one_logits([1.0, -1.0]), [[1.0, 0.0], [-1.0, 0.0]])


@pytest.mark.parametrize("kwargs, match", [
    ({}, "exactly one"),
    ({"logits": np.zeros((2, 2)), "utilities": np.zeros(2)}, "exactly one"),
    ({"logits": np.zeros((2, 4))}, "square"),  # (2, 3) is the top-2 model's
    ({"logits": np.zeros((3, 1))}, "square"),
    ({"logits": np.full((2, 2), np.nan)}, "finite"),
    ({"utilities": np.zeros((2, 3))}, "mixture_weights"),
    ({"utilities": np.zeros(3), "length_probs": [1, 1]}, "length_probs"),
    ({"utilities": np.zeros((2, 3)), "mixture_weights": [1, -1]}, "mixture_weights"),
])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        draw_ballots(5, **kwargs)


def test_add_ties_ties_one_adjacent_pair_in_the_chosen_share():
    """``add_ties`` keeps every ballot and its length, ties exactly one adjacent pair in about
    ``share`` of the eligible ballots (binomial 5-sigma band), and leaves short ballots alone."""
    from pm_perm.preferences.synthetic import add_ties

    data = simulate_rankings(4000, utilities=np.linspace(1, -1, 5),
                             length_probs=[0, 0.3, 0.2, 0.2, 0.0, 0.3], rng=0)
    for pair in ("random", "first", "last", 1):
        tied = add_ties(data, 0.25, pair=pair, rng=1)
        assert tied.n_rankings == data.n_rankings
        rows = np.repeat(tied.orders, tied.counts, axis=0)
        k = (rows >= 0).sum(1)
        blocks = np.array([(r >= 0).sum() - np.unique(r[r >= 0]).size for r in rows])
        assert set(np.unique(blocks)) == {0, 1}  # at most one tie of two items
        assert np.array_equal(np.bincount(k, minlength=6),
                              np.bincount(np.repeat(data.ranked_lengths(), data.counts),
                                          minlength=6))
        assert not blocks[k < 3].any()
        n = int((k >= 3).sum())
        assert abs(blocks.sum() - 0.25 * n) < 5 * np.sqrt(n * 0.25 * 0.75)
        if pair == "last":  # the tie block holds the last two ranked positions
            for r in rows[blocks == 1][:50]:
                vals = np.sort(r[r >= 0])
                assert vals[-1] == vals[-2] == (r >= 0).sum() - 2
        if pair == 1:  # the 2nd and 3rd ranked items share position 1; no item is at 2
            tied_rows = rows[blocks == 1]
            assert ((tied_rows == 1).sum(1) == 2).all() and not (tied_rows == 2).any()
    with pytest.raises(ValueError, match=r"0 <= pair <= min_length - 2"):
        add_ties(data, 0.1, pair=2)  # a ballot of 3 items has no 3rd-and-4th pair
    with pytest.raises(ValueError, match="pair must be"):
        add_ties(data, 0.1, pair="second")
    with pytest.raises(ValueError, match="share"):
        add_ties(data, 1.5)
    with pytest.raises(ValueError, match="already has ties"):
        add_ties(add_ties(data, 1.0, rng=0), 0.1)
