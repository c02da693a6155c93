"""PyTensor Ops for the exact top-k item-by-position model; kernels in
:mod:`pm_perm.kernels.top_k`.

* ``top_k_loglik(logits, orders)``: ``(..., M, K + 1), (n, M) -> (..., n)``, ``log p`` of each
  rank-form ballot (at most K items ranked; the last column of the logits is the "not in the
  top K" logit).
* ``top_k_loglik_sum(logits, orders, counts)``: ``-> (...)``, ``sum_n counts[n] log p(ballot
  n)``: value and gradient from ONE Op run; a graph that needs only the value gets the
  value-only Op (rewrite ``local_top_k_sum_value_only``).

A graph that needs the per-ballot values AND a gradient weighted by data (``TopKRanking``'s
logp: ``sum(counts * loglik)``) would run the kernel twice (values, then the pullback); the
rewrite ``local_fuse_top_k_loglik_and_grad`` makes that one ``TopKLoglikAndGrad`` node.

Core Ops are wrapped in ``Blockwise`` (batch dimensions of the logits, e.g. the components of a
mixture) and have numba implementations calling the kernel's C symbol
(:mod:`pm_perm.ops.extern`). Orders are integer data: rows that are not valid rank form, or
rank more than K items, get ``-inf``. NaN, ``+inf`` or finite logits beyond 1e300 give NaN, as
do logits under which no top-K list has positive probability. K beyond the limit
(:func:`pm_perm.kernels.top_k.check_top_k_size`) raises ``ValueError`` naming the alternatives.
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from numba import types
from pytensor.graph.op import Op
from pytensor.link.numba.dispatch import basic as numba_basic

from pm_perm.kernels._version import code_version
from pm_perm.kernels.top_k import TOP_K_MAX_K, check_top_k_size, make_top_k_kernel
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
from pm_perm.ops.extern import StatusError, c_contiguous_out, copy_back, extern_kernel

__all__ = [
    "TopKLoglik",
    "TopKLoglikAndGrad",
    "TopKLoglikSum",
    "TopKLoglikSumAndGrad",
    "top_k_loglik",
    "top_k_loglik_sum",
]


def _core_inputs(L, orders, weights):
    L = pt.as_tensor_variable(L)
    orders = pt.as_tensor_variable(orders)
    if L.type.ndim != 2 or orders.type.ndim != 2:
        raise TypeError("core Op expects logits (M, K + 1) and orders (n, M)")
    if L.type.dtype not in pt.type.float_dtypes:
        raise TypeError(f"logits must be floating point; got dtype {L.type.dtype}")
    if orders.type.dtype not in pt.type.int_dtypes:
        raise TypeError(f"orders must be integers (rank form); got dtype {orders.type.dtype}")
    M, Q = L.type.shape
    if M is not None and Q is not None:
        check_top_k_size(M, Q - 1)
    inputs = [pt.cast(L, "float64"), pt.cast(orders, "int64")]
    if weights is not None:
        weights = pt.as_tensor_variable(weights)
        if weights.type.ndim != 1:
            raise TypeError("counts / weights must be a vector (n,)")
        inputs.append(pt.cast(weights, "float64"))
    return inputs


class _TopKOp(RankingKernelOp, Op):
    """Shared construction: ``max_k`` (the largest K accepted) is part of the props."""

    __props__ = ("max_k",)

    def __init__(self, max_k=TOP_K_MAX_K):
        self.max_k = int(max_k)

    def _inputs(self, L, orders, weights=None):
        return _core_inputs(L, orders, weights)

    def _kernel(self, L, orders, weights, want_grad):
        return _run(L, orders, weights, want_grad)

    @staticmethod
    def _loglik_graph(x, orders):
        return _loglik(x, orders)

    @staticmethod
    def _sum_and_grad_graph(x, orders, weights):
        return _sum_and_grad(x, orders, weights)

    def _check_runtime(self, L, orders, weights=None):
        M, Q = L.shape
        check_top_k_size(M, Q - 1)
        if orders.shape[-1] != M:
            raise ValueError(f"orders have {orders.shape[-1]} columns but the logits have {M} "
                             "rows (items)")
        if weights is not None and weights.shape[-1] != orders.shape[0]:
            raise ValueError(f"{weights.shape[-1]} counts for {orders.shape[0]} orders")


class TopKLoglik(ValuesOpMixin, _TopKOp):
    """Core Op: per-ballot ``log p`` for logits (M, K + 1) and orders (n, M) -> (n,)."""

    gufunc_signature = "(m,q),(n,m)->(n)"


class TopKLoglikSumAndGrad(SumAndGradOpMixin, _TopKOp):
    """Core Op: ``(sum_n w_n log p_n (), its gradient (M, K + 1))`` from one kernel run."""

    gufunc_signature = "(m,q),(n,m),(n)->(),(m,q)"


class TopKLoglikSum(SumOpMixin, _TopKOp):
    """Value only, ``sum_n w_n log p_n`` (): used by the rewrite when no output needs the
    gradient. Its pullback is the gradient output of the two-output Op."""

    gufunc_signature = "(m,q),(n,m),(n)->()"


class TopKLoglikAndGrad(AndGradOpMixin, _TopKOp):
    """Core Op: per-ballot ``log p`` (n,) and the gradient (M, K + 1) of ``sum_n w_n log p_n``
    from one kernel run; created by ``local_fuse_top_k_loglik_and_grad``. No gradient."""

    gufunc_signature = "(m,q),(n,m),(n)->(n),(m,q)"


_loglik = EmptyBatchBlockwise(TopKLoglik())
_sum_and_grad = EmptyBatchBlockwise(TopKLoglikSumAndGrad())


# ----------------------------------------------------------------------------- the kernel

_F64_PTR = types.CPointer(types.float64)
_SIGNATURE = types.float64(_F64_PTR, types.intp, types.intp, types.CPointer(types.int64),
                           types.intp, _F64_PTR, _F64_PTR, _F64_PTR, types.intc)
_VERSION = code_version(__file__)  # numba cache version (see pm_perm.kernels._version)
_EXTERN = extern_kernel("pm_perm_top_k_kernel", _SIGNATURE, make_top_k_kernel(_VERSION))


def _run(L, orders, weights, want_grad):
    """``(total, values (n,), gradient (M, K + 1) or None)`` of one core input in Python."""
    L = np.ascontiguousarray(L, dtype=np.float64)
    orders = np.ascontiguousarray(orders, dtype=np.int64)
    (M, Q), n = L.shape, orders.shape[0]
    weights = np.zeros(n) if weights is None else np.ascontiguousarray(weights, dtype=np.float64)
    values = np.empty(n)
    grad = np.empty((M, Q) if want_grad else (0, 0))
    total = _EXTERN()(L, M, Q, orders, n, weights, values, grad, int(want_grad))
    return total, values, grad if want_grad else None


class _ShapeError(StatusError):
    """The numba implementations' shape errors (see :class:`StatusError`)."""

    messages = (
        (ValueError, ""),
        (ValueError, "top-k logits must be (M, K + 1) with 1 <= K <= M and K within the exact "
                     "limit TOP_K_MAX_K, and orders (n, M)"),
        (ValueError, "counts must have one entry per order"),
        (ValueError, "weights must have one entry per order"),
    )


def _kernel_numba(max_k, weights_name):
    """``run(L, orders, weights, values, grad, want_grad) -> total`` in compiled code: checks
    the shapes (raising ``ValueError``), then calls the C kernel."""
    kernel = _EXTERN().external
    weights_error = 2 if weights_name == "counts" else 3

    @numba_basic.numba_njit
    def run(L, orders, weights, values, grad, want_grad):
        M, Q = L.shape
        if Q < 2 or Q - 1 > M or Q - 1 > max_k or orders.shape[1] != M:
            raise _ShapeError(1)
        if weights.shape[0] != orders.shape[0]:
            raise _ShapeError(weights_error)
        Lc, oc = np.ascontiguousarray(L), np.ascontiguousarray(orders)
        wc = np.ascontiguousarray(weights)
        v, g = c_contiguous_out(values), c_contiguous_out(grad)
        total = kernel(Lc.ctypes, M, Q, oc.ctypes, orders.shape[0], wc.ctypes, v.ctypes,
                       g.ctypes, want_grad)
        copy_back(values, v)
        if want_grad:
            copy_back(grad, g)
        return total

    return run


_OPS = (TopKLoglik, TopKLoglikSumAndGrad, TopKLoglikSum, TopKLoglikAndGrad)
register_ranking_numba(_OPS, _kernel_numba, "max_k", _VERSION)


# ----------------------------------------------------------------------------- graph rewrites


local_top_k_sum_value_only = register_value_only_rewrite(
    "local_top_k_sum_value_only", TopKLoglikSumAndGrad,
    lambda core: EmptyBatchBlockwise(TopKLoglikSum(core.max_k)), "gradient")


local_fuse_top_k_loglik_and_grad = register_fuse_rewrite(
    "local_fuse_top_k_loglik_and_grad", _OPS, "max_k",
    """One kernel run instead of two for per-ballot values + a gradient weighted independently
    of them (``sum(weights * loglik)`` with data weights, as in ``TopKRanking``'s logp): replace
    ``TopKLoglik(L, orders)`` and the gradient output of ``TopKLoglikSumAndGrad(L, orders, g)``
    by one ``TopKLoglikAndGrad`` node. Only for one (M, K + 1) matrix and unbatched weights.""")


# ----------------------------------------------------------------------------- public helpers


def top_k_loglik(logits, orders):
    """Symbolic ``log p(ballot n)`` of the top-k model -> (..., n).

    Parameters
    ----------
    logits : tensor_like of float, shape (..., M, K + 1)
        Columns ``0..K-1``: the logit of each item at each position; the last column: the logit
        of each item being not in the top K (:mod:`pm_perm.kernels.top_k`).
    orders : tensor_like of int, shape (n, M)
        Rank-form ballots (:class:`pm_perm.PartialRanking`'s convention) ranking at most K
        items; longer or invalid rows get ``-inf``.

    Notes
    -----
    Differentiable in ``logits``. O(M^3 + M K 2^K) per logits matrix, plus O(M) per ballot of
    length K and O(M r 2^r) per ballot leaving r = K - k positions to its unranked items, or,
    for a length held by many ballots, O(M^2 r 2^r) once and O(2^r) to O(k 3^r) per ballot
    (:mod:`pm_perm.kernels.top_k_ballots`).
    """
    return _loglik(logits, orders)


def top_k_loglik_sum(logits, orders, counts):
    """Symbolic ``sum_n counts[n] log p(ballot n)`` -> (...), value and gradient from one Op run.

    Parameters
    ----------
    logits : tensor_like of float, shape (..., M, K + 1)
    orders : tensor_like of int, shape (n, M)
        Distinct rank-form ballots.
    counts : tensor_like of float, shape (n,)
        Number of ballots per order (rows of weight 0 are skipped).
    """
    return _sum_and_grad(logits, orders, counts)[0]


# gradient graphs vectorise these core Ops into EmptyBatchBlockwise (pm_perm.ops._blockwise)
register_core_ops(TopKLoglik, TopKLoglikSumAndGrad, TopKLoglikSum, TopKLoglikAndGrad)
