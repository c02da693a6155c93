"""The many-ballot generators of pm_perm.preferences.synthetic (issue 50): Plackett-Luce top-k
ballots aggregated into distinct orders with counts."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.stats import chisquare

from pm_perm.preferences.synthetic import distinct_top_k_ballots, top_k_ballots


def _pl_top_k_prob(u, items):
    w = np.exp(u)
    rest, p = w.sum(), 1.0
    for i in items:
        p *= w[i] / rest
        rest -= w[i]
    return p


def test_top_k_ballots_follow_plackett_luce():
    """Chi-square of the 12 top-2 orders of 4 items against their exact Plackett-Luce
    probabilities (fixed seed; false-failure rate 1e-3 if the generator is exact)."""
    n = 20_000
    data, u = top_k_ballots(n, 4, 2, rng=3, chunk=7_000)  # several chunks merged
    assert data.n_rankings == n and data.kind == "soi" and data.max_ranked == 2
    assert (data.ranked_lengths() == 2).all()
    observed, expected = [], []
    for a, b in itertools.permutations(range(4), 2):
        row = np.full(4, -1)
        row[[a, b]] = [0, 1]
        hit = np.flatnonzero((data.orders == row).all(axis=1))
        observed.append(data.counts[hit].sum())
        expected.append(n * _pl_top_k_prob(u, (a, b)))
    assert chisquare(observed, expected).pvalue > 1e-3


def test_top_k_lengths_and_complete_ballots():
    data, _ = top_k_ballots(5_000, 5, 3, lengths=[0, 0.5, 0, 0.5], rng=0)
    lengths = np.bincount(data.ranked_lengths(), weights=data.counts, minlength=6)
    assert lengths[[0, 2, 4, 5]].sum() == 0 and abs(lengths[1] / 5_000 - 0.5) < 0.03
    full, _ = top_k_ballots(100, 3, 3, rng=0)
    assert full.kind == "soc"
    # a length of 0 ranks nothing: such ballots are not data
    empty, _ = top_k_ballots(1_000, 4, 2, lengths=[0.5, 0.5, 0], rng=0)
    assert 400 < empty.n_rankings < 600 and (empty.ranked_lengths() == 1).all()


def test_distinct_top_k_ballots_stop_at_the_n_distinct_th_order():
    data, u = distinct_top_k_ballots(40, 8, 2, rng=1)
    assert data.n_distinct == 40 and data.counts[-1] == 1  # the 40th order's first ballot
    more, v = distinct_top_k_ballots(41, 8, 2, rng=1)
    np.testing.assert_array_equal(u, v)  # the same stream of ballots, one order further
    np.testing.assert_array_equal(more.orders[:40], data.orders)
    assert (more.counts[:40] >= data.counts).all()


@pytest.mark.parametrize(("call", "match"), [
    (lambda: top_k_ballots(10, 4, 5), "k must be an integer in"),
    (lambda: top_k_ballots(0, 4, 2), "n_ballots must be a positive integer"),
    (lambda: top_k_ballots(10, 4, 2, lengths=[1, 1]), "lengths must be 3"),
    (lambda: top_k_ballots(10, 200, 9), "does not fit the int64 keys"),
    (lambda: distinct_top_k_ballots(13, 4, 2), r"n_distinct must be an integer in \[1, 12\]"),
])
def test_bad_input_names_the_problem(call, match):
    with pytest.raises(ValueError, match=match):
        call()
