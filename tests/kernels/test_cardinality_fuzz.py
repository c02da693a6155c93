"""Fuzzed inputs into the public ESP kernels: a correct result or the documented error."""

import numpy as np
import pytest

from pm_perm.kernels.count_draws import sample_conditional_bernoulli
from pm_perm.kernels.esp import conditional_marginals, log_esp
from pm_perm.kernels.esp_all import log_esp_all
from pm_perm.reference.subsets import log_esp as log_esp_enum


def _call(fn, *args):
    try:
        return fn(*args), None
    except (ValueError, TypeError) as err:
        return None, err


@pytest.mark.parametrize("seed", range(30))
def test_random_inputs(seed):
    rng = np.random.default_rng(seed)
    shape = tuple(int(s) for s in rng.integers(0, 5, size=rng.integers(0, 3)))
    theta = rng.normal(scale=rng.choice([1e-300, 1.0, 1e3, 1e300, 1e305]), size=shape)
    special = rng.choice([None, np.nan, np.inf, -np.inf])
    if special is not None and theta.size:
        theta.flat[rng.integers(theta.size)] = special
    kind = rng.choice(["float64", "float32", "int64", "bool"])
    with np.errstate(over="ignore", invalid="ignore"):
        theta = theta.astype(kind)
    k = int(rng.integers(-1, 6))
    for fn, args in [(log_esp, (theta, k)), (conditional_marginals, (theta, k)),
                     (log_esp_all, (theta,)), (sample_conditional_bernoulli, (theta, k))]:
        out, err = _call(fn, *args)
        if err is not None:
            assert str(err)
            continue
        out = np.asarray(out)
        assert not np.isnan(out).any(), (fn.__name__, theta, k)
        arr = np.asarray(theta, dtype=float)
        if fn is log_esp and arr.ndim >= 1 and 0 < arr.shape[-1] <= 8 and arr.ndim == 1:
            ref = log_esp_enum(arr, k) if 0 <= k <= arr.shape[-1] else -np.inf
            np.testing.assert_allclose(out, ref, rtol=1e-10, atol=1e-10)


def test_non_contiguous_and_read_only():
    rng = np.random.default_rng(0)
    base = rng.normal(size=(3, 20))
    theta = base[:, ::2]
    ro = np.ascontiguousarray(theta)
    ro.setflags(write=False)
    np.testing.assert_allclose(log_esp(theta, 3), log_esp(ro, 3))
    np.testing.assert_allclose(conditional_marginals(theta.T.copy().T, 3),
                               conditional_marginals(ro, 3))
    assert sample_conditional_bernoulli(ro, 3, rng=1).sum(-1).tolist() == [3, 3, 3]


def test_logits_whose_sums_overflow_are_refused():
    """Near the float64 maximum, e_k's log-sums overflow: refused with a message, not NaN."""
    theta = np.array([1.5e308, 1.5e308, 0.0])
    for fn, args in [(log_esp, (theta, 2)), (conditional_marginals, (theta, 2)),
                     (log_esp_all, (theta,)), (sample_conditional_bernoulli, (theta, 2))]:
        with pytest.raises(ValueError, match="overflow float64"):
            fn(*args)
    np.testing.assert_allclose(log_esp(np.array([1e300, 1e300, 0.0]), 2), 2e300, rtol=1e-15)
