"""PyTensor Ops that expand distinct rows by their counts: ranking data given as distinct orders
and counts, seen by PyMC as one row per ballot.

* ``expand_counts(orders, counts)``: ``(n, ...), (n,) -> (N, ...)``, row ``i`` repeated
  ``counts[i]`` times (``N = sum(counts)``; a row of count 0 vanishes). The observed value of a
  ranking variable given ``weights=counts`` (:mod:`pm_perm.distributions._ballots`). Integer
  data: no gradient.
* ``repeat_rows(x, counts)``: the same expansion of a differentiable ``x``, e.g. per-order
  log-likelihoods repeated per ballot. Its gradient sums the cotangent over each row's copies
  (a segment sum, O(N)); when the cotangent is the same for every copy (the gradient of a sum)
  it is ``counts * cotangent``, O(n).

The rewrite ``sum_of_repeat_rows`` replaces ``sum(repeat_rows(x, counts))`` (over axis 0, or
every axis) by ``sum(counts * x)`` (a row of count 0 contributes 0, even where ``x`` is
``-inf``): the summed log-likelihood that ``pm.find_MAP`` and NUTS compile, and its gradient,
cost per DISTINCT order, however many ballots the counts hold, while
``pm.compute_log_likelihood`` sees one value per ballot.

Counts may be integer or float tensors (a ``pm.Data`` of float counts); they must be finite,
non-negative integers, else ``ValueError`` at run time. Both Ops have numba implementations
(here) and JAX ones (:mod:`pm_perm.backends.jax.ballots`; JAX needs the counts known when the
graph is compiled, as under ``pm.sample(nuts_sampler="numpyro")`` where ``pm.Data`` become
constants).
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from pytensor.gradient import disconnected_type, grad_undefined
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.graph.rewriting.basic import node_rewriter
from pytensor.link.numba.dispatch import basic as numba_basic
from pytensor.link.numba.dispatch.basic import register_funcify_default_op_cache_key
from pytensor.scalar.basic import Add, Second
from pytensor.tensor.basic import Alloc
from pytensor.tensor.elemwise import CAReduce, Elemwise
from pytensor.tensor.rewriting.basic import register_canonicalize, register_specialize
from pytensor.tensor.shape import SpecifyShape

__all__ = ["COUNTS_MSG", "ExpandCounts", "RepeatRows", "check_counts", "expand_counts",
           "repeat_rows"]

#: The error of counts that are not finite non-negative integers.
COUNTS_MSG = "counts must be finite non-negative integers (the number of ballots of each row)"
_LENGTH_MSG = "counts must have one entry per row (counts (n,) for rows (n, ...))"


def check_counts(counts, n=None):
    """``counts`` as an int64 array (n,) if they are finite non-negative integers, else raise.

    Parameters
    ----------
    counts : array_like, shape (n,)
    n : int, optional
        The number of rows the counts belong to.

    Raises
    ------
    ValueError
        Not one-dimensional, of another length than ``n``, or not finite non-negative integers
        (the message names the first bad entry).
    """
    c = np.asarray(counts)
    if c.ndim != 1 or (n is not None and c.shape[0] != n):
        raise ValueError(f"{_LENGTH_MSG}; got counts of shape {c.shape} for {n} rows")
    if c.dtype.kind not in "iufb":
        raise ValueError(f"{COUNTS_MSG}; got dtype {c.dtype}")
    cf = c.astype(np.float64)
    bad = ~(np.isfinite(cf) & (cf >= 0) & (cf == np.round(cf)))
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"{COUNTS_MSG}; got {c[i]!r} at row {i}")
    return cf.astype(np.int64)


class _RepeatOp:
    """Mixin of :class:`ExpandCounts` and :class:`RepeatRows`: node, ``perform``, shape."""

    def make_node(self, x, counts):
        x = pt.as_tensor_variable(x)
        counts = pt.as_tensor_variable(counts)
        if x.type.ndim < 1:
            raise TypeError(f"{type(self).__name__}: rows must have at least one dimension")
        if counts.type.ndim != 1 or counts.type.dtype not in (*pt.type.int_dtypes,
                                                              *pt.type.float_dtypes):
            raise TypeError(f"{type(self).__name__}: counts must be a numeric vector (n,); got "
                            f"{counts.type}")
        out = pt.tensor(dtype=x.type.dtype, shape=(None, *x.type.shape[1:]))
        return Apply(self, [x, counts], [out])

    def perform(self, node, inputs, output_storage):
        x, counts = inputs
        c = check_counts(counts, x.shape[0])
        output_storage[0][0] = np.repeat(x, c, axis=0)

    def infer_shape(self, node, input_shapes):
        x_shape, _ = input_shapes
        n_out = pt.cast(pt.sum(node.inputs[1]), "int64")
        return [(n_out, *x_shape[1:])]


class ExpandCounts(_RepeatOp, Op):
    """Op: rows (n, ...) and counts (n,) -> each row repeated its count times (N, ...).

    The value of an observed ranking variable with counts (one row per ballot); the
    distributions recognise it (:func:`pm_perm.distributions._ballots.distinct_rows`) and
    compute on the distinct rows. Data, not differentiable.
    """

    __props__ = ()

    def pullback(self, inputs, outputs, cotangents):
        x, counts = inputs
        return [grad_undefined(self, 0, x, "expand_counts expands data (orders), which has no "
                               "gradient; use repeat_rows for differentiable rows"),
                disconnected_type()]

    def connection_pattern(self, node):
        return [[False], [False]]


class RepeatRows(_RepeatOp, Op):
    """Op: rows ``x`` (n, ...) and counts (n,) -> each row repeated its count times (N, ...).

    Gradient in ``x``: the cotangent summed over each row's copies; in the counts: none.
    """

    __props__ = ()

    def connection_pattern(self, node):
        return [[True], [False]]

    def pullback(self, inputs, outputs, cotangents):
        x, counts = inputs
        (g,) = cotangents
        return [_segment_sum(g, x, counts), disconnected_type()]


def _broadcast_counts(counts, x):
    """``counts`` (n,) as a float tensor that broadcasts against ``x`` (n, ...)."""
    c = pt.cast(counts, "float64" if x.type.dtype not in pt.type.float_dtypes else x.type.dtype)
    return c.reshape((c.shape[0], *([1] * (x.type.ndim - 1)))) if x.type.ndim > 1 else c


def _row_constant(g):
    """A tensor ``v`` broadcastable along axis 0 with ``g = broadcast(v)`` when the cotangent
    ``g`` is recognisably the same for every row (the gradient of a sum: ``second(y, v)``,
    ``alloc(v, ...)``, possibly under an empty ``Sum``), else None."""
    while g.owner is not None:
        op = g.owner.op
        if g.type.broadcastable[0]:
            return g
        if isinstance(op, CAReduce) and op.axis is not None and len(op.axis) == 0:
            g = g.owner.inputs[0]
        elif isinstance(op, Elemwise) and isinstance(op.scalar_op, Second) \
                and g.owner.inputs[1].type.ndim == g.type.ndim:
            g = g.owner.inputs[1]
        elif isinstance(op, Alloc) and g.owner.inputs[0].type.ndim < g.type.ndim:
            v = g.owner.inputs[0]
            return pt.shape_padleft(v, g.type.ndim - v.type.ndim)
        else:
            return None
    return g if g.type.broadcastable[0] else None


def _segment_sum(g, x, counts):
    """``out[i] = sum of g over the copies of row i`` (x's shape): O(n) for the gradient of a
    sum, else a scatter-add of the N rows of ``g``."""
    v = _row_constant(g)
    if v is not None:
        c = _broadcast_counts(counts, x)
        return pt.cast(pt.second(x, v * c), x.type.dtype)
    n = x.shape[0]
    rows = repeat_rows(pt.arange(n, dtype="int64"), counts)
    return pt.inc_subtensor(pt.zeros_like(x)[rows], g)


expand_counts = ExpandCounts()
repeat_rows = RepeatRows()


# ----------------------------------------------------------------------------- rewrite


@register_canonicalize
@register_specialize
@node_rewriter([CAReduce])
def sum_of_repeat_rows(fgraph, node):
    """``sum(repeat_rows(x, c))`` over axis 0 (and any others) -> ``sum(c * x)`` (count 0 -> 0)."""
    if not isinstance(node.op.scalar_op, Add):
        return None
    (inp,) = node.inputs
    src = inp
    # PyMC allocates a logp to its variable's shape (PyTensor may turn that into a
    # SpecifyShape): the same shape here, the variable's rows being the ballots
    while src.owner is not None and (
            isinstance(src.owner.op, SpecifyShape)
            or (isinstance(src.owner.op, Alloc)
                and src.owner.inputs[0].type.ndim == src.type.ndim)):
        src = src.owner.inputs[0]
    if src.owner is None or not isinstance(src.owner.op, RepeatRows):
        return None
    x, counts = src.owner.inputs
    axis = tuple(range(inp.type.ndim)) if node.op.axis is None else tuple(node.op.axis)
    if 0 not in axis:
        return None
    c = _broadcast_counts(counts, x)
    weighted = pt.switch(pt.eq(c, 0), pt.zeros((), dtype=c.dtype), c * x)
    out = pt.sum(weighted, axis=axis)
    out = pt.cast(out, node.outputs[0].type.dtype)
    if out.type.broadcastable != node.outputs[0].type.broadcastable:
        return None
    return [out]


# ----------------------------------------------------------------------------- numba


def _repeat_numba():
    @numba_basic.numba_njit
    def repeat_numba(x, counts):
        n = x.shape[0]
        if counts.shape[0] != n:
            raise ValueError(_LENGTH_MSG)
        total = 0
        for i in range(n):
            c = np.float64(counts[i])
            if not (np.isfinite(c) and c >= 0.0 and c == np.floor(c)):
                raise ValueError(COUNTS_MSG)
            total += np.int64(c)
        rest = x.size // n if n > 0 else 0  # entries per row
        x2 = np.ascontiguousarray(x).reshape((n, rest))
        out = np.empty((total, rest), dtype=x.dtype)
        r = 0
        for i in range(n):
            for _ in range(np.int64(counts[i])):
                out[r] = x2[i]
                r += 1
        return out.reshape((total,) + x.shape[1:])

    return repeat_numba


@register_funcify_default_op_cache_key(ExpandCounts)
def _numba_expand_counts(op, node, **kwargs):
    return _repeat_numba()


@register_funcify_default_op_cache_key(RepeatRows)
def _numba_repeat_rows(op, node, **kwargs):
    return _repeat_numba()

