"""The Python side shared by the core Ops on ranking data (:mod:`pm_perm.ops.partial_orders`,
:mod:`pm_perm.ops.plackett_luce`, :mod:`pm_perm.ops.top_k`).

Their inputs are ``(x, orders[, weights])``: logits or utilities, rank-form orders (n, M) and
per-order weights (n,). One kernel call gives ``(total, values (n,), gradient in x)``; each Op
returns some of these.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pytensor.tensor as pt
from pytensor.gradient import DisconnectedType, disconnected_type, grad_not_implemented
from pytensor.graph.basic import Apply
from pytensor.graph.rewriting.basic import node_rewriter
from pytensor.graph.traversal import ancestors
from pytensor.link.numba.dispatch import basic as numba_basic
from pytensor.link.numba.dispatch.basic import register_funcify_default_op_cache_key
from pytensor.tensor.blockwise import Blockwise
from pytensor.tensor.rewriting.basic import register_specialize

from pm_perm.ops._blockwise import EmptyBatchBlockwise

__all__ = [
    "AndGradOpMixin",
    "RankingKernelOp",
    "SumAndGradOpMixin",
    "SumOpMixin",
    "ValuesOpMixin",
    "register_fuse_rewrite",
    "register_ranking_numba",
]


class RankingKernelOp:
    """Mixin of the core Ops on ranking data: the node, ``perform`` and ``infer_shape``.

    ``output_names`` names the Op's outputs, among ``"total"`` (``sum_n w_n loglik_n``, ()),
    ``"values"`` (the per-order log-likelihoods, (n,)) and ``"grad"`` (the gradient of the total
    in ``x``, x's shape). The Op class provides ``_inputs(x, orders[, weights])`` (the checked,
    cast input variables), ``_check_runtime(x, orders[, weights])`` and
    ``_kernel(x, orders, weights or None, want_grad) -> (total, values, grad)``; the kernel
    computes the gradient only when an output is ``"grad"``.
    """

    output_names = ()

    def _apply(self, *args):
        inputs = self._inputs(*args)
        shapes = {"total": (), "values": (inputs[1].type.shape[0],), "grad": inputs[0].type.shape}
        return Apply(self, inputs,
                     [pt.tensor(dtype="float64", shape=shapes[name]) for name in self.output_names])

    def perform(self, node, inputs, output_storage):
        x, orders, *weights = inputs
        self._check_runtime(x, orders, *weights)
        total, values, grad = self._kernel(x, orders, weights[0] if weights else None,
                                           "grad" in self.output_names)
        results = {"total": np.asarray(total, dtype=np.float64), "values": values, "grad": grad}
        for storage, name in zip(output_storage, self.output_names, strict=True):
            storage[0] = results[name]

    def infer_shape(self, node, input_shapes):
        shapes = {"total": (), "values": (input_shapes[1][0],), "grad": input_shapes[0]}
        return [shapes[name] for name in self.output_names]


# ----------------------------------------------------------------------------- numba + rewrite
# The four core Ops of a ranking kernel (values; total and gradient; total only; values and a
# gradient weighted independently of them) share their numba implementations and the rewrite
# that fuses values + gradient into one kernel run (:mod:`pm_perm.ops.partial_orders`,
# :mod:`pm_perm.ops.top_k`).

_SOURCE = Path(__file__).read_bytes()


def register_ranking_numba(ops, kernel_numba, limit, version):
    """Register the numba implementations of the four core Ops ``ops`` = ``(Loglik,
    LoglikSumAndGrad, LoglikSum, LoglikAndGrad)`` of one ranking kernel.

    ``kernel_numba(limit_value, weights_name)`` returns the module's compiled
    ``run(x, orders, weights, values, grad, want_grad) -> total`` (``weights_name`` is
    ``"counts"`` or ``"weights"``, for its shape error); ``limit`` names the Ops' prop bounding
    the size (``"max_m"``, ``"max_k"``); ``version`` is the module's
    :func:`pm_perm.kernels._version.code_version`, combined here with this module's source.
    The implementations write into the output buffers PyTensor's Blockwise loop hands them
    (``handles_out``, see :mod:`pm_perm.ops.extern`); called outside a Blockwise they allocate.
    """
    loglik_cls, sum_and_grad_cls, sum_cls, and_grad_cls = ops
    version = zlib.crc32(_SOURCE, version) & 0x7FFFFFFF

    @register_funcify_default_op_cache_key(loglik_cls)
    def _numba_loglik(op, node, **kwargs):
        run = kernel_numba(getattr(op, limit), "counts")

        @numba_basic.numba_njit
        def loglik_numba(x, orders, out=None):
            n = orders.shape[0]
            if out is None:
                out = np.empty(n)
            run(x, orders, np.zeros(n), out, np.empty((0, 0)), 0)
            return out

        loglik_numba.handles_out = True
        return loglik_numba, version

    @register_funcify_default_op_cache_key(sum_and_grad_cls)
    def _numba_loglik_sum_and_grad(op, node, **kwargs):
        run = kernel_numba(getattr(op, limit), "counts")

        @numba_basic.numba_njit
        def loglik_sum_and_grad_numba(x, orders, weights, out_v=None, out_g=None):
            if out_v is None:
                out_v, out_g = np.empty(()), np.empty(x.shape)
            out_v[()] = run(x, orders, weights, np.empty(orders.shape[0]), out_g, 1)
            return out_v, out_g

        loglik_sum_and_grad_numba.handles_out = True
        return loglik_sum_and_grad_numba, version

    @register_funcify_default_op_cache_key(sum_cls)
    def _numba_loglik_sum(op, node, **kwargs):
        run = kernel_numba(getattr(op, limit), "counts")

        @numba_basic.numba_njit
        def loglik_sum_numba(x, orders, weights, out=None):
            if out is None:
                out = np.empty(())
            out[()] = run(x, orders, weights, np.empty(orders.shape[0]), np.empty((0, 0)), 0)
            return out

        loglik_sum_numba.handles_out = True
        return loglik_sum_numba, version

    @register_funcify_default_op_cache_key(and_grad_cls)
    def _numba_loglik_and_grad(op, node, **kwargs):
        run = kernel_numba(getattr(op, limit), "weights")

        @numba_basic.numba_njit
        def loglik_and_grad_numba(x, orders, weights, out_v=None, out_g=None):
            if out_v is None:
                out_v, out_g = np.empty(orders.shape[0]), np.empty(x.shape)
            run(x, orders, weights, out_v, out_g, 1)
            return out_v, out_g

        loglik_and_grad_numba.handles_out = True
        return loglik_and_grad_numba, version


def register_fuse_rewrite(name, ops, limit, doc):
    """Register in ``specialize`` (as ``name``) and return the rewrite that fuses
    ``Loglik(x, orders)`` and the gradient output of ``LoglikSumAndGrad(x, orders, g)`` into one
    ``LoglikAndGrad(x, orders, g)`` node (``ops`` as in :func:`register_ranking_numba`; ``limit``
    the prop copied to the fused Op; ``doc`` its docstring).

    Only for one (unbatched) ``x`` and unbatched weights ``g``, when the weighted sum itself is
    unused and ``g`` does not depend on the values (they must come first).
    """
    loglik_cls, sum_and_grad_cls, _, and_grad_cls = ops

    def rewrite(fgraph, node):
        if not isinstance(node.op.core_op, sum_and_grad_cls):
            return None
        x, orders, g = node.inputs
        if x.type.ndim != 2 or orders.type.ndim != 2 or g.type.ndim != 1:
            return None
        if fgraph.clients.get(node.outputs[0]):
            return None  # the weighted sum itself is used: keep the two-output Op
        for client, _ in fgraph.clients[x]:
            loglik = client if isinstance(client, Apply) else None
            if (loglik is None or not _is_core(loglik.outputs[0], loglik_cls)
                    or loglik.inputs[0] is not x or loglik.inputs[1] is not orders):
                continue
            if loglik.outputs[0] in ancestors([g]):
                continue  # the weights depend on the values: they must come first
            fused = EmptyBatchBlockwise(and_grad_cls(getattr(node.op.core_op, limit)))
            values, grad = fused(x, orders, g)
            return {loglik.outputs[0]: values, node.outputs[1]: grad}
        return None

    rewrite.__name__ = rewrite.__qualname__ = name
    rewrite.__doc__ = doc
    return register_specialize(node_rewriter([Blockwise])(rewrite))


def _is_core(var, cls):
    node = var.owner
    return (node is not None and isinstance(node.op, Blockwise)
            and isinstance(node.op.core_op, cls))


# ----------------------------------------------------------------------------- the four Ops
# The graph side of the four core Ops (mixins before the module's base class, which provides
# ``_loglik_graph(x, orders)`` and ``_sum_and_grad_graph(x, orders, weights)``: its
# Blockwise-wrapped values and (total, gradient) Ops).


class ValuesOpMixin:
    """``Loglik``: per-order values (n,); pullback = the gradient output of the weighted sum."""

    output_names = ("values",)

    def make_node(self, x, orders):
        return self._apply(x, orders)

    def connection_pattern(self, node):
        return [[True], [False]]

    def pullback(self, inputs, outputs, cotangents):
        x, orders = inputs
        (g,) = cotangents
        return [self._sum_and_grad_graph(x, orders, g)[1], disconnected_type()]


class SumAndGradOpMixin:
    """``LoglikSumAndGrad``: ``(sum_n w_n log p_n, its gradient in x)``; no second derivative."""

    output_names = ("total", "grad")

    def make_node(self, x, orders, weights):
        return self._apply(x, orders, weights)

    def connection_pattern(self, node):
        return [[True, True], [False, False], [True, True]]

    def pullback(self, inputs, outputs, cotangents):
        x, orders, weights = inputs
        g_v, g_grad = cotangents
        if not isinstance(g_grad.type, DisconnectedType):
            return [grad_not_implemented(self, 0, x, "second derivatives of the loglik"),
                    disconnected_type(),
                    grad_not_implemented(self, 2, weights, "derivative of the gradient")]
        if isinstance(g_v.type, DisconnectedType):
            return [pt.zeros_like(x), disconnected_type(), pt.zeros_like(weights)]
        return [g_v[..., None, None] * outputs[1], disconnected_type(),
                g_v[..., None] * self._loglik_graph(x, orders)]


class SumOpMixin:
    """``LoglikSum``: the weighted sum only; pullback = the gradient output of the two-output
    Op."""

    output_names = ("total",)

    def make_node(self, x, orders, weights):
        return self._apply(x, orders, weights)

    def connection_pattern(self, node):
        return [[True], [False], [True]]

    def pullback(self, inputs, outputs, cotangents):
        x, orders, weights = inputs
        (g,) = cotangents
        return [g[..., None, None] * self._sum_and_grad_graph(x, orders, weights)[1],
                disconnected_type(), g[..., None] * self._loglik_graph(x, orders)]


class AndGradOpMixin:
    """``LoglikAndGrad`` (a rewrite product): values (n,) and the gradient of the weighted sum;
    no gradient of its own."""

    output_names = ("values", "grad")

    def make_node(self, x, orders, weights):
        return self._apply(x, orders, weights)

    def pullback(self, inputs, outputs, cotangents):
        return [grad_not_implemented(self, i, x, "gradient of the fused Op (a rewrite product)")
                for i, x in enumerate(inputs)]
