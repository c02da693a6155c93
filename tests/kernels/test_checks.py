"""Input conversion at the Python -> numba boundary (``pm_perm.kernels._checks``)."""

from __future__ import annotations

import re

import numpy as np
from numba import types

from pm_perm.kernels import esp, huber_law, partial_orders, permanent
from pm_perm.kernels._checks import c_array, first_non_permutation


def _read_only_array_args(dispatcher):
    return [sig for sig in dispatcher.signatures
            if any(isinstance(a, types.Array) and not a.mutable for a in sig)]


def test_c_array_copies_only_what_is_not_a_writable_c_array():
    a = np.zeros((3, 4))
    assert c_array(a) is a
    frozen = np.broadcast_to(np.arange(4.0), (3, 4))  # a read-only view
    out = c_array(frozen)
    assert out.flags.writeable and out.flags.c_contiguous and np.array_equal(out, frozen)
    assert c_array(np.arange(4), np.int64).dtype == np.int64
    assert c_array(a.T).flags.c_contiguous


def test_read_only_input_does_not_compile_another_kernel_variant():
    """numba compiles a kernel again for read-only arrays (seconds on an empty cache): the
    Python API hands the kernels writable arrays whatever it is given."""
    theta = np.broadcast_to(np.linspace(-1, 1, 5), (3, 5))
    W = np.zeros((2, 3, 3))
    W.flags.writeable = False
    orders = np.array([[0, 1, 2], [2, 0, 1]])
    orders.flags.writeable = False
    esp.log_esp(theta, 2)
    esp.log_esp_and_marginals(theta, np.broadcast_to(2, (3,)))
    permanent.log_permanent(W)
    partial_orders.partial_order_loglik(W, orders)
    weights = np.ones(2)
    weights.flags.writeable = False
    partial_orders.partial_order_loglik_and_grad(W, orders, weights)
    A = np.full((3, 3), 0.3)
    A.flags.writeable = False
    huber_law.huber_law_log_bound(A)
    for dispatcher in (esp._log_esp_batch, esp._log_esp_and_marginals_batch,
                       permanent._log_permanent_batch, partial_orders._batch,
                       huber_law._log_bound):
        assert not _read_only_array_args(dispatcher), dispatcher.py_func.__qualname__


def test_hall_violator_agrees_with_enumeration_and_names_a_violator():
    """``hall_violator`` (the feasibility check of the Bethe and Huber-Law paths) against
    brute force over every permutation, on random -inf patterns of M = 1..6."""
    import itertools

    from pm_perm.kernels._checks import hall_violator

    rng = np.random.default_rng(0)
    seen = set()
    for _ in range(600):
        M = int(rng.integers(1, 7))
        W = np.where(rng.random((M, M)) < rng.uniform(0.2, 0.8), -np.inf, rng.normal(size=(M, M)))
        feasible = any(np.isfinite(W[np.arange(M), p]).all()
                       for p in itertools.permutations(range(M)))
        ok, rows, cols = hall_violator(W)
        assert ok == feasible
        seen.add(ok)
        if not ok:  # the rows reach only the columns listed, and there are fewer of those
            assert rows.sum() > cols.sum()
            assert not np.isfinite(W[rows][:, ~cols]).any()
    assert seen == {True, False}


def test_check_admits_permutation_messages():
    import pytest

    from pm_perm.kernels._checks import check_admits_permutation

    X = np.array([[0, -np.inf, -np.inf], [0, -np.inf, -np.inf], [0, 0, 0.0]])
    with pytest.raises(ValueError, match=r"^logits admit no permutation \(every one uses a -inf "
                       r"entry\): rows 0, 1 have finite entries only in column 0, fewer"):
        check_admits_permutation(X)
    batch = np.zeros((2, 3, 3))
    batch[1, 2] = -np.inf
    with pytest.raises(ValueError, match=r"^logits\[1\] admit .*: row 2 is all -inf"):
        check_admits_permutation(batch)
    W = np.zeros((3, 3))
    W[:, 1] = -np.inf
    with pytest.raises(ValueError, match="column 1 is all -inf"):
        check_admits_permutation(W)
    check_admits_permutation(np.where(np.eye(4) > 0, -np.inf, 0.0))  # derangements exist


def test_complex_sizes_counts_and_weights_are_refused_not_truncated():
    import pytest

    from pm_perm.kernels._checks import as_count, as_float_array, as_size, check_weights

    # complex: NumPy would keep the real part with only a ComplexWarning
    with pytest.raises(TypeError, match="logits must be real numbers; got complex"):
        as_float_array(np.ones((3, 3)) * 1j, "logits")
    with pytest.raises(TypeError, match="logits must be real numbers; got complex"):
        permanent.log_permanent(np.ones((3, 3)) * 1j)
    # size: 2.5 became 2
    assert as_size(3) == (3,) and as_size((2, np.int64(3))) == (2, 3) and as_size(()) == ()
    for bad in (2.5, (2, 1.5), -1, np.nan, "3", True):
        with pytest.raises(ValueError, match="size must be a non-negative integer"):
            as_size(bad)
    # counts: NaN gave "cannot convert float NaN to integer", 2.5 became 2
    assert as_count(3, "n") == 3 and as_count(1e3, "n") == 1000
    for bad in (np.nan, np.inf, 2.5, -1, "3", None, True):
        with pytest.raises(ValueError, match=rf"burn_in_sweeps must be an integer >= 0; got "
                           rf"{re.escape(repr(bad))}"):
            as_count(bad, "burn_in_sweeps", 0)
    # weights: name the entry that is not finite
    assert check_weights([1, 2], 2).dtype == np.float64
    with pytest.raises(ValueError, match=r"weights\[1\] = inf is not finite"):
        check_weights([1, np.inf, np.nan], 3)
    with pytest.raises(ValueError, match=r"weights must have shape \(2,\), one per order; got "
                       r"shape \(3,\)"):
        check_weights([1, 2, 3], 2)
    with pytest.raises(TypeError, match="weights must be real numbers; got complex"):
        check_weights([1j], 1)


def test_first_non_permutation_names_the_first_bad_row():
    assert first_non_permutation(np.array([2, 0, 1])) is None
    assert first_non_permutation(np.array([0, 0, 1])) == ()
    rows = np.tile(np.arange(4), (2, 3, 1))
    assert first_non_permutation(rows) is None
    rows[1, 2] = [0, 1, 2, 4]  # out of range
    rows[1, 1] = [3, 3, 1, 0]  # repeated: the first bad row in C order
    assert first_non_permutation(rows) == (1, 1)
    assert first_non_permutation(np.array([[1.0, 0.0], [0.0, 1.0]])) is None
    assert first_non_permutation(np.array([[0.5, 0.0]])) == (0,)
