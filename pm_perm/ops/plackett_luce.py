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
from pytensor.gradient import DisconnectedType, disconnected_type, grad_not_implemented
from pytensor.graph.basic import Apply, Constant, equal_computations
from pytensor.graph.op import Op
from pytensor.graph.rewriting.basic import node_rewriter
from pytensor.graph.traversal import ancestors
from pytensor.link.numba.dispatch import basic as numba_basic
from pytensor.link.numba.dispatch.basic import register_funcify_default_op_cache_key
from pytensor.tensor.blockwise import Blockwise
from pytensor.tensor.rewriting.basic import register_specialize

from pm_perm._numba import njit
from pm_perm.kernels._version import code_version
from pm_perm.kernels.plackett_luce import plackett_luce_core
from pm_perm.kernels.rank_form import validate_orders

_VERSION = code_version(__file__)  # numba cache version (see pm_perm.kernels._version)

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
    u, orders = np.ascontiguousarray(u), np.ascontiguousarray(orders)
    g = np.zeros(orders.shape[0]) if g is None else np.ascontiguousarray(g)
    values, grad = np.empty(orders.shape[0]), np.empty(u.shape[0])
    total = plackett_luce_core(u, orders, g, values, grad, want_grad)
    return total, values, grad


class PlackettLuceLoglik(Op):
    """Core Op: utilities (M,), orders (n, M) -> log PL probability of each order (n,)."""

    __props__ = ()
    gufunc_signature = "(m),(n,m)->(n)"

    def make_node(self, u, orders):
        u, orders = _core_inputs(u, orders)
        return Apply(self, [u, orders], [pt.tensor(dtype="float64", shape=(orders.type.shape[0],))])

    def perform(self, node, inputs, output_storage):
        u, orders = inputs
        _check_runtime(u, orders)
        output_storage[0][0] = _run(u, orders, None, False)[1]

    def infer_shape(self, node, input_shapes):
        return [(input_shapes[1][0],)]

    def connection_pattern(self, node):
        return [[True], [False]]

    def pullback(self, inputs, outputs, cotangents):
        u, orders = inputs
        return [PlackettLuceLoglikVJP()(u, orders, cotangents[0]), disconnected_type()]


class PlackettLuceLoglikVJP(Op):
    """Core Op: ``sum_n g[n] d loglik[n] / du`` for utilities (M,), orders (n, M), g (n,)."""

    __props__ = ()
    gufunc_signature = "(m),(n,m),(n)->(m)"

    def make_node(self, u, orders, g):
        u, orders, g = _core_inputs(u, orders, g)
        return Apply(self, [u, orders, g], [pt.tensor(dtype="float64", shape=u.type.shape)])

    def perform(self, node, inputs, output_storage):
        u, orders, g = inputs
        _check_runtime(u, orders, g)
        output_storage[0][0] = _run(u, orders, g, True)[2]

    def infer_shape(self, node, input_shapes):
        return [input_shapes[0]]

    def connection_pattern(self, node):
        return [[True], [False], [True]]

    def pullback(self, inputs, outputs, cotangents):
        u, orders, g = inputs
        return [grad_not_implemented(self, 0, u, "second derivatives of the PL log-likelihood"),
                disconnected_type(),
                grad_not_implemented(self, 2, g, "gradient in the cotangent")]


class PlackettLuceLoglikAndVJP(Op):
    """Core Op: (loglik (n,), ``sum_n g[n] d loglik[n] / du`` (M,)) from one pass.

    Created by the ``fuse_plackett_luce_loglik_and_vjp`` rewrite; no gradient of its own.
    """

    __props__ = ()
    gufunc_signature = "(m),(n,m),(n)->(n),(m)"

    def make_node(self, u, orders, g):
        u, orders, g = _core_inputs(u, orders, g)
        return Apply(self, [u, orders, g],
                     [pt.tensor(dtype="float64", shape=(orders.type.shape[0],)),
                      pt.tensor(dtype="float64", shape=u.type.shape)])

    def perform(self, node, inputs, output_storage):
        u, orders, g = inputs
        _check_runtime(u, orders, g)
        _, values, grad = _run(u, orders, g, True)
        output_storage[0][0] = values
        output_storage[1][0] = grad

    def infer_shape(self, node, input_shapes):
        return [(input_shapes[1][0],), input_shapes[0]]

    def pullback(self, inputs, outputs, cotangents):
        u, orders, g = inputs
        return [grad_not_implemented(self, 0, u, "gradients of the fused PL Op"),
                disconnected_type(),
                grad_not_implemented(self, 2, g, "gradients of the fused PL Op")]


class PlackettLuceLoglikSum(Op):
    """Core Op: (``sum_n counts[n] loglik[n]`` (), its gradient in the utilities (M,))."""

    __props__ = ()
    gufunc_signature = "(m),(n,m),(n)->(),(m)"

    def make_node(self, u, orders, counts):
        u, orders, counts = _core_inputs(u, orders, counts)
        return Apply(self, [u, orders, counts],
                     [pt.tensor(dtype="float64", shape=()),
                      pt.tensor(dtype="float64", shape=u.type.shape)])

    def perform(self, node, inputs, output_storage):
        u, orders, counts = inputs
        _check_runtime(u, orders, counts)
        total, _, grad = _run(u, orders, counts, True)
        output_storage[0][0] = np.asarray(total, dtype=np.float64)
        output_storage[1][0] = grad

    def infer_shape(self, node, input_shapes):
        return [(), input_shapes[0]]

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


@njit(cache=True)
def _numba_run(u, orders, g, want_grad):
    if orders.shape[1] != u.shape[0] or g.shape[0] != orders.shape[0]:
        raise ValueError("Plackett-Luce: orders (n, M), utilities (M,) and weights (n,) disagree")
    values = np.empty(orders.shape[0])
    grad = np.empty(u.shape[0])
    total = plackett_luce_core(np.ascontiguousarray(u), np.ascontiguousarray(orders),
                               np.ascontiguousarray(g), values, grad, want_grad)
    return total, values, grad


@register_funcify_default_op_cache_key(PlackettLuceLoglik)
def _numba_loglik(op, node, **kwargs):
    @numba_basic.numba_njit
    def loglik_numba(u, orders):
        return _numba_run(u, orders, np.zeros(orders.shape[0]), False)[1]

    return loglik_numba, _VERSION


@register_funcify_default_op_cache_key(PlackettLuceLoglikVJP)
def _numba_vjp(op, node, **kwargs):
    @numba_basic.numba_njit
    def vjp_numba(u, orders, g):
        return _numba_run(u, orders, g, True)[2]

    return vjp_numba, _VERSION


@register_funcify_default_op_cache_key(PlackettLuceLoglikAndVJP)
def _numba_loglik_and_vjp(op, node, **kwargs):
    @numba_basic.numba_njit
    def loglik_and_vjp_numba(u, orders, g):
        _, values, grad = _numba_run(u, orders, g, True)
        return values, grad

    return loglik_and_vjp_numba, _VERSION


@register_funcify_default_op_cache_key(PlackettLuceLoglikSum)
def _numba_sum(op, node, **kwargs):
    @numba_basic.numba_njit
    def sum_numba(u, orders, counts):
        total, _, grad = _numba_run(u, orders, counts, True)
        return np.array(total, dtype=np.float64), grad

    return sum_numba, _VERSION


# ----------------------------------------------------------------------------- graph rewrite


def _core(node, cls):
    op = node.op
    core = op.core_op if isinstance(op, Blockwise) else op
    return core if isinstance(core, cls) else None


@register_specialize
@node_rewriter([Blockwise, PlackettLuceLoglikVJP])
def fuse_plackett_luce_loglik_and_vjp(fgraph, node):
    """Replace ``PlackettLuceLoglik(u, o)`` and ``PlackettLuceLoglikVJP(u, o, g)`` by one node."""
    if _core(node, PlackettLuceLoglikVJP) is None:
        return None
    u, orders, g = node.inputs[:3]  # (a Blockwise may carry output-shape inputs after them)
    for client, _ in fgraph.clients[u]:
        if (isinstance(client, Apply) and client.inputs[0] is u
                and _core(client, PlackettLuceLoglik) is not None
                and equal_computations([client.inputs[1]], [orders])):
            if client.outputs[0] in ancestors([g]):
                # the cotangent depends on the values (a mixture's logsumexp over components):
                # fusing would make the graph cyclic, so the two nodes stay apart
                return None
            fused = PlackettLuceLoglikAndVJP()
            fused = fused if not isinstance(node.op, Blockwise) else Blockwise(fused)
            values, grad = fused(u, orders, g)
            if (values.type != client.outputs[0].type
                    or grad.type != node.outputs[0].type):
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
    return Blockwise(PlackettLuceLoglik())(utilities, _orders(orders, utilities))


def plackett_luce_loglik_sum(utilities, orders, counts):
    """Symbolic ``sum_n counts[n] log p(orders[n])``: (..., M), (n, M), (n,) -> (...).

    Value and gradient come from one O(n M) pass (the Op's second output).
    """
    return Blockwise(PlackettLuceLoglikSum())(utilities, _orders(orders, utilities), counts)[0]
