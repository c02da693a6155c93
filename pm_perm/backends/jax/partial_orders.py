"""Exact likelihood of partial orders (top-k, ties) under the permutation exponential family in
JAX (no PyTensor here).

Where it runs: on a CPU, the numba kernel of the numba Ops
(:func:`pm_perm.kernels.partial_orders.partial_orders_core`) as an XLA FFI custom call
(:mod:`pm_perm.backends.jax.cpu_ffi`); on every other platform (GPU, TPU), with
``PM_PERM_JAX_XLA=1`` or inside ``xla_only()``, the XLA program below, which has no custom call
and no host callback, so XLA can also partition it over devices (the sharding recipe). On a
CPU the FFI call is about as fast as the numba path whether the orders are constants of the
program or inputs, while the XLA program is much slower with orders as inputs (parsed at every
call, O(n M^2)); so the CPU runs the FFI call (``benchmarks/bench_jax.py`` compares them).

Model and value convention: :mod:`pm_perm.kernels.partial_orders`. An order is a sequence of
blocks (:mod:`pm_perm.backends.jax.rank_form`); ``log p(order) = sum of middle single logits
W[i, start_i] + log h(last block) + sum of log perm(middle tie blocks) - log h(all items)``.

Suffix table
    ``log h(U)`` for every item set ``U`` (bijections of ``U`` onto the LAST ``|U|`` positions):
    ``log h(U) = logsumexp_{i in U} (log h(U - {i}) + W[i, M - |U|])``, the subset DP of
    :mod:`pm_perm.backends.jax.permanent` written for XLA the same way: one array over the ``2^M``
    bitmasks filled one popcount layer at a time, each layer a gather vectorised over its
    ``C(M, k)`` subsets. It is kept in LOG space with a log-sum-exp per subset (a maximum shift
    per subset), so no sum underflows whatever the spread of the logits and without the
    max-weight assignment's duals that the numba kernel and the XLA permanent scale by (those
    come from a host kernel): the XLA program has no host callback, on any platform, and XLA can
    partition it over devices. Its ``jax.custom_vjp`` is the adjoint sweep of the numba kernel in
    log space, the same gathers in reverse layer order. All orders of one ``W`` share the table:
    O(M 2^M) exp per pass whatever the number ``n`` of orders, plus O(M) gathers per order.

Tie blocks
    A middle tie block of ``s`` items at positions ``p .. p + s - 1`` contributes
    ``log perm(exp W[items, p:p+s])``: the same table (vmapped) for the ``s x s`` block, read at
    the block's items. Constant orders (observed data, known when the graph is compiled) are
    grouped by block size once; orders that are function inputs pad every order's blocks to a
    size class (2, 4, 8, ... items) picked at run time by ``lax.switch`` from the largest block
    present, O(n M T 2^T) for class ``T`` (0 when no order has a middle tie).

Values and gradients are those of the numba Ops: invalid rows ``-inf`` and no gradient; an order
impossible under ``W`` ``-inf`` with the gradient of its parts (each impossible part adds zero,
never NaN: every log-sum-exp is :func:`pm_perm.backends.jax._common.logsumexp`); NaN, ``+inf`` or
finite logits beyond ``LOGIT_ABS_MAX``, and logits admitting no permutation, give NaN values,
sums and gradients. The dtype of ``W`` is kept (float32 on a GPU in float32 mode).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from pm_perm.backends.jax import rank_form
from pm_perm.backends.jax._common import logsumexp, popcount_layers, valid_logits

__all__ = ["log_suffix_table", "loglik_fns"]


def _bits(S, k):
    """(C, k) int32: the ``k`` set bits of each bitmask of ``S`` (C,), ascending (computed in
    the program: a table of them would be M 2^(M-1) integers)."""
    out = []
    for _ in range(k):
        low = S & -S
        out.append(jax.lax.population_count(low - 1))
        S = S ^ low
    return jnp.stack(out, axis=1) if out else jnp.zeros(S.shape + (0,), jnp.int32)


def _table(W):
    M = W.shape[0]
    h = jnp.full(1 << M, -jnp.inf, W.dtype).at[0].set(0.0)
    for k in range(1, M + 1):
        S = jnp.asarray(popcount_layers(M)[k])
        J = _bits(S, k)  # the members i of each U = S: terms log h(U - {i}) + W[i, M - k]
        X = h[S[:, None] ^ jnp.left_shift(1, J)] + W[:, M - k][J]
        h = h.at[S].set(logsumexp(X), indices_are_sorted=True, unique_indices=True)
    return h


@jax.custom_vjp
def log_suffix_table(W):
    """``log h(U)`` for every bitmask ``U`` of the rows of ``W`` (M, M) -> (2^M,): the log-sum
    over bijections of the items ``U`` onto the last ``|U|`` positions (columns) of
    ``prod exp W``; ``-inf`` where there is none. ``h(all) = perm(exp W)``."""
    return _table(W)


def _table_fwd(W):
    h = _table(W)
    return h, (W, h)


def _table_bwd(res, A):
    """Adjoint sweep: ``A`` holds d out / d log h(U); layer k hands it down to each ``T`` of
    layer k - 1 from its supersets ``T + {j}``, weighted by ``exp(log h(T) + W[j, M - k] -
    log h(T + {j}))`` (the softmax weight of that term of the log-sum-exp), which also sum to
    the gradient of column ``M - k``. Gathers only, except that column's M-bin sum."""
    W, h = res
    A = jnp.asarray(A, h.dtype)
    M = W.shape[0]
    full = (1 << M) - 1
    G = jnp.zeros_like(W)
    for k in range(M, 0, -1):
        T = jnp.asarray(popcount_layers(M)[k - 1])
        N = _bits(full ^ T, M - k + 1)  # the items j not in T
        succ = T[:, None] | jnp.left_shift(1, N)
        hs = h[succ]
        live = hs > -jnp.inf  # else no bijection: zero weight (never -inf - -inf)
        x = jnp.where(live, h[T][:, None] + W[:, M - k][N] - jnp.where(live, hs, 0.0), -jnp.inf)
        E = A[succ] * jnp.exp(x)  # x <= 0 where live: one term of the log-sum-exp
        G = G.at[:, M - k].set(jnp.zeros(M, W.dtype).at[N.ravel()].add(E.ravel()))
        A = A.at[T].add(jnp.sum(E, axis=1), indices_are_sorted=True, unique_indices=True)
    return (G,)


log_suffix_table.defvjp(_table_fwd, _table_bwd)


def _tie_values(W, per_order, group):
    """``log perm(exp W[items, start:start + size])`` of each block of ``group`` (nb,): the
    suffix table of the ``T x T`` matrix whose last ``size`` columns are the block's positions,
    read at its first ``size`` items (the padding never enters that entry)."""
    M = W.shape[0]
    T = group.items.shape[1]
    cols = jnp.clip(group.start[:, None] + group.size[:, None] - T + jnp.arange(T), 0, M - 1)
    sub = W[group.items[:, :, None], cols[:, None, :]]  # (nb, T, T)
    h = jax.vmap(log_suffix_table)(sub)
    real = (jnp.left_shift(1, group.size) - 1).astype(jnp.int32)
    return jnp.take_along_axis(h, real[:, None], axis=1)[:, 0]


def _values(W, blocks, groups):
    """Per-order ``log p`` (n,) (differentiable in ``W``; ``-inf`` for invalid rows) and
    ``log perm(exp W)``."""
    n, M = blocks.start.shape
    h = log_suffix_table(W)
    lz = h[-1]
    item = jnp.arange(M, dtype=jnp.int32)
    pos = jnp.where(blocks.single(), blocks.start, M)  # M: no term
    We = jnp.concatenate([W, jnp.zeros((M, 1), W.dtype)], axis=1)
    suffix = jnp.sum(jnp.where(blocks.last(), jnp.left_shift(1, item), 0), axis=1)
    # one gather per item from its row: XLA's gathers from a small row are far cheaper than
    # one (n, M) gather from the whole matrix
    lp = sum(We[i][pos[:, i]] for i in range(M)) + h[suffix]
    if groups is None:
        lp = lp + rank_form.traced_tie_sum(_tie_values, W, None, blocks, M - 1)
    else:
        for g in groups.values():
            lp = lp + rank_form.tie_sum(_tie_values, W, None, g, n)
    return jnp.where(blocks.valid, lp - lz, -jnp.inf), lz


def _check(W, orders, max_m):
    M0, M1 = W.shape[-2:]
    if M0 != M1:
        raise ValueError(f"logits must be square (M, M); got shape {W.shape}")
    if M0 > max_m:
        raise ValueError(f"M = {M0} is beyond the exact limit {max_m} of the partial-order "
                         "likelihood")
    if orders.shape[-1] != M0:
        raise ValueError(f"orders have {orders.shape[-1]} columns but the logits are "
                         f"{M0} x {M0}")


def _xla(W, blocks, groups, w):
    """Values (n,) and, if ``w`` is given, the gradient of ``sum_n w_n values_n``, with the NaN
    semantics of the numba Ops."""
    ok = valid_logits(W)
    W0 = jnp.where(ok, W, 0.0)
    if w is None:
        values, lz = _values(W0, blocks, groups)
        grad = None
    else:
        values, vjp, lz = jax.vjp(lambda x: _values(x, blocks, groups), W0, has_aux=True)
        grad = vjp(jnp.where(w != 0, w, 0.0))[0]
    good = ok & (lz > -jnp.inf)
    values = jnp.where(good, values, jnp.nan)
    return values if w is None else (values, jnp.where(good, grad, jnp.nan))


def loglik_fns(max_m, orders=None):
    """``(loglik, sum_and_grad, values_and_grad)`` of the partial-order Ops
    (:func:`pm_perm.backends.jax.rank_form.loglik_fns`): ``W`` (M, M), orders (n, M), weights
    (n,). On a CPU the numba kernel runs (an FFI custom call); on every other platform, with
    ``PM_PERM_JAX_XLA=1`` or inside ``xla_only()``, the XLA program above.

    ``orders``: the orders when they are constants of the compiled graph (parsed once here for
    the XLA program, which then ignores its ``orders`` argument); ``None`` parses them in the
    program.
    """
    if orders is not None:
        const, seq = rank_form.blocks_numpy(orders)
        groups = rank_form.tie_groups_numpy(const, seq)

    def xla(W, o, w):
        if orders is not None:
            return _xla(W, rank_form.Blocks(*(jnp.asarray(a) for a in const)), groups, w)
        return _xla(W, rank_form.blocks_jax(o), None, w)

    return rank_form.loglik_fns("pm_perm_partial_orders", 2,
                                lambda W, o: _check(W, o, max_m), xla)
