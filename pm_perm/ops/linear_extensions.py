"""PyTensor Ops for the exact likelihood of arbitrary partial orders (sets of pairwise
preferences, one per assessor); kernels in :mod:`pm_perm.kernels.linear_extensions`.

* ``linear_extension_loglik(params, prefs, family)``: ``(M,) or (M, M), (n, P, 2) -> (n,)``,
  per assessor ``log sum over the linear extensions`` of its preferences: the log-probability
  under Plackett-Luce (utilities (M,)), the UNNORMALISED log-sum under the permutation
  exponential family (logits (M, M); subtract ``log_permanent``).

Its gradient is one more Op (``LinearExtensionLoglikGrad``: a forward and an adjoint sweep per
assessor). The parameters are one vector / matrix for all assessors (no batch dimensions). Bad
preferences (an item id out of range, a pair ``(i, i)``, a cycle, a DP beyond the budget) raise
``ValueError`` naming the assessor and the fix, in Python (``perform``) and in compiled numba
graphs alike.
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from numba import types
from pytensor.gradient import disconnected_type, grad_not_implemented
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.link.numba.dispatch import basic as numba_basic
from pytensor.link.numba.dispatch.basic import register_funcify_default_op_cache_key

from pm_perm.kernels._version import code_version
from pm_perm.kernels.linear_extensions import (
    EXP_FAMILY,
    LINEAR_EXTENSION_ERRORS,
    MAX_CELLS,
    PLACKETT_LUCE,
    check_preferences,
    make_linear_extensions_kernel,
)
from pm_perm.ops.extern import StatusError, c_contiguous_out, copy_back, extern_kernel

__all__ = [
    "LinearExtensionLoglik",
    "LinearExtensionLoglikGrad",
    "linear_extension_loglik",
]

_F64 = types.CPointer(types.float64)
_I64 = types.CPointer(types.int64)
_SIGNATURE = types.float64(_F64, types.intp, types.intp, types.intc, _I64, types.intp,
                           types.intp, _F64, _F64, _F64, types.intc, types.int64, _I64)
_VERSION = code_version(__file__)  # numba cache version (see pm_perm.kernels._version)
_EXTERN = extern_kernel("pm_perm_linear_extensions_kernel", _SIGNATURE,
                        make_linear_extensions_kernel(_VERSION))


class _LinearExtensionError(StatusError):
    """The kernel's statuses (see :class:`StatusError`), then a shape error of the wrappers."""

    messages = (*((ValueError, m) for m in LINEAR_EXTENSION_ERRORS),
                (ValueError, "weights must have one entry per assessor"))


_WEIGHTS_STATUS = len(LINEAR_EXTENSION_ERRORS)


def _run(params, family, prefs, weights, want_grad, max_cells):
    """``(total, values (n,), grad or None)`` in Python through the C kernel; raises
    ``ValueError`` for bad preferences (a cycle: the whole cycle named)."""
    P = np.ascontiguousarray(params, dtype=np.float64)
    P2 = P.reshape(P.shape[0], -1)
    prefs = np.ascontiguousarray(prefs, dtype=np.int64)
    n, p = prefs.shape[0], prefs.shape[1]
    w = np.zeros(n) if weights is None else np.ascontiguousarray(weights, dtype=np.float64)
    if w.shape[0] != n:
        raise ValueError(_LinearExtensionError.messages[_WEIGHTS_STATUS][1])
    values = np.empty(n)
    grad = np.empty(P2.shape if want_grad else (0, 0))
    info = np.zeros(5, dtype=np.int64)
    total = _EXTERN()(P2, P2.shape[0], P2.shape[1], family, prefs, n, p, w, values, grad,
                      int(want_grad), max_cells, info)
    if info[0] == 4:  # name the whole cycle
        r = int(info[1])
        check_preferences(prefs[r:r + 1], P2.shape[0], max_cells=max_cells, first=r)
    if info[0] != 0:
        raise ValueError(LINEAR_EXTENSION_ERRORS[info[0]].format(*info[1:]))
    return total, values, grad.reshape(P.shape) if want_grad else None


class _LinearExtensionOp(Op):
    """Shared construction: the family (``PLACKETT_LUCE`` / ``EXP_FAMILY``) and the budget per
    assessor (``max_cells``) are the props."""

    __props__ = ("family", "max_cells")

    def __init__(self, family=PLACKETT_LUCE, max_cells=MAX_CELLS):
        if family not in (PLACKETT_LUCE, EXP_FAMILY):
            raise ValueError(f"unknown family {family!r}")
        self.family = int(family)
        self.max_cells = int(max_cells)

    def _inputs(self, params, prefs, weights=None):
        params = pt.as_tensor_variable(params)
        prefs = pt.as_tensor_variable(prefs)
        want = 1 if self.family == PLACKETT_LUCE else 2
        if params.type.ndim != want:
            raise TypeError(f"{'utilities (M,)' if want == 1 else 'logits (M, M)'} expected; "
                            f"got ndim {params.type.ndim} (no batch dimensions)")
        if prefs.type.ndim != 3 or prefs.type.dtype not in pt.type.int_dtypes:
            raise TypeError("preferences must be integers (n, P, 2)")
        inputs = [pt.cast(params, "float64"), pt.cast(prefs, "int64")]
        if weights is not None:
            inputs.append(pt.cast(pt.as_tensor_variable(weights), "float64"))
        return inputs

    def _check_runtime(self, params, prefs):
        if self.family == EXP_FAMILY and params.shape[0] != params.shape[1]:
            raise ValueError(f"logits must be square (M, M); got shape {params.shape}")
        if prefs.shape[-1] != 2:
            raise ValueError(f"preferences must be (n, P, 2) pairs; got shape {prefs.shape}")


class LinearExtensionLoglik(_LinearExtensionOp):
    """Core Op: per-assessor ``log sum over linear extensions`` (n,) of params and preferences
    (n, P, 2)."""

    def make_node(self, params, prefs):
        inputs = self._inputs(params, prefs)
        return Apply(self, inputs, [pt.tensor(dtype="float64", shape=(inputs[1].type.shape[0],))])

    def perform(self, node, inputs, output_storage):
        params, prefs = inputs
        self._check_runtime(params, prefs)
        output_storage[0][0] = _run(params, self.family, prefs, None, False, self.max_cells)[1]

    def infer_shape(self, node, input_shapes):
        return [(input_shapes[1][0],)]

    def connection_pattern(self, node):
        return [[True], [False]]

    def pullback(self, inputs, outputs, cotangents):
        params, prefs = inputs
        (g,) = cotangents
        grad = LinearExtensionLoglikGrad(self.family, self.max_cells)(params, prefs, g)
        return [grad, disconnected_type()]


class LinearExtensionLoglikGrad(_LinearExtensionOp):
    """Core Op: the gradient in params of ``sum_n weights[n] loglik[n]`` (params' shape)."""

    def make_node(self, params, prefs, weights):
        inputs = self._inputs(params, prefs, weights)
        return Apply(self, inputs, [inputs[0].type()])

    def perform(self, node, inputs, output_storage):
        params, prefs, weights = inputs
        self._check_runtime(params, prefs)
        output_storage[0][0] = _run(params, self.family, prefs, weights, True,
                                    self.max_cells)[2]

    def infer_shape(self, node, input_shapes):
        return [input_shapes[0]]

    def pullback(self, inputs, outputs, cotangents):
        return [grad_not_implemented(self, i, x, "second derivatives of the linear-extension "
                                     "likelihood") for i, x in enumerate(inputs)]


def _kernel_numba(family, max_cells):
    kernel = _EXTERN().external

    @numba_basic.numba_njit
    def run(params, prefs, weights, values, grad, want_grad):
        m = params.shape[0]
        cols = 1 if params.ndim == 1 else params.shape[-1]
        n = prefs.shape[0]
        if weights.shape[0] != n:
            raise _LinearExtensionError(_WEIGHTS_STATUS)
        pc, qc, wc = (np.ascontiguousarray(params), np.ascontiguousarray(prefs),
                      np.ascontiguousarray(weights))
        info = np.zeros(5, dtype=np.int64)
        total = kernel(pc.ctypes, m, cols, family, qc.ctypes, n, prefs.shape[1], wc.ctypes,
                       values.ctypes, grad.ctypes, want_grad, max_cells, info.ctypes)
        if info[0] != 0:
            raise _LinearExtensionError(info[0], info[1], info[2], info[3], info[4])
        return total

    return run


@register_funcify_default_op_cache_key(LinearExtensionLoglik)
def _numba_linear_extension_loglik(op, node, **kwargs):
    run = _kernel_numba(op.family, op.max_cells)

    @numba_basic.numba_njit
    def linear_extension_loglik_numba(params, prefs):
        n = prefs.shape[0]
        out = np.empty(n)
        run(params, prefs, np.zeros(n), out, np.empty(1), 0)
        return out

    return linear_extension_loglik_numba, _VERSION


@register_funcify_default_op_cache_key(LinearExtensionLoglikGrad)
def _numba_linear_extension_loglik_grad(op, node, **kwargs):
    run = _kernel_numba(op.family, op.max_cells)

    @numba_basic.numba_njit
    def linear_extension_loglik_grad_numba(params, prefs, weights):
        out = np.empty(params.shape)
        g = c_contiguous_out(out)
        run(params, prefs, weights, np.empty(prefs.shape[0]), g, 1)
        return copy_back(out, g)

    return linear_extension_loglik_grad_numba, _VERSION


def linear_extension_loglik(params, prefs, family=PLACKETT_LUCE, max_cells=MAX_CELLS):
    """Symbolic per-assessor ``log sum over linear extensions`` (n,) (see the module docstring).

    Parameters
    ----------
    params : tensor_like of float
        Utilities (M,) (``family=PLACKETT_LUCE``) or logits (M, M) (``EXP_FAMILY``).
    prefs : tensor_like of int, shape (n, P, 2)
        Per assessor, ``(preferred, other)`` pairs, ``(-1, -1)`` padding.
    family : int
    max_cells : int
        Budget of the DP per assessor (#ideals x items).
    """
    return LinearExtensionLoglik(family, max_cells)(params, prefs)
