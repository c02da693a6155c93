"""Plackett-Luce log-likelihood of rank-form orders (top-k, ties) in JAX (no PyTensor here).

Where it runs: on a CPU, the numba kernel of the numba Ops
(:func:`pm_perm.kernels.plackett_luce.plackett_luce_core`) as an XLA FFI custom call
(:mod:`pm_perm.backends.jax.cpu_ffi`); on every other platform (GPU, TPU), with
``PM_PERM_JAX_XLA=1`` or inside ``xla_only()``, the XLA program below (no custom call, no host
callback: XLA can partition it). On a CPU the FFI call is as fast as the numba path, while the
XLA program is slower (XLA's per-position scan and transcendental functions are slower than
numba's loop on a CPU), much slower with the orders as inputs (parsed at every call); so the CPU
runs the FFI call (``benchmarks/bench_jax.py`` compares them).

Model, tie rule and value convention: :mod:`pm_perm.kernels.plackett_luce`. With the items of
each order in position order (``seq``, :mod:`pm_perm.backends.jax.rank_form`) and
``L_t = log sum_{s >= t} exp(u[seq_s])`` (a ``logaddexp`` per position, scanned from the last),

* a middle block of one item at position ``t`` contributes ``u[seq_t] - L_t``;
* a middle tie block ``S`` at positions ``p .. p + s - 1`` contributes the exact log-probability
  that its items fill them in any internal order: the subset DP over ``S`` of the numba kernel,
  ``log f(A) = logsumexp_{i in A} (log f(A - {i}) + u_i - log(T + sum_{j in S - (A - {i})}
  exp(u_j)))`` with ``log T = L_{p + s}``, in log space over the ``2^s`` subsets (blocks of one
  size vectorised together; constant orders grouped by size once, traced ones padded to a size
  class picked at run time, as for the partial orders);
* the last block contributes 0.

Everything is in log space (``logaddexp`` and :func:`pm_perm.backends.jax._common.logsumexp`), so
no sum underflows whatever the spread of the utilities (the numba kernel switches to log space
when a suffix sum falls below 1e-250). Cost O(n M) per utilities vector (plus O(s 2^s) per tie
block); ``jax.grad`` by automatic differentiation of those passes.

Values and gradients are those of the numba Ops: invalid rows ``-inf`` with no gradient; NaN or
infinite utilities NaN (values, sums, gradients). A tie block of more than ``TIE_BLOCK_MAX``
items before the last block is an error in numba: here a ``ValueError`` when the orders are
constants of the graph (parsed when the program is built), and otherwise NaN values and gradient
for every order of the call (JAX cannot raise at run time).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from pm_perm.backends.jax import rank_form
from pm_perm.backends.jax._common import logsumexp, popcount_layers
from pm_perm.kernels.plackett_luce import TIE_BLOCK_MAX

__all__ = ["loglik_fns"]


def _logaddexp(a, b):
    """``log(exp a + exp b)`` for finite arguments (XLA's ``logaddexp`` is slower here)."""
    return jnp.maximum(a, b) + jnp.log1p(jnp.exp(-jnp.abs(a - b)))


def _suffix_lse(useq):
    """``L[t] = log sum_{s >= t} exp(useq[s])`` for positions ``t`` along axis 0 of (M, n):
    a ``lax.scan`` from the last position (an unrolled loop lets XLA fuse the chain into every
    position, recomputing it: much slower with the gradient)."""
    def step(acc, x):
        acc = _logaddexp(acc, x)
        return acc, acc

    rest = jax.lax.scan(step, useq[-1], useq[:-1], reverse=True)[1]
    return jnp.concatenate([rest, useq[-1:]])


def _tie_values(u, L, group):
    """log PL probability that each block of ``group`` fills its positions in any order (nb,),
    given ``log T = L[order, start + size]`` after it: the numba kernel's subset DP in log
    space over the bitmasks of the block's first ``size`` items (padding items never enter the
    entry that is read)."""
    nb, T = group.items.shape
    M = L.shape[1]
    uu = u[group.items]  # (nb, T)
    lam = L[group.order, jnp.minimum(group.start + group.size, M - 1)]
    real = (jnp.left_shift(1, group.size) - 1).astype(jnp.int32)
    masks = jnp.arange(1 << T, dtype=jnp.int32)
    bits = jnp.arange(T, dtype=jnp.int32)
    member = ((masks[:, None] >> bits) & 1) == 1  # (2^T, T)
    lsum = logsumexp(jnp.where(member, uu[:, None, :], -jnp.inf))  # (nb, 2^T) LSE over C
    ld = logsumexp(jnp.stack([jnp.broadcast_to(lam[:, None], lsum.shape), lsum]), axis=0)
    pow2 = jnp.left_shift(1, bits)
    lf = jnp.full((nb, 1 << T), -jnp.inf, u.dtype).at[:, 0].set(0.0)
    for k in range(1, T + 1):
        A = jnp.asarray(popcount_layers(T)[k])
        B = A[:, None] ^ pow2  # A - {i} for members i; A + {i} (layer k + 1, still -inf) else
        rest = real[:, None, None] & ~B  # S - (A - {i})
        x = lf[:, B] + uu[:, None, :] - jnp.take_along_axis(
            ld, rest.reshape(nb, -1), axis=1).reshape(rest.shape)
        lf = lf.at[:, A].set(logsumexp(x))
    return jnp.take_along_axis(lf, real[:, None], axis=1)[:, 0]


def _values(u, blocks, seq_t, groups):
    """Per-order log PL probability (n,) (differentiable in ``u``; ``-inf`` for invalid rows),
    from ``seq_t`` (M, n): the items at each position (positions along axis 0, so that every
    per-position step reads a contiguous row)."""
    M, n = seq_t.shape
    useq = jnp.stack([u[seq_t[t]] for t in range(M)])  # one gather from u per position
    L = _suffix_lse(useq)
    single = (blocks.head.T == 1) & (jnp.arange(M)[:, None] < M - 1)
    lp = jnp.sum(jnp.where(single, useq - L, 0.0), axis=0)
    if groups is None:
        lp = lp + rank_form.traced_tie_sum(_tie_values, u, L.T, blocks,
                                           min(TIE_BLOCK_MAX, M - 1))
    else:
        for g in groups.values():
            lp = lp + rank_form.tie_sum(_tie_values, u, L.T, g, n)
    return jnp.where(blocks.valid, lp, -jnp.inf)


def _xla(u, blocks, seq_t, groups, w):
    """Values (n,) and, if ``w`` is given, the gradient of ``sum_n w_n values_n``, with the NaN
    semantics of the numba Ops."""
    good = jnp.all(jnp.isfinite(u))
    u0 = jnp.where(good, u, 0.0)
    if w is None:
        return jnp.where(good, _values(u0, blocks, seq_t, groups), jnp.nan)
    values, vjp = jax.vjp(lambda x: _values(x, blocks, seq_t, groups), u0)
    grad = vjp(jnp.where(w != 0, w, 0.0))[0]
    return jnp.where(good, values, jnp.nan), jnp.where(good, grad, jnp.nan)


def loglik_fns(orders=None):
    """``(loglik, sum_and_grad, values_and_grad)`` of the Plackett-Luce Ops
    (:func:`pm_perm.backends.jax.rank_form.loglik_fns`): utilities (M,), orders (n, M), weights
    (n,). On a CPU the numba kernel runs (an FFI custom call); on every other platform, with
    ``PM_PERM_JAX_XLA=1`` or inside ``xla_only()``, the XLA program above.

    ``orders``: the orders when they are constants of the compiled graph (parsed once here for
    the XLA program, which then ignores its ``orders`` argument; a tie block beyond
    ``TIE_BLOCK_MAX`` raises ``ValueError`` now); ``None`` parses them in the program.
    """
    if orders is not None:
        const, seq_np = rank_form.blocks_numpy(orders)
        groups = rank_form.tie_groups_numpy(const, seq_np)
        if groups and max(groups) > TIE_BLOCK_MAX:
            raise ValueError(f"an order has a tie block of more than TIE_BLOCK_MAX = "
                             f"{TIE_BLOCK_MAX} items before its last block; its exact "
                             "probability costs O(s 2^s)")

    def xla(u, o, w):
        if orders is not None:
            blocks = rank_form.Blocks(*(jnp.asarray(a) for a in const))
            return _xla(u, blocks, jnp.asarray(seq_np.T), groups, w)
        blocks = rank_form.blocks_jax(o)
        return _xla(u, blocks, rank_form.position_order(blocks).T, None, w)

    def check(u, o):
        if u.shape[-1] != o.shape[-1]:
            raise ValueError(f"orders have {o.shape[-1]} items but utilities have "
                             f"{u.shape[-1]}")

    return rank_form.loglik_fns("pm_perm_plackett_luce", 1, check, xla)
