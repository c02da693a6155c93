"""Exact log-permanent and permutation marginals in JAX (no PyTensor here).

Where it runs: on a CPU, the value and the marginals come from pm_perm's numba kernel (the one
the numba Ops call), as an XLA FFI custom call (:mod:`pm_perm.backends.jax.cpu_ffi`), because the
XLA DP below is several times slower on a CPU (``benchmarks/bench_jax.py``); on every other
platform (GPU, TPU), with ``PM_PERM_JAX_XLA=1``, or inside
:func:`pm_perm.backends.jax.platform.xla_only`, the XLA DP runs. The choice is made when the
program is lowered for its platform (``jax.lax.platform_dependent``).

XLA DP: the same subset dynamic program as :mod:`pm_perm.kernels.permanent`, written for XLA:
the forward table ``f[S]`` (rows ``0..|S|-1`` onto the column set ``S``) is one array over all
``2^M`` bitmasks, filled one popcount layer at a time. Layer ``k`` is a gather and a
matrix-vector product, vectorised over the ``C(M, k)`` subsets of the layer: ``f[S] = sum_j f[S
xor 2^j] B[k-1, j]``; for a column ``j`` not in ``S``, ``S xor 2^j`` lies in layer ``k+1``,
still zero, so no mask is needed. The backward table ``g`` and the marginals ``P[k, j] = B[k, j]
sum_{|T|=k} f[T] g[T + {j}] / perm(B)`` come from the same gathers in reverse layer order. Work
O(M 2^M) per pass, memory 2^M floats (plus one layer of C(M, k) x M).

Scaling: as in the numba kernel, ``W`` is shifted by the dual potentials of the max-weight
assignment (``B = exp(W - r - c) <= 1``, equal to 1 on the best permutation), so the DP adds
only positive numbers in ``[1, M!]`` whatever the spread of the logits. The duals come from the
numba Hungarian kernel through ``jax.pure_callback`` (O(M^3) per matrix on the host, the whole
batch in one call; not differentiated: ``log perm`` moves by exactly the sum of the shifts, so
they are held constant). Row/column log-normalisers computed in JAX (Sinkhorn) are no
substitute: at logit spreads of hundreds of nats they need thousands of sweeps, and with a fixed
number of sweeps the DP underflows to ``log perm = -inf`` (and a sampler runs away). The
dtype of ``W`` is kept: float64 when ``jax_enable_x64`` is on (PyTensor's JAX linker turns it on
for floatX = float64), float32 otherwise.

Gradient: :func:`log_permanent` has a ``jax.custom_vjp`` whose forward pass computes the value
and the marginals in one forward-backward pass (kept as the only residual, M x M), and whose
backward pass scales them by the cotangent. ``-inf`` logits are exact zeros of ``B`` with zero
gradient; logits admitting no permutation give ``log perm = -inf`` and zero marginals; NaN,
``+inf`` or finite entries beyond ``LOGIT_ABS_MAX`` give NaN (as the numba Ops do). Second
derivatives are not implemented (nor in numba).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from numba import njit

from pm_perm.backends.jax import cpu_ffi
from pm_perm.backends.jax._common import popcount_layers, valid_logits
from pm_perm.backends.jax.platform import on_platform
from pm_perm.kernels._checks import finite_or_minus_inf
from pm_perm.kernels.assignment import max_weight_assignment_core

__all__ = ["log_permanent", "log_permanent_and_marginals", "permutation_marginals"]

def _valid(W):
    return valid_logits(W)


@njit(cache=True)
def _duals_batch(W):
    """Shifts ``(r, c)`` of each (M, M) matrix of ``W`` (n, M, M): ``W - r - c <= 0``, zero on
    the max-weight matching; zeros for infeasible or invalid matrices (their output is -inf or
    NaN anyway)."""
    n, M = W.shape[0], W.shape[1]
    r, c = np.zeros((n, M, 1)), np.zeros((n, 1, M))
    for b in range(n):
        if not finite_or_minus_inf(W[b]):
            continue
        _, u, v, feasible = max_weight_assignment_core(np.ascontiguousarray(W[b]))
        if feasible:
            r[b, :, 0], c[b, 0, :] = -u, -v
    return r, c


def _host_duals(W):
    W = np.asarray(W)
    batch, M = W.shape[:-2], W.shape[-1]
    r, c = _duals_batch(np.ascontiguousarray(W.reshape(-1, M, M), dtype=np.float64))
    return (r.reshape(*batch, M, 1).astype(W.dtype), c.reshape(*batch, 1, M).astype(W.dtype))


def _scaled(W):
    """Shifts ``(r, c)`` with ``W - r - c <= 0``, 0 on the best permutation (held constant)."""
    W = jax.lax.stop_gradient(W)
    M = W.shape[-1]
    out = (jax.ShapeDtypeStruct((M, 1), W.dtype), jax.ShapeDtypeStruct((1, M), W.dtype))
    return jax.pure_callback(_host_duals, out, W, vmap_method="expand_dims")


def _forward(B):
    """Forward table over all bitmasks (layer M holds ``perm(B)`` at the full mask)."""
    M = B.shape[0]
    pow2 = jnp.asarray(1 << np.arange(M), dtype=jnp.int32)
    f = jnp.zeros(1 << M, B.dtype).at[0].set(1.0)
    for k, S in enumerate(popcount_layers(M)[1:], start=1):
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
        T = jnp.asarray(popcount_layers(M)[k])
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
    B = jnp.exp(jnp.minimum(W - r - c, 0.0))  # rounding can leave tiny positive exponents
    f = _forward(B)
    return B, f, jnp.sum(r) + jnp.sum(c)


def _xla_value(W):
    B, f, shift = _run(W)
    return _value_from(f, shift, _valid(W))


def _xla_value_and_marginals(W):
    B, f, shift = _run(W)
    ok = _valid(W)
    return _value_from(f, shift, ok), jnp.where(ok, _marginals(B, f), jnp.nan)


# ----------------------------------------------------------------------------- CPU: host kernel


def _host(W, marginals):
    value = jax.ShapeDtypeStruct(W.shape[:-2], W.dtype)
    out = (value, jax.ShapeDtypeStruct(W.shape, W.dtype)) if marginals else value
    return cpu_ffi.call("pm_perm_log_permanent", out, W,
                        vmap_method="expand_dims")


def _value(W):
    return on_platform((W,), lambda W: _host(W, False), _xla_value)


def _value_and_marginals(W):
    return on_platform((W,), lambda W: _host(W, True), _xla_value_and_marginals)


# ----------------------------------------------------------------------------- public functions


@jax.custom_vjp
def log_permanent(W):
    """``log perm(exp W)`` for logits ``W`` (M, M) -> (); ``jax.grad`` gives the marginals."""
    return _value(W)


def _with_marginals_fwd(W):
    v, P = _value_and_marginals(W)
    return v, P


def _lp_bwd(P, g):
    return (g * P,)


log_permanent.defvjp(_with_marginals_fwd, _lp_bwd)


@jax.custom_vjp
def log_permanent_and_marginals(W):
    """``(log perm(exp W), P)`` from one forward-backward pass; ``jax.grad`` of the value is
    ``P`` (the derivative of ``P``, second derivatives, is not implemented, as in numba)."""
    return _value_and_marginals(W)


def _both_fwd(W):
    v, P = _value_and_marginals(W)
    return (v, P), P


def _both_bwd(P, cts):
    g_v, _ = cts
    return (g_v * P,)


log_permanent_and_marginals.defvjp(_both_fwd, _both_bwd)


def permutation_marginals(W):
    """``P[i, j] = p(y[i] = j)`` for logits ``W`` (M, M)."""
    return log_permanent_and_marginals(W)[1]
