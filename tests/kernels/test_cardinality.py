"""Tests of the conditional-Bernoulli kernels against enumeration and closed forms."""

import math

import numpy as np
import pytest
from scipy import stats

from pm_perm.kernels import cardinality as C
from pm_perm.reference import subsets as S
from pm_perm.testing import chi_square_pvalue


def _rel(a, b):
    return abs(a - b) / max(1.0, abs(b))


@pytest.mark.parametrize("D", range(1, 11))
def test_value_marginals_all_k_against_enumeration(D):
    rng = np.random.default_rng(D)
    theta = rng.normal(size=D) * 2.0
    ref = np.array([S.log_esp(theta, k) for k in range(D + 1)])
    np.testing.assert_allclose(C.log_esp_all(theta), ref, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(C.log_esp_all_logspace(theta), ref, rtol=1e-13, atol=1e-13)
    for k in range(D + 1):
        v, m = C.log_esp_and_marginals(theta, k)
        assert _rel(v, ref[k]) < 1e-13
        assert _rel(C.log_esp(theta, k), ref[k]) < 1e-13
        np.testing.assert_allclose(m, S.conditional_marginals(theta, k), atol=1e-13)
        assert abs(m.sum() - k) < 1e-12
        # each probability, and their sum
        Y, lp = S.conditional_bernoulli_log_pmf(theta, k)
        lp_kernel = Y @ theta - v
        np.testing.assert_allclose(lp_kernel, lp, atol=1e-12)
        assert abs(np.exp(lp_kernel).sum() - 1.0) < 1e-12


def test_out_of_range_counts():
    theta = np.array([0.3, -1.0, 2.0])
    assert C.log_esp(theta, -1) == -np.inf
    assert C.log_esp(theta, 4) == -np.inf
    v, m = C.log_esp_and_marginals(theta, 4)
    assert v == -np.inf and np.all(m == 0)
    assert C.log_esp(theta, 0) == 0.0
    assert C.log_esp(theta, 3) == pytest.approx(theta.sum(), rel=1e-15)


@pytest.mark.parametrize("scale", [50.0, 200.0])
def test_extreme_logits_against_enumeration(scale):
    rng = np.random.default_rng(3)
    D = 10
    theta = scale * np.sign(rng.normal(size=D)) + rng.normal(size=D)
    theta[4] = -np.inf
    for k in range(D + 1):
        v, m = C.log_esp_and_marginals(theta, k)
        r = S.log_esp(theta, k)
        if r == -np.inf:
            assert v == -np.inf
            continue
        assert np.isfinite(v) and _rel(v, r) < 1e-13
        np.testing.assert_allclose(m, S.conditional_marginals(theta, k), atol=1e-13)
        assert m[4] == 0.0


def test_minus_inf_logits_drop_out():
    theta = np.array([0.5, -np.inf, 1.5, -np.inf, -0.2])
    fin = theta[np.isfinite(theta)]
    for k in range(6):
        assert C.log_esp(theta, k) == pytest.approx(S.log_esp(fin, k) if k <= 3 else -np.inf)
    np.testing.assert_allclose(C.log_esp_all(theta)[:4], [S.log_esp(fin, k) for k in range(4)])
    assert np.all(C.log_esp_all(theta)[4:] == -np.inf)


@pytest.mark.parametrize("D", [2000, 10000])
def test_binomial_closed_form_at_large_D(D):
    # theta = 0: e_k = C(D, k). The tilted DP is accurate at every k, including the far tails
    # where a single-tilt probability DP underflows (the all-k path must fall back there).
    theta = np.zeros(D)
    ks = np.array([1, 2, D // 10, D // 2, D - 3, D - 1])
    exact = np.array([math.log(math.comb(D, int(k))) for k in ks])  # exact integers
    np.testing.assert_allclose(C.log_esp(theta, ks), exact, rtol=1e-12)
    all_k = C.log_esp_all(theta)
    np.testing.assert_allclose(all_k[ks], exact, rtol=1e-12)
    np.testing.assert_allclose(all_k, C.log_esp_all_logspace(theta), rtol=1e-11)


def test_large_D_matches_logspace_reference():
    rng = np.random.default_rng(7)
    theta = rng.normal(size=3000) * 3
    ref = C.log_esp_all_logspace(theta)
    for k in [1, 30, 300, 1500, 2999]:
        assert _rel(C.log_esp(theta, k), ref[k]) < 1e-12


def test_marginals_are_the_gradient():
    rng = np.random.default_rng(11)
    theta = rng.normal(size=40)
    k = 7
    _, m = C.log_esp_and_marginals(theta, k)
    eps = 1e-6
    fd = np.array(
        [
            (C.log_esp(theta + eps * e, k) - C.log_esp(theta - eps * e, k)) / (2 * eps)
            for e in np.eye(40)
        ]
    )
    np.testing.assert_allclose(m, fd, atol=1e-8)


def test_batching_and_broadcasting():
    rng = np.random.default_rng(1)
    theta = rng.normal(size=(3, 6))
    k = np.arange(4)[:, None]  # (4, 1) -> batch (4, 3)
    v, m = C.log_esp_and_marginals(theta, k)
    assert v.shape == (4, 3) and m.shape == (4, 3, 6)
    assert v[2, 1] == pytest.approx(S.log_esp(theta[1], 2), rel=1e-13)
    assert C.log_esp_all(theta, K=3).shape == (3, 4)


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
    draws = C.sample_conditional_bernoulli(theta, k, size=(20000,), rng=12345)
    assert draws.shape == (20000, theta.shape[0])
    assert np.all(draws.sum(-1) == k)
    assert _gof_pvalue(draws, theta, k) > 1e-3


@pytest.mark.parametrize("D", range(2, 9))
def test_sampler_goodness_of_fit_each_size(D):
    # k = D // 2, logits N(0, 1): smallest cell expectation > 5 at 20,000 draws for these seeds.
    # Threshold p > 1e-3 (0.1% false-failure rate per size for a random seed).
    theta = np.random.default_rng(100 + D).normal(size=D)
    k = D // 2
    draws = C.sample_conditional_bernoulli(theta, k, size=(20000,), rng=D)
    assert _gof_pvalue(draws, theta, k) > 1e-3


def test_sampler_large_D_marginals():
    # Sample marginals at D = 300 against the exact marginals: 4,000 draws; each marginal's
    # standard error is <= 0.008, tolerance 5 s.e. + 1e-3 (false failure < 1e-4 overall).
    rng = np.random.default_rng(5)
    theta = rng.normal(size=300) * 2
    k = 30
    draws = C.sample_conditional_bernoulli(theta, k, size=(4000,), rng=9)
    assert np.all(draws.sum(-1) == k)
    m = C.conditional_marginals(theta, k)
    se = np.sqrt(m * (1 - m) / 4000)
    assert np.all(np.abs(draws.mean(0) - m) <= 5 * se + 1e-3)


def test_nchoosek_marginals_against_enumeration():
    rng = np.random.default_rng(2)
    D = 6
    theta = rng.normal(size=D)
    pk = rng.dirichlet(np.ones(D + 1))
    Y, lp = S.nchoosek_log_pmf(theta, pk)
    ref = (np.exp(lp)[:, None] * Y).sum(0)
    np.testing.assert_allclose(C.nchoosek_marginals(theta, pk), ref, atol=1e-13)


def test_constrained_count_table():
    rng = np.random.default_rng(4)
    pk = rng.dirichlet(np.ones(5), size=3)  # R = 3, D = 4
    T = C.constrained_count_table(pk)
    brute = sum(
        pk[0, a] * pk[1, b] * pk[2, 4 - a - b] for a in range(5) for b in range(5 - a)
    )
    assert T[2, 4] == pytest.approx(brute, rel=1e-14)


def test_bad_input():
    with pytest.raises(ValueError, match="NaN"):
        C.log_esp([0.0, np.nan], 1)
    with pytest.raises(ValueError, match="integer"):
        C.log_esp([0.0, 1.0], 0.5)
    with pytest.raises(ValueError, match="finite logits"):
        C.sample_conditional_bernoulli([0.0, -np.inf], 2)
    with pytest.raises(ValueError, match="D \\+ 1"):
        C.nchoosek_marginals([0.0, 1.0], [0.5, 0.5])
    with pytest.raises(ValueError, match="non-negative"):
        C.log_esp_all([0.0, 1.0], K=-1)


def test_api_paper_cuts_get_clear_errors():
    """An int size as in the other samplers; D = 0 and a NaN K refused with a message; an empty
    batch gives an empty result, as log_esp_all does."""
    th = np.zeros(4)
    y = C.sample_conditional_bernoulli(th, 2, size=3, rng=0)
    assert y.shape == (3, 4) and np.all(y.sum(-1) == 2)
    np.testing.assert_array_equal(y, C.sample_conditional_bernoulli(th, 2, size=(3,), rng=0))
    for size in (2.5, (2, -1), "3"):
        with pytest.raises(ValueError, match="size must be a non-negative integer"):
            C.sample_conditional_bernoulli(th, 2, size=size, rng=0)
    for fn, args in [(C.log_esp, (np.zeros(0), 0)), (C.log_esp_all, (np.zeros((2, 0)),)),
                     (C.log_esp_all_fft, (np.zeros(0),)), (C.log_esp_and_marginals,
                                                         (np.zeros(0), 0))]:
        with pytest.raises(ValueError, match="at least one item \\(D >= 1\\)"):
            fn(*args)
    for K in (np.nan, np.inf, "2", [1]):
        with pytest.raises(ValueError, match="K must be a non-negative integer"):
            C.log_esp_all(th, K=K)
    assert C.log_esp_all_fft(np.zeros((0, 4))).shape == C.log_esp_all(np.zeros((0, 4))).shape
    np.testing.assert_allclose(C.log_esp_all(th, K=2.0), C.log_esp_all(th, K=2))


def test_nchoosek_draw_conditions_on_feasible_counts():
    """Mass on counts above the number of finite logits: every draw succeeds (the old one
    failed depending on the seed) with a feasible count; no feasible count: a ValueError."""
    theta = np.array([-np.inf, -np.inf, 0.0, 0.0])
    pk = np.array([0.0, 0.0, 0.5, 0.5, 0.0])
    for seed in range(20):
        y = C.sample_nchoosek_core(np.random.default_rng(seed), theta, pk)
        assert y.tolist() == [0, 0, 1, 1]
    rng = np.random.default_rng(0)
    pk = np.array([0.2, 0.2, 0.2, 0.4, 0.0])
    counts = [C.sample_nchoosek_core(rng, theta, pk).sum() for _ in range(6000)]
    np.testing.assert_allclose(np.bincount(counts, minlength=3) / 6000, [1 / 3] * 3, atol=0.03)
    with pytest.raises(ValueError, match="no mass on a feasible count"):
        C.sample_nchoosek_core(rng, theta, np.array([0.0, 0.0, 0.0, 1.0, 0.0]))


def test_tilt_keeps_mode_at_k():
    # The tilted pmf's value at k is not tiny (>= 1/(4 sqrt(D)) here), which is what makes
    # the probability-scale DP accurate.
    rng = np.random.default_rng(0)
    theta = rng.normal(size=500) * 5
    invalid, n_fin, lo, hi = C._scan(theta)
    assert not invalid and n_fin == 500
    for k in [1, 50, 250, 499]:
        p, _, _, _ = C._tilted(theta, float(k), n_fin, k, lo, hi)
        q = stats.poisson_binom(p).pmf(k)
        assert q > 1 / (4 * math.sqrt(500))


# ----------------------------------------------------------------------------- FFT product tree


@pytest.mark.parametrize("D", [1, 2, 5, 10])
def test_fft_all_k_against_enumeration(D):
    theta = np.random.default_rng(D).normal(size=D) * 2
    ref = [S.log_esp(theta, k) for k in range(D + 1)]
    np.testing.assert_allclose(C.log_esp_all_fft(theta), ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("scale", [0.3, 3.0, 50.0])
def test_fft_all_k_matches_logspace_at_large_D(scale):
    rng = np.random.default_rng(1)
    theta = rng.normal(size=2000) * scale
    theta[::97] = -np.inf
    out, passes = C.log_esp_all_fft(theta, rtol=1e-10, return_passes=True)
    ref = C.log_esp_all_logspace(theta)
    fin = np.isfinite(ref)
    np.testing.assert_array_equal(np.isfinite(out), fin)
    # rtol on e_j = absolute error on log e_j
    assert np.max(np.abs(out[fin] - ref[fin])) < 1e-9
    assert passes >= 1


def test_fft_roundoff_bound_holds():
    # The absolute error of the FFT pmf stays below the bound used by the guard (measured
    # against the exact positive DP on the same tilted probabilities).
    rng = np.random.default_rng(2)
    theta = rng.normal(size=4000)
    p, r, _, _ = C._tilted(theta, 2000.0, 4000, 0, theta.min(), theta.max())
    q, bound = C._product_tree_pmf(p, r)
    exact = C._leaf_pmfs(p, r, 4000)[0]
    assert np.max(np.abs(q - exact)) <= bound


def test_fft_refuses_when_the_bound_cannot_be_met():
    # rtol below the round-off bound: no FFT value is accepted, every count comes from the
    # exact single-k DP (still correct), never from the inaccurate transform.
    theta = np.random.default_rng(3).normal(size=300)
    out = C.log_esp_all_fft(theta, K=40, rtol=1e-16)
    np.testing.assert_allclose(out, C.log_esp_all_logspace(theta, K=40), rtol=1e-12)
    with pytest.raises(ValueError, match="rtol"):
        C.log_esp_all_fft(theta, rtol=0.0)


@pytest.mark.parametrize("D", range(1, 11))
def test_covariance_dot_against_enumeration(D):
    rng = np.random.default_rng(200 + D)
    theta = rng.normal(size=D) * 2
    if D > 3:
        theta[1] = 50.0
        theta[2] = -np.inf
    v = rng.normal(size=D)
    n_fin = int(np.isfinite(theta).sum())
    assert np.all(C.conditional_covariance_dot_core(theta, n_fin + 1, v) == 0)  # infeasible k
    for k in range(n_fin + 1):
        Y, lp = S.conditional_bernoulli_log_pmf(theta, k)
        P = np.exp(lp)
        m = P @ Y
        cov = (Y * P[:, None]).T @ Y - np.outer(m, m)
        hv = C.conditional_covariance_dot_core(theta, k, v)
        np.testing.assert_allclose(hv, cov @ v, atol=1e-12)
        assert abs(hv.sum()) < 1e-12  # sum y = k is fixed: Cov(y) 1 = 0


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
            draws = C.sample_conditional_bernoulli(theta, k, size=(n,), rng=1000 * D + k)
            codes = draws @ bits[:D]
            ref_codes = Y @ bits[:D]
            assert np.all(np.isin(codes, ref_codes))
            if len(Y) == 1:
                continue
            counts = np.array([np.count_nonzero(codes == c) for c in ref_codes])
            assert stats.chisquare(counts, probs * n).pvalue > 1e-4, (D, k)
