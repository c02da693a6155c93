"""Tests of the FFT product tree for all counts against enumeration and the log-space DP."""

import numpy as np
import pytest

from pm_perm.kernels import _tilted_dp, esp_all, esp_fft
from pm_perm.reference import subsets as S


def _rel(a, b):
    return abs(a - b) / max(1.0, abs(b))


@pytest.mark.parametrize("D", [1, 2, 5, 10])
def test_fft_all_k_against_enumeration(D):
    theta = np.random.default_rng(D).normal(size=D) * 2
    ref = [S.log_esp(theta, k) for k in range(D + 1)]
    np.testing.assert_allclose(esp_fft.log_esp_all_fft(theta), ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("scale", [0.3, 3.0, 50.0])
def test_fft_all_k_matches_logspace_at_large_D(scale):
    rng = np.random.default_rng(1)
    theta = rng.normal(size=2000) * scale
    theta[::97] = -np.inf
    out, passes = esp_fft.log_esp_all_fft(theta, rtol=1e-10, return_passes=True)
    ref = esp_all.log_esp_all_logspace(theta)
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
    p, r, _, _ = _tilted_dp.tilted(theta, 2000.0, 4000, 0, theta.min(), theta.max())
    q, bound = esp_fft._product_tree_pmf(p, r)
    exact = esp_fft._leaf_pmfs(p, r, 4000)[0]
    assert np.max(np.abs(q - exact)) <= bound


def test_fft_refuses_when_the_bound_cannot_be_met():
    # rtol below the round-off bound: no FFT value is accepted, every count comes from the
    # exact single-k DP (still correct), never from the inaccurate transform.
    theta = np.random.default_rng(3).normal(size=300)
    out = esp_fft.log_esp_all_fft(theta, K=40, rtol=1e-16)
    np.testing.assert_allclose(out, esp_all.log_esp_all_logspace(theta, K=40), rtol=1e-12)
    with pytest.raises(ValueError, match="rtol"):
        esp_fft.log_esp_all_fft(theta, rtol=0.0)
