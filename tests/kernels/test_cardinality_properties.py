"""Property-based tests (hypothesis) of the elementary-symmetric-polynomial kernels."""

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pm_perm.kernels.count_draws import sample_conditional_bernoulli
from pm_perm.kernels.esp import log_esp, log_esp_and_marginals
from pm_perm.kernels.esp_all import log_esp_all

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True)


@st.composite
def logits_and_k(draw, max_d=40):
    D = draw(st.integers(1, max_d))
    seed = draw(st.integers(0, 2**32 - 1))
    scale = draw(st.sampled_from([0.01, 1.0, 10.0, 50.0]))
    rng = np.random.default_rng(seed)
    theta = scale * rng.normal(size=D)
    k = draw(st.integers(0, D))
    return theta, k, rng


@SETTINGS
@given(logits_and_k())
def test_symmetric_in_theta(case):
    theta, k, rng = case
    a = log_esp(theta, k)
    b = log_esp(theta[rng.permutation(theta.size)], k)
    assert abs(a - b) <= 1e-12 * max(1.0, abs(a))


@SETTINGS
@given(logits_and_k())
def test_marginals_in_unit_interval_and_sum_to_k(case):
    theta, k, _ = case
    _, m = log_esp_and_marginals(theta, k)
    assert np.all(m >= -1e-15) and np.all(m <= 1 + 1e-15)
    assert abs(m.sum() - k) <= 1e-10 * max(1, k)


@SETTINGS
@given(st.integers(1, 60), st.floats(-30, 30), st.data())
def test_equal_logits_give_binomial_times_power(D, t, data):
    k = data.draw(st.integers(0, D))
    ref = math.log(math.comb(D, k)) + k * t
    got = log_esp(np.full(D, t), k)
    assert abs(got - ref) <= 1e-12 * max(1.0, abs(ref))


@SETTINGS
@given(logits_and_k())
def test_shift_by_c_adds_k_c(case):
    theta, k, rng = case
    c = float(rng.normal() * 5)
    a, b = log_esp(theta, k), log_esp(theta + c, k)
    assert abs(b - (a + k * c)) <= 1e-12 * max(1.0, abs(a), abs(b))


@SETTINGS
@given(logits_and_k(max_d=25))
def test_all_k_matches_single_k(case):
    theta, k, _ = case
    allk = log_esp_all(theta)
    assert abs(allk[k] - log_esp(theta, k)) <= 1e-10 * max(1.0, abs(allk[k]))


@SETTINGS
@given(logits_and_k(max_d=30), st.integers(1, 10))
def test_samples_are_binary_with_k_ones(case, n):
    theta, k, rng = case
    y = sample_conditional_bernoulli(theta, k, size=(n,), rng=rng)
    assert y.shape == (n, theta.size)
    assert set(np.unique(y)) <= {0, 1}
    assert np.all(y.sum(-1) == k)
