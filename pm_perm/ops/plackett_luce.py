"""PyTensor Ops for the Plackett-Luce log-likelihood of rank-form orders.

* ``plackett_luce_loglik(u, orders)``: ``(..., M), (n, M) -> (..., n)``, log PL probability of each
  order (top-k; ties by the exact block rule of :mod:`pm_perm.kernels.plackett_luce`); its
  pullback is the vector-Jacobian product Op :class:`PlackettLuceLoglikVJP` (one O(n M) pass).
  A graph holding both (logp and dlogp in find_MAP / NUTS) has them fused by the ``specialize``
  rewrite ``fuse_plackett_luce_loglik_and_vjp`` into one :class:`PlackettLuceLoglikAndVJP`
  node: one pass for value and gradient.
* ``plackett_luce_loglik_sum(u, orders, counts)``: ``(..., M), (n, M), (n,) -> (...)``,
  ``sum_n counts[n] loglik[n]``; one Op returns the value and its gradient from the same pass
  (the gradient output is what its pullback uses), so logp + dlogp cost one pass.

Both are ``Blockwise`` wrappers of core Ops with numba implementations (utilities may carry
leading batch dimensions, e.g. (K, M) for mixtures; the orders are shared). Orders are integer
data without gradient; invalid rows give ``-inf``; NaN / inf utilities give NaN (the
distribution's parameter check turns that into an error). Cost O(n M) per utilities vector.
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from numba import types
from pytensor.gradient import DisconnectedType, disconnected_type, grad_not_implemented
from pytensor.graph.basic import Apply, Constant, equal_computations
from pytensor.graph.op import Op
from pytensor.graph.rewriting.basic import node_rewriter
from pytensor.graph.traversal import ancestors
from pytensor.link.numba.dispatch import basic as numba_basic
from pytensor.link.numba.dispatch.basic import register_funcify_default_op_cache_key
from pytensor.tensor.blockwise import Blockwise
from pytensor.tensor.rewriting.basic import register_specialize

from pm_perm.kernels._version import code_version
from pm_perm.kernels.plackett_luce import (
    PL_TIE_BLOCK_TOO_LARGE,
    TIE_BLOCK_MESSAGE,
    make_plackett_luce_kernel,
)
from pm_perm.kernels.rank_form import validate_orders
from pm_perm.ops._blockwise import EmptyBatchBlockwise, core_op_of, register_core_ops
from pm_perm.ops._ranking import RankingKernelOp
from pm_perm.ops.extern import StatusError, c_contiguous_out, copy_back, extern_kernel

__all__ = [
    "PlackettLuceLoglik",
    "PlackettLuceLoglikAndVJP",
    "PlackettLuceLoglikSum",
    "PlackettLuceLoglikVJP",
    "plackett_luce_loglik",
    "plackett_luce_loglik_sum",
]


def _core_inputs(u, orders, *weights):
    u = pt.as_tensor_variable(u)
    orders = pt.as_tensor_variable(orders)
    if u.type.ndim != 1 or orders.type.ndim != 2:
        raise TypeError(f"core Plackett-Luce Op expects utilities (M,) and orders (n, M); got "
                        f"ndim {u.type.ndim} and {orders.type.ndim}")
    if orders.type.dtype not in pt.type.int_dtypes:
        raise TypeError(f"orders must be an integer tensor (rank form); got {orders.type.dtype}")
    rest = [pt.cast(pt.as_tensor_variable(w), "float64") for w in weights]
    for w in rest:
        if w.type.ndim != 1:
            raise TypeError(f"per-order weights must be (n,); got ndim {w.type.ndim}")
    return [pt.cast(u, "float64"), pt.cast(orders, "int64"), *rest]


def _check_runtime(u, orders, g=None):
    if orders.shape[1] != u.shape[0]:
        raise ValueError(f"orders have {orders.shape[1]} items but utilities have {u.shape[0]}")
    if g is not None and g.shape[0] != orders.shape[0]:
        raise ValueError(f"{g.shape[0]} weights for {orders.shape[0]} orders")


def _run(u, orders, g, want_grad):
    """``(total, values (n,), grad (M,))`` of one core input in Python, by the C kernel."""
    u = np.ascontiguousarray(u, dtype=np.float64)
    orders = np.ascontiguousarray(orders, dtype=np.int64)
    n = orders.shape[0]
    g = np.zeros(n) if g is None else np.ascontiguousarray(g, dtype=np.float64)
    values, grad, total = np.empty(n), np.empty(u.shape[0]), np.empty(1)
    status = _EXTERN()(u, u.shape[0], orders, n, g, values, grad, int(want_grad), total)
    if status != 0:
        raise ValueError(TIE_BLOCK_MESSAGE)
    return total[0], values, grad


class _PlackettLuceOp(RankingKernelOp, Op):
    """Shared construction of the four core Ops (no props): inputs, runtime checks, kernel."""

    __props__ = ()
    _inputs = staticmethod(_core_inputs)
    _check_runtime = staticmethod(_check_runtime)
    _kernel = staticmethod(_run)


class PlackettLuceLoglik(_PlackettLuceOp):
    """Core Op: utilities (M,), orders (n, M) -> log PL probability of each order (n,)."""

    gufunc_signature = "(m),(n,m)->(n)"
    output_names = ("values",)

    def make_node(self, u, orders):
        return self._apply(u, orders)

    def connection_pattern(self, node):
        return [[True], [False]]

    def pullback(self, inputs, outputs, cotangents):
        u, orders = inputs
        return [PlackettLuceLoglikVJP()(u, orders, cotangents[0]), disconnected_type()]


class PlackettLuceLoglikVJP(_PlackettLuceOp):
    """Core Op: ``sum_n g[n] d loglik[n] / du`` for utilities (M,), orders (n, M), g (n,)."""

    gufunc_signature = "(m),(n,m),(n)->(m)"
    output_names = ("grad",)

    def make_node(self, u, orders, g):
        return self._apply(u, orders, g)

    def connection_pattern(self, node):
        return [[True], [False], [True]]

    def pullback(self, inputs, outputs, cotangents):
        u, orders, g = inputs
        return [grad_not_implemented(self, 0, u, "second derivatives of the PL log-likelihood"),
                disconnected_type(),
                grad_not_implemented(self, 2, g, "gradient in the cotangent")]


class PlackettLuceLoglikAndVJP(_PlackettLuceOp):
    """Core Op: (loglik (n,), ``sum_n g[n] d loglik[n] / du`` (M,)) from one pass.

    Created by the ``fuse_plackett_luce_loglik_and_vjp`` rewrite; no gradient of its own.
    """

    gufunc_signature = "(m),(n,m),(n)->(n),(m)"
    output_names = ("values", "grad")

    def make_node(self, u, orders, g):
        return self._apply(u, orders, g)

    def pullback(self, inputs, outputs, cotangents):
        u, orders, g = inputs
        return [grad_not_implemented(self, 0, u, "gradients of the fused PL Op"),
                disconnected_type(),
                grad_not_implemented(self, 2, g, "gradients of the fused PL Op")]


class PlackettLuceLoglikSum(_PlackettLuceOp):
    """Core Op: (``sum_n counts[n] loglik[n]`` (), its gradient in the utilities (M,))."""

    gufunc_signature = "(m),(n,m),(n)->(),(m)"
    output_names = ("total", "grad")

    def make_node(self, u, orders, counts):
        return self._apply(u, orders, counts)

    def connection_pattern(self, node):
        return [[True, True], [False, False], [True, True]]

    def pullback(self, inputs, outputs, cotangents):
        u, orders, counts = inputs
        g_v, g_grad = cotangents
        if not isinstance(g_grad.type, DisconnectedType):
            gu = grad_not_implemented(self, 0, u, "second derivatives of the PL log-likelihood")
        elif isinstance(g_v.type, DisconnectedType):
            gu = pt.zeros_like(u)
        else:
            gu = g_v[..., None] * outputs[1]
        return [gu, disconnected_type(),
                grad_not_implemented(self, 2, counts, "gradient in the counts")]


# ----------------------------------------------------------------------------- numba


# The compiled graphs call the kernel through a C symbol (see pm_perm.ops.extern): compiled once
# per numba cache, not again inside every PyTensor function that uses the Ops. ``perform`` calls
# the same compiled kernel (``_run``).

_F64_PTR = types.CPointer(types.float64)
_SIGNATURE = types.int64(_F64_PTR, types.intp, types.CPointer(types.int64), types.intp, _F64_PTR,
                         _F64_PTR, _F64_PTR, types.intc, _F64_PTR)
_VERSION = code_version(__file__)  # numba cache version (see pm_perm.kernels._version)
_EXTERN = extern_kernel("pm_perm_plackett_luce_kernel", _SIGNATURE,
                        make_plackett_luce_kernel(_VERSION))


class _PlackettLuceError(StatusError):
    """The numba implementations' errors by status (see :class:`StatusError`)."""

    messages = (
        (ValueError, ""),
        (ValueError, TIE_BLOCK_MESSAGE),
        (ValueError, "Plackett-Luce: orders (n, M), utilities (M,) and weights (n,) disagree"),
    )


_DISAGREE = 2
assert PL_TIE_BLOCK_TOO_LARGE == 1  # its message is the first one above


def _run_numba():
    """``run(u, orders, g, want_grad, values, grad) -> total`` in compiled code: writes the
    per-order values (n,) and the gradient (M,) (filled even without ``want_grad``)."""
    kernel = _EXTERN().external

    @numba_basic.numba_njit
    def run(u, orders, g, want_grad, values, grad):
        M, n = u.shape[0], orders.shape[0]
        if orders.shape[1] != M or g.shape[0] != n:
            raise _PlackettLuceError(_DISAGREE)
        uc, oc, gc = np.ascontiguousarray(u), np.ascontiguousarray(orders), np.ascontiguousarray(g)
        v, gu, total = c_contiguous_out(values), c_contiguous_out(grad), np.empty(1)
        status = kernel(uc.ctypes, M, oc.ctypes, n, gc.ctypes, v.ctypes, gu.ctypes, want_grad,
                        total.ctypes)
        if status != 0:
            raise _PlackettLuceError(status)
        copy_back(values, v)
        copy_back(grad, gu)
        return total[0]

    return run


# The numba implementations write into the output buffers PyTensor's Blockwise loop hands them
# (``handles_out``, see pm_perm.ops.extern); called outside a Blockwise they allocate.


@register_funcify_default_op_cache_key(PlackettLuceLoglik)
def _numba_loglik(op, node, **kwargs):
    run = _run_numba()

    @numba_basic.numba_njit
    def loglik_numba(u, orders, out=None):
        n = orders.shape[0]
        if out is None:
            out = np.empty(n)
        run(u, orders, np.zeros(n), 0, out, np.empty(u.shape[0]))
        return out

    loglik_numba.handles_out = True
    return loglik_numba, _VERSION


@register_funcify_default_op_cache_key(PlackettLuceLoglikVJP)
def _numba_vjp(op, node, **kwargs):
    run = _run_numba()

    @numba_basic.numba_njit
    def vjp_numba(u, orders, g, out=None):
        if out is None:
            out = np.empty(u.shape[0])
        run(u, orders, g, 1, np.empty(orders.shape[0]), out)
        return out

    vjp_numba.handles_out = True
    return vjp_numba, _VERSION


@register_funcify_default_op_cache_key(PlackettLuceLoglikAndVJP)
def _numba_loglik_and_vjp(op, node, **kwargs):
    run = _run_numba()

    @numba_basic.numba_njit
    def loglik_and_vjp_numba(u, orders, g, out_v=None, out_g=None):
        if out_v is None:
            out_v, out_g = np.empty(orders.shape[0]), np.empty(u.shape[0])
        run(u, orders, g, 1, out_v, out_g)
        return out_v, out_g

    loglik_and_vjp_numba.handles_out = True
    return loglik_and_vjp_numba, _VERSION


@register_funcify_default_op_cache_key(PlackettLuceLoglikSum)
def _numba_sum(op, node, **kwargs):
    run = _run_numba()

    @numba_basic.numba_njit
    def sum_numba(u, orders, counts, out_v=None, out_g=None):
        if out_v is None:
            out_v, out_g = np.empty(()), np.empty(u.shape[0])
        out_v[()] = run(u, orders, counts, 1, np.empty(orders.shape[0]), out_g)
        return out_v, out_g

    sum_numba.handles_out = True
    return sum_numba, _VERSION


# ----------------------------------------------------------------------------- graph rewrite


@register_specialize
@node_rewriter([Blockwise, PlackettLuceLoglikVJP])
def fuse_plackett_luce_loglik_and_vjp(fgraph, node):
    """Replace ``PlackettLuceLoglik(u, o)`` and ``PlackettLuceLoglikVJP(u, o, g)`` by one node."""
    if core_op_of(node, PlackettLuceLoglikVJP) is None:
        return None
    u, orders, g = node.inputs[:3]  # (a Blockwise may carry output-shape inputs after them)
    for client, _ in fgraph.clients[u]:
        if (isinstance(client, Apply) and client.inputs[0] is u
                and core_op_of(client, PlackettLuceLoglik) is not None
                and equal_computations([client.inputs[1]], [orders])):
            if client.outputs[0] in ancestors([g]):
                # the cotangent depends on the values (a mixture's logsumexp over components):
                # fusing would make the graph cyclic, so the two nodes stay apart
                return None
            fused = PlackettLuceLoglikAndVJP()
            fused = fused if not isinstance(node.op, Blockwise) else EmptyBatchBlockwise(fused)
            values, grad = fused(u, orders, g)
            # the fused node's types may be more specific (orders folded to a constant after
            # the forward node was built), never less
            if not (client.outputs[0].type.is_super(values.type)
                    and node.outputs[0].type.is_super(grad.type)):
                return None
            return {node.outputs[0]: grad, client.outputs[0]: values}
    return None


# ----------------------------------------------------------------------------- public helpers


def _orders(orders, utilities):
    """Validate constant orders now (a clear error at graph build); symbolic ones at run time."""
    if isinstance(orders, pt.Variable) and not isinstance(orders, Constant):
        return orders
    data = orders.data if isinstance(orders, Constant) else orders
    u = pt.as_tensor_variable(utilities)
    M = u.type.shape[-1] if u.type.ndim else None
    return pt.as_tensor_variable(validate_orders(data, M))


def plackett_luce_loglik(utilities, orders):
    """Symbolic log PL probability of each rank-form order: (..., M), (n, M) -> (..., n).

    Differentiable in ``utilities``; O(n M) per utilities vector. Constant ``orders`` are
    validated when the graph is built (``ValueError`` naming the first invalid row).
    """
    return EmptyBatchBlockwise(PlackettLuceLoglik())(utilities, _orders(orders, utilities))


def plackett_luce_loglik_sum(utilities, orders, counts):
    """Symbolic ``sum_n counts[n] log p(orders[n])``: (..., M), (n, M), (n,) -> (...).

    Value and gradient come from one O(n M) pass (the Op's second output).
    """
    loglik_sum = EmptyBatchBlockwise(PlackettLuceLoglikSum())
    return loglik_sum(utilities, _orders(orders, utilities), counts)[0]


# gradient graphs vectorise these core Ops into EmptyBatchBlockwise (pm_perm.ops._blockwise)
register_core_ops(PlackettLuceLoglik, PlackettLuceLoglikVJP, PlackettLuceLoglikAndVJP,
                  PlackettLuceLoglikSum)
