"""Registration of the JAX implementations of every pm_perm Op with PyTensor's JAX linker.

Imported when PyTensor's JAX backend is first imported (:mod:`pm_perm.jax_backend.lazy`; set
``PM_PERM_NO_JAX=1`` to never register). The functions registered here are
the CORE Ops' implementations; PyTensor's ``Blockwise`` wraps them in ``jnp.vectorize``.
Shapes are static under ``jax.jit``, so size limits are checked when the graph is traced.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from pytensor.link.jax.dispatch import jax_funcify

from pm_perm.jax_backend import bethe, cardinality, host, matching, permanent
from pm_perm.ops import bethe as bethe_ops
from pm_perm.ops import cardinality as card_ops
from pm_perm.ops import matching as matching_ops
from pm_perm.ops import partial_orders as po_ops
from pm_perm.ops import permanent as perm_ops
from pm_perm.ops import plackett_luce as pl_ops


def _check_square(op, W):
    if getattr(op, "method", "dp") != "dp":
        raise NotImplementedError(
            f"method={op.method!r} of the exact permanent has no JAX implementation; compile "
            "with PyTensor's default numba backend (the JAX backend runs method='dp' only)"
        )
    M0, M1 = W.shape[-2:]
    if M0 != M1:
        raise ValueError(f"logits must be square (M, M); got shape {W.shape}")
    if M0 > op.max_m:
        raise ValueError(f"M = {M0} is beyond the exact limit {op.max_m}")


@jax_funcify.register(perm_ops.LogPermanent)
def _jax_log_permanent(op, node=None, **kwargs):
    def log_permanent_jax(W):
        _check_square(op, W)
        return permanent.log_permanent(W)

    return log_permanent_jax


@jax_funcify.register(perm_ops.PermutationMarginals)
def _jax_permutation_marginals(op, node=None, **kwargs):
    def permutation_marginals_jax(W):
        _check_square(op, W)
        return permanent.permutation_marginals(W)

    return permutation_marginals_jax


@jax_funcify.register(perm_ops.LogPermanentAndMarginals)
def _jax_log_permanent_and_marginals(op, node=None, **kwargs):
    def log_permanent_and_marginals_jax(W):
        _check_square(op, W)
        return permanent.log_permanent_and_marginals(W)

    return log_permanent_and_marginals_jax


@jax_funcify.register(card_ops.LogESP)
def _jax_log_esp(op, node=None, **kwargs):
    return cardinality.log_esp


@jax_funcify.register(card_ops.LogESPAndMarginals)
def _jax_log_esp_and_marginals(op, node=None, **kwargs):
    return cardinality.log_esp_and_marginals


@jax_funcify.register(card_ops.ConditionalCovarianceDot)
def _jax_conditional_covariance_dot(op, node=None, **kwargs):
    return cardinality.conditional_covariance_dot


def _bethe_fn(op, fn):
    tol, max_iter = op.tol, op.max_iter

    def bethe_jax(W):
        return fn(W, tol, max_iter)

    return bethe_jax


@jax_funcify.register(bethe_ops.BetheLogPermanent)
def _jax_bethe_log_permanent(op, node=None, **kwargs):
    return _bethe_fn(op, bethe.bethe_log_permanent)


@jax_funcify.register(bethe_ops.BetheMarginals)
def _jax_bethe_marginals(op, node=None, **kwargs):
    return _bethe_fn(op, lambda W, t, n: bethe.bethe_log_permanent_and_marginals(W, t, n)[1])


@jax_funcify.register(bethe_ops.BetheLogPermanentAndMarginals)
def _jax_bethe_both(op, node=None, **kwargs):
    def bethe_both_jax(W):
        v, G = bethe.bethe_log_permanent_and_marginals(W, op.tol, op.max_iter)
        return v, G

    return bethe_both_jax


@jax_funcify.register(matching_ops.MaxWeightMatching)
def _jax_max_weight_matching(op, node=None, **kwargs):
    def max_weight_matching_jax(W):
        return matching.max_weight_matching(W).astype(jnp.int64)

    return max_weight_matching_jax


# ----------------------------------------------------------------------------- host callbacks

_po_loglik, _po_sum = host.loglik_fns("partial_orders")
_pl_loglik, _pl_sum = host.loglik_fns("plackett_luce")


@jax_funcify.register(po_ops.PartialOrderLoglik)
def _jax_partial_order_loglik(op, node=None, **kwargs):
    return _po_loglik


@jax_funcify.register(po_ops.PartialOrderLoglikSumAndGrad)
def _jax_partial_order_sum_and_grad(op, node=None, **kwargs):
    return _po_sum


@jax_funcify.register(po_ops.PartialOrderLoglikSum)
def _jax_partial_order_sum(op, node=None, **kwargs):
    return lambda W, orders, w: _po_sum(W, orders, w)[0]


@jax_funcify.register(pl_ops.PlackettLuceLoglik)
def _jax_plackett_luce_loglik(op, node=None, **kwargs):
    return _pl_loglik


@jax_funcify.register(pl_ops.PlackettLuceLoglikVJP)
def _jax_plackett_luce_vjp(op, node=None, **kwargs):
    return lambda u, orders, g: jax.vjp(lambda x: _pl_loglik(x, orders), u)[1](g)[0]


@jax_funcify.register(pl_ops.PlackettLuceLoglikSum)
def _jax_plackett_luce_sum(op, node=None, **kwargs):
    return _pl_sum


def _values_and_vjp(loglik):
    """JAX body of the fused Ops (per-order values and the gradient of ``sum_n g_n loglik_n``)
    that the numba graph rewrites create: the same host kernel as the unfused Ops."""

    def values_and_vjp(x, orders, g):
        values, vjp = jax.vjp(lambda y: loglik(y, orders), x)
        return values, vjp(g)[0]

    return values_and_vjp


@jax_funcify.register(po_ops.PartialOrderLoglikAndGrad)
def _jax_partial_order_loglik_and_grad(op, node=None, **kwargs):
    return _values_and_vjp(_po_loglik)


@jax_funcify.register(pl_ops.PlackettLuceLoglikAndVJP)
def _jax_plackett_luce_loglik_and_vjp(op, node=None, **kwargs):
    return _values_and_vjp(_pl_loglik)
