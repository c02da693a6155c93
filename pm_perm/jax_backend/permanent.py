"""Exact log-permanent and permutation marginals in JAX (no PyTensor here).

Same subset dynamic program as :mod:`pm_perm.kernels.permanent`, written for XLA: the forward
table ``f[S]`` (rows ``0..|S|-1`` onto the column set ``S``) is one array over all ``2^M``
bitmasks, filled one popcount layer at a time. Layer ``k`` is a gather and a matrix-vector
product, vectorised over the ``C(M, k)`` subsets of the layer:
``f[S] = sum_j f[S xor 2^j] B[k-1, j]``; for a column ``j`` not in ``S``, ``S xor 2^j`` lies in
layer ``k+1``, still zero, so no mask is needed. The backward table ``g`` and the marginals
``P[k, j] = B[k, j] sum_{|T|=k} f[T] g[T + {j}] / perm(B)`` come from the same gathers in
reverse layer order. Work O(M 2^M) per pass, memory 2^M floats (plus one layer of C(M, k) x M).

Scaling: ``W`` is shifted by row and column log-normalisers (a few Sinkhorn sweeps in log space,
held constant for differentiation: ``log perm`` moves by exactly the sum of the shifts), so
every entry of ``B`` is at most 1, each row and column sums to about 1, and the DP adds only
positive numbers below ``M!``. The dtype of ``W`` is kept: float64 when ``jax_enable_x64`` is on
(PyTensor's JAX linker turns it on for floatX = float64), float32 otherwise.

Gradient: :func:`log_permanent` has a ``jax.custom_vjp`` whose backward pass is the DP's own
(the marginals), so ``jax.grad`` costs about one more pass and no per-layer residuals. ``-inf``
logits are exact zeros of ``B`` with zero gradient; logits admitting no permutation give
``log perm = -inf`` and zero marginals; NaN, ``+inf`` or finite entries beyond ``LOGIT_ABS_MAX``
give NaN (as the numba Ops do). Second derivatives are not implemented (nor in numba).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from pm_perm.jax_backend._common import valid_logits

__all__ = ["log_permanent", "log_permanent_and_marginals", "permutation_marginals"]

#: Sinkhorn sweeps (log space) used to scale ``W`` before the DP; only conditioning depends on it.
SCALING_SWEEPS = 8


@functools.lru_cache(maxsize=None)
def _layers(M: int) -> tuple[np.ndarray, ...]:
    """Bitmasks of each popcount layer 0..M (int32, increasing)."""
    masks = np.arange(1 << M, dtype=np.int64)
    pop = np.zeros_like(masks)
    for j in range(M):
        pop += (masks >> j) & 1
    return tuple(masks[pop == k].astype(np.int32) for k in range(M + 1))


def _valid(W):
    return valid_logits(W)


def _logsumexp_finite(x, axis):
    """logsumexp along ``axis`` with an all ``-inf`` slice giving 0 (a harmless shift)."""
    m = jnp.max(x, axis=axis, keepdims=True)
    m = jnp.where(jnp.isfinite(m), m, 0.0)
    s = jnp.sum(jnp.exp(x - m), axis=axis, keepdims=True)
    return jnp.where(s > 0, m + jnp.log(jnp.where(s > 0, s, 1.0)), 0.0)


def _scaled(W):
    """``(B, shift)``: ``B = exp(W - r - c)`` with entries <= 1 and ``shift = sum r + sum c``."""
    W = jax.lax.stop_gradient(W)

    def sweep(_, rc):
        r = _logsumexp_finite(W - rc[1], axis=1)
        return r, _logsumexp_finite(W - r, axis=0)

    zeros = (jnp.zeros(W.shape[:1] + (1,), W.dtype), jnp.zeros((1,) + W.shape[1:], W.dtype))
    r, c = jax.lax.fori_loop(0, SCALING_SWEEPS, sweep, zeros)
    # make every entry <= 1 exactly (Sinkhorn leaves column sums 1, so this is a tiny correction)
    c = c + jnp.maximum(jnp.max(jnp.where(jnp.isfinite(W), W - r - c, -jnp.inf), axis=0,
                                keepdims=True), 0.0)
    return r, c


def _forward(B):
    """Forward table over all bitmasks (layer M holds ``perm(B)`` at the full mask)."""
    M = B.shape[0]
    pow2 = jnp.asarray(1 << np.arange(M), dtype=jnp.int32)
    f = jnp.zeros(1 << M, B.dtype).at[0].set(1.0)
    for k, S in enumerate(_layers(M)[1:], start=1):
        S = jnp.asarray(S)
        f = f.at[S].set(f[S[:, None] ^ pow2] @ B[k - 1])
    return f


def _marginals(B, f):
    """``P[i, j] = p(y[i] = j)`` from the forward table ``f`` by the backward pass."""
    M = B.shape[0]
    pow2 = jnp.asarray(1 << np.arange(M), dtype=jnp.int32)
    full = (1 << M) - 1
    g = jnp.zeros(1 << M, B.dtype).at[full].set(1.0)
    rows = []
    for k in range(M - 1, -1, -1):
        T = jnp.asarray(_layers(M)[k])
        G = g[T[:, None] ^ pow2]  # g[T + {j}] for j not in T; zero (layer k-1, unset) otherwise
        rows.append(B[k] * (f[T] @ G))
        if k > 0:
            g = g.at[T].set(G @ B[k])
    perm = f[full]
    P = jnp.stack(rows[::-1])
    return jnp.where(perm > 0, P / jnp.where(perm > 0, perm, 1.0), 0.0)


def _value_from(f, shift, ok):
    perm = f[-1]
    v = jnp.where(perm > 0, jnp.log(jnp.where(perm > 0, perm, 1.0)) + shift, -jnp.inf)
    return jnp.where(ok, v, jnp.nan)


def _run(W):
    r, c = _scaled(W)
    B = jnp.exp(W - r - c)
    f = _forward(B)
    return B, f, jnp.sum(r) + jnp.sum(c)


@jax.custom_vjp
def log_permanent(W):
    """``log perm(exp W)`` for logits ``W`` (M, M) -> (); ``jax.grad`` gives the marginals."""
    B, f, shift = _run(W)
    return _value_from(f, shift, _valid(W))


def _lp_fwd(W):
    B, f, shift = _run(W)
    ok = _valid(W)
    return _value_from(f, shift, ok), (B, f, ok)


def _lp_bwd(res, g):
    B, f, ok = res
    P = _marginals(B, f)
    return (jnp.where(ok, g * P, jnp.nan),)


log_permanent.defvjp(_lp_fwd, _lp_bwd)


@jax.custom_vjp
def log_permanent_and_marginals(W):
    """``(log perm(exp W), P)`` from one forward-backward pass; ``jax.grad`` of the value is
    ``P`` (the derivative of ``P``, second derivatives, is not implemented, as in numba)."""
    B, f, shift = _run(W)
    ok = _valid(W)
    return _value_from(f, shift, ok), jnp.where(ok, _marginals(B, f), jnp.nan)


def _both_fwd(W):
    v, P = log_permanent_and_marginals(W)
    return (v, P), P


def _both_bwd(P, cts):
    g_v, _ = cts
    return (g_v * P,)


log_permanent_and_marginals.defvjp(_both_fwd, _both_bwd)


def permutation_marginals(W):
    """``P[i, j] = p(y[i] = j)`` for logits ``W`` (M, M)."""
    return log_permanent_and_marginals(W)[1]
