"""PyTensor Ops for the exact likelihood of partial orders (top-k, ties) under the permutation
exponential family; kernels in :mod:`pm_perm.kernels.partial_orders`.

* ``partial_order_loglik(logits, orders)``: ``(..., M, M), (n, M) -> (..., n)``, ``log p`` of
  each rank-form order (convention: :class:`pm_perm.PartialRanking`).
* ``partial_order_loglik_sum(logits, orders, counts)``: ``-> (...)``,
  ``sum_n counts[n] log p(order n)``. Its value and gradient come from ONE Op run (one suffix
  table and one adjoint sweep, O(M 2^M) whatever ``n``); a graph that needs only the value gets
  the value-only Op (rewrite ``local_partial_order_sum_value_only``).

A graph that needs the per-order values AND a gradient weighted by data (``PartialRanking``'s
logp: ``sum(counts * loglik)``) would build the table twice (values, then the pullback); the
rewrite ``local_fuse_partial_order_loglik_and_grad`` makes that one ``PartialOrderLoglikAndGrad``
node.

Core Ops are wrapped in ``Blockwise`` (batch dimensions of the logits, e.g. the K components of a
mixture) and have numba implementations. Orders are integer data: rows that are not valid rank
form get ``-inf``. NaN, ``+inf`` or finite logits beyond 1e300 give NaN outputs, as do logits
under which no permutation has positive probability (``perm(exp W) = 0``); ``-inf`` logits are
forbidden (item, position) pairs. M beyond the exact limit (:func:`partial_order_max_m`, fixed
when the graph is built) raises ``ValueError`` naming the alternatives.
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from numba import types
from pytensor.graph.op import Op
from pytensor.link.numba.dispatch import basic as numba_basic

from pm_perm.kernels._version import code_version
from pm_perm.kernels.partial_orders import (
    check_partial_order_size,
    make_partial_orders_kernel,
)
from pm_perm.kernels.permanent import EXACT_MAX_M
from pm_perm.ops._blockwise import (
    EmptyBatchBlockwise,
    register_core_ops,
    register_value_only_rewrite,
)
from pm_perm.ops._ranking import (
    AndGradOpMixin,
    RankingKernelOp,
    SumAndGradOpMixin,
    SumOpMixin,
    ValuesOpMixin,
    register_fuse_rewrite,
    register_ranking_numba,
)
from pm_perm.ops._shapes import check_static_square
from pm_perm.ops.extern import StatusError, c_contiguous_out, copy_back, extern_kernel

__all__ = [
    "PartialOrderLoglik",
    "PartialOrderLoglikAndGrad",
    "PartialOrderLoglikSum",
    "PartialOrderLoglikSumAndGrad",
    "partial_order_loglik",
    "partial_order_loglik_sum",
    "partial_order_max_m",
]


def partial_order_max_m() -> int:
    """Largest M the partial-order Ops accept now (``EXACT_MAX_M`` capped by the memory budget)."""
    m = EXACT_MAX_M
    while m > 1:
        try:
            check_partial_order_size(m)
            return m
        except ValueError:
            m -= 1
    return m


def _core_inputs(W, orders, weights, max_m):
    W = pt.as_tensor_variable(W)
    orders = pt.as_tensor_variable(orders)
    if W.type.ndim != 2 or orders.type.ndim != 2:
        raise TypeError("core Op expects logits (M, M) and orders (n, M)")
    if W.type.dtype not in pt.type.float_dtypes:
        raise TypeError(f"logits must be floating point; got dtype {W.type.dtype}")
    if orders.type.dtype not in pt.type.int_dtypes:
        raise TypeError(f"orders must be integers (rank form); got dtype {orders.type.dtype}")
    check_static_square(W, max_m, check_partial_order_size)
    inputs = [pt.cast(W, "float64"), pt.cast(orders, "int64")]
    if weights is not None:
        weights = pt.as_tensor_variable(weights)
        if weights.type.ndim != 1:
            raise TypeError("counts / weights must be a vector (n,)")
        inputs.append(pt.cast(weights, "float64"))
    return inputs


class _PartialOrderOp(RankingKernelOp, Op):
    """Shared construction: ``max_m`` is part of the props (and so of the numba cache key)."""

    __props__ = ("max_m",)

    def __init__(self, max_m=None):
        self.max_m = int(partial_order_max_m() if max_m is None else max_m)

    def _inputs(self, W, orders, weights=None):
        return _core_inputs(W, orders, weights, self.max_m)

    def _kernel(self, W, orders, weights, want_grad):
        return _run(W, orders, weights, want_grad)

    @staticmethod
    def _loglik_graph(x, orders):
        return _loglik(x, orders)

    @staticmethod
    def _sum_and_grad_graph(x, orders, weights):
        return _sum_and_grad(x, orders, weights)

    def _check_runtime(self, W, orders, weights=None):
        M = W.shape[-1]
        if W.shape[-2] != M:
            raise ValueError(f"logits must be square (M, M); got shape {W.shape}")
        if M > self.max_m:
            check_partial_order_size(M)
            raise ValueError(f"M = {M} is beyond the exact limit {self.max_m}")
        if orders.shape[-1] != M:
            raise ValueError(f"orders have {orders.shape[-1]} columns but the logits are {M} x {M}")
        if weights is not None and weights.shape[-1] != orders.shape[0]:
            raise ValueError(f"{weights.shape[-1]} counts for {orders.shape[0]} orders")


class PartialOrderLoglik(ValuesOpMixin, _PartialOrderOp):
    """Core Op: per-order ``log p`` for logits (M, M) and orders (n, M) -> (n,)."""

    gufunc_signature = "(m,m),(n,m)->(n)"


class PartialOrderLoglikSumAndGrad(SumAndGradOpMixin, _PartialOrderOp):
    """Core Op: ``(sum_n w_n log p_n (), its gradient (M, M))`` for logits (M, M), orders (n, M)
    and weights (n,), from one suffix table and one adjoint sweep."""

    gufunc_signature = "(m,m),(n,m),(n)->(),(m,m)"


class PartialOrderLoglikSum(SumOpMixin, _PartialOrderOp):
    """Value only, ``sum_n w_n log p_n`` (): what the rewrite below uses when no compiled output
    needs the gradient. Its pullback is the gradient output of the two-output Op."""

    gufunc_signature = "(m,m),(n,m),(n)->()"


class PartialOrderLoglikAndGrad(AndGradOpMixin, _PartialOrderOp):
    """Core Op: per-order ``log p`` (n,) and the gradient (M, M) of ``sum_n w_n log p_n``, from
    one table. Created by the rewrite ``local_fuse_partial_order_loglik_and_grad`` when a graph
    needs the per-order values and a gradient weighted by something that does not depend on
    them (``PartialRanking``'s logp: the weights are the counts). No gradient of its own."""

    gufunc_signature = "(m,m),(n,m),(n)->(n),(m,m)"


_loglik = EmptyBatchBlockwise(PartialOrderLoglik())
_sum_and_grad = EmptyBatchBlockwise(PartialOrderLoglikSumAndGrad())


# ----------------------------------------------------------------------------- the kernel
# The compiled graphs call the kernel through a C symbol (see pm_perm.ops.extern): the suffix
# table, the adjoint sweep and the block permanents are compiled once per numba cache, not again
# inside every PyTensor function that uses the Ops. ``perform`` calls the same compiled kernel.

_F64_PTR = types.CPointer(types.float64)
_SIGNATURE = types.float64(_F64_PTR, types.intp, types.CPointer(types.int64), types.intp,
                           _F64_PTR, _F64_PTR, _F64_PTR, types.intc)
_VERSION = code_version(__file__)  # numba cache version (see pm_perm.kernels._version)
_EXTERN = extern_kernel("pm_perm_partial_orders_kernel", _SIGNATURE,
                        make_partial_orders_kernel(_VERSION))


def _run(W, orders, weights, want_grad):
    """``(total, values (n,), gradient (M, M) or None)`` of one core input in Python (NaN for
    NaN / +inf logits); ``weights`` None: zeros (values only)."""
    W = np.ascontiguousarray(W, dtype=np.float64)
    orders = np.ascontiguousarray(orders, dtype=np.int64)
    M, n = W.shape[0], orders.shape[0]
    weights = np.zeros(n) if weights is None else np.ascontiguousarray(weights, dtype=np.float64)
    values = np.empty(n)
    grad = np.empty((M, M) if want_grad else (0, 0))
    total = _EXTERN()(W, M, orders, n, weights, values, grad, int(want_grad))
    return total, values, grad if want_grad else None


class _ShapeError(StatusError):
    """The numba implementations' shape errors (see :class:`StatusError`)."""

    messages = (
        (ValueError, ""),
        (ValueError, "logits must be square (M, M) with M within the exact limit, and orders "
                     "(n, M)"),
        (ValueError, "counts must have one entry per order"),
        (ValueError, "weights must have one entry per order"),
    )


def _kernel_numba(max_m, weights_name):
    """``run(W, orders, weights, values, grad, want_grad) -> total`` in compiled code: checks the
    shapes (raising ``ValueError``), then calls the C kernel, which writes ``values`` (n,) and,
    with ``want_grad``, ``grad`` (M, M)."""
    kernel = _EXTERN().external
    weights_error = 2 if weights_name == "counts" else 3

    @numba_basic.numba_njit
    def run(W, orders, weights, values, grad, want_grad):
        M = W.shape[0]
        if W.shape[1] != M or M > max_m or orders.shape[1] != M:
            raise _ShapeError(1)
        if weights.shape[0] != orders.shape[0]:
            raise _ShapeError(weights_error)
        Wc, oc = np.ascontiguousarray(W), np.ascontiguousarray(orders)
        wc = np.ascontiguousarray(weights)
        v, g = c_contiguous_out(values), c_contiguous_out(grad)
        total = kernel(Wc.ctypes, M, oc.ctypes, orders.shape[0], wc.ctypes, v.ctypes, g.ctypes,
                       want_grad)
        copy_back(values, v)
        if want_grad:
            copy_back(grad, g)
        return total

    return run


_OPS = (PartialOrderLoglik, PartialOrderLoglikSumAndGrad, PartialOrderLoglikSum,
        PartialOrderLoglikAndGrad)
register_ranking_numba(_OPS, _kernel_numba, "max_m", _VERSION)


# ----------------------------------------------------------------------------- graph rewrites


local_partial_order_sum_value_only = register_value_only_rewrite(
    "local_partial_order_sum_value_only", PartialOrderLoglikSumAndGrad,
    lambda core: EmptyBatchBlockwise(PartialOrderLoglikSum(core.max_m)), "gradient")


local_fuse_partial_order_loglik_and_grad = register_fuse_rewrite(
    "local_fuse_partial_order_loglik_and_grad", _OPS, "max_m",
    """One table instead of two for per-order values + a gradient weighted independently of
    them (``sum(weights * loglik)`` with data weights, as in ``PartialRanking``'s logp): replace
    ``PartialOrderLoglik(W, orders)`` and the gradient output of
    ``PartialOrderLoglikSumAndGrad(W, orders, g)`` by one ``PartialOrderLoglikAndGrad`` node.
    Only for one (M, M) matrix and unbatched weights.""")


# ----------------------------------------------------------------------------- public helpers


def partial_order_loglik(logits, orders):
    """Symbolic ``log p(order n)`` for logits (..., M, M) and rank-form orders (n, M) -> (..., n).

    ``p(y) ∝ exp(sum_i logits[i, y[i]])``, rows = items, columns = positions; the rank form
    (top-k with ``-1`` for unranked items, ties by the smallest position of the block) is stated
    in :class:`pm_perm.PartialRanking`. Differentiable in ``logits`` (the gradient is one more
    table pass). Cost per logits matrix: O(M 2^M + n M), plus O(s 2^s) per middle tie block of
    size s; M up to :func:`partial_order_max_m`.
    """
    return _loglik(logits, orders)


def partial_order_loglik_sum(logits, orders, counts):
    """Symbolic ``sum_n counts[n] log p(order n)`` -> (...), value and gradient from one Op run.

    Parameters
    ----------
    logits : tensor_like of float, shape (..., M, M)
    orders : tensor_like of int, shape (n, M)
        Distinct rank-form orders.
    counts : tensor_like of float, shape (n,)
        Number of rankings per order (any real weights are accepted; rows of weight 0 are
        skipped, so an impossible order of count 0 does not make the sum NaN).
    """
    return _sum_and_grad(logits, orders, counts)[0]


# gradient graphs vectorise these core Ops into EmptyBatchBlockwise (pm_perm.ops._blockwise)
register_core_ops(PartialOrderLoglik, PartialOrderLoglikSumAndGrad, PartialOrderLoglikSum,
                  PartialOrderLoglikAndGrad)
