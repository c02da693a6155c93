import itertools

import numpy as np
import pymc as pm
import pytest
from scipy.stats import chisquare

from pm_perm.distributions.ordinal_n_choose_k import OrdinalNChooseK
from pm_perm.learning_to_rank.predictive import plackett_luce_predictive


def _ordinal_ranking_probs(s):
    """p(ranking) under OrdinalNChooseK with one document per level, by enumeration.

    Position p of the ranking gets label D - 1 - p (label D - 1 = top)."""
    D = len(s)
    rankings = list(itertools.permutations(range(D)))
    labels = np.empty((len(rankings), D), dtype=np.int64)
    for r, order in enumerate(rankings):
        labels[r, list(order)] = D - 1 - np.arange(D)
    dist = OrdinalNChooseK.dist(logits=np.broadcast_to(s, labels.shape), n_levels=D)
    logp = pm.logp(dist, labels).eval()
    return rankings, np.exp(logp)


@pytest.mark.parametrize("D", [3, 4])
def test_draws_follow_the_ordinal_model_with_one_document_per_level(D):
    """Chi-square goodness of fit of 20,000 draws against the enumerated ordinal-model
    probabilities of all D! rankings; seed fixed, false-failure rate 1e-3 per case."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(D, 2))
    theta = np.array([[0.8, -0.6]])
    rankings, probs = _ordinal_ranking_probs(X @ theta[0])
    np.testing.assert_allclose(probs.sum(), 1.0, rtol=1e-10)
    n = 20_000
    y = plackett_luce_predictive(np.repeat(theta, n, axis=0), X, rng=1)
    order = np.argsort(y, axis=1)  # documents by position
    index = {r: i for i, r in enumerate(rankings)}
    counts = np.bincount([index[tuple(o)] for o in order], minlength=len(rankings))
    assert chisquare(counts, probs * n).pvalue > 1e-3


def test_positions_are_permutations_and_draws_mix_theta():
    X = np.array([[1.0], [0.0], [-1.0], [0.5]])
    draws = np.array([[5.0]] * 300 + [[-5.0]] * 300)
    y = plackett_luce_predictive(draws, X, rng=0)
    assert y.dtype == np.int64 and y.shape == (600, 4)
    assert np.all(np.sort(y, axis=1) == np.arange(4))
    assert np.mean(y[:300, 0] == 0) > 0.9 and np.mean(y[300:, 2] == 0) > 0.9


def test_bad_input_raises():
    with pytest.raises(ValueError, match="share n_features"):
        plackett_luce_predictive(np.ones((3, 2)), np.ones((4, 3)))
    with pytest.raises(ValueError, match="finite scores"):
        plackett_luce_predictive(np.array([[np.nan]]), np.ones((4, 1)))
