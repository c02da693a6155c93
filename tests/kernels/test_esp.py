"""Tests of the ESP kernels (value, marginals, covariance; the all-k DP alongside) against
enumeration and closed forms."""

import math

import numpy as np
import pytest

from pm_perm.kernels import count_draws, esp, esp_all, esp_fft
from pm_perm.reference import subsets as S


def _rel(a, b):
    return abs(a - b) / max(1.0, abs(b))


@pytest.mark.parametrize("D", range(1, 11))
def test_value_marginals_all_k_against_enumeration(D):
    rng = np.random.default_rng(D)
    theta = rng.normal(size=D) * 2.0
    ref = np.array([S.log_esp(theta, k) for k in range(D + 1)])
    np.testing.assert_allclose(esp_all.log_esp_all(theta), ref, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(esp_all.log_esp_all_logspace(theta), ref, rtol=1e-13, atol=1e-13)
    for k in range(D + 1):
        v, m = esp.log_esp_and_marginals(theta, k)
        assert _rel(v, ref[k]) < 1e-13
        assert _rel(esp.log_esp(theta, k), ref[k]) < 1e-13
        np.testing.assert_allclose(m, S.conditional_marginals(theta, k), atol=1e-13)
        assert abs(m.sum() - k) < 1e-12
        # each probability, and their sum
        Y, lp = S.conditional_bernoulli_log_pmf(theta, k)
        lp_kernel = Y @ theta - v
        np.testing.assert_allclose(lp_kernel, lp, atol=1e-12)
        assert abs(np.exp(lp_kernel).sum() - 1.0) < 1e-12


def test_out_of_range_counts():
    theta = np.array([0.3, -1.0, 2.0])
    assert esp.log_esp(theta, -1) == -np.inf
    assert esp.log_esp(theta, 4) == -np.inf
    v, m = esp.log_esp_and_marginals(theta, 4)
    assert v == -np.inf and np.all(m == 0)
    assert esp.log_esp(theta, 0) == 0.0
    assert esp.log_esp(theta, 3) == pytest.approx(theta.sum(), rel=1e-15)


@pytest.mark.parametrize("scale", [50.0, 200.0])
def test_extreme_logits_against_enumeration(scale):
    rng = np.random.default_rng(3)
    D = 10
    theta = scale * np.sign(rng.normal(size=D)) + rng.normal(size=D)
    theta[4] = -np.inf
    for k in range(D + 1):
        v, m = esp.log_esp_and_marginals(theta, k)
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
        assert esp.log_esp(theta, k) == pytest.approx(S.log_esp(fin, k) if k <= 3 else -np.inf)
    np.testing.assert_allclose(esp_all.log_esp_all(theta)[:4],
                               [S.log_esp(fin, k) for k in range(4)])
    assert np.all(esp_all.log_esp_all(theta)[4:] == -np.inf)


@pytest.mark.parametrize("D", [2000, 10000])
def test_binomial_closed_form_at_large_D(D):
    # theta = 0: e_k = C(D, k). The tilted DP is accurate at every k, including the far tails
    # where a single-tilt probability DP underflows (the all-k path must fall back there).
    theta = np.zeros(D)
    ks = np.array([1, 2, D // 10, D // 2, D - 3, D - 1])
    exact = np.array([math.log(math.comb(D, int(k))) for k in ks])  # exact integers
    np.testing.assert_allclose(esp.log_esp(theta, ks), exact, rtol=1e-12)
    all_k = esp_all.log_esp_all(theta)
    np.testing.assert_allclose(all_k[ks], exact, rtol=1e-12)
    np.testing.assert_allclose(all_k, esp_all.log_esp_all_logspace(theta), rtol=1e-11)


def test_large_D_matches_logspace_reference():
    rng = np.random.default_rng(7)
    theta = rng.normal(size=3000) * 3
    ref = esp_all.log_esp_all_logspace(theta)
    for k in [1, 30, 300, 1500, 2999]:
        assert _rel(esp.log_esp(theta, k), ref[k]) < 1e-12


def test_marginals_are_the_gradient():
    rng = np.random.default_rng(11)
    theta = rng.normal(size=40)
    k = 7
    _, m = esp.log_esp_and_marginals(theta, k)
    eps = 1e-6
    fd = np.array(
        [
            (esp.log_esp(theta + eps * e, k) - esp.log_esp(theta - eps * e, k)) / (2 * eps)
            for e in np.eye(40)
        ]
    )
    np.testing.assert_allclose(m, fd, atol=1e-8)


def test_batching_and_broadcasting():
    rng = np.random.default_rng(1)
    theta = rng.normal(size=(3, 6))
    k = np.arange(4)[:, None]  # (4, 1) -> batch (4, 3)
    v, m = esp.log_esp_and_marginals(theta, k)
    assert v.shape == (4, 3) and m.shape == (4, 3, 6)
    assert v[2, 1] == pytest.approx(S.log_esp(theta[1], 2), rel=1e-13)
    assert esp_all.log_esp_all(theta, K=3).shape == (3, 4)


def test_nchoosek_marginals_against_enumeration():
    rng = np.random.default_rng(2)
    D = 6
    theta = rng.normal(size=D)
    pk = rng.dirichlet(np.ones(D + 1))
    Y, lp = S.nchoosek_log_pmf(theta, pk)
    ref = (np.exp(lp)[:, None] * Y).sum(0)
    np.testing.assert_allclose(esp.nchoosek_marginals(theta, pk), ref, atol=1e-13)


def test_bad_input():
    with pytest.raises(ValueError, match="NaN"):
        esp.log_esp([0.0, np.nan], 1)
    with pytest.raises(ValueError, match="integer"):
        esp.log_esp([0.0, 1.0], 0.5)
    with pytest.raises(ValueError, match="finite logits"):
        count_draws.sample_conditional_bernoulli([0.0, -np.inf], 2)
    with pytest.raises(ValueError, match="D \\+ 1"):
        esp.nchoosek_marginals([0.0, 1.0], [0.5, 0.5])
    with pytest.raises(ValueError, match="non-negative"):
        esp_all.log_esp_all([0.0, 1.0], K=-1)


def test_api_paper_cuts_get_clear_errors():
    """An int size as in the other samplers; D = 0 and a NaN K refused with a message; an empty
    batch gives an empty result, as log_esp_all does."""
    th = np.zeros(4)
    y = count_draws.sample_conditional_bernoulli(th, 2, size=3, rng=0)
    assert y.shape == (3, 4) and np.all(y.sum(-1) == 2)
    np.testing.assert_array_equal(
        y, count_draws.sample_conditional_bernoulli(th, 2, size=(3,), rng=0))
    for size in (2.5, (2, -1), "3"):
        with pytest.raises(ValueError, match="size must be a non-negative integer"):
            count_draws.sample_conditional_bernoulli(th, 2, size=size, rng=0)
    for fn, args in [(esp.log_esp, (np.zeros(0), 0)), (esp_all.log_esp_all, (np.zeros((2, 0)),)),
                     (esp_fft.log_esp_all_fft, (np.zeros(0),)), (esp.log_esp_and_marginals,
                                                         (np.zeros(0), 0))]:
        with pytest.raises(ValueError, match="at least one item \\(D >= 1\\)"):
            fn(*args)
    for K in (np.nan, np.inf, "2", [1]):
        with pytest.raises(ValueError, match="K must be a non-negative integer"):
            esp_all.log_esp_all(th, K=K)
    empty = np.zeros((0, 4))
    assert esp_fft.log_esp_all_fft(empty).shape == esp_all.log_esp_all(empty).shape
    np.testing.assert_allclose(esp_all.log_esp_all(th, K=2.0), esp_all.log_esp_all(th, K=2))


@pytest.mark.parametrize("D", range(1, 11))
def test_covariance_dot_against_enumeration(D):
    rng = np.random.default_rng(200 + D)
    theta = rng.normal(size=D) * 2
    if D > 3:
        theta[1] = 50.0
        theta[2] = -np.inf
    v = rng.normal(size=D)
    n_fin = int(np.isfinite(theta).sum())
    assert np.all(esp.conditional_covariance_dot_core(theta, n_fin + 1, v) == 0)  # infeasible k
    for k in range(n_fin + 1):
        Y, lp = S.conditional_bernoulli_log_pmf(theta, k)
        P = np.exp(lp)
        m = P @ Y
        cov = (Y * P[:, None]).T @ Y - np.outer(m, m)
        hv = esp.conditional_covariance_dot_core(theta, k, v)
        np.testing.assert_allclose(hv, cov @ v, atol=1e-12)
        assert abs(hv.sum()) < 1e-12  # sum y = k is fixed: Cov(y) 1 = 0
