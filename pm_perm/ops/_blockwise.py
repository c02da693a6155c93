"""The ``Blockwise`` of pm_perm's Ops: PyTensor's, plus empty batches on the Python linker.

PyTensor's ``Blockwise.perform`` (the Python linker: pm_perm's MAP fits, ``FAST_COMPILE``)
loops over the batch with ``np.vectorize`` machinery that raises ``NotImplementedError:
vectorize with zero size not implemented`` when a batch dimension is 0: a logp over zero
observations with one parameter row each, zero posterior draws, an empty fold.
:class:`EmptyBatchBlockwise` returns the empty outputs instead: shape ``batch + core``, each
output core dimension sized by the input core dimension of the same name in the Op's
``gufunc_signature``. Numba and JAX compile it as PyTensor's ``Blockwise`` (they handle empty
batches themselves).

Every pm_perm core Op class wrapped this way is registered with :func:`register_core_ops`, so
that the gradient graphs PyTensor vectorises from a core Op's pullback use it too.
:func:`core_op_of` finds the core Op of a node, wrapped or not, for the graph rewrites.
"""

from __future__ import annotations

import numpy as np
from pytensor.graph.replace import _vectorize_node
from pytensor.graph.rewriting.basic import copy_stack_trace, node_rewriter
from pytensor.tensor.blockwise import Blockwise
from pytensor.tensor.rewriting.basic import register_specialize

__all__ = ["EmptyBatchBlockwise", "core_op_of", "register_core_ops", "register_value_only_rewrite"]


class EmptyBatchBlockwise(Blockwise):
    """PyTensor's ``Blockwise``; on the Python linker an empty batch gives empty outputs.

    Cost: one ``np.broadcast_shapes`` of the batch shapes per call on the Python linker;
    nothing on the compiled backends.
    """

    def _create_node_gufunc(self, node, impl):
        loop = super()._create_node_gufunc(node, impl)
        batch_ndim = self.batch_ndim(node)
        inputs_sig, outputs_sig = self.inputs_sig, self.outputs_sig
        dtypes = [out.type.dtype for out in node.outputs]

        def gufunc(*inputs):
            try:
                batch = np.broadcast_shapes(*(np.shape(x)[:batch_ndim] for x in inputs))
            except ValueError:  # batch shapes that do not broadcast: PyTensor's error
                return loop(*inputs)
            if 0 not in batch:
                return loop(*inputs)
            self._check_runtime_broadcast(node, inputs)
            sizes = {}
            for sig, x in zip(inputs_sig, inputs, strict=True):
                sizes.update(zip(sig, np.shape(x)[batch_ndim:], strict=True))
            if any(dim not in sizes for sig in outputs_sig for dim in sig):
                return loop(*inputs)  # an output dimension no input names: PyTensor's error
            return tuple(np.empty(batch + tuple(sizes[dim] for dim in sig), dtype=dtype)
                         for sig, dtype in zip(outputs_sig, dtypes, strict=True))

        return gufunc


def core_op_of(node, cls):
    """The core Op of ``node`` (its own Op, or the core Op of its ``Blockwise``) if it is an
    instance of ``cls``, else None: what the graph rewrites match on."""
    op = node.op
    core = op.core_op if isinstance(op, Blockwise) else op
    return core if isinstance(core, cls) else None


def _vectorize_core(op, node, *batched_inputs):
    return EmptyBatchBlockwise(op).make_node(*batched_inputs)


def register_core_ops(*op_classes):
    """Vectorise these core Op classes (gradient graphs, ``vectorize_graph``) into this
    module's :class:`EmptyBatchBlockwise` instead of PyTensor's ``Blockwise``."""
    for cls in op_classes:
        _vectorize_node.register(cls, _vectorize_core)


def register_value_only_rewrite(name, both_cls, value_op, unused):
    """Register in ``specialize`` (as ``name``) and return the rewrite that replaces a
    ``Blockwise`` of the two-output core Op class ``both_cls`` whose second output (the
    ``unused`` one, a word for the docstring) has no client by ``value_op(core_op)`` applied
    to the same inputs: the value-only Op, which skips the second output's work."""

    def rewrite(fgraph, node):
        if not isinstance(node.op.core_op, both_cls):
            return None
        if fgraph.clients.get(node.outputs[1]):
            return None
        new = value_op(node.op.core_op)(*node.inputs)
        copy_stack_trace(node.outputs[0], new)
        return {node.outputs[0]: new}

    rewrite.__name__ = rewrite.__qualname__ = name
    rewrite.__doc__ = (f"Replace the two-output Op by the value-only one when the {unused} has "
                       "no client.")
    return register_specialize(node_rewriter([Blockwise])(rewrite))
