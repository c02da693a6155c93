"""Draws that keep a ballot's pattern (``pattern=`` of PlackettLuce and PartialRanking; issue 53,
finding 5): goodness of fit against the exact probabilities, validation, support points and
the model-level default (the observed rows are the patterns)."""

from __future__ import annotations

import itertools

import numpy as np
import pymc as pm
import pytest
from pymc.distributions.distribution import support_point

import pm_perm
from pm_perm.distributions.partial_ranking import PartialRankingRV
from pm_perm.distributions.plackett_luce import PlackettLuceRV
from pm_perm.kernels.patterns import coarsen_into, coarsen_to_patterns
from pm_perm.testing import check_draws_match_logp

U = np.array([1.2, 0.3, -0.4, 0.0, -1.0])
W = np.array([[1.0, 0.2, -0.5, 0.0, 0.3],
              [0.0, 0.8, 0.1, -0.7, 0.2],
              [-0.3, 0.0, 0.9, 0.4, -0.2],
              [0.5, -0.6, 0.0, 0.7, 0.1],
              [0.0, 0.3, -0.1, 0.2, 0.6]])
PATTERNS = [np.array([0, 0, 2, -1, -1]),   # a tie for first, one more ranked, two unranked
            np.array([3, 0, 1, 1, -1]),    # a tie in the middle of a top-4
            np.array([0, 1, 2, 3, 4])]     # complete: the pattern changes nothing


def _rows_of(pattern):
    """Every rank-form row with the positions of ``pattern`` (its distinct permutations)."""
    return np.array(sorted(set(itertools.permutations(pattern.tolist()))), dtype=np.int64)


def _same_pattern(draws, patterns):
    return np.array_equal(np.sort(draws, axis=-1),
                          np.broadcast_to(np.sort(patterns, axis=-1), np.shape(draws)))


def test_coarsening_kernel():
    y = np.array([2, 0, 4, 1, 3])  # item 1 first, item 3 second, ...
    out = np.empty(5, dtype=np.int64)
    assert coarsen_into(y, np.array([0, 0, 2, -1, -1]), out) == 0
    # complete positions 0, 1 -> 0 (tied first); 2 -> 2; 3, 4 -> unranked
    np.testing.assert_array_equal(out, [2, 0, -1, 0, -1])
    assert coarsen_into(y, np.array([0, 0, 1, -1, -1]), out) == 2  # not rank form
    assert coarsen_into(y, np.array([0, 1, -1]), out) == 1         # wrong length
    np.testing.assert_array_equal(coarsen_to_patterns(y[None], [[0, 0, 2, -1, -1]]),
                                  [[2, 0, -1, 0, -1]])
    with pytest.raises(ValueError, match=r"pattern\[0\] = \[0, 2, 2, -1, -1\] is not a valid"):
        coarsen_to_patterns(y[None], [[0, 2, 2, -1, -1]])


@pytest.mark.parametrize("mode", ["NUMBA", "FAST_COMPILE"])  # compiled draws, NumPy rng_fn
@pytest.mark.parametrize("family", ["plackett-luce", "partial-ranking"])
@pytest.mark.parametrize("which", range(len(PATTERNS)))
def test_pattern_draws_match_exact_probabilities(family, which, mode):
    """Chi-square of 4,000 draws with a pattern against exp(logp) of every row of that pattern
    (the rows' probabilities sum to 1: a tied/top-k order's probability is that of its
    completions). Fixed seeds; each case fails at p < 1e-3, so the false-failure rate of a
    correct sampler is 0.1% per case. ``length_probs`` is given and is ignored by the draws
    (the pattern wins); the logp used is that without it."""
    pattern = PATTERNS[which]
    lp = np.full(6, 1 / 6)
    if family == "plackett-luce":
        d, exact = (pm_perm.PlackettLuce.dist(utilities=U, pattern=pattern, length_probs=lp),
                    pm_perm.PlackettLuce.dist(utilities=U))
    else:
        d, exact = (pm_perm.PartialRanking.dist(logits=W, pattern=pattern, length_probs=lp),
                    pm_perm.PartialRanking.dist(logits=W))
    support = _rows_of(pattern)
    probs = np.exp(pm.logp(exact, support).eval())
    assert probs.sum() == pytest.approx(1.0, abs=1e-12)
    draws = pm.draw(d, draws=4000, random_seed=10 + which, mode=mode)
    assert _same_pattern(draws, pattern)
    from pm_perm.testing import chi_square_pvalue

    assert chi_square_pvalue(draws, support, probs) > 1e-3


def test_pattern_draws_without_length_probs_match_logp():
    """Without ``length_probs`` the pattern's rows are the whole support of the draws:
    :func:`check_draws_match_logp` itself (false-failure rate 0.1%)."""
    pattern = PATTERNS[0]
    d = pm_perm.PlackettLuce.dist(utilities=U, pattern=pattern)
    assert check_draws_match_logp(d, _rows_of(pattern), n_draws=4000, seed=3) > 1e-3


@pytest.mark.parametrize("mode", ["NUMBA", "FAST_COMPILE"])
def test_one_pattern_per_row(mode):
    """A batch of patterns: each draw has its own row's pattern."""
    patterns = np.array([[0, 0, 2, -1, -1], [0, 1, -1, -1, -1], [1, 0, 2, 3, 4],
                         [-1, -1, -1, -1, -1], [0, 0, 0, 0, 0]])
    for d in (pm_perm.PlackettLuce.dist(utilities=U, pattern=patterns),
              pm_perm.PartialRanking.dist(logits=W, pattern=patterns)):
        y = pm.draw(d, draws=50, random_seed=1, mode=mode)
        assert y.shape == (50, 5, 5)
        assert _same_pattern(y, patterns)


@pytest.mark.parametrize("mode", ["NUMBA", "FAST_COMPILE"])
@pytest.mark.parametrize("dist", ["plackett-luce", "partial-ranking"])
def test_invalid_patterns_raise(dist, mode):
    """Invalid patterns: refused by ``dist`` when constant, by the draws when symbolic."""
    import pytensor.tensor as pt

    def make(pattern):
        if dist == "plackett-luce":
            return pm_perm.PlackettLuce.dist(utilities=U, pattern=pattern)
        return pm_perm.PartialRanking.dist(logits=W, pattern=pattern)

    with pytest.raises(ValueError, match="not a valid rank-form order"):
        make([0, 2, 2, -1, -1])  # a block of 2 at position 0 must be [0, 0]
    with pytest.raises(ValueError, match="pattern must have M entries"):
        make([0, 1, 2])
    p = pt.lvector("p")
    d = make(p)
    draw = pm.compile([p], d, mode=mode)
    assert _same_pattern(draw(np.array([0, 1, -1, -1, -1])), [0, 1, -1, -1, -1])
    with pytest.raises(ValueError, match="pattern.* rank-form"):  # numba or NumPy message
        draw(np.array([1, 1, -1, -1, -1]))  # no item first
    with pytest.raises(ValueError, match="M entries"):
        draw(np.array([0, 1, 2]))


def test_rng_fn_validates_like_the_compiled_draws():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="not a valid rank-form order"):
        PlackettLuceRV.rng_fn(rng, U, np.float64(1), np.zeros(0), np.array([0, 0, 0, 5, -1]),
                              None)
    with pytest.raises(ValueError, match="not a valid rank-form order"):
        PartialRankingRV.rng_fn(rng, W, np.float64(1), np.zeros(0), np.array([0, 1, 3, 3, -1]),
                                None)
    # the pattern wins over length_probs for the draws, but length_probs is still checked
    with pytest.raises(ValueError, match="length_probs"):
        PlackettLuceRV.rng_fn(rng, U, np.float64(1), np.full(6, 0.5), PATTERNS[0], None)
    with pytest.raises(ValueError, match="length_probs"):
        pm.draw(pm_perm.PartialRanking.dist(logits=W, pattern=PATTERNS[0],
                                            length_probs=np.full(6, 0.5)))


def test_support_point_keeps_the_pattern():
    sp = support_point(pm_perm.PlackettLuce.dist(U, pattern=PATTERNS[0],
                                                 length_probs=np.full(6, 1 / 6))).eval()
    # utilities sorted: items 0, 1, 3, 2, 4 -> positions 0, 0, 2, then unranked
    np.testing.assert_array_equal(sp, [0, 0, -1, 2, -1])
    sp = support_point(pm_perm.PartialRanking.dist(W, pattern=PATTERNS[1])).eval()
    assert _same_pattern(sp, PATTERNS[1])
    pats = np.stack(PATTERNS)
    sp = support_point(pm_perm.PlackettLuce.dist(U, pattern=pats)).eval()
    assert sp.shape == (3, 5) and _same_pattern(sp, pats)


def test_logp_ignores_the_pattern():
    rows = _rows_of(PATTERNS[1])
    for a, b in ((pm_perm.PlackettLuce.dist(U, pattern=PATTERNS[0]),
                  pm_perm.PlackettLuce.dist(U)),
                 (pm_perm.PartialRanking.dist(W, pattern=PATTERNS[0]),
                  pm_perm.PartialRanking.dist(W))):
        np.testing.assert_array_equal(pm.logp(a, rows).eval(), pm.logp(b, rows).eval())


TIED = np.array([[0, 0, 2, -1, -1], [1, 0, -1, -1, -1], [0, 1, 1, 3, 4], [2, 0, 0, -1, -1],
                 [0, 1, 2, 3, 4], [-1, 0, -1, -1, -1]])


@pytest.mark.parametrize("family", ["plackett-luce", "partial-ranking"])
def test_predictive_of_an_observed_variable_keeps_each_rows_pattern(family):
    """At model level the observed rows are the patterns: prior and posterior predictive
    draws have each row's length and tie blocks (on main they were complete rankings, or
    top-k with ``length_probs``, never tied); ``keep_pattern=False`` restores that."""
    az = pytest.importorskip("arviz")
    counts = np.array([3.0, 1, 2, 1, 5, 1])

    def build(**kw):
        with pm.Model() as model:
            lp = pm.Dirichlet("length_probs", a=np.ones(6))
            if family == "plackett-luce":
                u = pm.Normal("u", shape=5)
                pm_perm.PlackettLuce("y", utilities=u, weights=counts, length_probs=lp,
                                     observed=TIED, **kw)
            else:
                w = pm.Normal("w", shape=(5, 5))
                pm_perm.PartialRanking("y", logits=w, weights=counts, length_probs=lp,
                                       observed=TIED, **kw)
        return model

    model = build()
    rng = np.random.default_rng(0)
    name, shape = ("u", (5,)) if family == "plackett-luce" else ("w", (5, 5))
    idata = az.from_dict({"posterior": {name: rng.normal(size=(1, 30, *shape)),
                                        "length_probs": rng.dirichlet(np.ones(6), (1, 30))}})
    with model:
        pp = pm.sample_posterior_predictive(idata, random_seed=2, progressbar=False)
        prior = pm.sample_prior_predictive(draws=20, random_seed=3)
    y = pp.posterior_predictive["y"].values
    ballots = np.repeat(TIED, counts.astype(int), axis=0)  # weights=counts: one row per ballot
    assert y.shape == (1, 30, ballots.shape[0], 5)
    assert _same_pattern(y, ballots)
    assert _same_pattern(prior.prior_predictive["y"].values, ballots)
    with build(keep_pattern=False):
        y = pm.sample_posterior_predictive(idata, random_seed=2, progressbar=False)
    s = np.sort(y.posterior_predictive["y"].values, axis=-1)
    assert not ((s[..., 1:] == s[..., :-1]) & (s[..., 1:] >= 0)).any()  # no ties
    with pytest.raises(ValueError, match="keep_pattern must be True or False"):
        build(keep_pattern="yes")


def test_a_data_pattern_follows_set_data():
    """With ``pm.Data`` observations the patterns follow ``pm.set_data`` (a new data set of
    any size, no recompilation of the model needed)."""
    with pm.Model() as model:
        obs = pm.Data("obs", TIED)
        u = pm.Normal("u", shape=5)
        pm_perm.PlackettLuce("y", utilities=u, observed=obs)
    new = TIED[[0, 0, 3]]
    with model:
        pm.set_data({"obs": new})
        y = pm.sample_prior_predictive(draws=10, random_seed=1).prior_predictive["y"].values
    assert y.shape == (1, 10, 3, 5) and _same_pattern(y, new)
