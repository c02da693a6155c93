"""Partial-order and Plackett-Luce log-likelihoods in JAX graphs, by host callbacks.

Both Op families (:mod:`pm_perm.ops.partial_orders`, :mod:`pm_perm.ops.plackett_luce`) have one
numba kernel ``core(x, orders, weights, want_grad) -> (sum_n w_n loglik_n, loglik, gradient)``
that returns the weighted sum, the per-order values and the gradient of the sum in ONE pass.
Here that kernel runs on the host through ``jax.pure_callback``, wrapped in ``jax.custom_vjp``
(the backward pass is the kernel's own gradient with the cotangent as weights), so ``jax.grad``
(numpyro, blackjax) and nutpie's JAX backend get exactly the numba path's value and gradient.
Batches are looped over on the host (``vmap_method="sequential"``). They run on the CPU even
when the rest of the model is on a GPU (a device-to-host copy per evaluation), and cannot be
sharded over devices; an XLA-native port of the tie-block subset DP is future work.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["loglik_fns"]


def _partial_orders_host(W, orders, weights, want_grad):
    from pm_perm.kernels._checks import finite_or_minus_inf
    from pm_perm.kernels.partial_orders import partial_orders_core

    W, orders = np.ascontiguousarray(W, np.float64), np.ascontiguousarray(orders, np.int64)
    weights = np.ascontiguousarray(weights, np.float64)
    n, M = orders.shape[0], W.shape[0]
    if not finite_or_minus_inf(W):
        return np.nan, np.full(n, np.nan), np.full((M, M), np.nan)
    values, grad = np.empty(n), np.empty((M, M) if want_grad else (0, 0))
    total = partial_orders_core(W, orders, weights, values, grad, want_grad)
    return total, values, grad if want_grad else np.zeros((M, M))


def _plackett_luce_host(u, orders, weights, want_grad):
    from pm_perm.ops.plackett_luce import _run

    return _run(np.asarray(u, np.float64), np.asarray(orders, np.int64),
                np.asarray(weights, np.float64), want_grad)


_HOSTS = {"partial_orders": _partial_orders_host, "plackett_luce": _plackett_luce_host}


def _call(host, x, orders, weights, want_grad):
    dt = x.dtype
    shapes = (jax.ShapeDtypeStruct((), dt), jax.ShapeDtypeStruct(orders.shape[:1], dt),
              jax.ShapeDtypeStruct(x.shape, dt))

    def cb(x, o, w):
        total, values, grad = host(x, o, w, want_grad)
        return (np.asarray(total, dt), np.asarray(values, dt), np.asarray(grad, dt))

    return jax.pure_callback(cb, shapes, jax.lax.stop_gradient(x), orders,
                             jax.lax.stop_gradient(weights), vmap_method="sequential")


def loglik_fns(family):
    """``(loglik(x, orders) -> (n,), sum_and_grad(x, orders, w) -> ((), x.shape))`` for
    ``family`` in ``{"partial_orders", "plackett_luce"}``; both differentiable in ``x`` (and
    the sum in ``w``) by ``jax.grad``."""
    host = _HOSTS[family]

    @jax.custom_vjp
    def loglik(x, orders):
        return _call(host, x, orders, jnp.zeros(orders.shape[:1], x.dtype), False)[1]

    def loglik_fwd(x, orders):
        return loglik(x, orders), (x, orders)

    def loglik_bwd(res, g):
        x, orders = res
        return _call(host, x, orders, g, True)[2], None

    loglik.defvjp(loglik_fwd, loglik_bwd)

    @jax.custom_vjp
    def sum_and_grad(x, orders, w):
        total, _, grad = _call(host, x, orders, w, True)
        return total, grad

    def sum_fwd(x, orders, w):
        total, values, grad = _call(host, x, orders, w, True)
        return (total, grad), (grad, values)

    def sum_bwd(res, cts):
        grad, values = res
        g_v, _ = cts  # the gradient output's own derivative is not implemented (as in numba)
        return g_v * grad, None, g_v * values

    sum_and_grad.defvjp(sum_fwd, sum_bwd)
    return loglik, sum_and_grad
