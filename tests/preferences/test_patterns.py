"""Posterior predictive ballots that keep each ballot's pattern, and the tie statistic of the
PPCs (issue 53, finding 5: replicated ballots were complete, or top-k with only 29% of rows of
their own length, and never tied; ``ppc_summary`` had no tie statistic)."""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm
import pytest

from pm_perm.preferences import analysis
from pm_perm.preferences import models as rmod
from pm_perm.preferences import posterior as rpost
from pm_perm.preferences.data import RankingData

M = 4
ORDERS = np.array([[0, 1, 2, 3],      # complete
                   [0, 0, 2, -1],     # a tie for first, top-3
                   [1, 0, -1, -1],    # top-2
                   [0, 1, 1, 1],      # a three-way tie behind the first
                   [2, 0, 1, -1],     # top-3
                   [-1, -1, 0, -1],   # top-1
                   [3, 2, 1, 0]])
COUNTS = np.array([4, 3, 5, 2, 3, 2, 1])


def _data():
    return RankingData.from_orders(ORDERS, COUNTS)


def _patterns(y):
    return np.sort(np.asarray(y), axis=-1)


def _prior_as_posterior(rm, draws=8, seed=0):
    """Prior draws of the model's parameters standing in for a posterior (the predictive's
    mechanics do not depend on where the draws come from)."""
    with warnings.catch_warnings():  # a mixture's Potential is irrelevant to prior draws
        warnings.filterwarnings("ignore", "The effect of Potentials")
        return pm.sample_prior_predictive(draws=draws, model=rm.model,
                                          random_seed=seed)["prior"]


def test_ballot_statistics_tie_share_by_hand():
    s = analysis.ballot_statistics(ORDERS, COUNTS)
    # ballots with a tie among ranked items: rows 1 and 3 (3 + 2 of 20); the unranked items of
    # a top-k ballot are not a tie
    assert float(s["tied"]) == pytest.approx(5 / 20)
    np.testing.assert_allclose(s["lengths"], np.array([0, 2, 5, 6, 7]) / 20)
    rep = analysis.replicated_statistics(np.stack([ORDERS, ORDERS[[0, 2, 5, 6, 0, 2, 4]]]))
    np.testing.assert_allclose(rep["tied"], [2 / 7, 0.0])


@pytest.mark.parametrize("builder", [rmod.plackett_luce_model, rmod.full_model])
def test_pymc_posterior_predictive_keeps_each_ballots_pattern(builder):
    """``pm.sample_posterior_predictive`` on the models' K = 1 ``"ballots"``: every replicated
    row has the pattern (length and tie blocks) of its observed row. On main the rows were
    top-k ballots of a length drawn from ``length_probs``, never tied."""
    rm = builder(_data())
    prior = _prior_as_posterior(rm)
    with rm.model:
        pp = pm.sample_posterior_predictive(prior.to_dataset(), var_names=["ballots"],
                                            random_seed=1, progressbar=False,
                                            return_inferencedata=False)
    y = np.asarray(pp["ballots"])
    observed = rm.model.rvs_to_values[rm.model["ballots"]].eval()  # one row per replicated one
    assert y.shape == (1, 8, *observed.shape)
    np.testing.assert_array_equal(_patterns(y), np.broadcast_to(_patterns(observed), y.shape))
    assert not np.array_equal(y[0, 0], y[0, 1])  # and the orders are drawn, not copied


@pytest.mark.parametrize("builder, K", [(rmod.plackett_luce_model, 1), (rmod.full_model, 1),
                                        (rmod.full_model, 2)])
def test_predictive_ballots_keep_lengths_and_ties(builder, K):
    """:func:`predictive_ballots`: one replicated ballot per observed ballot with its pattern,
    so the replicated length distribution and tie share EQUAL the observed ones (every draw);
    ``keep_pattern=False`` draws lengths from ``length_probs`` and no ties."""
    data = _data()
    rm = builder(data, components=K)
    prior = _prior_as_posterior(rm)
    ballots = rpost.predictive_ballots(rm, {"posterior": prior}, draws=None, seed=2)
    assert ballots.shape == (8, data.n_rankings, M)
    expected = np.repeat(ORDERS, COUNTS, axis=0)
    np.testing.assert_array_equal(_patterns(ballots),
                                  np.broadcast_to(_patterns(expected), ballots.shape))
    obs = analysis.ballot_statistics(data.orders, data.counts)
    rep = analysis.replicated_statistics(ballots)
    np.testing.assert_allclose(rep["lengths"], np.broadcast_to(obs["lengths"], (8, M + 1)))
    np.testing.assert_allclose(rep["tied"], float(obs["tied"]))
    if K == 1:  # the model's data were restored after the call
        np.testing.assert_array_equal(rm.model["orders"].get_value(), data.orders)
    free = rpost.predictive_ballots(rm, {"posterior": prior}, draws=None, seed=2,
                                    keep_pattern=False)
    assert analysis.replicated_statistics(free)["tied"].max() == 0.0
    with pytest.raises(ValueError, match="keep_pattern must be True or False"):
        rpost.predictive_ballots(rm, {"posterior": prior}, keep_pattern=None)


def test_ppc_summary_has_a_tie_statistic():
    """With patterns kept (default) the replicated lengths and tie share are the observed ones
    (p-value 1); without, the tie share of tied data is flagged (the models draw no ties)."""
    data = _data()
    rng = np.random.default_rng(3)
    post = {"params": rng.normal(size=(5, 1, M)), "weights": np.ones((5, 1)),
            "length_probs": rng.dirichlet(np.ones(M + 1), 5)}
    out = analysis.ppc_summary(data, post, "plackett-luce", n_reps=40, rng=4)
    assert set(out) == {"first", "lengths", "pairwise", "tied"}
    tied = out["tied"]
    assert float(tied["observed"]) == pytest.approx(0.25)
    assert float(tied["lower"]) == float(tied["upper"]) == pytest.approx(0.25)
    assert float(tied["p_value"]) == 1.0
    np.testing.assert_allclose(out["lengths"]["mean"], out["lengths"]["observed"])
    free = analysis.ppc_summary(data, post, "plackett-luce", n_reps=40, rng=4,
                                keep_pattern=False)
    assert float(free["tied"]["upper"]) == 0.0 and float(free["tied"]["p_value"]) == 0.0
    # ballots given directly: the same statistic
    ballots = np.repeat(ORDERS, COUNTS, axis=0)[None]
    assert float(analysis.ppc_summary(data, replicated=ballots)["tied"]["mean"]) == 0.25
    with pytest.raises(ValueError, match="lack 'tied'"):
        analysis.ppc_summary(data, replicated={k: v for k, v in
                                               analysis.replicated_statistics(ballots).items()
                                               if k != "tied"})
