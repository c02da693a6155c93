"""Input conversion at the Python -> numba boundary (``pm_perm.kernels._checks``)."""

from __future__ import annotations

import numpy as np
from numba import types

from pm_perm.kernels import cardinality, huber_law, partial_orders, permanent
from pm_perm.kernels._checks import c_array


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
    cardinality.log_esp(theta, 2)
    cardinality.log_esp_and_marginals(theta, np.broadcast_to(2, (3,)))
    permanent.log_permanent(W)
    partial_orders.partial_order_loglik(W, orders)
    weights = np.ones(2)
    weights.flags.writeable = False
    partial_orders.partial_order_loglik_and_grad(W, orders, weights)
    A = np.full((3, 3), 0.3)
    A.flags.writeable = False
    huber_law.huber_law_log_bound(A)
    for dispatcher in (cardinality._log_esp_batch, cardinality._log_esp_and_marginals_batch,
                       permanent._log_permanent_batch, partial_orders._batch,
                       huber_law._log_bound):
        assert not _read_only_array_args(dispatcher), dispatcher.py_func.__qualname__
