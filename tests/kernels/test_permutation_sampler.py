"""Exact permutation sampler (backward-table walk) against enumeration and chi-square tests."""

import numpy as np
import pytest
from scipy import stats

from pm_perm.kernels.permanent import log_permanent, permutation_marginals
from pm_perm.kernels.permutation_sampler import sample_permutation_core, sample_permutations
from pm_perm.reference.permutations import all_permutations
from tests.kernels._logits import random_logits


def test_sampler_chi_square_all_24_permutations_at_m4():
    """Pearson chi-square over all 24 permutations, 40,000 draws, seed fixed.

    The test fails if p < 1e-4: a false-failure rate of 1e-4 for a correct sampler.
    """
    rng = np.random.default_rng(11)
    W = random_logits(rng, 4, forbid=0.1)
    perms = all_permutations(4)
    p = np.exp(W[np.arange(4), perms].sum(-1) - log_permanent(W))
    y = sample_permutations(W, size=(40_000,), rng=12)
    codes = {tuple(q): k for k, q in enumerate(perms)}
    counts = np.bincount([codes[tuple(r)] for r in y], minlength=24)
    keep = p > 0
    assert counts[~keep].sum() == 0  # never draws a forbidden permutation
    chi2 = ((counts[keep] - 40_000 * p[keep]) ** 2 / (40_000 * p[keep])).sum()
    assert stats.chi2.sf(chi2, keep.sum() - 1) > 1e-4


@pytest.mark.parametrize("M", [1, 2, 9])
def test_sampler_marginals_and_validity(M):
    """Sample marginals within 5 binomial standard errors (+1e-3) of the exact ones."""
    rng = np.random.default_rng(13 + M)
    W = random_logits(rng, M)
    n = 20_000
    y = sample_permutations(W, size=(n,), rng=14)
    assert y.shape == (n, M) and y.dtype == np.int64
    assert np.all(np.sort(y, axis=-1) == np.arange(M))
    emp = np.zeros((M, M))
    np.add.at(emp, (np.arange(M)[None, :].repeat(n, 0), y), 1.0)
    emp /= n
    P = permutation_marginals(W)
    assert np.all(np.abs(emp - P) <= 5 * np.sqrt(P * (1 - P) / n) + 1e-3)


def test_sampler_broadcasts_batch_to_size():
    rng = np.random.default_rng(15)
    W = rng.normal(size=(3, 5, 5))
    y = sample_permutations(W, size=(2, 3), rng=1)
    assert y.shape == (2, 3, 5)
    W_forced = np.where(np.eye(5, dtype=bool), 0.0, -np.inf)  # only the identity is allowed
    y = sample_permutations(np.stack([W_forced, W[0]]), size=(4, 2), rng=2)
    assert np.all(y[:, 0] == np.arange(5))
    with pytest.raises(ValueError, match="broadcast"):
        sample_permutations(W, size=(2,), rng=1)


def test_sampler_core_matches_public_sampler_distribution():
    rng = np.random.default_rng(16)
    W = rng.normal(size=(3, 3))
    gen = np.random.default_rng(3)
    draws = np.array([sample_permutation_core(gen, W) for _ in range(6000)])
    perms = all_permutations(3)
    p = np.exp(W[np.arange(3), perms].sum(-1) - log_permanent(W))
    counts = np.array([(draws == q).all(-1).sum() for q in perms])
    chi2 = ((counts - 6000 * p) ** 2 / (6000 * p)).sum()
    assert stats.chi2.sf(chi2, 5) > 1e-4  # false-failure rate 1e-4


def test_sampler_refuses_infeasible():
    W = np.zeros((3, 3))
    W[:2, :2] = -np.inf
    W[:2, 2] = 0.0
    with pytest.raises(ValueError, match="no permutation"):
        sample_permutations(W, rng=0)


def test_sample_permutations_refuses_a_fractional_size():
    """size=2.5 was truncated to 2 draws without a word."""
    from pm_perm.kernels.permutation_sampler import sample_permutations

    with pytest.raises(ValueError, match="size must be a non-negative integer"):
        sample_permutations(np.zeros((3, 3)), size=2.5, rng=0)
    assert sample_permutations(np.zeros((3, 3)), size=(2,), rng=0).shape == (2, 3)
