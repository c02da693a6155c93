"""PyTensor Ops for the exact likelihood of complete and top-k orders under the
Plackett-Luce-anchored model ``p(pi | u, D) ∝ PL(pi; u) exp(sum_i D[i, pi(i)])``; kernel in
:mod:`pm_perm.kernels.pl_tilted`.

* ``pl_tilted_loglik(u, D, orders)``: ``(M,), (M, M), (n, M) -> (n,)``, ``log p`` of each
  rank-form order (complete or top-k; a tie block only at the end of an order).
* ``pl_tilted_loglik_sum(u, D, orders, counts)``: ``-> ()``, ``sum_n counts[n] log p_n``; its
  value and both gradients come from ONE Op run (one table, one adjoint sweep, O(M 2^M)
  whatever ``n``).

A graph that needs the per-order values AND their gradient weighted by data (the logp of
:class:`~pm_perm.distributions.PLAnchoredRanking`: ``sum(counts * loglik)``, whose pullback is
``PLTiltedLoglikSumAndGrad(u, D, orders, -counts)``) would build the table twice; the rewrite
``local_fuse_pl_tilted_loglik_and_grad`` makes that one ``PLTiltedLoglikAndGrad`` node (one table
and one adjoint sweep per evaluation of a MAP objective instead of two tables).

Core Ops only (one ``(u, D)``, no batch dimensions), with numba implementations that call the
kernel directly (nopython). Non-finite ``u`` or ``D`` give NaN; an order with a tie block before
its last block gives NaN (check the data with
:func:`pm_perm.kernels.pl_tilted.check_no_middle_ties` when the graph is built, as
:func:`pm_perm.preferences.anchored.pl_anchored_model` does). M beyond the exact limit of the
partial-order kernels raises ``ValueError`` when the graph is built (static M) or run.
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from pytensor.gradient import DisconnectedType, disconnected_type, grad_not_implemented
from pytensor.graph.basic import Apply, Constant
from pytensor.graph.op import Op
from pytensor.graph.rewriting.basic import node_rewriter
from pytensor.graph.traversal import ancestors
from pytensor.link.numba.dispatch import basic as numba_basic
from pytensor.link.numba.dispatch.basic import register_funcify_default_op_cache_key
from pytensor.tensor.rewriting.basic import register_specialize

from pm_perm.kernels._version import code_version
from pm_perm.kernels.partial_orders import check_partial_order_size
from pm_perm.kernels.pl_tilted import orders_plan, pl_tilted_core, pl_tilted_planned

__all__ = [
    "PLTiltedLoglik",
    "PLTiltedLoglikAndGrad",
    "PLTiltedLoglikSumAndGrad",
    "pl_tilted_loglik",
    "pl_tilted_loglik_sum",
]

_VERSION = code_version(__file__)


def _inputs(u, D, orders, weights=None):
    u, D, orders = (pt.as_tensor_variable(x) for x in (u, D, orders))
    if u.type.ndim != 1 or D.type.ndim != 2 or orders.type.ndim != 2:
        raise TypeError("the Plackett-Luce-anchored Ops take utilities (M,), tilt logits (M, M) "
                        f"and orders (n, M); got ndim {u.type.ndim}, {D.type.ndim}, "
                        f"{orders.type.ndim}")
    if orders.type.dtype not in pt.type.int_dtypes:
        raise TypeError(f"orders must be integers (rank form); got dtype {orders.type.dtype}")
    M = u.type.shape[0]
    if M is not None:
        check_partial_order_size(M)
    out = [pt.cast(u, "float64"), pt.cast(D, "float64"), pt.cast(orders, "int64")]
    if weights is not None:
        weights = pt.as_tensor_variable(weights)
        if weights.type.ndim != 1:
            raise TypeError("counts / weights must be a vector (n,)")
        out.append(pt.cast(weights, "float64"))
    return out


def _check_runtime(u, D, orders, weights=None):
    M = u.shape[0]
    if D.shape != (M, M) or orders.shape[1] != M:
        raise ValueError(f"utilities ({M},) need tilt logits ({M}, {M}) and orders (n, {M}); got "
                         f"{D.shape} and {orders.shape}")
    if weights is not None and weights.shape[0] != orders.shape[0]:
        raise ValueError(f"{weights.shape[0]} counts for {orders.shape[0]} orders")
    check_partial_order_size(M)


def _plan(node, orders):
    """The orders' :func:`~pm_perm.kernels.pl_tilted.orders_plan`; parsed once and kept on the
    graph's constant when the orders are one (e.g. a MAP engine's frozen data,
    :func:`pm_perm.preferences.fitting.fit_map`), else parsed at each evaluation."""
    var = node.inputs[2]
    if not isinstance(var, Constant):
        return orders_plan(orders)
    plan = getattr(var.tag, "pl_tilted_plan", None)
    if plan is None:
        plan = var.tag.pl_tilted_plan = orders_plan(orders)
    return plan


def _run(node, u, D, orders, weights, want_grad):
    u = np.ascontiguousarray(u, dtype=np.float64)
    D = np.ascontiguousarray(D, dtype=np.float64)
    orders = np.ascontiguousarray(orders, dtype=np.int64)
    M, n = u.shape[0], orders.shape[0]
    w = np.zeros(n) if weights is None else np.ascontiguousarray(weights, dtype=np.float64)
    values, gu, gD = np.empty(n), np.empty(M), np.empty((M, M))
    total = pl_tilted_planned(u, D, *_plan(node, orders), w, values, gu, gD, want_grad)
    return total, values, gu, gD


class PLTiltedLoglik(Op):
    """Core Op: per-order ``log p`` for ``u`` (M,), ``D`` (M, M) and orders (n, M) -> (n,)."""

    __props__ = ()

    def make_node(self, u, D, orders):
        inputs = _inputs(u, D, orders)
        return Apply(self, inputs, [pt.tensor(dtype="float64", shape=(inputs[2].type.shape[0],))])

    def perform(self, node, inputs, output_storage):
        _check_runtime(*inputs)
        output_storage[0][0] = _run(node, *inputs, None, False)[1]

    def infer_shape(self, node, input_shapes):
        return [(input_shapes[2][0],)]

    def connection_pattern(self, node):
        return [[True], [True], [False]]

    def pullback(self, inputs, outputs, cotangents):
        u, D, orders = inputs
        (g,) = cotangents
        _, gu, gD = _sum_and_grad(u, D, orders, g)
        return [gu, gD, disconnected_type()]


class PLTiltedLoglikSumAndGrad(Op):
    """Core Op: ``(sum_n w_n log p_n (), d/du (M,), d/dD (M, M))`` from one table and one
    adjoint sweep, for ``u`` (M,), ``D`` (M, M), orders (n, M) and weights (n,)."""

    __props__ = ()

    def make_node(self, u, D, orders, weights):
        inputs = _inputs(u, D, orders, weights)
        return Apply(self, inputs, [pt.tensor(dtype="float64", shape=()),
                                    pt.tensor(dtype="float64", shape=inputs[0].type.shape),
                                    pt.tensor(dtype="float64", shape=inputs[1].type.shape)])

    def perform(self, node, inputs, output_storage):
        _check_runtime(*inputs)
        total, _, gu, gD = _run(node, *inputs, True)
        output_storage[0][0] = np.asarray(total, dtype=np.float64)
        output_storage[1][0] = gu
        output_storage[2][0] = gD

    def infer_shape(self, node, input_shapes):
        return [(), input_shapes[0], input_shapes[1]]

    def connection_pattern(self, node):
        return [[True, True, True], [True, True, True], [False, False, False],
                [True, True, True]]

    def pullback(self, inputs, outputs, cotangents):
        u, D, orders, weights = inputs
        g_v, g_u, g_D = cotangents
        if not (isinstance(g_u.type, DisconnectedType) and isinstance(g_D.type, DisconnectedType)):
            return [grad_not_implemented(self, 0, u, "second derivatives of the loglik"),
                    grad_not_implemented(self, 1, D, "second derivatives of the loglik"),
                    disconnected_type(),
                    grad_not_implemented(self, 3, weights, "derivative of the gradient")]
        if isinstance(g_v.type, DisconnectedType):
            return [pt.zeros_like(u), pt.zeros_like(D), disconnected_type(),
                    pt.zeros_like(weights)]
        return [g_v * outputs[1], g_v * outputs[2], disconnected_type(),
                g_v * _loglik(u, D, orders)]


class PLTiltedLoglikAndGrad(Op):
    """Core Op: per-order ``log p`` (n,) and the gradients ``d/du`` (M,), ``d/dD`` (M, M) of
    ``sum_n w_n log p_n``, from one table and one adjoint sweep. Created by the rewrite
    ``local_fuse_pl_tilted_loglik_and_grad`` when a graph needs the per-order values and a
    gradient weighted by something that does not depend on them (the weights are the counts).
    No gradient of its own."""

    __props__ = ()

    def make_node(self, u, D, orders, weights):
        inputs = _inputs(u, D, orders, weights)
        return Apply(self, inputs, [pt.tensor(dtype="float64", shape=(inputs[2].type.shape[0],)),
                                    pt.tensor(dtype="float64", shape=inputs[0].type.shape),
                                    pt.tensor(dtype="float64", shape=inputs[1].type.shape)])

    def perform(self, node, inputs, output_storage):
        _check_runtime(*inputs)
        _, values, gu, gD = _run(node, *inputs, True)
        output_storage[0][0] = values
        output_storage[1][0] = gu
        output_storage[2][0] = gD

    def infer_shape(self, node, input_shapes):
        return [(input_shapes[2][0],), input_shapes[0], input_shapes[1]]

    def pullback(self, inputs, outputs, cotangents):
        return [grad_not_implemented(self, k, x, "derivatives of the fused values and gradient")
                if k != 2 else disconnected_type() for k, x in enumerate(inputs)]


_loglik = PLTiltedLoglik()
_sum_and_grad = PLTiltedLoglikSumAndGrad()
_and_grad = PLTiltedLoglikAndGrad()


# ----------------------------------------------------------------------------- numba


@numba_basic.numba_njit
def _shapes_ok(u, D, orders):
    M = u.shape[0]
    return D.shape[0] == M and D.shape[1] == M and orders.shape[1] == M


@register_funcify_default_op_cache_key(PLTiltedLoglik)
def _numba_pl_tilted_loglik(op, node, **kwargs):
    @numba_basic.numba_njit
    def pl_tilted_loglik_numba(u, D, orders):
        if not _shapes_ok(u, D, orders):
            raise ValueError("utilities (M,) need tilt logits (M, M) and orders (n, M)")
        M, n = u.shape[0], orders.shape[0]
        values = np.empty(n)
        pl_tilted_core(np.ascontiguousarray(u), np.ascontiguousarray(D),
                       np.ascontiguousarray(orders), np.zeros(n), values, np.empty(M),
                       np.empty((M, M)), False)
        return values

    return pl_tilted_loglik_numba, _VERSION


@numba_basic.numba_njit
def _weighted_run(u, D, orders, weights):
    """``(total, values (n,), d/du (M,), d/dD (M, M))`` of one weighted kernel run (the two
    weighted Ops' numba implementations)."""
    if not _shapes_ok(u, D, orders):
        raise ValueError("utilities (M,) need tilt logits (M, M) and orders (n, M)")
    if weights.shape[0] != orders.shape[0]:
        raise ValueError("counts must have one entry per order")
    M, n = u.shape[0], orders.shape[0]
    values, gu, gD = np.empty(n), np.empty(M), np.empty((M, M))
    total = pl_tilted_core(np.ascontiguousarray(u), np.ascontiguousarray(D),
                           np.ascontiguousarray(orders), np.ascontiguousarray(weights), values,
                           gu, gD, True)
    return total, values, gu, gD


@register_funcify_default_op_cache_key(PLTiltedLoglikSumAndGrad)
def _numba_pl_tilted_sum_and_grad(op, node, **kwargs):
    @numba_basic.numba_njit
    def pl_tilted_sum_and_grad_numba(u, D, orders, weights):
        total, _, gu, gD = _weighted_run(u, D, orders, weights)
        return np.asarray(total), gu, gD

    return pl_tilted_sum_and_grad_numba, _VERSION


@register_funcify_default_op_cache_key(PLTiltedLoglikAndGrad)
def _numba_pl_tilted_and_grad(op, node, **kwargs):
    @numba_basic.numba_njit
    def pl_tilted_and_grad_numba(u, D, orders, weights):
        _, values, gu, gD = _weighted_run(u, D, orders, weights)
        return values, gu, gD

    return pl_tilted_and_grad_numba, _VERSION


# ----------------------------------------------------------------------------- graph rewrite


@register_specialize
@node_rewriter([PLTiltedLoglikSumAndGrad])
def local_fuse_pl_tilted_loglik_and_grad(fgraph, node):
    """One table instead of two for per-order values + a gradient weighted independently of
    them: replace ``PLTiltedLoglik(u, D, orders)`` and the gradient outputs of
    ``PLTiltedLoglikSumAndGrad(u, D, orders, w)`` (its weighted sum unused, ``w`` not computed
    from the values) by one ``PLTiltedLoglikAndGrad(u, D, orders, w)`` node. The kernel writes
    every order's value whatever its weight, so the values are the same numbers."""
    u, D, orders, w = node.inputs
    if fgraph.clients.get(node.outputs[0]):
        return None  # the weighted sum itself is used: keep the three-output Op
    for client, _ in fgraph.clients[u]:
        if (not isinstance(client, Apply) or not isinstance(client.op, PLTiltedLoglik)
                or client.inputs[0] is not u or client.inputs[1] is not D
                or client.inputs[2] is not orders):
            continue
        if client.outputs[0] in ancestors([w]):
            continue  # the weights depend on the values: they must come first
        values, gu, gD = _and_grad(u, D, orders, w)
        return {client.outputs[0]: values, node.outputs[1]: gu, node.outputs[2]: gD}
    return None


# ----------------------------------------------------------------------------- public helpers


def pl_tilted_loglik(u, D, orders):
    """Symbolic ``log p(order n)`` for utilities ``u`` (M,), tilt logits ``D`` (M, M) and
    rank-form orders (n, M) -> (n,), under ``p(pi) ∝ PL(pi; u) exp(sum_i D[i, pi(i)])``.

    Differentiable in ``u`` and ``D`` (one more table pass). ``D = 0``: Plackett-Luce exactly.
    Cost O(M 2^M + n M^2); complete and top-k orders (:mod:`pm_perm.kernels.pl_tilted`).
    """
    return _loglik(u, D, orders)


def pl_tilted_loglik_sum(u, D, orders, counts):
    """Symbolic ``sum_n counts[n] log p(order n)`` -> (), value and gradients from one Op run.

    Parameters
    ----------
    u : tensor_like of float, shape (M,)
    D : tensor_like of float, shape (M, M)
    orders : tensor_like of int, shape (n, M)
        Distinct rank-form orders (complete or top-k).
    counts : tensor_like of float, shape (n,)
        Number of rankings per order (rows of weight 0 are skipped).
    """
    return _sum_and_grad(u, D, orders, counts)[0]
