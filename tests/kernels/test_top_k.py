"""Top-k item-by-position kernel against enumeration over every top-K list (M <= 8)."""

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from pm_perm.kernels.partial_orders import partial_order_loglik
from pm_perm.kernels.top_k import (
    TOP_K_MAX_K,
    check_top_k_size,
    top_k_log_normalizer,
    top_k_loglik,
    top_k_loglik_and_grad,
    top_k_marginals,
)
from pm_perm.kernels.top_k_sampler import sample_top_k
from pm_perm.reference.rankings import random_tie_orders
from pm_perm.reference.top_k import (
    _consistent,
    top_k_lists,
    top_k_logp_enum,
    top_k_marginals_enum,
    top_k_scores,
)

CASES = [(M, K) for M in range(1, 9) for K in range(1, M + 1)]


def random_logits(rng, M, K, scale=1.5, forbid=0.0):
    L = rng.normal(scale=scale, size=(M, K + 1))
    L[rng.random(L.shape) < forbid] = -np.inf
    L[np.arange(K), rng.permutation(K)] = rng.normal(size=K)  # keeps a finite top-K list
    L[K:, K] = rng.normal(size=M - K)
    return L


def ballots(rng, M, K, per_length):
    """Every ballot of length <= K for M <= 4; else ``per_length`` random ones of each length
    0..K; plus random tie patterns ranking at most K items."""
    lists = top_k_lists(M, K)
    cut = [np.where(lists < k, lists, -1) for k in range(K + 1)]
    if M > 4:
        cut = [c[rng.choice(len(c), min(per_length, len(c)), replace=False)] for c in cut]
    ties = random_tie_orders(rng, M, 12)
    ties = ties[(ties >= 0).sum(1) <= K]
    return np.unique(np.concatenate([*cut, ties]), axis=0)


def enum_grad(L, orders, weights):
    """d/dL sum_n w_n log p_n by enumeration: sum_n w_n (E[onehot | ballot n] - E[onehot])."""
    M, K = L.shape[0], L.shape[1] - 1
    lists = top_k_lists(M, K)
    s = top_k_scores(L, lists)
    onehot = np.zeros((len(lists), M, K + 1))
    onehot[np.arange(len(lists))[:, None], np.arange(M), np.where(lists >= 0, lists, K)] = 1.0

    def expect(mask):
        lw = np.where(mask, s, -np.inf)
        return np.einsum("k,kij->ij", np.exp(lw - logsumexp(lw)), onehot)

    full = expect(np.ones(len(lists), bool))
    return sum(w * (expect(_consistent(y, lists)) - full) for y, w in zip(orders, weights,
                                                                            strict=True))


@pytest.mark.parametrize(("M", "K"), CASES)
def test_normalizer_and_marginals_against_enumeration(M, K):
    rng = np.random.default_rng(100 * M + K)
    L = random_logits(rng, M, K, forbid=0.15)
    lz, G = top_k_marginals_enum(L)
    got_lz, got_G = top_k_marginals(L)
    np.testing.assert_allclose(got_lz, lz, rtol=0, atol=1e-11)
    np.testing.assert_allclose(top_k_log_normalizer(L), lz, rtol=0, atol=1e-11)
    np.testing.assert_allclose(got_G, G, rtol=0, atol=1e-11)


@pytest.mark.parametrize(("M", "K"), CASES)
def test_ballots_against_enumeration(M, K):
    """Every ballot length 0..K (all ballots for M <= 4), strict and tied, with its gradient
    (by enumeration for M <= 7; M = 8 by finite differences elsewhere, to keep it fast)."""
    rng = np.random.default_rng(200 * M + K)
    L = random_logits(rng, M, K)
    orders = ballots(rng, M, K, per_length=3 if M < 8 else 1)
    got = top_k_loglik(L, orders)
    ref = [top_k_logp_enum(L, y) for y in orders]
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-11)
    weights = rng.integers(0, 5, size=len(orders)).astype(float)
    total, grad = top_k_loglik_and_grad(L, orders, weights)
    np.testing.assert_allclose(total, np.dot(weights, ref), rtol=1e-12, atol=1e-10)
    keep = weights > 0
    if M < 8:
        np.testing.assert_allclose(grad, enum_grad(L, orders[keep], weights[keep]), atol=1e-10)


@pytest.mark.parametrize(("M", "K"), [(6, 2), (6, 3), (7, 5)])
def test_ballots_and_gradient_with_logits_spread_over_hundreds_of_nats(M, K):
    """Logits of scale 300: the unlikely ballots' suffix sums go through the log-space path
    (SUFFIX_TINY); values and gradients still match enumeration."""
    rng = np.random.default_rng(500 * M + K)
    L = random_logits(rng, M, K, scale=300.0)
    orders = ballots(rng, M, K, per_length=4)
    ref = np.array([top_k_logp_enum(L, y) for y in orders])
    np.testing.assert_allclose(top_k_loglik(L, orders), ref, rtol=1e-13, atol=1e-9)
    weights = rng.integers(1, 4, size=len(orders)).astype(float)
    _, grad = top_k_loglik_and_grad(L, orders, weights)
    np.testing.assert_allclose(grad, enum_grad(L, orders, weights), atol=1e-9)


@pytest.mark.parametrize("M", [1, 2, 3, 4])
def test_every_length_partitions_the_lists(M):
    """For each K and each length k <= K, the ballots of length k are a partition: their
    probabilities sum to one."""
    rng = np.random.default_rng(M)
    for K in range(1, M + 1):
        L = random_logits(rng, M, K)
        lists = top_k_lists(M, K)
        for k in range(K + 1):
            cut = np.unique(np.where(lists < k, lists, -1), axis=0)
            np.testing.assert_allclose(logsumexp(top_k_loglik(L, cut)), 0.0, atol=1e-12)


@pytest.mark.parametrize("M", [1, 3, 6, 11])
def test_k_equals_m_is_the_full_model(M):
    """K = M: the top-k likelihood is PartialRanking's full model with W = L[:, :M], for
    top-k and tied ballots (the last column is unused)."""
    rng = np.random.default_rng(300 + M)
    L = random_logits(rng, M, M)
    orders = np.concatenate([random_tie_orders(rng, M, 20), ballots(rng, M, M, 2) if M <= 8
                             else random_tie_orders(rng, M, 5)])
    np.testing.assert_allclose(top_k_loglik(L, orders), partial_order_loglik(L[:, :M], orders),
                               rtol=0, atol=1e-10)


@pytest.mark.parametrize(("M", "K", "spread"), [(7, 3, 3.0), (10, 4, 50.0), (12, 6, 400.0),
                                                (9, 8, 1000.0)])
def test_any_k_is_the_full_model_with_repeated_last_column(M, K, spread):
    """For any K the top-k model is the full model with W_full[:, j] = V for j >= K: equal
    likelihoods of every ballot of length <= K, also for logits spread over hundreds of nats
    (dual scaling)."""
    rng = np.random.default_rng(400 + M)
    L = random_logits(rng, M, K, scale=spread)
    W_full = np.concatenate([L[:, :K], np.repeat(L[:, K:], M - K, axis=1)], axis=1)
    ties = random_tie_orders(rng, M, 40)
    ranks = np.argsort(np.argsort(rng.random((4, M)), axis=1), axis=1)
    orders = np.concatenate([ties[(ties >= 0).sum(1) <= K]]
                            + [np.where(ranks < k, ranks, -1) for k in range(K + 1)])
    got = top_k_loglik(L, orders)
    ref = partial_order_loglik(W_full, orders)
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-9 * spread)


def test_k_one_is_a_multinomial_of_first_choices():
    rng = np.random.default_rng(5)
    L = rng.normal(size=(6, 2))
    first = np.full((6, 6), -1)
    first[np.arange(6), np.arange(6)] = 0
    expect = (L[:, 0] - L[:, 1]) - logsumexp(L[:, 0] - L[:, 1])
    np.testing.assert_allclose(top_k_loglik(L, first), expect, atol=1e-12)


def test_batched_logits_match_single():
    rng = np.random.default_rng(6)
    L = rng.normal(size=(2, 3, 5, 3))
    orders = ballots(rng, 5, 2, 4)
    got = top_k_loglik(L, orders)
    for idx in np.ndindex(2, 3):
        np.testing.assert_allclose(got[idx], top_k_loglik(L[idx], orders), atol=1e-13)
    w = np.arange(len(orders), dtype=float)
    tot, g = top_k_loglik_and_grad(L, orders, w)
    np.testing.assert_allclose(tot, (got * w).sum(-1), rtol=1e-12)
    assert g.shape == L.shape


def test_draws_chi_square_all_top2_lists_of_4_items():
    """Pearson chi-square over the 12 top-2 lists of 4 items, 30,000 draws, seed fixed.

    The test fails if p < 1e-4: a false-failure rate of 1e-4 for a correct sampler."""
    rng = np.random.default_rng(7)
    L = rng.normal(size=(4, 3))
    lists = top_k_lists(4, 2)
    p = np.exp(top_k_loglik(L, lists))
    np.testing.assert_allclose(p.sum(), 1.0, atol=1e-12)
    draws = sample_top_k(L, size=(30_000,), rng=np.random.default_rng(8))
    index = {tuple(t): r for r, t in enumerate(lists)}
    counts = np.bincount([index[tuple(d)] for d in draws], minlength=len(lists))
    chi2 = ((counts - 30_000 * p) ** 2 / (30_000 * p)).sum()
    assert stats.chi2.sf(chi2, len(lists) - 1) > 1e-4


def test_draws_chi_square_batched_logits_k3_of_5():
    """Two logits matrices drawn in one call (each draw from its own matrix): chi-square over
    the 60 top-3 lists of 5 items per matrix, 20,000 draws each, seed fixed; fails if
    p < 1e-4 (false-failure rate about 2e-4 for the two tests)."""
    rng = np.random.default_rng(9)
    L = rng.normal(size=(2, 5, 4))
    lists = top_k_lists(5, 3)
    draws = sample_top_k(L, size=(20_000, 2), rng=np.random.default_rng(10))
    index = {tuple(t): r for r, t in enumerate(lists)}
    for b in range(2):
        p = np.exp(top_k_loglik(L[b], lists))
        counts = np.bincount([index[tuple(d)] for d in draws[:, b]], minlength=len(lists))
        chi2 = ((counts - 20_000 * p) ** 2 / (20_000 * p)).sum()
        assert stats.chi2.sf(chi2, len(lists) - 1) > 1e-4


def test_draws_avoid_forbidden_entries():
    L = np.zeros((4, 3))
    L[0, 0] = -np.inf  # item 0 never first
    L[1, 2] = -np.inf  # item 1 always in the top 2
    d = sample_top_k(L, size=(2000,), rng=np.random.default_rng(1))
    assert not np.any(d[:, 0] == 0)
    assert np.all(d[:, 1] >= 0)


def test_impossible_logits_give_nan():
    L = np.full((3, 2), -np.inf)  # K = 1: no item can be first
    L[:, 1] = 0.0
    assert np.isnan(top_k_loglik(L, np.array([[0, -1, -1]]))).all()
    assert top_k_log_normalizer(L) == -np.inf
    with pytest.raises(ValueError, match="admit no top-K list"):
        sample_top_k(L)


def test_large_m_is_fast_and_normalised():
    """M = 100, K = 4: the length-1 ballots are a partition (their probabilities sum to 1)."""
    rng = np.random.default_rng(11)
    L = rng.normal(size=(100, 5))
    first = np.full((100, 100), -1)
    first[np.arange(100), np.arange(100)] = 0
    np.testing.assert_allclose(logsumexp(top_k_loglik(L, first)), 0.0, atol=1e-10)
    _, G = top_k_marginals(L)
    np.testing.assert_allclose(G.sum(0), [1, 1, 1, 1, 96], rtol=1e-12)
    np.testing.assert_allclose(G.sum(1), 1.0, rtol=1e-12)


def test_bad_input_names_the_problem():
    L = np.zeros((3, 2))
    with pytest.raises(ValueError, match="more than the K = 1 positions"):
        top_k_loglik(L, np.array([[0, 1, -1]]))
    with pytest.raises(ValueError, match="not a valid rank-form order"):
        top_k_loglik(L, np.array([[1, -1, -1]]))
    with pytest.raises(ValueError, match="1 <= K <= M"):
        top_k_loglik(np.zeros((3, 5)), np.array([[0, -1, -1]]))
    with pytest.raises(ValueError, match="K >= 1"):
        top_k_loglik(np.zeros((3, 1)), np.array([[0, -1, -1]]))
    with pytest.raises(ValueError, match="NaN"):
        top_k_loglik(np.full((3, 2), np.nan), np.array([[0, -1, -1]]))
    with pytest.raises(ValueError, match="TOP_K_MAX_K"):
        check_top_k_size(40, TOP_K_MAX_K + 1)
    with pytest.raises(ValueError, match="weights"):
        top_k_loglik_and_grad(L, np.array([[0, -1, -1]]), [np.nan])


def test_memory_budget_is_named(monkeypatch):
    monkeypatch.setenv("PM_PERM_MEMORY_BUDGET", "1M")
    with pytest.raises(ValueError, match="PM_PERM_MEMORY_BUDGET"):
        check_top_k_size(100, 12)
