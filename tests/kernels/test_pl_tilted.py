"""Plackett-Luce-anchored (tilted) likelihood kernel against enumeration over all M! orders."""

import numpy as np
import pytest

from pm_perm.kernels.pl_tilted import (
    check_no_middle_ties,
    pl_tilted_core,
    pl_tilted_loglik,
    pl_tilted_loglik_and_grad,
)
from pm_perm.kernels.plackett_luce import plackett_luce_loglik
from pm_perm.reference.permutations import all_permutations
from pm_perm.reference.rankings import (
    every_top_k_order,
    partial_orders_loglik_enum,
    pl_tilted_complete_logp,
)


def _enum(u, D, orders):
    perms = all_permutations(len(u))
    return partial_orders_loglik_enum(pl_tilted_complete_logp(u, D, perms), orders, perms)


@pytest.mark.parametrize("M", range(1, 8))
def test_every_top_k_order_matches_enumeration(M):
    """Every complete and top-k order of M = 1..7 items (the empty order included, whose
    probability is 1), and tied last blocks (every top-k order with its unranked items given
    as one tie block at the end is the same event)."""
    rng = np.random.default_rng(M)
    u, D = rng.normal(0, 1.5, M), rng.normal(0, 1.5, (M, M))
    orders = every_top_k_order(M)
    if M > 5:  # keep the enumeration fast: a random subset of the orders
        orders = orders[rng.choice(len(orders), 300, replace=False)]
    got = pl_tilted_loglik(u, D, orders)
    np.testing.assert_allclose(got, _enum(u, D, orders), rtol=1e-10, atol=1e-10)
    # the unranked tail written as a tie block at the end: the same event
    tied = orders.copy()
    for row in tied:
        k = int((row >= 0).sum())
        if k < M:
            row[row < 0] = k
    np.testing.assert_allclose(pl_tilted_loglik(u, D, tied), got, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("M", [2, 5, 9])
def test_zero_tilt_is_plackett_luce_exactly(M):
    rng = np.random.default_rng(10 + M)
    u = rng.normal(0, 2.0, M)
    orders = np.array([rng.permutation(M) for _ in range(20)])
    for k in (0, 1, M // 2, M - 1):
        orders[:5 * (k > 0) + 1, :] = np.where(orders[:6] < k, orders[:6], -1)[:5 * (k > 0) + 1]
    got = pl_tilted_loglik(u, np.zeros((M, M)), orders)
    np.testing.assert_allclose(got, plackett_luce_loglik(u, orders), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("M", [1, 2, 3, 6])
def test_gradient_by_finite_differences(M):
    rng = np.random.default_rng(20 + M)
    u, D = rng.normal(0, 1.0, M), rng.normal(0, 1.0, (M, M))
    orders = every_top_k_order(M)
    w = rng.uniform(0.5, 3.0, len(orders))
    _, gu, gD = pl_tilted_loglik_and_grad(u, D, orders, w)

    def f(uu, DD):
        return float(pl_tilted_loglik_and_grad(uu, DD, orders, w)[0])

    eps = 1e-6
    num_u = np.array([(f(u + eps * e, D) - f(u - eps * e, D)) / (2 * eps) for e in np.eye(M)])
    num_D = np.zeros((M, M))
    for i in range(M):
        for j in range(M):
            E = np.zeros((M, M))
            E[i, j] = eps
            num_D[i, j] = (f(u, D + E) - f(u, D - E)) / (2 * eps)
    np.testing.assert_allclose(gu, num_u, atol=1e-6 * max(1, np.abs(num_u).max()))
    np.testing.assert_allclose(gD, num_D, atol=1e-6 * max(1, np.abs(num_D).max()))
    # the total is the weighted sum of the per-order values
    total = pl_tilted_loglik_and_grad(u, D, orders, w)[0]
    np.testing.assert_allclose(total, w @ pl_tilted_loglik(u, D, orders), rtol=1e-12)


def test_batched_and_large_spread():
    rng = np.random.default_rng(3)
    M = 6
    u, D = rng.normal(0, 1.0, (2, M)), 30.0 * rng.normal(0, 1.0, (2, M, M))
    orders = every_top_k_order(M)[::7]
    got = pl_tilted_loglik(u, D, orders)
    assert got.shape == (2, len(orders))
    for b in range(2):
        np.testing.assert_allclose(got[b], _enum(u[b], D[b], orders), rtol=1e-9, atol=1e-9)


def test_middle_ties_are_refused_with_the_alternative():
    with pytest.raises(ValueError, match=r"row 1 .*tied items before its last block.*"
                                         r"full_model\(data\)"):
        pl_tilted_loglik(np.zeros(4), np.zeros((4, 4)), [[0, 1, 2, 3], [0, 0, 2, 3]])
    check_no_middle_ties(np.array([[0, 1, 1, 1], [0, -1, -1, -1]]))  # tied LAST blocks: fine


def test_bad_input_names_what_is_wrong():
    with pytest.raises(ValueError, match=r"D must have shape \(\.\.\., 3, 3\)"):
        pl_tilted_loglik(np.zeros(3), np.zeros((2, 2)), [[0, 1, 2]])
    with pytest.raises(ValueError, match="weights must have shape"):
        pl_tilted_loglik_and_grad(np.zeros(3), np.zeros((3, 3)), [[0, 1, 2]], [1.0, 2.0])
    with pytest.raises(ValueError, match="utilities contains NaN"):
        pl_tilted_loglik(np.array([np.nan, 0, 0]), np.zeros((3, 3)), [[0, 1, 2]])
    with pytest.raises(ValueError, match="tilt logits D contain -inf.*needs finite"):
        pl_tilted_loglik(np.zeros(3), np.full((3, 3), -np.inf), [[0, 1, 2]])
    # the core (used by the Ops) returns NaN for non-finite input instead of raising
    values, gu, gD = np.empty(1), np.empty(3), np.empty((3, 3))
    total = pl_tilted_core(np.array([np.inf, 0, 0]), np.zeros((3, 3)),
                           np.array([[0, 1, 2]]), np.ones(1), values, gu, gD, True)
    assert np.isnan(total) and np.isnan(values).all() and np.isnan(gD).all()


def test_the_plan_parses_each_order_once_into_its_distinct_sets():
    """orders_plan: the items before each row's last block, the lengths' codes for invalid and
    middle-tie rows, and each position's set of unplaced items as an index into the distinct
    sets; the likelihood on the plan is the same whether a set's terms are met once or by many
    rows (a row repeated with its weight split gives the same total and gradient)."""
    from pm_perm.kernels.pl_tilted import INVALID, MIDDLE_TIE, orders_plan, pl_tilted_planned

    M = 4
    orders = np.array([[1, 0, 3, 2],     # complete: items 1, 0, 3 before the last item 2
                       [0, -1, 1, -1],   # top-2: items 0, 2; last block {1, 3}
                       [0, 1, 1, 1],     # a tie at the end: item 0; last block {1, 2, 3}
                       [0, 1, 1, 3],     # a tie in the middle
                       [0, 0, 5, 1],     # not rank form
                       [0, -1, 1, -1]])  # the second row again
    items, lengths, set_ids, last_ids, sets = orders_plan(orders)
    assert lengths.tolist() == [3, 2, 1, MIDDLE_TIE, INVALID, 2]
    assert items[0, :3].tolist() == [1, 0, 3] and items[1, :2].tolist() == [0, 2]
    assert len(set(sets.tolist())) == len(sets)
    full = 0b1111
    assert [sets[t] for t in set_ids[0, :3]] == [full, full ^ 0b10, full ^ 0b11]
    assert [sets[last_ids[k]] for k in (0, 1, 2, 5)] == [0b100, 0b1010, 0b1110, 0b1010]
    assert set_ids[5, :2].tolist() == set_ids[1, :2].tolist()
    rng = np.random.default_rng(3)
    u, D = rng.normal(size=M), rng.normal(size=(M, M))
    w = np.array([2.0, 1.0, 3.0, 0.0, 0.0, 4.0])
    out = [np.empty(6), np.empty(M), np.empty((M, M))]
    total = pl_tilted_planned(u, D, items, lengths, set_ids, last_ids, sets, w, *out, True)
    assert out[0][4] == -np.inf and np.isnan(out[0][3])
    np.testing.assert_allclose(out[0][[0, 1, 2, 5]],
                               _enum(u, D, orders[[0, 1, 2, 5]]), rtol=1e-10, atol=1e-10)
    one = orders[[0, 1, 2]]
    t1, gu1, gD1 = pl_tilted_loglik_and_grad(u, D, one, np.array([2.0, 5.0, 3.0]))
    np.testing.assert_allclose(total, t1, rtol=1e-13)
    np.testing.assert_allclose(out[1], gu1, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out[2], gD1, rtol=1e-12, atol=1e-12)
