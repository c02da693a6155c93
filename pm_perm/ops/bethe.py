"""PyTensor Ops for the Bethe approximation of the log-permanent (see pm_perm.kernels.bethe).

``bethe_log_permanent(W)`` (core signature ``(m,m)->()``) is a LOWER bound of
``log perm(exp W)`` (Gurvits), within ``M/2 log 2``; its gradient is the Bethe belief matrix
``bethe_marginals(W)`` (``(m,m)->(m,m)``), exact at the fixed point (envelope theorem), so
find_MAP / NUTS see a consistent value and gradient. Cost O(M^2) per fixed-point sweep; M up to
``BETHE_MAX_M``. Non-convergence raises instead of returning an unconverged value. Logits with
NaN, ``+inf`` or finite entries beyond ``LOGIT_ABS_MAX`` give NaN outputs, and logits that
admit no permutation (every one uses a ``-inf`` entry) give ``-inf`` and zero beliefs, as the
exact permanent Ops do (PyMC's parameter checks then refuse the point).
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from numba import types
from pytensor.gradient import DisconnectedType, grad_not_implemented
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.link.numba.dispatch import basic as numba_basic
from pytensor.link.numba.dispatch.basic import register_funcify_default_op_cache_key

from pm_perm.kernels._checks import finite_or_minus_inf
from pm_perm.kernels._version import code_version
from pm_perm.kernels.bethe import (
    BETHE_MAX_M,
    BETHE_NO_PERMUTATION,
    BETHE_NOT_CONVERGED,
    BetheConvergenceError,
    bethe_solve,
    make_bethe_kernel,
)
from pm_perm.ops._blockwise import EmptyBatchBlockwise, register_core_ops
from pm_perm.ops.extern import StatusError, c_contiguous_out, copy_back, extern_kernel

__all__ = [
    "BetheLogPermanent",
    "BetheLogPermanentAndMarginals",
    "BetheMarginals",
    "bethe_log_permanent",
    "bethe_marginals",
]


def _value_and_beliefs(W, tol, max_iter):
    """Python-mode outputs of one matrix: ``(log perm_B as a 0-d array, beliefs)``; NaN for NaN,
    ``+inf`` or finite logits beyond ``LOGIT_ABS_MAX``, ``-inf`` and zero beliefs for logits that
    admit no permutation (the numba path does the same)."""
    W = np.ascontiguousarray(W)
    if not finite_or_minus_inf(W):
        return np.asarray(np.nan), np.full(W.shape, np.nan)
    v, g = bethe_solve(W, tol, max_iter, strict=False)
    return np.asarray(v), g


def _as_logits(W):
    W = pt.as_tensor_variable(W)
    if W.type.ndim != 2:
        raise TypeError(f"core Bethe Op expects a (M, M) matrix; got ndim={W.type.ndim}")
    if W.type.dtype not in pt.type.float_dtypes:
        raise TypeError(f"logits must be floating point; got dtype {W.type.dtype}")
    return pt.cast(W, "float64")


class _BetheOp(Op):
    """Shared construction: the fixed point's ``tol`` and ``max_iter`` are the props (and so part
    of the numba cache key)."""

    __props__ = ("tol", "max_iter")

    def __init__(self, tol=1e-9, max_iter=100_000):
        self.tol = float(tol)
        self.max_iter = int(max_iter)


class BetheMarginals(_BetheOp):
    """Bethe beliefs (approximate P(y[i] = j)) of logits W (M, M)."""

    gufunc_signature = "(m,m)->(m,m)"

    def make_node(self, W):
        W = _as_logits(W)
        return Apply(self, [W], [pt.tensor(dtype="float64", shape=W.type.shape)])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = _value_and_beliefs(inputs[0], self.tol, self.max_iter)[1]

    def infer_shape(self, node, input_shapes):
        return [input_shapes[0]]

    def pullback(self, inputs, outputs, cotangents):
        return [grad_not_implemented(self, 0, inputs[0], "Hessian of the Bethe free energy")]


class BetheLogPermanent(_BetheOp):
    """Bethe log-permanent (a lower bound of log perm(exp W)) of logits W (M, M)."""

    gufunc_signature = "(m,m)->()"

    def make_node(self, W):
        W = _as_logits(W)
        return Apply(self, [W], [pt.tensor(dtype="float64", shape=())])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = _value_and_beliefs(inputs[0], self.tol, self.max_iter)[0]

    def infer_shape(self, node, input_shapes):
        return [()]

    def pullback(self, inputs, outputs, cotangents):
        (W,) = inputs
        (g,) = cotangents
        marg = EmptyBatchBlockwise(BetheMarginals(self.tol, self.max_iter))(W)
        return [g[..., None, None] * marg]


class BetheLogPermanentAndMarginals(_BetheOp):
    """Both outputs of one Bethe run: ``(log perm_B (), beliefs (M, M))``.

    :func:`bethe_log_permanent` uses this Op so that a graph needing the value and its gradient
    (logp + dlogp in find_MAP / NUTS) runs the fixed point once, not twice: the pullback of the
    value output is the (already computed) second output.
    """

    gufunc_signature = "(m,m)->(),(m,m)"

    def make_node(self, W):
        W = _as_logits(W)
        return Apply(
            self,
            [W],
            [pt.tensor(dtype="float64", shape=()), pt.tensor(dtype="float64", shape=W.type.shape)],
        )

    def perform(self, node, inputs, output_storage):
        v, g = _value_and_beliefs(inputs[0], self.tol, self.max_iter)
        output_storage[0][0] = v
        output_storage[1][0] = g

    def infer_shape(self, node, input_shapes):
        return [(), input_shapes[0]]

    def pullback(self, inputs, outputs, cotangents):
        (W,) = inputs
        g_v, g_m = cotangents
        if not isinstance(g_m.type, DisconnectedType):
            return [grad_not_implemented(self, 0, W, "Hessian of the Bethe free energy")]
        if isinstance(g_v.type, DisconnectedType):
            return [pt.zeros_like(W)]
        return [g_v[..., None, None] * outputs[1]]


_bethe_both = EmptyBatchBlockwise(BetheLogPermanentAndMarginals())


def bethe_log_permanent(W):
    """Bethe log-permanent of logits ``W`` (..., M, M) -> (...): a lower bound of log perm.

    Gradient = Bethe beliefs, taken from the same fixed-point run (one Op evaluation).
    """
    return _bethe_both(W)[0]


bethe_marginals = EmptyBatchBlockwise(BetheMarginals())

# ----------------------------------------------------------------------------- numba
# The compiled graphs call the Bethe kernel through a C symbol (see pm_perm.ops.extern): its code
# (BP, vertex certificate, Newton, CCCP) is compiled once per numba cache, not again inside every
# PyTensor function that uses the Ops. ``perform`` runs pm_perm.kernels.bethe.bethe_solve in Python.

_F64_PTR = types.CPointer(types.float64)
_SIGNATURE = types.int64(_F64_PTR, types.intp, types.float64, types.int64, _F64_PTR, _F64_PTR)
_VERSION = code_version(__file__)  # numba cache version (see pm_perm.kernels._version)
_EXTERN = extern_kernel("pm_perm_bethe_kernel", _SIGNATURE, make_bethe_kernel(_VERSION))


class _BetheError(StatusError):
    """The numba implementations' errors by status (see :class:`StatusError`)."""

    messages = (
        (ValueError, ""),
        (ValueError, ""),  # BETHE_NO_PERMUTATION: not an error (-inf, zero beliefs)
        (BetheConvergenceError,
         "Bethe fixed point did not converge within max_iter sweeps to tol: the weights are "
         "very spread out; increase max_iter or loosen tol."),
        (ValueError, "Bethe approximation: M exceeds BETHE_MAX_M"),
        (ValueError, "logits must be square (..., M, M); got {} x {}"),
    )


_TOO_LARGE, _NOT_SQUARE = 3, 4
assert BETHE_NO_PERMUTATION == 1 and BETHE_NOT_CONVERGED == 2  # the first statuses above


def _bethe_numba(tol, max_iter):
    """``bethe(W, value, beliefs)`` in compiled code: writes ``log perm_B`` to the 0-d array
    ``value`` and the beliefs to ``beliefs`` (M, M); NaN for NaN, ``+inf`` or finite logits
    beyond ``LOGIT_ABS_MAX``, ``-inf`` and zeros for logits that admit no permutation; raises
    like :func:`pm_perm.kernels.bethe.bethe_solve` otherwise."""
    kernel = _EXTERN().external

    @numba_basic.numba_njit
    def bethe(W, value, beliefs):
        M = W.shape[0]
        if W.shape[1] != M:
            raise _BetheError(_NOT_SQUARE, M, W.shape[1])
        if M > BETHE_MAX_M:
            raise _BetheError(_TOO_LARGE)
        Wc = np.ascontiguousarray(W)
        v = np.empty(1)
        g = c_contiguous_out(beliefs)
        status = kernel(Wc.ctypes, M, tol, max_iter, v.ctypes, g.ctypes)
        if status != 0 and status != BETHE_NO_PERMUTATION:
            raise _BetheError(status)
        value[()] = v[0]
        copy_back(beliefs, g)

    return bethe


# The numba implementations write into the output buffers PyTensor's Blockwise loop hands them
# (``handles_out``, see pm_perm.ops.extern); called outside a Blockwise they allocate.


@register_funcify_default_op_cache_key(BetheLogPermanent)
def _numba_bethe_log_permanent(op, node, **kwargs):
    bethe = _bethe_numba(op.tol, op.max_iter)

    @numba_basic.numba_njit
    def bethe_lp_numba(W, out=None):
        if out is None:
            out = np.empty(())
        bethe(W, out, np.empty(W.shape))
        return out

    bethe_lp_numba.handles_out = True
    return bethe_lp_numba, _VERSION


@register_funcify_default_op_cache_key(BetheMarginals)
def _numba_bethe_marginals(op, node, **kwargs):
    bethe = _bethe_numba(op.tol, op.max_iter)

    @numba_basic.numba_njit
    def bethe_marg_numba(W, out=None):
        if out is None:
            out = np.empty(W.shape)
        bethe(W, np.empty(()), out)
        return out

    bethe_marg_numba.handles_out = True
    return bethe_marg_numba, _VERSION


@register_funcify_default_op_cache_key(BetheLogPermanentAndMarginals)
def _numba_bethe_both(op, node, **kwargs):
    bethe = _bethe_numba(op.tol, op.max_iter)

    @numba_basic.numba_njit
    def bethe_both_numba(W, out_v=None, out_g=None):
        if out_v is None:
            out_v, out_g = np.empty(()), np.empty(W.shape)
        bethe(W, out_v, out_g)
        return out_v, out_g

    bethe_both_numba.handles_out = True
    return bethe_both_numba, _VERSION


# gradient graphs vectorise these core Ops into EmptyBatchBlockwise (pm_perm.ops._blockwise)
register_core_ops(BetheMarginals, BetheLogPermanent, BetheLogPermanentAndMarginals)
