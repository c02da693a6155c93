"""The Python side shared by the core Ops on ranking data (:mod:`pm_perm.ops.partial_orders`,
:mod:`pm_perm.ops.plackett_luce`).

Their inputs are ``(x, orders[, weights])``: logits or utilities, rank-form orders (n, M) and
per-order weights (n,). One kernel call gives ``(total, values (n,), gradient in x)``; each Op
returns some of these.
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from pytensor.graph.basic import Apply

__all__ = ["RankingKernelOp"]


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
