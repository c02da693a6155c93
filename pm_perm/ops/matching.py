"""PyTensor Op for the max-weight perfect matching (the mode of ``PermutationExpFamily``).

Used by ``support_point`` so that PyMC's initial point is the mode; numba-native (the Hungarian
kernel of :mod:`pm_perm.kernels.assignment`), no gradient (the mode is piecewise constant).
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.link.numba.dispatch import basic as numba_basic
from pytensor.link.numba.dispatch.basic import register_funcify_default_op_cache_key
from pytensor.tensor.blockwise import Blockwise

from pm_perm._numba import njit
from pm_perm.kernels._checks import LOGIT_ABS_MAX
from pm_perm.kernels._version import code_version
from pm_perm.kernels.assignment import max_weight_assignment_core

_VERSION = code_version(__file__)  # numba cache version (see pm_perm.kernels._version)

__all__ = ["MaxWeightMatching", "max_weight_matching"]


@njit(cache=True)
def _matching(W):
    M = W.shape[0]
    for i in range(M):
        for j in range(M):
            if not (abs(W[i, j]) <= LOGIT_ABS_MAX or W[i, j] == -np.inf):
                raise ValueError(
                    "logits contain NaN, +inf or a finite value beyond 1e300: "
                    "no max-weight matching"
                )
    y, _, _, feasible = max_weight_assignment_core(W)
    if not feasible:
        raise ValueError("logits have no perfect matching avoiding their -inf entries")
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
        output_storage[0][0] = _matching(np.ascontiguousarray(inputs[0]))

    def infer_shape(self, node, input_shapes):
        return [(input_shapes[0][0],)]

    def pullback(self, inputs, outputs, cotangents):
        return [pt.zeros_like(inputs[0])]


@register_funcify_default_op_cache_key(MaxWeightMatching)
def _numba_max_weight_matching(op, node, **kwargs):
    @numba_basic.numba_njit
    def max_weight_matching_numba(W):
        return _matching(np.ascontiguousarray(W))

    return max_weight_matching_numba, _VERSION


def max_weight_matching(W):
    """Symbolic max-weight matching of logits ``W`` (..., M, M) -> (..., M) int64."""
    return Blockwise(MaxWeightMatching())(W)
