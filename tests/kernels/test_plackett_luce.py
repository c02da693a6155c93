"""Plackett-Luce kernels against enumeration over all M! rankings (kernels.plackett_luce)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import logsumexp

from pm_perm.kernels.plackett_luce import (
    TIE_BLOCK_MAX,
    plackett_luce_core,
    plackett_luce_loglik,
    plackett_luce_loglik_and_grad,
    sample_plackett_luce,
)
from pm_perm.reference.permutations import all_permutations
from pm_perm.reference.rankings import (
    consistent_mask,
    plackett_luce_complete_logp,
    plackett_luce_logp_enum,
)
from pm_perm.testing import chi_square_pvalue


def _pattern_orders(perms, blocks, ranked):
    """Every order of one pattern (tie-block sizes ``blocks`` over the first ``ranked``
    positions, the rest unranked) and, for each complete ranking, the index of its order."""
    M = perms.shape[1]
    value = np.full(M, -1)
    p = 0
    for s in blocks:
        value[p:p + s] = p
        p += s
    assert p == ranked
    mapped = value[perms]                        # rank form of the coarsened order
    orders, inverse = np.unique(mapped, axis=0, return_inverse=True)
    return orders, inverse.ravel()


def _random_blocks(rng, ranked):
    blocks = []
    while sum(blocks) < ranked:
        blocks.append(int(rng.integers(1, ranked - sum(blocks) + 1)))
    return blocks


def _check_pattern(u, perms, lp_complete, blocks, ranked):
    orders, inverse = _pattern_orders(perms, blocks, ranked)
    got = plackett_luce_loglik(u, orders)
    want = np.array([logsumexp(lp_complete[inverse == r]) for r in range(len(orders))])
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(logsumexp(got), 0.0, atol=1e-10)   # the pattern's orders sum to 1


@pytest.mark.parametrize("M", range(1, 8))
def test_every_top_k_pattern_against_enumeration(M):
    rng = np.random.default_rng(M)
    u = rng.normal(scale=1.5, size=M)
    perms = all_permutations(M)
    lp = plackett_luce_complete_logp(u, perms)
    for k in range(M + 1):
        _check_pattern(u, perms, lp, [1] * k, k)


@pytest.mark.parametrize("M", range(2, 8))
def test_random_tie_patterns_against_enumeration(M):
    rng = np.random.default_rng(100 + M)
    u = rng.normal(scale=1.5, size=M)
    perms = all_permutations(M)
    lp = plackett_luce_complete_logp(u, perms)
    for _ in range(6):
        ranked = int(rng.integers(1, M + 1))
        _check_pattern(u, perms, lp, _random_blocks(rng, ranked), ranked)


def test_consistent_mask_oracle_agrees():
    """The two oracles (grouping complete rankings, and the consistency mask) agree."""
    u = np.array([0.3, -1.0, 2.0, 0.0, 0.7])
    for y in ([1, -1, 0, 1, -1], [0, 0, 0, 3, 4], [2, 0, 1, -1, -1], [0, 0, 0, 0, 0]):
        assert plackett_luce_loglik(u, [y])[0] == pytest.approx(plackett_luce_logp_enum(u, y),
                                                                 abs=1e-12)
    assert consistent_mask([0, 0, 0, 0, 0]).all()


@pytest.mark.parametrize("spread", [30.0, 1500.0])
def test_extreme_utilities(spread):
    """Utilities far apart (the 1500 case takes the log-space path) match enumeration."""
    rng = np.random.default_rng(7)
    M = 6
    u = rng.normal(size=M) * spread
    perms = all_permutations(M)
    lp = plackett_luce_complete_logp(u, perms)
    for blocks, ranked in (([1, 1, 1], 3), ([2, 1, 2], 5), ([1] * 5, 5), ([3], 3)):
        orders, inverse = _pattern_orders(perms, blocks, ranked)
        got = plackett_luce_loglik(u, orders)
        want = np.array([logsumexp(lp[inverse == r]) for r in range(len(orders))])
        assert np.all(np.isfinite(got))
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
        # the gradient must be finite too (no 0 * inf)
        _, g = plackett_luce_loglik_and_grad(u, orders)
        assert np.all(np.isfinite(g))


@pytest.mark.parametrize("spread", [1.0, 1500.0])
def test_gradient_matches_finite_differences(spread):
    rng = np.random.default_rng(11)
    M = 7
    u = rng.normal(size=M) * spread
    orders = np.array([[0, 1, 2, 3, 4, 5, 6], [2, -1, 0, 1, -1, -1, 3], [0, 0, 2, -1, -1, 2, -1],
                       [1, 0, 1, 3, 3, 3, 3], [-1, -1, -1, -1, -1, -1, -1],
                       [0, 0, 0, 3, -1, 4, -1]])
    weights = rng.integers(0, 5, size=len(orders)).astype(float)
    total, grad = plackett_luce_loglik_and_grad(u, orders, weights)
    assert total == pytest.approx(weights @ plackett_luce_loglik(u, orders), rel=1e-12)
    h = 1e-6 * max(1.0, spread)
    for i in range(M):
        e = np.zeros(M)
        e[i] = h
        fd = (plackett_luce_loglik_and_grad(u + e, orders, weights)[0]
              - plackett_luce_loglik_and_grad(u - e, orders, weights)[0]) / (2 * h)
        assert grad[i] == pytest.approx(fd, rel=1e-5, abs=1e-6)
    np.testing.assert_allclose(grad.sum(), 0.0, atol=1e-9)   # shift invariance


def test_batched_utilities_and_shift_invariance():
    rng = np.random.default_rng(2)
    U = rng.normal(size=(3, 4, 5))
    orders = np.array([[0, 1, -1, -1, 2], [1, 1, 0, 3, 3]])
    out = plackett_luce_loglik(U, orders)
    assert out.shape == (3, 4, 2)
    np.testing.assert_allclose(out[1, 2], plackett_luce_loglik(U[1, 2], orders))
    np.testing.assert_allclose(plackett_luce_loglik(U + 40.0, orders), out, atol=1e-12)
    total, grad = plackett_luce_loglik_and_grad(U, orders, [2, 3])
    assert total.shape == (3, 4) and grad.shape == (3, 4, 5)


def test_bad_input():
    with pytest.raises(ValueError, match="NaN"):
        plackett_luce_loglik([0.0, np.nan], [[0, 1]])
    with pytest.raises(ValueError, match="-inf"):
        plackett_luce_loglik([0.0, -np.inf], [[0, 1]])
    with pytest.raises(ValueError, match=r"orders\[1\] = \[1, 1\] .*not a valid rank-form"):
        plackett_luce_loglik([0.0, 1.0], [[0, 1], [1, 1]])
    with pytest.raises(ValueError, match=r"shape \(n, 2\)"):
        plackett_luce_loglik([0.0, 1.0], [[0, 1, 2]])
    with pytest.raises(ValueError, match="weights must be finite"):
        plackett_luce_loglik_and_grad([0.0, 1.0], [[0, 1]], [np.nan])
    M = TIE_BLOCK_MAX + 2
    big = np.zeros(M, dtype=np.int64)
    big[-1] = TIE_BLOCK_MAX + 1
    with pytest.raises(ValueError, match="tie block of more than TIE_BLOCK_MAX"):
        plackett_luce_loglik(np.zeros(M), [big])
    # a last block of any size needs no DP: probability 1
    assert plackett_luce_loglik(np.zeros(M), [np.zeros(M, dtype=np.int64)])[0] == 0.0
    # the compiled core: NaN in, NaN out (the Ops rely on it); invalid orders -inf
    values, grad = np.empty(2), np.empty(2)
    assert np.isnan(plackett_luce_core(np.array([0.0, np.nan]), np.array([[0, 1], [1, 0]]),
                                       np.ones(2), values, grad, True))
    assert np.isnan(values).all() and np.isnan(grad).all()
    plackett_luce_core(np.zeros(2), np.array([[0, 1], [0, 5]]), np.ones(2), values, grad, True)
    assert values[1] == -np.inf


# --------------------------------------------------------------------------- sampling


def _chi2_pvalue(draws, orders, probs):
    assert (probs * len(draws)).min() >= 5   # chi-square approximation valid without pooling
    return chi_square_pvalue(draws, orders, probs)


def test_complete_draws_goodness_of_fit():
    """Chi-square over all 24 rankings of M = 4; false-failure rate 1e-3 (p < 1e-3 fails)."""
    u = np.array([1.0, 0.2, -0.5, 0.0])
    perms = all_permutations(4)
    draws = sample_plackett_luce(u, size=(20_000,), rng=123)
    assert draws.shape == (20_000, 4) and draws.dtype == np.int64
    probs = np.exp(plackett_luce_loglik(u, perms))
    assert _chi2_pvalue(draws, perms, probs) > 1e-3


def test_top_k_draws_goodness_of_fit():
    """Ballots of every length k ~ length_probs (M = 3, 1 + 3 + 6 + 6 = 16 cells): probability
    length_probs[k] x PL(top-k order). False-failure rate 1e-3."""
    u = np.array([0.5, -0.3, 0.0])
    lp = np.array([0.1, 0.3, 0.25, 0.35])
    cells, probs = [], []
    for k in range(4):
        orders, _ = _pattern_orders(all_permutations(3), [1] * k, k)
        cells.append(orders)
        probs.append(lp[k] * np.exp(plackett_luce_loglik(u, orders)))
    cells, probs = np.concatenate(cells), np.concatenate(probs)
    assert probs.sum() == pytest.approx(1.0)
    draws = sample_plackett_luce(u, size=(20_000,), rng=7, length_probs=lp)
    assert _chi2_pvalue(draws, cells, probs) > 1e-3


def test_sampler_shapes_and_errors():
    U = np.zeros((2, 5))
    assert sample_plackett_luce(U, rng=0).shape == (2, 5)
    assert sample_plackett_luce(U, size=(3, 2), rng=0).shape == (3, 2, 5)
    with pytest.raises(ValueError, match="do not broadcast"):
        sample_plackett_luce(U, size=(3,), rng=0)
    with pytest.raises(ValueError, match="M \\+ 1 = 6 entries"):
        sample_plackett_luce(U, length_probs=np.ones(5) / 5)
    with pytest.raises(ValueError, match="sum to 1"):
        sample_plackett_luce(U, length_probs=np.ones(6))
    with pytest.raises(ValueError, match="NaN"):
        sample_plackett_luce([0.0, np.nan])


def test_weights_message_names_the_entry():
    # before: "weights must be finite with shape (1,); got (1,)"
    with pytest.raises(ValueError, match=r"weights\[1\] = nan is not finite"):
        plackett_luce_loglik_and_grad([0.0, 1.0], [[0, 1], [1, 0]], [1.0, np.nan])
    with pytest.raises(ValueError, match=r"weights\[0\] = -inf is not finite"):
        plackett_luce_loglik_and_grad([0.0, 1.0], [[0, 1]], [-np.inf])
    with pytest.raises(ValueError, match=r"weights must have shape \(1,\), one per order; got "
                       r"shape \(2,\)"):
        plackett_luce_loglik_and_grad([0.0, 1.0], [[0, 1]], [1.0, 2.0])
    with pytest.raises(TypeError, match="utilities must be real numbers; got complex"):
        plackett_luce_loglik([0.0, 1j], [[0, 1]])


def test_sampler_size_must_be_integers_and_m_at_least_one():
    from pm_perm.kernels.plackett_luce import PL_DRAW_ERRORS, draw_plackett_luce_into

    assert sample_plackett_luce(np.zeros(3), size=2, rng=0).shape == (2, 3)
    for size in (2.5, (1.5,), -2):  # 2.5 was drawn as 2
        with pytest.raises(ValueError, match="size must be a non-negative integer"):
            sample_plackett_luce(np.zeros(3), size=size, rng=0)
    # the compiled draws' core (PyTensor's numba draws): M = 0 is an error, not an empty draw
    status = draw_plackett_luce_into(np.random.default_rng(0), np.zeros(0), np.zeros(0),
                                     np.zeros(0, dtype=np.int64))
    assert PL_DRAW_ERRORS[status] == "utilities must have M >= 1 items"
