"""Held-out metrics against brute-force enumeration and closed forms."""

from itertools import product

import numpy as np
import pytest
from scipy.special import expit, log_softmax, logit

from pm_perm.classification.metrics import (
    bernoulli_nll,
    nchoosek_nll,
    poisson_binomial_pmf,
    topk_accuracy,
)


def test_poisson_binomial_pmf_matches_enumeration():
    rng = np.random.default_rng(0)
    p = rng.uniform(size=(3, 6))
    q = poisson_binomial_pmf(p)
    for row in range(3):
        ref = np.zeros(7)
        for y in product((0, 1), repeat=6):
            y = np.array(y)
            ref[y.sum()] += np.prod(np.where(y == 1, p[row], 1 - p[row]))
        np.testing.assert_allclose(q[row], ref, rtol=1e-12, atol=1e-15)


def test_nchoosek_nll_with_poisson_binomial_prior_is_bernoulli_nll():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(20, 7))
    Y = rng.integers(0, 2, size=(20, 7))
    count_logits = np.log(poisson_binomial_pmf(expit(logits)))
    np.testing.assert_allclose(nchoosek_nll(logits, count_logits, Y),
                               bernoulli_nll(logits, Y), rtol=1e-10)


def test_nchoosek_nll_matches_enumeration():
    rng = np.random.default_rng(2)
    logits, count_logits = rng.normal(size=(1, 5)), rng.normal(size=(1, 6))
    log_pi = log_softmax(count_logits[0])
    ys = np.array(list(product((0, 1), repeat=5)))
    s = ys.sum(axis=1)
    scores = ys @ logits[0]
    lp = np.array([log_pi[k] + scores[i] - np.log(np.exp(scores[s == k]).sum())
                   for i, k in enumerate(s)])
    got = -nchoosek_nll(np.repeat(logits, len(ys), 0), np.repeat(count_logits, len(ys), 0), ys)
    np.testing.assert_allclose(got, lp, rtol=1e-12)
    np.testing.assert_allclose(np.exp(lp).sum(), 1.0, rtol=1e-12)


def test_bernoulli_nll_closed_form():
    p = np.array([[0.2, 0.7]])
    np.testing.assert_allclose(bernoulli_nll(logit(p), np.array([[1, 0]])),
                               [-np.log(0.2) - np.log(0.3)])


def test_topk_accuracy():
    scores = np.array([[3.0, 2.0, 1.0], [1.0, 2.0, 3.0]])
    target = np.array([1, 0])
    assert topk_accuracy(scores, target, 1) == 0.0
    assert topk_accuracy(scores, target, 2) == 0.5
    assert topk_accuracy(scores, target, 3) == 1.0


def test_nchoosek_and_bernoulli_nll_refuse_bad_input():
    L, Y = np.zeros((2, 4)), np.array([[1, 0, 0, 0], [1, 1, 0, 0]])
    with pytest.raises(ValueError, match=r"count_logits must have shape \(n, D \+ 1\)"):
        nchoosek_nll(L, np.zeros((2, 4)), Y)  # one logit per count 0..D, not per output
    with pytest.raises(ValueError, match="Y must be binary"):
        nchoosek_nll(L, np.zeros((2, 5)), np.array([[2, 0, 0, 0], [1, 1, 0, 0]]))
    with pytest.raises(ValueError, match="Y must have the shape of logits"):
        bernoulli_nll(L, Y[:1])
    with pytest.raises(ValueError, match="logits contain NaN"):
        bernoulli_nll(L * np.nan, Y)
    with pytest.raises(ValueError, match="count_logits contain NaN"):
        nchoosek_nll(L, np.full((2, 5), np.nan), Y)
    # -inf count logits are a zero prior probability, not an error
    cl = np.zeros((2, 5))
    cl[:, 1] = -np.inf
    np.testing.assert_allclose(nchoosek_nll(L, cl, Y), [np.inf, np.log(4) + np.log(6)])


def test_poisson_binomial_pmf_refuses_non_probabilities():
    for p in ([1.5, 0.5], [-0.1, 0.5], [np.nan, 0.5]):
        with pytest.raises(ValueError, match=r"probabilities in \[0, 1\]"):
            poisson_binomial_pmf(p)
    np.testing.assert_allclose(poisson_binomial_pmf([1.0, 0.5]), [0.0, 0.5, 0.5])


@pytest.mark.parametrize("target, K, match", [
    (np.array([0]), 1, "target must be an integer class index per row"),
    (np.array([0.0, 3.0]), 1, "target must be an integer class index per row"),
    (np.array([7, 9]), 4, r"target must hold class indices in 0..C-1 = 0..3"),
    (np.array([0, 3]), 0, r"K must be an integer in 1..C = 1..4"),
    (np.array([0, 3]), -1, r"K must be an integer in 1..C = 1..4"),
    (np.array([0, 3]), 5, r"K must be an integer in 1..C = 1..4"),
])
def test_topk_accuracy_refuses_bad_input(target, K, match):
    scores = np.array([[3.0, 2.0, 1.0, 0.0], [0.0, 1.0, 2.0, 3.0]])
    with pytest.raises(ValueError, match=match):
        topk_accuracy(scores, target, K)


def test_topk_accuracy_refuses_nan_scores():
    scores = np.array([[np.nan, 2, 1, 0], [0, 1, 2, np.nan]])
    with pytest.raises(ValueError, match="scores contain NaN"):
        topk_accuracy(scores, np.array([0, 3]), 1)
