"""Partial-order likelihood kernel against enumeration over all M! permutations."""

import itertools

import numpy as np
import pytest
from scipy.special import logsumexp

from pm_perm.kernels.partial_orders import (
    check_partial_order_size,
    partial_order_loglik,
    partial_order_loglik_and_grad,
    partial_orders_core,
    validate_orders,
)
from pm_perm.kernels.permanent import EXACT_MAX_M, log_permanent
from pm_perm.reference.permutations import all_permutations
from pm_perm.reference.rankings import (
    consistent_mask,
    partial_order_logp_enum,
    random_tie_orders,
)


def random_logits(rng, M, batch=(), scale=2.0, forbid=0.15):
    """Gaussian logits with some -inf entries, every matrix keeping a feasible matching."""
    W = rng.normal(scale=scale, size=batch + (M, M))
    W[rng.random(W.shape) < forbid] = -np.inf
    for w in W.reshape(-1, M, M):
        w[np.arange(M), rng.permutation(M)] = rng.normal(scale=scale, size=M)
    return W


def pattern_orders(sizes, unranked_tail):
    """All rank-form orders whose blocks have the given sizes (the last block as -1 when
    ``unranked_tail``)."""
    M = sum(sizes)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int)
    block_of_pos = np.repeat(np.arange(len(sizes)), sizes)
    value = starts.copy()
    if unranked_tail:
        value[-1] = -1
    seen = set()
    for sigma in itertools.permutations(range(M)):  # sigma[pos] = item
        y = np.empty(M, dtype=np.int64)
        y[list(sigma)] = value[block_of_pos]
        seen.add(tuple(y))
    return np.array(sorted(seen), dtype=np.int64).reshape(-1, M)


def top_k_orders(rng, M, k, n):
    """Up to ``n`` random top-k orders of M items."""
    out = []
    for _ in range(n):
        y = np.full(M, -1, dtype=np.int64)
        y[rng.permutation(M)[:k]] = np.arange(k)
        out.append(y)
    return np.unique(np.array(out), axis=0)


def enum_grad(W, orders, weights):
    """d/dW sum_n w_n log p_n by enumeration: sum_n w_n (E[onehot | order n] - E[onehot])."""
    M = W.shape[0]
    perms = all_permutations(M)
    s = W[np.arange(M), perms].sum(-1)
    onehot = np.zeros((perms.shape[0], M, M))
    onehot[np.arange(perms.shape[0])[:, None], np.arange(M), perms] = 1.0

    def expect(mask):
        lw = np.where(mask, s, -np.inf)
        p = np.exp(lw - logsumexp(lw))
        return np.einsum("k,kij->ij", p, onehot)

    full = expect(np.ones(perms.shape[0], bool))
    return sum(w * (expect(consistent_mask(y)) - full)
               for y, w in zip(orders, weights, strict=True))


@pytest.mark.parametrize("M", range(1, 8))
def test_top_k_against_enumeration(M):
    rng = np.random.default_rng(10 + M)
    W = random_logits(rng, M)
    for k in range(M + 1):
        orders = top_k_orders(rng, M, k, 12)
        got = partial_order_loglik(W, orders)
        ref = [partial_order_logp_enum(W, y) for y in orders]
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-11)


@pytest.mark.parametrize("M", range(1, 8))
def test_ties_against_enumeration(M):
    rng = np.random.default_rng(20 + M)
    W = random_logits(rng, M)
    orders = random_tie_orders(rng, M, 25)
    got = partial_order_loglik(W, orders)
    ref = [partial_order_logp_enum(W, y) for y in orders]
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-11)
    # weights 0 on some rows, and on the impossible (-inf) rows so the total stays finite
    weights = rng.integers(0, 5, size=orders.shape[0]).astype(float) * np.isfinite(got)
    total, grad = partial_order_loglik_and_grad(W, orders, weights)
    keep = weights > 0
    np.testing.assert_allclose(total, np.dot(weights[keep], got[keep]), rtol=1e-12, atol=1e-10)
    np.testing.assert_allclose(grad, enum_grad(W, orders[keep], weights[keep]), atol=1e-10)


@pytest.mark.parametrize("M", range(1, 8))
def test_top_k_gradient_against_enumeration(M):
    rng = np.random.default_rng(30 + M)
    W = rng.normal(scale=1.5, size=(M, M))
    orders = np.concatenate([top_k_orders(rng, M, k, 3) for k in range(M + 1)])
    weights = rng.integers(1, 6, size=orders.shape[0]).astype(float)
    total, grad = partial_order_loglik_and_grad(W, orders, weights)
    ref = [partial_order_logp_enum(W, y) for y in orders]
    np.testing.assert_allclose(total, np.dot(weights, ref), rtol=1e-12, atol=1e-10)
    np.testing.assert_allclose(grad, enum_grad(W, orders, weights), atol=1e-10)


def _compositions(M):
    for cuts in itertools.product([0, 1], repeat=M - 1):
        edges = [0] + [i + 1 for i, c in enumerate(cuts) if c] + [M]
        yield list(np.diff(edges))


@pytest.mark.parametrize("M", range(1, 8))
def test_every_pattern_sums_to_one(M):
    """The orders of one block pattern partition the permutations: their probabilities sum to 1
    (every composition for M <= 5, a random few at M = 6, 7; each with and without -1 tail)."""
    rng = np.random.default_rng(40 + M)
    W = random_logits(rng, M, forbid=0.0)
    patterns = list(_compositions(M))
    if M > 5:
        patterns = [patterns[i] for i in rng.choice(len(patterns), 6, replace=False)]
        patterns.append([1] * M)  # complete orders
    for sizes in patterns:
        for tail in (False, True):
            lp = partial_order_loglik(W, pattern_orders(sizes, tail))
            np.testing.assert_allclose(logsumexp(lp), 0.0, atol=1e-11)


def test_batched_logits_match_single():
    rng = np.random.default_rng(5)
    M = 6
    W = random_logits(rng, M, batch=(2, 3))
    orders = np.concatenate([top_k_orders(rng, M, 3, 5), random_tie_orders(rng, M, 5)])
    weights = rng.integers(1, 4, size=orders.shape[0]).astype(float)
    vals = partial_order_loglik(W, orders)
    tot, grad = partial_order_loglik_and_grad(W, orders, weights)
    assert vals.shape == (2, 3, orders.shape[0]) and tot.shape == (2, 3) and grad.shape == W.shape
    for idx in np.ndindex(2, 3):
        np.testing.assert_array_equal(vals[idx], partial_order_loglik(W[idx], orders))
        t1, g1 = partial_order_loglik_and_grad(W[idx], orders, weights)
        np.testing.assert_array_equal(tot[idx], t1)
        np.testing.assert_array_equal(grad[idx], g1)


def test_extreme_logits_stay_exact():
    """Logits spread over thousands of nats: orders far from the mode have scaled suffix sums
    that underflow; they are evaluated by their own block permanent and stay exact."""
    rng = np.random.default_rng(6)
    M = 6
    W = rng.normal(scale=400.0, size=(M, M))
    orders = np.concatenate([top_k_orders(rng, M, k, 8) for k in range(M + 1)])
    got = partial_order_loglik(W, orders)
    ref = [partial_order_logp_enum(W, y) for y in orders]
    assert np.min(ref) < -2000  # some orders really are extreme
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-8)
    weights = np.ones(orders.shape[0])
    _, grad = partial_order_loglik_and_grad(W, orders, weights)
    np.testing.assert_allclose(grad, enum_grad(W, orders, weights), atol=1e-8)


@pytest.mark.parametrize("M", [12, 14])
def test_large_m_against_block_permanents(M):
    """Beyond enumeration: a top-k order is sum of its logits + log perm of the unranked
    sub-matrix on the last positions - log perm of W (independent permanent calls)."""
    rng = np.random.default_rng(M)
    W = rng.normal(size=(M, M))
    orders = np.concatenate([top_k_orders(rng, M, k, 2) for k in (0, 1, 3, 7, M - 1, M)])
    got = partial_order_loglik(W, orders)
    lz = log_permanent(W)
    for y, g in zip(orders, got, strict=True):
        ranked = np.flatnonzero(y >= 0)
        k = ranked.size
        rest = np.flatnonzero(y < 0)
        ref = W[ranked, y[ranked]].sum() - lz
        if rest.size:
            ref += log_permanent(W[np.ix_(rest, np.arange(k, M))])
        np.testing.assert_allclose(g, ref, rtol=0, atol=1e-10)


def test_forbidden_and_infeasible():
    M = 4
    W = np.zeros((M, M))
    W[0, 0] = -np.inf  # item 0 never first
    orders = np.array([[0, 1, 2, 3], [1, 0, 2, 3], [-1, 0, -1, -1]])
    lp = partial_order_loglik(W, orders)
    assert lp[0] == -np.inf
    np.testing.assert_allclose(lp[1:], [partial_order_logp_enum(W, y) for y in orders[1:]])
    W[:, 0] = -np.inf  # nobody can be first: perm(exp W) = 0
    assert np.all(np.isnan(partial_order_loglik(W, orders)))
    total, grad = partial_order_loglik_and_grad(W, orders, np.ones(3))
    assert np.isnan(total) and np.all(np.isnan(grad))


def test_invalid_rows_in_core_get_minus_inf_and_no_gradient():
    W = np.random.default_rng(0).normal(size=(3, 3))
    orders = np.array([[0, 1, 2], [0, 0, 1], [0, 2, -1], [1, 1, 1], [0, 3, 1], [0, -2, 1]])
    values = np.empty(orders.shape[0])
    grad = np.empty((3, 3))
    partial_orders_core(W, orders, np.array([1.0, 0, 0, 0, 0, 0]), values, grad, True)
    assert np.isfinite(values[0]) and np.all(values[1:] == -np.inf)
    np.testing.assert_allclose(grad, partial_order_loglik_and_grad(W, orders[:1], [1.0])[1])


@pytest.mark.parametrize(
    ("row", "why"),
    [([0, 0, 1], "block"), ([0, 2, -1], "gap"), ([1, 1, 1], "no 0"), ([0, 3, 1], "range"),
     ([0, -2, 1], "below -1"), ([-1, 0, 2], "ranked after unranked")],
)
def test_validate_orders_names_the_row(row, why):
    orders = np.array([[0, 1, 2], [2, 1, 0], row])
    with pytest.raises(ValueError, match=r"orders\[2\] = \[.*\] is not a valid rank-form order"):
        validate_orders(orders, 3)


def test_validate_orders_accepts_the_convention():
    orders = [[0, 1, 2], [0, 0, 2], [0, 1, 1], [1, 1, 0], [0, 0, 0], [-1, -1, -1], [-1, 0, -1],
              [0, 1, -1], [0, 0, -1]]
    np.testing.assert_array_equal(validate_orders(orders, 3), orders)
    with pytest.raises(ValueError, match="integers"):
        validate_orders(np.array([[0.5, 1, 2]]), 3)
    with pytest.raises(ValueError, match=r"shape \(n, 3\)"):
        validate_orders(np.zeros((2, 4), dtype=int), 3)


def test_size_limit_names_the_alternatives(monkeypatch):
    with pytest.raises(ValueError, match=rf"M = {EXACT_MAX_M + 1} items.*Plackett-Luce.*fewer"):
        check_partial_order_size(EXACT_MAX_M + 1)
    monkeypatch.setenv("PM_PERM_MEMORY_BUDGET", "1M")
    with pytest.raises(ValueError, match="M = 17 items needs.*memory budget.*Plackett-Luce"):
        partial_order_loglik(np.zeros((17, 17)), np.full((1, 17), -1))
    check_partial_order_size(15)  # 2 x 256 KiB fits


def test_nan_logits_rejected():
    with pytest.raises(ValueError, match="NaN"):
        partial_order_loglik(np.full((3, 3), np.nan), [[0, 1, 2]])


def test_non_finite_weights_refused_like_plackett_luce():
    # before: NaN weights gave a NaN total and gradient, inf ones NaN and -inf gradients
    W = np.zeros((3, 3))
    for bad in (np.nan, np.inf, -np.inf):
        with pytest.raises(ValueError, match=rf"weights\[1\] = {bad} is not finite; weights "
                           "must be finite numbers"):
            partial_order_loglik_and_grad(W, [[0, 1, 2], [2, 1, 0]], [1.0, bad])
    with pytest.raises(ValueError, match=r"weights must have shape \(2,\)"):
        partial_order_loglik_and_grad(W, [[0, 1, 2], [2, 1, 0]], [1.0])
    total, _ = partial_order_loglik_and_grad(W, [[0, 1, 2], [2, 1, 0]], [1.0, -2.0])
    assert total == pytest.approx(np.log(6.0))  # (1 - 2) x log(1/6): any finite weights
