"""Tests of the count-label samplers (conditional Bernoulli, NChooseK, ordinal counts) against
enumeration."""

import numpy as np
import pytest
from scipy import stats

from pm_perm.kernels import count_draws, esp
from pm_perm.reference import subsets as S
from pm_perm.testing import chi_square_pvalue


def _gof_pvalue(draws, theta, k):
    """p = 0 if an impossible outcome (a -inf logit) is drawn."""
    Y, lp = S.conditional_bernoulli_log_pmf(theta, k)
    return chi_square_pvalue(draws, Y, np.exp(lp))


@pytest.mark.parametrize(
    ("theta", "k"),
    [
        (np.array([0.5, -1.0, 2.0, 0.0, 1.0]), 2),
        (np.array([1.0, -np.inf, 0.3, -0.7, 2.0, 0.0]), 3),
        (np.array([3.0, -2.0, 1.0, 0.5, -1.5, 0.2, 2.2]), 4),
    ],
)
def test_sampler_goodness_of_fit(theta, k):
    # Chi-square test on all C(D, k) outcomes (expected counts >= 5 here), 20,000 draws, fixed
    # seed. Threshold p > 1e-3: a correct sampler fails with probability 0.1% per seed.
    draws = count_draws.sample_conditional_bernoulli(theta, k, size=(20000,), rng=12345)
    assert draws.shape == (20000, theta.shape[0])
    assert np.all(draws.sum(-1) == k)
    assert _gof_pvalue(draws, theta, k) > 1e-3


@pytest.mark.parametrize("D", range(2, 9))
def test_sampler_goodness_of_fit_each_size(D):
    # k = D // 2, logits N(0, 1): smallest cell expectation > 5 at 20,000 draws for these seeds.
    # Threshold p > 1e-3 (0.1% false-failure rate per size for a random seed).
    theta = np.random.default_rng(100 + D).normal(size=D)
    k = D // 2
    draws = count_draws.sample_conditional_bernoulli(theta, k, size=(20000,), rng=D)
    assert _gof_pvalue(draws, theta, k) > 1e-3


def test_sampler_large_D_marginals():
    # Sample marginals at D = 300 against the exact marginals: 4,000 draws; each marginal's
    # standard error is <= 0.008, tolerance 5 s.e. + 1e-3 (false failure < 1e-4 overall).
    rng = np.random.default_rng(5)
    theta = rng.normal(size=300) * 2
    k = 30
    draws = count_draws.sample_conditional_bernoulli(theta, k, size=(4000,), rng=9)
    assert np.all(draws.sum(-1) == k)
    m = esp.conditional_marginals(theta, k)
    se = np.sqrt(m * (1 - m) / 4000)
    assert np.all(np.abs(draws.mean(0) - m) <= 5 * se + 1e-3)


def test_constrained_count_table():
    rng = np.random.default_rng(4)
    pk = rng.dirichlet(np.ones(5), size=3)  # R = 3, D = 4
    T = count_draws.constrained_count_table(pk)
    brute = sum(
        pk[0, a] * pk[1, b] * pk[2, 4 - a - b] for a in range(5) for b in range(5 - a)
    )
    assert T[2, 4] == pytest.approx(brute, rel=1e-14)


def test_nchoosek_draw_conditions_on_feasible_counts():
    """Mass on counts above the number of finite logits: every draw succeeds (the old one
    failed depending on the seed) with a feasible count; no feasible count: a ValueError."""
    theta = np.array([-np.inf, -np.inf, 0.0, 0.0])
    pk = np.array([0.0, 0.0, 0.5, 0.5, 0.0])
    for seed in range(20):
        y = count_draws.sample_nchoosek_core(np.random.default_rng(seed), theta, pk)
        assert y.tolist() == [0, 0, 1, 1]
    rng = np.random.default_rng(0)
    pk = np.array([0.2, 0.2, 0.2, 0.4, 0.0])
    counts = [count_draws.sample_nchoosek_core(rng, theta, pk).sum() for _ in range(6000)]
    np.testing.assert_allclose(np.bincount(counts, minlength=3) / 6000, [1 / 3] * 3, atol=0.03)
    with pytest.raises(ValueError, match="no mass on a feasible count"):
        count_draws.sample_nchoosek_core(rng, theta, np.array([0.0, 0.0, 0.0, 1.0, 0.0]))


def test_sampler_goodness_of_fit_every_size_and_count():
    # Every D = 1..10 and every k: chi-square of all C(D, k) outcomes; the number of draws is
    # chosen so that every expected cell count is >= 5 (at least 20,000, at most 400,000).
    # k = 0 and k = D are deterministic and checked exactly. Fixed seeds; threshold p > 1e-4
    # per case (65 cases: overall false-failure rate < 0.7% for a random seed).
    bits = 1 << np.arange(10)
    for D in range(1, 11):
        theta = np.random.default_rng(300 + D).normal(size=D)
        for k in range(D + 1):
            Y, lp = S.conditional_bernoulli_log_pmf(theta, k)
            probs = np.exp(lp)
            n = int(min(400_000, max(20_000, np.ceil(5 / probs.min()))))
            draws = count_draws.sample_conditional_bernoulli(theta, k, size=(n,), rng=1000 * D + k)
            codes = draws @ bits[:D]
            ref_codes = Y @ bits[:D]
            assert np.all(np.isin(codes, ref_codes))
            if len(Y) == 1:
                continue
            counts = np.array([np.count_nonzero(codes == c) for c in ref_codes])
            assert stats.chisquare(counts, probs * n).pvalue > 1e-4, (D, k)
