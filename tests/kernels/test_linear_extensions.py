"""The linear-extension likelihood of arbitrary partial orders (pm_perm.kernels.linear_extensions)
against brute-force enumeration of all M! rankings, and its errors."""

from __future__ import annotations

import numpy as np
import pytest

from pm_perm.kernels.linear_extensions import (
    EXP_FAMILY,
    PLACKETT_LUCE,
    check_preferences,
    count_ideals,
    find_cycle,
    linear_extension_loglik,
    linear_extension_loglik_and_grad,
)
from pm_perm.kernels.partial_orders import partial_order_loglik
from pm_perm.kernels.permanent import log_permanent
from pm_perm.kernels.plackett_luce import plackett_luce_loglik
from pm_perm.reference.pairwise import linear_extensions_logp_enum, random_partial_order
from pm_perm.reference.rankings import random_tie_orders


def _random_cases(seed, per_size):
    """``per_size`` random preference sets for every M = 1..7 (any number of pairs, padding)."""
    rng = np.random.default_rng(seed)
    for M in range(1, 8):
        for _ in range(per_size):
            n_pairs = int(rng.integers(0, M * (M - 1) // 2 + 1))
            yield rng, M, random_partial_order(rng, M, n_pairs, pad=int(rng.integers(0, 3)))


def test_plackett_luce_matches_enumeration():
    """Random acyclic preference sets over M = 1..7 items (any number of pairs, padding)."""
    for rng, M, prefs in _random_cases(0, 6):
        u = rng.normal(scale=1.5, size=M)
        got = linear_extension_loglik(u, prefs)[0]
        assert got == pytest.approx(linear_extensions_logp_enum(u, prefs), abs=1e-10)


def test_exp_family_matches_enumeration():
    """Unnormalised log-sum minus log perm = the normalised probability, M = 1..7."""
    for rng, M, prefs in _random_cases(1, 6):
        W = rng.normal(size=(M, M))
        got = linear_extension_loglik(W, prefs, family=EXP_FAMILY)[0] - log_permanent(W)
        assert got == pytest.approx(linear_extensions_logp_enum(W, prefs, "exp"), abs=1e-10)


def test_forbidden_logits_and_impossible_orders():
    """-inf logits: an order that needs a forbidden (item, position) gets -inf."""
    W = np.zeros((3, 3))
    W[0, 0] = W[0, 1] = -np.inf  # item 0 can only be last
    assert linear_extension_loglik(W, [[0, 1]], family=EXP_FAMILY)[0] == -np.inf
    got = linear_extension_loglik(W, [[1, 0]], family=EXP_FAMILY)[0] - log_permanent(W)
    assert got == pytest.approx(linear_extensions_logp_enum(W, [[1, 0]], "exp"), abs=1e-12)


def _pairs_of_order(y):
    """A rank-form order (top-k, ties) as preference pairs: every item of an earlier block
    before every item of a later block (unranked items: the last block)."""
    M = len(y)
    pos = np.where(y < 0, M, y)
    return np.array([(i, j) for i in range(M) for j in range(M) if pos[i] < pos[j]],
                    dtype=np.int64).reshape(-1, 2)


def test_top_k_and_tied_orders_equal_plackett_luce_and_partial_ranking():
    """Top-k and tied orders are partial orders: same value as PlackettLuce / PartialRanking."""
    rng = np.random.default_rng(2)
    for M in (3, 5, 6):
        orders = random_tie_orders(rng, M, 12)
        u = rng.normal(size=M)
        W = rng.normal(size=(M, M))
        pl = plackett_luce_loglik(u, orders)
        pr = partial_order_loglik(W, orders)
        for k, y in enumerate(orders):
            prefs = _pairs_of_order(y)
            assert linear_extension_loglik(u, prefs)[0] == pytest.approx(pl[k], abs=1e-10)
            ours = linear_extension_loglik(W, prefs, family=EXP_FAMILY)[0] - log_permanent(W)
            assert ours == pytest.approx(pr[k], abs=1e-10)


@pytest.mark.parametrize("family", [PLACKETT_LUCE, EXP_FAMILY])
def test_gradient_matches_finite_differences(family):
    """The adjoint sweep's gradient of a weighted sum over three assessors."""
    rng = np.random.default_rng(3)
    M = 6
    prefs = np.stack([random_partial_order(rng, M, k, pad=7 - k) for k in (2, 4, 7)])
    x = rng.normal(size=M if family == PLACKETT_LUCE else (M, M))
    w = np.array([1.0, 2.5, 0.0])
    total, grad = linear_extension_loglik_and_grad(x, prefs, w, family=family)
    values = linear_extension_loglik(x, prefs, family=family)
    assert total == pytest.approx(w @ values)
    num = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[idx] += 1e-6
        xm[idx] -= 1e-6
        num[idx] = w @ (linear_extension_loglik(xp, prefs, family=family)
                        - linear_extension_loglik(xm, prefs, family=family)) / 2e-6
    np.testing.assert_allclose(grad, num, atol=1e-6)


def test_extreme_utilities_stay_finite():
    """Log space: utilities spread over 2,000 nats give a finite value and gradient."""
    u = np.array([1000.0, -1000.0, 0.0, 3.0])
    prefs = [[1, 0], [2, 3]]
    total, grad = linear_extension_loglik_and_grad(u, prefs)
    assert np.isfinite(total) and np.all(np.isfinite(grad))
    assert total == pytest.approx(linear_extensions_logp_enum(u, prefs), rel=1e-12)
    assert total == pytest.approx(-2000.0 - np.log1p(np.exp(3.0)), rel=1e-9)


def test_ideal_counts():
    """A chain of m items has m + 1 ideals; an antichain 2^m; the exp family counts all M."""
    chain = [[i, i + 1] for i in range(9)]
    assert count_ideals(chain) == 11
    assert count_ideals([[-1, -1]], 6, use_all=True) == 64
    assert count_ideals([[0, 1]], 4, use_all=True) == 12  # 2^4 minus the 4 sets with 1, not 0


def test_cycle_is_named():
    with pytest.raises(ValueError, match=r"cyclic preferences 0 > 1 > 2 > 0.*Drop or fix"):
        check_preferences([[0, 1], [1, 2], [2, 0], [3, 4]], 5)
    with pytest.raises(ValueError, match="assessor 1: cyclic preferences"):
        linear_extension_loglik(np.zeros(4), [[[0, 1], [-1, -1]], [[2, 3], [3, 2]]])
    assert find_cycle([[0, 1], [1, 2]]) is None
    assert find_cycle([[3, 1], [1, 3]]) == [3, 1, 3]


@pytest.mark.parametrize(("prefs", "match"), [
    ([[0, 5]], r"item id 5 out of range 0\.\.3 \(M = 4 items\).*fix the ids"),
    ([[-2, 1]], r"item id -2 out of range"),
    ([[2, 2]], r"item 2 is preferred to itself; drop the pair"),
    ([[1, -1]], r"padding must be \(-1, -1\)"),
])
def test_bad_pairs(prefs, match):
    with pytest.raises(ValueError, match=match):
        linear_extension_loglik(np.zeros(4), prefs)
    with pytest.raises(ValueError, match=match):
        check_preferences(prefs, 4)


def test_beyond_the_budget_names_the_alternatives():
    """24 items without preferences: 2^24 ideals under the exp family, refused at once."""
    with pytest.raises(ValueError, match=r"budget of 1000 cells.*BradleyTerry.*fewer items"):
        linear_extension_loglik(np.zeros((12, 12)), [[0, 1]], family=EXP_FAMILY, max_cells=1000)
    with pytest.raises(ValueError, match=r"more than the budget"):
        count_ideals([[-1, -1]], 24, use_all=True)


def test_bad_shapes():
    with pytest.raises(ValueError, match=r"\(P, 2\)"):
        linear_extension_loglik(np.zeros(3), [0, 1, 2])
    with pytest.raises(ValueError, match="logits must have shape"):
        linear_extension_loglik(np.zeros(3), [[0, 1]], family=EXP_FAMILY)
    with pytest.raises(ValueError, match="integer item ids"):
        linear_extension_loglik(np.zeros(3), [[0.5, 1.0]])
