"""Fuzzed inputs into the public permanent kernels: either a correct result or the documented
error; never a crash, a hang, a silent NaN, or an allocation beyond the budget."""

import time

import numpy as np
import pytest

from pm_perm.kernels.matching import max_weight_matching
from pm_perm.kernels.permanent import (
    log_permanent,
    log_permanent_and_marginals,
    permutation_marginals,
)
from pm_perm.kernels.permutation_sampler import sample_permutations
from pm_perm.reference.permutations import log_permanent_enum

KERNELS = [log_permanent, permutation_marginals, sample_permutations, max_weight_matching]


def _outcome(fn, W):
    try:
        return fn(W), None
    except (ValueError, TypeError) as err:
        return None, err


@pytest.mark.parametrize("seed", range(40))
def test_random_shapes_dtypes_and_values(seed):
    rng = np.random.default_rng(seed)
    ndim = rng.integers(0, 5)
    shape = tuple(int(s) for s in rng.integers(0, 5, size=ndim))
    kind = rng.choice(["float64", "float32", "int64", "bool", "object"])
    W = rng.normal(scale=rng.choice([1e-300, 1.0, 1e3, 1e300, 1e305]), size=shape)
    special = rng.choice([None, np.nan, np.inf, -np.inf])
    if special is not None and W.size:
        W.flat[rng.integers(W.size)] = special
    with np.errstate(over="ignore", invalid="ignore"):  # the cast itself may overflow
        W = W.astype(kind) if kind != "object" else W.astype(object)
    for fn in KERNELS:
        out, err = _outcome(fn, W)
        if err is not None:
            assert str(err)  # the documented error carries a message
            continue
        arr = np.asarray(W, dtype=float)
        assert arr.ndim >= 2 and arr.shape[-1] == arr.shape[-2] >= 1
        assert not np.isnan(arr).any() and not np.isposinf(arr).any()
        assert not (np.abs(arr[np.isfinite(arr)]) > 1e300).any()
        out = np.asarray(out)
        if fn is log_permanent:
            assert not np.isnan(out).any()
            if arr.shape[-1] <= 6:
                np.testing.assert_allclose(out, log_permanent_enum(arr), rtol=1e-12, atol=1e-9)


def test_non_contiguous_and_read_only_inputs():
    rng = np.random.default_rng(1)
    base = rng.normal(size=(7, 14))
    W = base[:, ::2]  # non-contiguous view
    assert not W.flags.c_contiguous
    ref = log_permanent(np.ascontiguousarray(W))
    assert log_permanent(W) == ref
    W_ro = np.ascontiguousarray(W)
    W_ro.setflags(write=False)
    assert log_permanent(W_ro) == ref
    lp, P = log_permanent_and_marginals(W.T)  # Fortran-ordered
    assert abs(lp - log_permanent(np.ascontiguousarray(W.T))) < 1e-12
    y = sample_permutations(W_ro, size=(3,), rng=0)
    assert y.shape == (3, 7)


def test_huge_and_tiny_logits_stay_finite():
    rng = np.random.default_rng(2)
    for scale in (1e-300, 1e-8, 1e8, 1e15):
        W = scale * rng.normal(size=(6, 6))
        lp, P = log_permanent_and_marginals(W)
        assert np.isfinite(lp) and np.all(np.isfinite(P))
        np.testing.assert_allclose(P.sum(-1), 1.0, atol=1e-12)


def test_empty_batches():
    assert log_permanent(np.zeros((0, 3, 3))).shape == (0,)
    assert permutation_marginals(np.zeros((2, 0, 3, 3))).shape == (2, 0, 3, 3)


def test_m32_refuses_at_once():
    W = np.zeros((32, 32))
    for fn in (log_permanent, permutation_marginals, sample_permutations):
        t = time.perf_counter()
        with pytest.raises(ValueError, match="EXACT_MAX_M"):
            fn(W)
        assert time.perf_counter() - t < 0.5


def test_logits_whose_sums_overflow_are_refused():
    """Finite logits near the float64 maximum: their sums overflow, so every kernel refuses them
    with a message (found by fuzzing: the enumeration and the DP divided by zero)."""
    W = np.full((3, 3), 1.5e308)
    W[0, 0] = -1.7e308
    for fn in KERNELS:
        with pytest.raises(ValueError, match="overflow float64"):
            fn(W)
    W = np.full((6, 6), 1e300)  # at the limit: accepted, exact
    np.testing.assert_allclose(log_permanent(W), 6e300 + np.log(720.0), rtol=1e-15)
