"""PyTensor Op for the max-weight perfect matching (the mode of ``PermutationExpFamily``).

Used by ``support_point`` so that PyMC's initial point is the mode; numba-native (the Hungarian
kernel of :mod:`pm_perm.kernels.assignment`), no gradient (the mode is piecewise constant).
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from numba import types
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.link.numba.dispatch import basic as numba_basic
from pytensor.link.numba.dispatch.basic import register_funcify_default_op_cache_key

from pm_perm.kernels._version import code_version
from pm_perm.kernels.assignment import MATCHING_ERRORS, make_matching_kernel
from pm_perm.ops._blockwise import EmptyBatchBlockwise, register_core_ops
from pm_perm.ops.extern import (
    StatusError,
    c_contiguous_out,
    copy_back,
    extern_kernel,
    value_errors,
)

__all__ = ["MaxWeightMatching", "checked_matching", "max_weight_matching"]


# The compiled graphs (e.g. PyMC's initial point) call the Hungarian kernel through a C symbol
# (see pm_perm.ops.extern); ``perform`` calls the same compiled kernel.
_VERSION = code_version(__file__)  # numba cache version (see pm_perm.kernels._version)
_EXTERN = extern_kernel(
    "pm_perm_matching_kernel",
    types.int64(types.CPointer(types.float64), types.intp, types.CPointer(types.int64)),
    make_matching_kernel(_VERSION),
)


class _MatchingError(StatusError):
    """Errors of the matching (see :class:`StatusError`): the kernel's, then the square check."""

    messages = value_errors([*MATCHING_ERRORS, "logits must be a square (M, M) matrix"])


_NOT_SQUARE = len(MATCHING_ERRORS)


def checked_matching(W):
    """The max-weight matching of one core matrix (M, M) by the compiled kernel, in Python;
    raises ``ValueError`` for a matrix that is not square or admits no finite matching."""
    W = np.ascontiguousarray(W, dtype=np.float64)
    if W.shape[0] != W.shape[1]:
        raise _MatchingError(_NOT_SQUARE)
    y = np.empty(W.shape[0], dtype=np.int64)
    status = _EXTERN()(W, W.shape[0], y)
    if status != 0:
        raise _MatchingError(status)
    return y


class MaxWeightMatching(Op):
    """Core Op: ``W`` (M, M) -> ``y`` (M,) int64, ``y[i]`` the column matched to row ``i``."""

    __props__ = ()
    gufunc_signature = "(m,m)->(m)"

    def make_node(self, W):
        W = pt.as_tensor_variable(W)
        if W.type.ndim != 2 or W.type.dtype not in pt.type.float_dtypes:
            raise TypeError(f"expects a float (M, M) matrix; got {W.type}")
        W = pt.cast(W, "float64")
        return Apply(self, [W], [pt.tensor(dtype="int64", shape=(W.type.shape[0],))])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = checked_matching(np.ascontiguousarray(inputs[0]))

    def infer_shape(self, node, input_shapes):
        return [(input_shapes[0][0],)]

    def pullback(self, inputs, outputs, cotangents):
        return [pt.zeros_like(inputs[0])]


@register_funcify_default_op_cache_key(MaxWeightMatching)
def _numba_max_weight_matching(op, node, **kwargs):
    kernel = _EXTERN().external

    @numba_basic.numba_njit
    def max_weight_matching_numba(W, out=None):
        if W.shape[0] != W.shape[1]:
            raise _MatchingError(_NOT_SQUARE)
        Wc = np.ascontiguousarray(W)
        if out is None:
            out = np.empty(Wc.shape[0], dtype=np.int64)
        y = c_contiguous_out(out)
        status = kernel(Wc.ctypes, Wc.shape[0], y.ctypes)
        if status != 0:
            raise _MatchingError(status)
        return copy_back(out, y)

    max_weight_matching_numba.handles_out = True  # see pm_perm.ops.extern
    return max_weight_matching_numba, _VERSION


def max_weight_matching(W):
    """Symbolic max-weight matching of logits ``W`` (..., M, M) -> (..., M) int64."""
    return EmptyBatchBlockwise(MaxWeightMatching())(W)


# gradient graphs vectorise these core Ops into EmptyBatchBlockwise (pm_perm.ops._blockwise)
register_core_ops(MaxWeightMatching)
