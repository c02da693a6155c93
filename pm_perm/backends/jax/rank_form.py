"""Rank-form orders as block arrays for the XLA likelihoods of partial orders and Plackett-Luce.

The value convention is the one of :mod:`pm_perm.kernels.rank_form` (``y[i]`` = position of item
``i``, tied items share the smallest position of their block, ``-1`` = unranked, forming an
implicit last block). The XLA programs need it as fixed-shape arrays, one row per order
(:class:`Blocks`): whether the row is valid, and the first position and the size of the block
of each item. An item is in the LAST block iff ``start + size == M``; every other block is a
"middle" block, of one item (a logit / a Plackett-Luce factor) or a tie block of ``s >= 2``
items (a small block DP). Invalid rows are given the structure of the all-unranked order (one
block of every item), so everything computed from them is finite before the final ``-inf``.

Orders known when the graph is compiled (observed data: PyTensor constants) are parsed here once
by the numba parser of the numba path (:func:`blocks_numpy`), and their tie blocks are grouped by
exact size (:func:`tie_groups_numpy`). Orders that are inputs of the compiled function
(``pm.Data`` under nutpie's JAX backend, the sharding recipe) are parsed by the XLA program at
each call (:func:`blocks_jax`, O(n M^2) compares), and their tie blocks are padded to a size
class chosen at run time (:func:`traced_tie_sum`).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from pm_perm._numba import njit
from pm_perm.backends.jax import cpu_ffi
from pm_perm.backends.jax.platform import on_platform, use_cpu_kernel
from pm_perm.kernels.rank_form import order_blocks

__all__ = ["Blocks", "TIE_BATCH_ELEMENTS", "TieGroup", "blocks_jax", "blocks_numpy",
           "loglik_fns", "position_order", "tie_groups_numpy", "tie_sum", "traced_tie_sum"]

#: Tie blocks are evaluated in batches of about this many table entries (``T 2^T`` per block of
#: ``T`` items; 8 MiB of float64 per intermediate), each batch recomputed in the backward pass
#: (``jax.checkpoint``), so the memory does not grow with the number of blocks.
TIE_BATCH_ELEMENTS = 1 << 20


class Blocks(NamedTuple):
    """Orders (n, M) as block arrays: ``valid`` (n,); ``start``, ``size`` (n, M) of the block
    holding each item; ``head`` (n, M): the size of the ranked block starting at each position
    (0 where none starts, and at the unranked positions)."""

    valid: jax.Array
    start: jax.Array
    size: jax.Array
    head: jax.Array

    def single(self):
        """(n, M) bool: the item forms a middle block on its own."""
        return (self.size == 1) & (self.start + self.size < self.start.shape[-1])

    def last(self):
        """(n, M) bool: the item is in the last block."""
        return self.start + self.size == self.start.shape[-1]

    def tied(self):
        """(n, M) bool: the item is in a middle tie block."""
        return (self.size >= 2) & (self.start + self.size < self.start.shape[-1])


class TieGroup(NamedTuple):
    """Middle tie blocks padded to ``T = items.shape[1]`` items: block ``b`` of order
    ``order[b]`` holds ``items[b, :size[b]]`` at positions ``start[b] .. start[b] + size[b] - 1``
    (``size[b] = 0``: an empty slot, contributing 0)."""

    order: jax.Array
    items: jax.Array
    start: jax.Array
    size: jax.Array


@njit(cache=True)
def _blocks_numba(orders):
    n, M = orders.shape
    valid = np.zeros(n, dtype=np.bool_)
    start = np.zeros((n, M), dtype=np.int32)
    size = np.full((n, M), M, dtype=np.int32)
    head = np.zeros((n, M), dtype=np.int32)
    seq = np.empty((n, M), dtype=np.int32)
    s = np.empty(M, dtype=np.int64)
    st = np.empty(M + 1, dtype=np.int64)
    for r in range(n):
        nb = order_blocks(orders[r], s, st)
        if nb < 0:
            for i in range(M):
                seq[r, i] = i
            continue
        valid[r] = True
        for b in range(nb):
            if orders[r, s[st[b]]] >= 0:  # a ranked block (not the unranked tail)
                head[r, st[b]] = st[b + 1] - st[b]
            for t in range(st[b], st[b + 1]):
                seq[r, t] = s[t]
                start[r, s[t]] = st[b]
                size[r, s[t]] = st[b + 1] - st[b]
    return valid, start, size, head, seq


def blocks_numpy(orders):
    """``(Blocks, seq)`` of constant orders (n, M), by the numba parser of the numba path, as
    NumPy arrays; ``seq`` (n, M) lists each order's items in position order (the items of a
    block by item id)."""
    arr = np.ascontiguousarray(np.asarray(orders), dtype=np.int64)
    if arr.ndim != 2:
        raise ValueError(f"orders must have shape (n, M); got {arr.shape}")
    valid, start, size, head, seq = _blocks_numba(arr)
    return Blocks(valid, start, size, head), seq


def blocks_jax(orders):
    """:class:`Blocks` of traced orders (n, M), vectorised: one O(n M^2) compare (the count of
    items at each value), the rest O(n M) bit operations.

    With ``r`` ranked items, ``c_v`` items at value ``v`` and ``next(v)`` the next value present
    after ``v`` (``r`` after the last), a row with values in ``-1..M-1`` is valid rank form iff
    value 0 is present (unless ``r = 0``) and ``c_v = next(v) - v`` for every present ``v``: the
    blocks then tile ``0..r-1`` (a present value ``>= r`` fails at the largest one). These are
    the rows :func:`pm_perm.kernels.rank_form.order_blocks` accepts; an item's block has the
    size ``next(y_i) - y_i``.
    """
    n, M = orders.shape
    y = orders.astype(jnp.int32)
    in_range = jnp.all((y >= -1) & (y < M), axis=1)
    y = jnp.where(in_range[:, None], y, -1)
    v = jnp.arange(M, dtype=jnp.int32)
    count = jnp.sum(y[:, :, None] == v, axis=1, dtype=jnp.int32)  # (n, M): items at value v
    ranked = M - jnp.sum(y < 0, axis=1, dtype=jnp.int32)
    present = jnp.sum(jnp.where(count > 0, jnp.left_shift(1, v), 0), axis=1, dtype=jnp.int32)

    def after(p):
        """The next present value after ``p`` (elementwise), ``r`` if none."""
        rest = present[:, None] & ~(jnp.left_shift(2, p) - 1)
        return jnp.where(rest != 0, jax.lax.population_count((rest & -rest) - 1), ranked[:, None])

    is_present = count > 0
    valid = (in_range & ((ranked == 0) | ((present & 1) == 1))
             & jnp.all(~is_present | (count == after(v) - v), axis=1))
    start = jnp.where(y >= 0, y, ranked[:, None])
    size = jnp.where(y >= 0, after(jnp.maximum(y, 0)) - y, (M - ranked)[:, None])
    out = (valid, jnp.where(valid[:, None], start, 0), jnp.where(valid[:, None], size, M),
           jnp.where(valid[:, None], count, 0))
    # materialised once: without the barrier XLA fuses these O(n M) bit operations into every
    # consumer, recomputing them (slower value and gradient)
    return Blocks(*jax.lax.optimization_barrier(out))


def position_order(blocks):
    """(n, M) int32: each order's items in position order (the items of a block by item id),
    for traced orders: item ``i`` is at ``start_i + #{j < i in its block}``, inverted by
    compares (O(n M^2); a sort per row is slower in XLA on a CPU)."""
    M = blocks.start.shape[-1]
    st = blocks.start
    item = jnp.arange(M, dtype=jnp.int32)
    before = (st[:, None, :] == st[:, :, None]) & (item < item[:, None])  # [n, i, j]: j < i
    rank = st + jnp.sum(before, axis=2, dtype=jnp.int32)
    return jnp.sum(jnp.where(rank[:, None, :] == item[:, None], item, 0), axis=2,
                   dtype=jnp.int32)


def tie_groups_numpy(blocks, seq):
    """The middle tie blocks of parsed constant orders, one :class:`TieGroup` per block size
    (no padding), as NumPy arrays: ``{size: TieGroup}``."""
    M = blocks.start.shape[1]
    st = np.take_along_axis(blocks.start, seq, axis=1)
    sz = np.take_along_axis(blocks.size, seq, axis=1)
    r, p = np.nonzero((st == np.arange(M)) & (sz >= 2) & (st + sz < M))
    groups = {}
    for s in np.unique(sz[r, p]):
        sel = sz[r, p] == s
        rs, ps = r[sel], p[sel]
        items = seq[rs[:, None], ps[:, None] + np.arange(s)]
        groups[int(s)] = TieGroup(rs.astype(np.int32), items.astype(np.int32),
                                  ps.astype(np.int32), np.full(rs.size, s, dtype=np.int32))
    return groups


def tie_sum(block_values, x, per_order, group, n):
    """Per-order sums (n,) of ``block_values(x, per_order, group) -> (nb,)`` over the blocks of
    ``group``, in checkpointed batches of about :data:`TIE_BATCH_ELEMENTS` table entries
    (``lax.map``) when there are many. ``per_order``: arrays (n, ...) that ``block_values``
    reads at ``group.order`` (or None)."""
    nb, T = group.items.shape
    B = max(1, TIE_BATCH_ELEMENTS // (T << T))
    if nb <= B:
        values = block_values(x, per_order, group)
    else:
        pad = -nb % B  # padding blocks have size 0 (value 0) and are cut off again
        chunks = TieGroup(*(jnp.concatenate([jnp.asarray(a), jnp.zeros((pad,) + a.shape[1:],
                                                                       a.dtype)])
                            .reshape((-1, B) + a.shape[1:]) for a in group))
        one = jax.checkpoint(lambda g: block_values(x, per_order, TieGroup(*g)))
        values = jax.lax.map(one, chunks).reshape(-1)[:nb]
    return jax.ops.segment_sum(values, group.order, num_segments=n)


def _tie_slots(blocks, T):
    """The middle tie blocks of traced orders as one :class:`TieGroup` padded to ``T`` items:
    one slot per order and position ``0 .. M - 3`` (where a middle block of two or more items
    can start), empty (size 0) where none starts; the block's items are the set bits of its item
    mask, in increasing order."""
    n, M = blocks.start.shape
    P = max(M - 2, 1)
    p = jnp.arange(P, dtype=jnp.int32)
    here = (blocks.start[:, None, :] == p[:, None]) & blocks.tied()[:, None, :]  # (n, P, M)
    size = jnp.sum(here, axis=2, dtype=jnp.int32)
    mask = jnp.sum(jnp.where(here, jnp.left_shift(1, jnp.arange(M, dtype=jnp.int32)), 0),
                   axis=2, dtype=jnp.int32)
    items = []
    for _ in range(T):  # the T lowest set bits (0 once the mask is empty)
        low = mask & -mask
        items.append(jnp.where(low > 0, jax.lax.population_count(low - 1), 0))
        mask = mask ^ low
    order = jnp.repeat(jnp.arange(n, dtype=jnp.int32), P)
    return TieGroup(order, jnp.stack(items, axis=2).reshape(n * P, T),
                    jnp.broadcast_to(p, (n, P)).reshape(-1), size.reshape(-1))


def _class_sum(block_values, x, per_order, blocks, T):
    """Tie sums (n,) of traced orders with every block padded to ``T`` items, over checkpointed
    batches of orders (``lax.map``), so that even the unused classes of :func:`traced_tie_sum`
    need only one batch's memory."""
    n, M = blocks.start.shape
    C = max(1, TIE_BATCH_ELEMENTS // (max(M - 2, 1) * T << T))
    if n <= C:
        return tie_sum(block_values, x, per_order, _tie_slots(blocks, T), n)
    pad = -n % C  # padding orders: invalid, one block of all items, no tie block

    def batches(a, fill):
        a = jnp.concatenate([a, jnp.full((pad,) + a.shape[1:], fill, a.dtype)])
        return a.reshape((-1, C) + a.shape[1:])

    chunks = (Blocks(batches(blocks.valid, False), batches(blocks.start, 0),
                     batches(blocks.size, M), batches(blocks.head, 0)),
              jax.tree.map(lambda a: batches(a, 0), per_order))

    def one(chunk):
        b, po = chunk
        return tie_sum(block_values, x, po, _tie_slots(Blocks(*b), T), C)

    return jax.lax.map(jax.checkpoint(one), chunks).reshape(-1)[:n]


def _size_classes(limit):
    """Padded sizes of the run-time tie classes: 2, 4, 8, ... and ``limit``."""
    out, T = [], 2
    while T < limit:
        out.append(T)
        T *= 2
    return out + [limit] if limit >= 2 else out


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1))
def _traced_ties(block_values, limit, x, per_order, blocks, index):
    return _switch(block_values, limit, index, lambda f: f(x, per_order), blocks)


def _switch(block_values, limit, index, how, blocks):
    """``lax.switch`` over the size classes of ``blocks``; ``how(f)`` applies the class's tie
    sum ``f(x, per_order)`` (its value, or its VJP). Branch 0: no tie block; last: a block
    beyond ``limit`` (NaN)."""
    n, M = blocks.start.shape
    classes = _size_classes(min(limit, M - 1))

    def branch(T):
        return lambda _: how(lambda x, po: _class_sum(block_values, x, po, blocks, T))

    zero = how(lambda x, po: jnp.zeros(n, jnp.result_type(*jax.tree.leaves(x))))
    zero = jax.tree.map(jnp.zeros_like, zero)
    nan = jax.tree.map(lambda a: jnp.full_like(a, jnp.nan), zero)
    return jax.lax.switch(index, [lambda _: zero] + [branch(T) for T in classes]
                          + [lambda _: nan], None)


def _traced_fwd(block_values, limit, x, per_order, blocks, index):
    out = _traced_ties(block_values, limit, x, per_order, blocks, index)
    return out, (x, per_order, blocks, index)


def _traced_bwd(block_values, limit, res, g):
    # the backward pass runs the same switch (a differentiated lax.switch would keep zero-filled
    # residuals of EVERY class, the largest included, whatever the data)
    x, per_order, blocks, index = res
    grads = _switch(block_values, limit, index,
                    lambda f: jax.vjp(f, x, per_order)[1](g), blocks)
    return (*grads, None, None)


_traced_ties.defvjp(_traced_fwd, _traced_bwd)


def traced_tie_sum(block_values, x, per_order, blocks, limit):
    """:func:`tie_sum` over the middle tie blocks of orders parsed at run time: every order's
    blocks padded to the smallest class (2, 4, 8, ..., ``limit`` items) that holds the largest
    block present, chosen by ``lax.switch`` (so orders without ties pay nothing). Orders with a
    block beyond ``limit`` get NaN (all of them: the class is chosen for the whole batch)."""
    M = blocks.start.shape[-1]
    big = jnp.max(jnp.where(blocks.tied(), blocks.size, 0), initial=0)
    bounds = jnp.asarray([0] + _size_classes(min(limit, M - 1)), dtype=big.dtype)
    return _traced_ties(block_values, limit, x, per_order, blocks, jnp.sum(big > bounds))


def _ffi(target, param_ndim, x, o, w, want_grad):
    """The family's numba kernel as an XLA FFI custom call (CPU): per-order values
    ``x.shape[:-param_ndim] + (n,)`` and, with ``want_grad``, the gradient (``x.shape``)."""
    shapes = [jax.ShapeDtypeStruct(x.shape[:x.ndim - param_ndim] + o.shape[-2:-1], x.dtype)]
    if want_grad:
        shapes.append(jax.ShapeDtypeStruct(x.shape, x.dtype))
    out = cpu_ffi.call(target, shapes, x, o, w, vmap_method="expand_dims")
    return tuple(out) if want_grad else out[0]


def loglik_fns(target, param_ndim, check, xla):
    """``(loglik, sum_and_grad, values_and_grad)``, the JAX bodies of a family of rank-form
    likelihood Ops. The family gives its FFI ``target`` (:mod:`pm_perm.backends.jax.cpu_ffi`),
    the number of trailing axes of one parameter ``x`` (2 for a logits matrix, 1 for
    utilities), ``check(x, orders)`` (raises on shapes the kernel refuses) and its XLA program
    ``xla(x, orders, w)``: the per-order values (``w`` None) or ``(values, gradient of
    sum_n w_n values_n)``. On a CPU the FFI call runs, elsewhere the XLA program
    (:func:`pm_perm.backends.jax.platform.on_platform`); rows of weight 0 or invalid add nothing
    to the gradient, as in the numba kernels. The platform choice (``cpu``, i.e.
    :func:`pm_perm.backends.jax.platform.use_cpu_kernel`) is read when a function is called, and
    the backward passes use the forward pass's value:

    * ``loglik(x, orders) -> (n,)``, whose ``jax.grad`` is ``values_and_grad`` with the
      cotangent as weights (the forward pass keeps no residual but the inputs);
    * ``sum_and_grad(x, orders, w) -> (sum_n w_n values_n, its gradient)`` from one pass; rows
      of weight 0 add nothing to the sum (not even ``0 * -inf``); ``jax.grad`` of the sum is
      that gradient in ``x`` and the values in ``w``;
    * ``values_and_grad(x, orders, w)`` (no derivative).

    Second derivatives are not implemented (as in numba).
    """

    # Each XLA program traced once per argument shapes and dtypes: a program that calls
    # ``values_and_grad`` twice (``sum_and_grad`` and the backward pass of ``loglik``) reuses
    # the first trace (tracing is about half of such a program's compile time at M = 5).
    xla_values = jax.jit(lambda x, o: xla(x, o, None))
    xla_values_and_grad = jax.jit(xla)

    def values(cpu, x, o):
        check(x, o)
        w = jnp.zeros(o.shape[:-1], x.dtype)
        return on_platform((x, o, w), lambda x, o, w: _ffi(target, param_ndim, x, o, w, False),
                           lambda x, o, w: xla_values(x, o), cpu)

    def values_and_grad(cpu, x, o, w):
        check(x, o)
        return on_platform((x, o, w), lambda x, o, w: _ffi(target, param_ndim, x, o, w, True),
                           xla_values_and_grad, cpu)

    @functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
    def loglik(cpu, x, o):
        return values(cpu, x, o)

    def loglik_fwd(cpu, x, o):
        return values(cpu, x, o), (x, o)

    def loglik_bwd(cpu, res, g):
        x, o = res
        return values_and_grad(cpu, x, o, g.astype(x.dtype))[1], None

    loglik.defvjp(loglik_fwd, loglik_bwd)

    def sum_fwd(cpu, x, o, w):
        v, g = values_and_grad(cpu, x, o, w.astype(x.dtype))
        w = w.astype(v.dtype)
        return (jnp.sum(jnp.where(w != 0, w * v, 0.0)), g), (g, v)

    @functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
    def sum_and_grad(cpu, x, o, w):
        return sum_fwd(cpu, x, o, w)[0]

    def sum_bwd(cpu, res, cts):
        g, v = res
        g_v, _ = cts  # the gradient output's own derivative is not implemented (as in numba)
        return g_v * g, None, g_v * v

    sum_and_grad.defvjp(sum_fwd, sum_bwd)
    return (lambda x, o: loglik(use_cpu_kernel(), x, o),
            lambda x, o, w: sum_and_grad(use_cpu_kernel(), x, o, w),
            lambda x, o, w: values_and_grad(use_cpu_kernel(), x, o, w))
