"""Bethe log-permanent and beliefs in JAX (no PyTensor here).

The same fixed point as :mod:`pm_perm.kernels.bethe` (the Bethe free energy is convex on the
Birkhoff polytope, so every converged scheme reaches the same beliefs): sum-product loopy BP
with ratio messages, ``lam[i, j] = B[i, j] / sum_{s != j} B[i, s] rho[i, s]``, ``rho[i, j] = 1 /
sum_{l != i} lam[l, j]``, beliefs ``G ~ B rho`` (rows normalised), in one ``lax.while_loop``.
Undamped for the first ``UNDAMPED_SWEEPS`` sweeps, then with damping 1/2 (geometric mixing of
the messages, same fixed points), which stops the period-2 oscillation at large weight spreads.
Exclusion sums use prefix + suffix sums (no cancellation). The numba path's extra stages (vertex
certificate, CCCP and Newton fallbacks) are not ported: where it needs them, this loop may not
converge.

Where it runs: on a CPU, the numba Bethe kernel (the numba Ops' fixed point with its vertex
certificate, CCCP and Newton stages) as an XLA FFI custom call
(:mod:`pm_perm.backends.jax.cpu_ffi`): under ``vmap`` (numpyro's vectorised chains, batched
matrices) the ``while_loop`` below runs until the slowest matrix converges, up to ``max_iter``
sweeps per evaluation, which makes NUTS impractically slow even on a small
``PermutationExpFamily(method="bethe")`` model. On every other platform, with
``PM_PERM_JAX_XLA=1`` or inside ``xla_only()``, the loop below runs.

Convergence failure is surfaced as NaN (value and beliefs), not as an exception (JAX cannot
raise at run time): a sampler rejects such a point. To check, call
:func:`bethe_log_permanent_info`, which also returns the number of sweeps and the final residual
(converged iff ``err <= tol``).

Value ``-F_B(G)`` at the fixed point plus the row/column shifts; gradient by ``jax.custom_vjp``:
the beliefs (envelope theorem), the same as the numba Op's pullback.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from pm_perm.backends.jax import cpu_ffi
from pm_perm.backends.jax._common import valid_logits
from pm_perm.backends.jax.platform import on_platform

__all__ = ["bethe_log_permanent", "bethe_log_permanent_and_marginals",
           "bethe_log_permanent_info"]

#: Undamped BP sweeps before damping 1/2 is switched on.
UNDAMPED_SWEEPS = 500


def _excl(x, axis):
    """``sum_{s != j} x[..., s]`` along ``axis`` by prefix and suffix sums (no cancellation)."""
    pre = jnp.cumsum(x, axis=axis) - x  # exclusive prefix: x >= 0, sums of earlier terms only
    rev = jnp.flip(x, axis)
    suf = jnp.flip(jnp.cumsum(rev, axis=axis) - rev, axis)
    return pre + suf


def _shifts(W):
    W = jax.lax.stop_gradient(W)
    r = jnp.max(W, axis=1, keepdims=True)
    r = jnp.where(jnp.isfinite(r), r, 0.0)
    c = jnp.max(W - r, axis=0, keepdims=True)
    c = jnp.where(jnp.isfinite(c), c, 0.0)
    return r, c


def _fixed_point(B, tol, max_iter):
    M = B.shape[0]
    if M == 1:  # the only permutation: belief 1, no messages
        return jnp.ones((1, 1), B.dtype), 0, jnp.asarray(0.0, B.dtype)

    def beliefs(rho):
        X = B * rho
        return X / jnp.sum(X, axis=1, keepdims=True)

    def cond(state):
        it, _, _, err = state
        return (it < max_iter) & ~(err <= tol) & ((it == 0) | jnp.isfinite(err))

    def body(state):
        it, rho, G, _ = state
        lam = B / _excl(B * rho, 1)
        new = 1.0 / _excl(lam, 0)
        a = jnp.where(it < UNDAMPED_SWEEPS, 1.0, 0.5)
        rho = rho ** (1.0 - a) * new**a
        G_new = beliefs(rho)
        err = jnp.maximum(jnp.max(jnp.abs(G_new - G)),
                          jnp.max(jnp.abs(jnp.sum(G_new, axis=0) - 1.0)))
        err = jnp.where(jnp.isfinite(err), err, jnp.inf)
        return it + 1, rho, G_new, err

    rho0 = jnp.ones((M, M), B.dtype)
    state = (0, rho0, jnp.zeros((M, M), B.dtype), jnp.asarray(jnp.inf, B.dtype))
    it, _, G, err = jax.lax.while_loop(cond, body, state)
    return G, it, err


def _log1m(G):
    """``log(1 - G)`` accurately near 1: the mean of the row and column complements."""
    comp = 0.5 * (_excl(G, 1) + _excl(G, 0))
    direct = jnp.log1p(-jnp.minimum(G, 0.5))
    safe = jnp.where(comp > 0, comp, 1.0)
    return jnp.where(G <= 0.5, direct, jnp.where(comp > 0, jnp.log(safe), -jnp.inf))


def _value(logB, G):
    pos = G > 0
    Gs = jnp.where(pos, G, 1.0)
    lm = _log1m(G)
    ent = jnp.where(pos, G * (jnp.where(pos, logB, 0.0) - jnp.log(Gs)), 0.0)
    cav = jnp.where(pos & jnp.isfinite(lm), (1.0 - G) * jnp.where(jnp.isfinite(lm), lm, 0.0), 0.0)
    return jnp.sum(ent + cav)


def bethe_log_permanent_info(W, tol=1e-9, max_iter=100_000):
    """``(log perm_B, beliefs, n_sweeps, err)`` for logits ``W`` (M, M).

    Converged iff ``err <= tol``; otherwise the value and beliefs returned are NaN. NaN,
    ``+inf`` or finite logits beyond ``LOGIT_ABS_MAX`` give NaN; a row or column of ``-inf``
    (no permutation) gives ``-inf`` and zero beliefs.
    """
    W = jax.lax.stop_gradient(W)
    ok = valid_logits(W)
    feasible = jnp.all(jnp.any(W > -jnp.inf, axis=0)) & jnp.all(jnp.any(W > -jnp.inf, axis=1))
    W0 = jnp.where(ok & feasible, W, 0.0)
    r, c = _shifts(W0)
    logB = W0 - r - c
    G, it, err = _fixed_point(jnp.exp(logB), tol, max_iter)
    v = _value(logB, G) + jnp.sum(r) + jnp.sum(c)
    conv = err <= tol
    v = jnp.where(conv, v, jnp.nan)
    G = jnp.where(conv, G, jnp.nan)
    v = jnp.where(feasible, v, -jnp.inf)
    G = jnp.where(feasible, G, 0.0)
    return jnp.where(ok, v, jnp.nan), jnp.where(ok, G, jnp.nan), it, err


@functools.partial(jax.custom_vjp, nondiff_argnums=(1, 2))
def bethe_log_permanent_and_marginals(W, tol=1e-9, max_iter=100_000):
    """``(log perm_B, beliefs)``; NaN when the fixed point did not converge.

    ``jax.grad`` of the value is the beliefs (envelope theorem); the beliefs' own derivative
    (the Hessian of the Bethe free energy) is not implemented, as in the numba Op.
    """
    return on_platform((W,), lambda W: _host(W, tol, max_iter),
                       lambda W: bethe_log_permanent_info(W, tol, max_iter)[:2])


def _host(W, tol, max_iter):
    """The numba Bethe kernel (an XLA FFI custom call, CPU only)."""
    shapes = (jax.ShapeDtypeStruct(W.shape[:-2], W.dtype), jax.ShapeDtypeStruct(W.shape, W.dtype))
    return cpu_ffi.call("pm_perm_bethe", shapes, W,
                        jnp.asarray(tol, W.dtype), jnp.asarray(max_iter),
                        vmap_method="expand_dims")


def _fwd(W, tol, max_iter):
    v, G = bethe_log_permanent_and_marginals(W, tol, max_iter)
    return (v, G), G


def _bwd(tol, max_iter, G, cts):
    g_v, _ = cts  # the beliefs' cotangent is dropped (second derivatives not implemented)
    return (g_v * G,)


bethe_log_permanent_and_marginals.defvjp(_fwd, _bwd)


def bethe_log_permanent(W, tol=1e-9, max_iter=100_000):
    """Bethe log-permanent of logits ``W`` (M, M); ``jax.grad`` gives the beliefs."""
    return bethe_log_permanent_and_marginals(W, tol, max_iter)[0]
