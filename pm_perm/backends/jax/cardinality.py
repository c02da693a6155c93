"""Conditional-Bernoulli normaliser ``log e_k(exp theta)`` in JAX (no PyTensor here).

Where it runs: on a CPU, value, marginals and ``Cov(y | k) @ v`` come from the numba kernels of
the numba Ops, as XLA FFI custom calls (:mod:`pm_perm.backends.jax.cpu_ffi`; O(D k) per row); on
every other platform, with ``PM_PERM_JAX_XLA=1`` or inside ``xla_only()``, the XLA DP below runs
(O(D^2), see below). ``jax.grad`` of :func:`log_esp` is the marginals and of
:func:`log_esp_and_marginals` uses :func:`conditional_covariance_dot` (``jax.custom_vjp``), on
both paths.

XLA DP:

Tilted probability-scale DP, as in :mod:`pm_perm.kernels.esp`: with a tilt ``c`` such
that ``sum_d sigmoid(theta_d - c) ~= k``,
``log e_k(exp theta) = k c + sum_d log(1 + exp(theta_d - c)) + log q[k]``, where ``q`` is the
Poisson-binomial pmf of independent Bernoulli(``p_d = sigmoid(theta_d - c)``) items. The
identity holds for every ``c``; the tilt only puts ``k`` at the pmf's mean, where ``q[k]`` is of
order ``1 / sqrt(var)``, so the DP adds positive numbers only, with relative error O(D eps). The
tilt is found by bisection and held constant for differentiation.

The count ``k`` is data (traced), so the whole pmf ``q[0..D]`` is carried through a
``lax.scan`` over the items, ``q <- q (1 - p_d) + shift(q) p_d``: O(D^2) multiply-adds (the
numba kernel's O(D k) needs a static ``k``), vectorised over the counts. Reverse mode would keep
one pmf per item (O(D^2) memory); the scan is split into ``ceil(sqrt(D))`` checkpointed blocks,
so ``jax.grad`` keeps O(D^1.5) floats and recomputes each block once (the numba kernel's
checkpointed suffix pass does the same).

No ``-inf`` enters the arithmetic (``jax.grad`` of ``logaddexp(-inf, -inf)`` is NaN): forbidden
items (``theta = -inf``) have ``p_d = 0`` exactly; ``k`` outside ``0..#finite logits`` gives
``-inf`` (and zero gradient) by a final ``where``, as in the numba kernels; the tilt is clipped
to a finite range so the unused branch never produces NaN. NaN or ``+inf`` logits give NaN.
Gradients of the XLA DP: reverse mode gives the conditional marginals ``p(y_d = 1 | k)``;
forward-over-reverse (``jax.jvp`` of the gradient) gives ``Cov(y | k) @ v``.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp

from pm_perm.backends.jax import cpu_ffi
from pm_perm.backends.jax._common import valid_logits
from pm_perm.backends.jax.platform import on_platform

__all__ = [
    "conditional_covariance_dot",
    "log_esp",
    "log_esp_and_marginals",
]

#: Bisection steps for the tilt (the bracket is at most ~2e300 wide in float64).
TILT_STEPS = 80


def _step(q, pp):
    p, p1 = pp
    return q * p1 + jnp.concatenate([jnp.zeros((1,), q.dtype), q[:-1] * p]), None


@jax.checkpoint
def _block(q, pps):
    return jax.lax.scan(_step, q, pps)[0], None


def _tilt(theta, k):
    """``c`` with ``sum sigmoid(theta - c) ~= k`` (clipped to finite logits +- 40)."""
    fin = jnp.isfinite(theta)
    lo = jnp.min(jnp.where(fin, theta, jnp.inf)) - 40.0
    hi = jnp.max(jnp.where(fin, theta, -jnp.inf)) + 40.0
    lo, hi = jnp.where(jnp.any(fin), lo, 0.0), jnp.where(jnp.any(fin), hi, 0.0)

    def body(_, b):
        lo, hi = b
        mid = 0.5 * (lo + hi)
        above = jnp.sum(jax.nn.sigmoid(theta - mid)) > k  # mean too large -> raise the tilt
        return jnp.where(above, mid, lo), jnp.where(above, hi, mid)

    lo, hi = jax.lax.fori_loop(0, TILT_STEPS, body, (lo, hi))
    return jax.lax.stop_gradient(0.5 * (lo + hi))


def _log_pmf_at(theta, c, k):
    """``k c + sum log(1 + exp(theta - c)) + log q[k]`` (``k`` clipped to 0..D)."""
    D = theta.shape[0]
    x = jnp.where(theta == -jnp.inf, -jnp.inf, theta - c)
    p, p1 = jax.nn.sigmoid(x), jax.nn.sigmoid(-x)  # no cancellation in 1 - p
    bs = max(1, math.isqrt(max(D - 1, 0)) + 1)
    nb = -(-D // bs)
    pad = nb * bs - D
    p = jnp.concatenate([p, jnp.zeros((pad,), p.dtype)]).reshape(nb, bs)
    p1 = jnp.concatenate([p1, jnp.ones((pad,), p1.dtype)]).reshape(nb, bs)
    q0 = jnp.zeros((D + 1,), theta.dtype).at[0].set(1.0)
    q = jax.lax.scan(_block, q0, (p, p1))[0]
    qk = q[jnp.clip(k, 0, D)]
    log_norm = jnp.sum(jnp.where(theta == -jnp.inf, 0.0, jax.nn.softplus(jnp.where(
        theta == -jnp.inf, 0.0, x))))
    return k * c + log_norm + jnp.log(jnp.where(qk > 0, qk, 1.0))


def _xla_log_esp(theta, k):
    n_fin = jnp.sum(jnp.isfinite(theta))
    ok = valid_logits(theta)
    feasible = (k >= 0) & (k <= n_fin)
    th = jnp.where(ok, theta, 0.0)
    v = jnp.where(feasible, _log_pmf_at(th, _tilt(th, k), k), -jnp.inf)
    return jnp.where(ok, v, jnp.nan)


def _xla_log_esp_and_marginals(theta, k):
    v, m = jax.value_and_grad(_xla_log_esp)(theta, k)
    return v, jnp.where(jnp.isnan(v), jnp.nan, m)


def _xla_covariance_dot(theta, k, v):
    return jax.jvp(lambda t: jax.grad(_xla_log_esp)(t, k), (theta,), (v,))[1]


# ----------------------------------------------------------------------------- CPU: host kernels


def _host(theta, k, v=None, marginals=False):
    value = jax.ShapeDtypeStruct(theta.shape[:-1], theta.dtype)
    vec = jax.ShapeDtypeStruct(theta.shape, theta.dtype)
    k = k.astype(jax.dtypes.canonicalize_dtype(jnp.int64))  # the handler reads int32 / int64
    args = (theta, k)
    if v is not None:
        shapes, args = vec, (*args, v)
    else:
        shapes = (value, vec) if marginals else value
    return cpu_ffi.call("pm_perm_log_esp", shapes, *args, vmap_method="broadcast_all")


# ----------------------------------------------------------------------------- public functions


@jax.custom_vjp
def log_esp(theta, k):
    """``log e_k(exp theta)`` for logits ``theta`` (D,) and an integer count ``k`` ()."""
    return on_platform((theta, k), _host, _xla_log_esp)


def _value_and_marginals(theta, k):
    host = functools.partial(_host, marginals=True)
    return on_platform((theta, k), host, _xla_log_esp_and_marginals)


def _log_esp_fwd(theta, k):
    # through the differentiable pair, so reverse-over-reverse (jax.jacrev of jax.grad) gets
    # the covariance; the FFI call itself has no derivative
    v, m = log_esp_and_marginals(theta, k)
    return v, m


def _log_esp_bwd(m, g):
    return g * m, None


log_esp.defvjp(_log_esp_fwd, _log_esp_bwd)


@jax.custom_vjp
def log_esp_and_marginals(theta, k):
    """``(log e_k, p(y_d = 1 | sum y = k))``; marginals are 0 when ``e_k = 0``. ``jax.grad``
    of the marginals is the conditional covariance (:func:`conditional_covariance_dot`)."""
    return _value_and_marginals(theta, k)


def _both_fwd(theta, k):
    v, m = _value_and_marginals(theta, k)
    return (v, m), (theta, k, m)


def _both_bwd(res, cts):
    theta, k, m = res
    g_v, g_m = cts
    return g_v * m + conditional_covariance_dot(theta, k, g_m), None


log_esp_and_marginals.defvjp(_both_fwd, _both_bwd)


def conditional_covariance_dot(theta, k, v):
    """``Cov(y | sum y = k) @ v``: the Hessian of ``log e_k`` applied to ``v`` (not
    differentiable again: third derivatives are not implemented, as in numba)."""
    v = v.astype(theta.dtype)
    return on_platform((theta, k, v), _host, _xla_covariance_dot)
