"""pm_perm.reference.rankings and permutation_probabilities_enum: the oracles agree."""

import math

import numpy as np
import pytest
from scipy.special import logsumexp

from pm_perm.reference.permutations import (
    all_permutations,
    permutation_logp_enum,
    permutation_probabilities_enum,
)
from pm_perm.reference.rankings import (
    consistent_mask,
    every_top_k_order,
    mixture_loglik_enum,
    partial_order_logp_enum,
    permutation_complete_logp,
    plackett_luce_complete_logp,
    plackett_luce_logp_enum,
    random_tie_orders,
)


@pytest.mark.parametrize("M", [1, 2, 3, 4])
def test_every_top_k_order(M):
    orders = every_top_k_order(M)
    # k = M - 1 and k = M give the same orders of the ranked items, distinct in rank form
    assert len(orders) == sum(math.perm(M, k) for k in range(M + 1))
    assert len(np.unique(orders, axis=0)) == len(orders)
    for y in orders:
        k = int((y >= 0).sum())
        assert sorted(y[y >= 0]) == list(range(k))


def test_random_tie_orders_are_weak_orders():
    orders = random_tie_orders(np.random.default_rng(0), 5, 50)
    assert len(np.unique(orders, axis=0)) == len(orders) > 10
    perms = all_permutations(5)
    for y in orders:  # each is an event of at least one complete ranking
        assert consistent_mask(y, perms).any()
        ranked = y[y >= 0]
        for v in np.unique(ranked):  # a block of size s at position v: next block at v + s
            assert (ranked >= v).sum() == len(ranked) - (ranked < v).sum()


def test_permutation_probabilities_enum():
    W = np.random.default_rng(1).normal(size=(4, 4))
    perms, p = permutation_probabilities_enum(W)
    np.testing.assert_array_equal(perms, all_permutations(4))
    np.testing.assert_allclose(np.log(p), permutation_logp_enum(W, perms), rtol=1e-12)
    np.testing.assert_allclose(np.log(p), permutation_complete_logp(W, perms), rtol=1e-12)


@pytest.mark.parametrize("family", ["full", "plackett-luce"])
def test_mixture_loglik_enum(family):
    rng = np.random.default_rng(2)
    M = 4
    params = rng.normal(size=(2, M, M) if family == "full" else (2, M))
    weights = np.array([0.3, 0.7])
    orders = np.concatenate([every_top_k_order(M)[::7], random_tie_orders(rng, M, 10)])
    ll, comps = mixture_loglik_enum(family, params, weights, orders)
    one = partial_order_logp_enum if family == "full" else plackett_luce_logp_enum
    want = np.array([[one(p, y) for y in orders] for p in params])
    np.testing.assert_allclose(comps, want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ll, logsumexp(np.log(weights)[:, None] + want, axis=0),
                               rtol=1e-10, atol=1e-12)
    # complete rankings: the probabilities of each component sum to 1
    perms = all_permutations(M)
    f = permutation_complete_logp if family == "full" else plackett_luce_complete_logp
    assert np.exp(f(params[0], perms)).sum() == pytest.approx(1.0, abs=1e-12)
