"""The top-k kernel's short ballots from shared tables (pm_perm.kernels.top_k_ballots) against
enumeration over every top-K list (M <= 8), and against one DP per ballot."""

import numpy as np
import pytest

from pm_perm.kernels.top_k import top_k_core
from pm_perm.kernels.top_k_ballots import FAST_MAX_BYTES, ballot_lengths, layout, plan_lengths
from pm_perm.reference.top_k import top_k_logp_enum
from tests.kernels.test_top_k import CASES, ballots, enum_grad, random_logits


def _core(L, orders, weights, fast):
    values, grad = np.empty(len(orders)), np.empty(L.shape)
    total = top_k_core(L, orders, weights, values, grad, True, fast)
    return total, values, grad


@pytest.mark.parametrize(("M", "K"), CASES)
def test_tables_against_enumeration(M, K):
    """Every length 1..K - 1 through the tables (``fast=1``), strict and tied ballots (all of
    them for M <= 4): values and, for M <= 7, the gradient by enumeration; M = 8's gradient
    against one DP per ballot (``fast=0``)."""
    rng = np.random.default_rng(300 * M + K)
    L = random_logits(rng, M, K, forbid=0.1)
    orders = ballots(rng, M, K, per_length=4 if M < 8 else 1)
    weights = rng.integers(0, 5, size=len(orders)).astype(float)
    total, values, grad = _core(L, orders, weights, 1)
    ref = np.array([top_k_logp_enum(L, y) for y in orders])
    np.testing.assert_array_equal(np.isneginf(values), np.isneginf(ref))
    ok = np.isfinite(ref)
    np.testing.assert_allclose(values[ok], ref[ok], rtol=0, atol=1e-11)
    keep = (weights > 0) & ok
    if keep.all():
        np.testing.assert_allclose(total, np.dot(weights, ref), rtol=1e-12, atol=1e-10)
    if M < 8:
        expect = enum_grad(L, orders[keep], weights[keep])
    else:
        expect = _core(L, orders[keep], weights[keep], 0)[2]
    _, _, grad = _core(L, orders[keep], weights[keep], 1)
    np.testing.assert_allclose(grad, expect, rtol=0, atol=1e-10)


@pytest.mark.parametrize(("M", "K", "scale"), [(6, 4, 300.0), (7, 5, 40.0), (8, 6, 300.0)])
def test_tables_with_logits_spread_over_hundreds_of_nats(M, K, scale):
    """Tables rescaled by powers of 1e-100 and ballots whose remainder is too small for them
    (left to the DP and its log-space path): still enumeration's values and gradients."""
    rng = np.random.default_rng(700 * M + K)
    L = random_logits(rng, M, K, scale=scale)
    orders = ballots(rng, M, K, per_length=6)
    ref = np.array([top_k_logp_enum(L, y) for y in orders])
    weights = rng.integers(1, 4, size=len(orders)).astype(float)
    _, values, grad = _core(L, orders, weights, 1)
    np.testing.assert_allclose(values, ref, rtol=1e-13, atol=1e-9)
    np.testing.assert_allclose(grad, enum_grad(L, orders, weights), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("K", [3, 4, 5, 6])
def test_tables_when_the_ranked_items_dominate(K):
    """Three items 40 nats more likely than the others at every position, ranked by every short
    ballot: removing them from a product over all items would cancel every digit; the tables
    never subtract. Values and gradients against enumeration (M = 7)."""
    M = 7
    rng = np.random.default_rng(K)
    L = rng.normal(size=(M, K + 1))
    L[:3, :K] += 40.0
    rows = []
    for k in range(1, 4):
        for _ in range(6):
            y = np.full(M, -1)
            y[rng.choice(3, k, replace=False)] = np.arange(k)
            rows.append(y)
    orders = np.unique(np.array(rows), axis=0)
    weights = rng.integers(1, 4, size=len(orders)).astype(float)
    ref = np.array([top_k_logp_enum(L, y) for y in orders])
    _, values, grad = _core(L, orders, weights, 1)
    np.testing.assert_allclose(values, ref, rtol=1e-12, atol=1e-10)
    np.testing.assert_allclose(grad, enum_grad(L, orders, weights), rtol=1e-8, atol=1e-9)


def test_the_automatic_plan_matches_one_dp_per_ballot():
    """``fast=-1`` (the Ops' default) on 3,000 ballots over 12 items: the plan takes the tables
    for the frequent lengths, and values and gradient equal one DP per ballot's."""
    rng = np.random.default_rng(5)
    M, K = 12, 6
    L = random_logits(rng, M, K)
    u = rng.normal(size=M)
    rows = []
    for _ in range(3000):
        k = rng.integers(1, K + 1)
        top = np.argsort(-(u + rng.gumbel(size=M)))[:k]
        y = np.full(M, -1)
        y[top] = np.arange(k)
        rows.append(y)
    orders, counts = np.unique(np.array(rows), axis=0, return_counts=True)
    use = plan_lengths(M, K, ballot_lengths(orders, K), -1)
    assert use[1:4].all() and not use[0] and not use[K]
    weights = counts.astype(float)
    t_auto, v_auto, g_auto = _core(L, orders, weights, -1)
    t_dp, v_dp, g_dp = _core(L, orders, weights, 0)
    np.testing.assert_allclose(v_auto, v_dp, rtol=1e-12, atol=1e-11)
    np.testing.assert_allclose(t_auto, t_dp, rtol=1e-12)
    np.testing.assert_allclose(g_auto, g_dp, rtol=1e-10, atol=1e-9)


def test_plan_keeps_few_ballots_and_big_tables_on_the_dp():
    M, K = 50, 10
    few = np.zeros(K + 1, dtype=np.int64)
    few[3] = 5
    assert not plan_lengths(M, K, few, -1).any()
    assert plan_lengths(M, K, few, 1)[3] and not plan_lengths(M, K, few * 10**6, 0).any()
    M, K = 200, 20  # 3 x 200^2 tables of 2^16 entries for length 4: beyond FAST_MAX_BYTES
    many = np.full(K + 1, 10**7, dtype=np.int64)
    assert 16 * layout(M, 4)[3] * 2**16 > FAST_MAX_BYTES
    use = plan_lengths(M, K, many, 1)
    assert not use[4] and use[K - 1]
    chosen = sum(16 * layout(M, k)[3] * 2 ** (K - k) for k in range(1, K) if use[k])
    assert chosen <= FAST_MAX_BYTES  # all lengths together, not each
    assert sum(16 * layout(M, k)[3] * 2 ** (K - k) for k in range(1, K) if k >= 12) > chosen
