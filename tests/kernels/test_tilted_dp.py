"""Tests of the tilted Poisson-binomial DP shared by the conditional-Bernoulli kernels."""

import math

import numpy as np
from scipy import stats

from pm_perm.kernels import _tilted_dp


def test_tilt_keeps_mode_at_k():
    # The tilted pmf's value at k is not tiny (>= 1/(4 sqrt(D)) here), which is what makes
    # the probability-scale DP accurate.
    rng = np.random.default_rng(0)
    theta = rng.normal(size=500) * 5
    invalid, n_fin, lo, hi = _tilted_dp.scan_logits(theta)
    assert not invalid and n_fin == 500
    for k in [1, 50, 250, 499]:
        p, _, _, _ = _tilted_dp.tilted(theta, float(k), n_fin, k, lo, hi)
        q = stats.poisson_binom(p).pmf(k)
        assert q > 1 / (4 * math.sqrt(500))
