"""Registration of the JAX implementations of every pm_perm Op with PyTensor's JAX linker.

Imported when PyTensor's JAX backend is first imported (:mod:`pm_perm.backends.jax.lazy`; set
``PM_PERM_NO_JAX=1`` to never register). The functions registered here are
the CORE Ops' implementations; PyTensor's ``Blockwise`` wraps them in ``jnp.vectorize``.
Shapes are static under ``jax.jit``, so size limits are checked when the graph is traced.
"""

from __future__ import annotations

import jax.numpy as jnp
from pytensor.graph.basic import Constant
from pytensor.link.jax.dispatch import jax_funcify

from pm_perm.backends.jax import (
    ballots,
    bethe,
    cardinality,
    linear_extensions,
    matching,
    partial_orders,
    permanent,
    plackett_luce,
    random,
    top_k,
)
from pm_perm.distributions.conditional_bernoulli import ConditionalBernoulliRV
from pm_perm.distributions.mallows import MallowsRV
from pm_perm.distributions.mallows_partial import MallowsPartialRV
from pm_perm.distributions.n_choose_k import NChooseKRV
from pm_perm.distributions.ordinal_n_choose_k import OrdinalNChooseKRV
from pm_perm.distributions.pairwise import BradleyTerryRV
from pm_perm.distributions.partial_order import PartialOrderExpFamilyRV, PartialOrderRV
from pm_perm.distributions.partial_ranking import PartialRankingRV
from pm_perm.distributions.permutation import (
    PermutationExpFamilyBetheRV,
    PermutationExpFamilyGlynnRV,
    PermutationExpFamilyRV,
)
from pm_perm.distributions.pl_anchored import PLAnchoredRankingRV
from pm_perm.distributions.plackett_luce import PlackettLuceRV
from pm_perm.distributions.top_k import TopKRankingRV
from pm_perm.ops import ballots as ballots_ops
from pm_perm.ops import bethe as bethe_ops
from pm_perm.ops import cardinality as card_ops
from pm_perm.ops import linear_extensions as le_ops
from pm_perm.ops import matching as matching_ops
from pm_perm.ops import partial_orders as po_ops
from pm_perm.ops import permanent as perm_ops
from pm_perm.ops import plackett_luce as pl_ops
from pm_perm.ops import top_k as top_k_ops


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


def _permanent_fn(op, fn):
    def permanent_jax(W):
        _check_square(op, W)
        return fn(W)

    return permanent_jax


def _bethe_fn(op, fn):
    tol, max_iter = op.tol, op.max_iter

    def bethe_jax(W):
        return fn(W, tol, max_iter)

    return bethe_jax


def _register_all(table, build):
    """Register ``build(op, fn)`` as the JAX implementation of each Op class of ``table``
    (``{Op class: JAX function}``); ``build=None`` registers the function itself."""
    for op_class, fn in table.items():
        def funcify(op, node=None, fn=fn, **kwargs):
            return fn if build is None else build(op, fn)

        jax_funcify.register(op_class)(funcify)


_register_all({
    perm_ops.LogPermanent: permanent.log_permanent,
    perm_ops.PermutationMarginals: permanent.permutation_marginals,
    perm_ops.LogPermanentAndMarginals: permanent.log_permanent_and_marginals,
}, _permanent_fn)
_register_all({
    card_ops.LogESP: cardinality.log_esp,
    card_ops.LogESPAndMarginals: cardinality.log_esp_and_marginals,
    card_ops.ConditionalCovarianceDot: cardinality.conditional_covariance_dot,
}, None)
_register_all({
    bethe_ops.BetheLogPermanent: bethe.bethe_log_permanent,
    bethe_ops.BetheMarginals:
        lambda W, t, n: bethe.bethe_log_permanent_and_marginals(W, t, n)[1],
    bethe_ops.BetheLogPermanentAndMarginals: bethe.bethe_log_permanent_and_marginals,
}, _bethe_fn)


@jax_funcify.register(matching_ops.MaxWeightMatching)
def _jax_max_weight_matching(op, node=None, **kwargs):
    def max_weight_matching_jax(W):
        return matching.max_weight_matching(W).astype(jnp.int64)

    return max_weight_matching_jax


# ----------------------------------------------------------------------------- ranking data
# (orders known when the graph is compiled are parsed once, for the XLA program)


def _const_orders(node):
    """The orders (input 1) of a core node when they are a constant of the graph, else None."""
    orders = None if node is None else node.inputs[1]
    return orders.data if isinstance(orders, Constant) else None


def _po_fns(op, node):
    return partial_orders.loglik_fns(op.max_m, _const_orders(node))


@jax_funcify.register(po_ops.PartialOrderLoglik)
def _jax_partial_order_loglik(op, node=None, **kwargs):
    return _po_fns(op, node)[0]


@jax_funcify.register(po_ops.PartialOrderLoglikSumAndGrad)
def _jax_partial_order_sum_and_grad(op, node=None, **kwargs):
    return _po_fns(op, node)[1]


@jax_funcify.register(po_ops.PartialOrderLoglikSum)
def _jax_partial_order_sum(op, node=None, **kwargs):
    sum_and_grad = _po_fns(op, node)[1]
    return lambda W, orders, w: sum_and_grad(W, orders, w)[0]


@jax_funcify.register(po_ops.PartialOrderLoglikAndGrad)
def _jax_partial_order_loglik_and_grad(op, node=None, **kwargs):
    return _po_fns(op, node)[2]


def _pl_fns(node):
    return plackett_luce.loglik_fns(_const_orders(node))


@jax_funcify.register(pl_ops.PlackettLuceLoglik)
def _jax_plackett_luce_loglik(op, node=None, **kwargs):
    return _pl_fns(node)[0]


@jax_funcify.register(pl_ops.PlackettLuceLoglikVJP)
def _jax_plackett_luce_vjp(op, node=None, **kwargs):
    values_and_grad = _pl_fns(node)[2]
    return lambda u, orders, g: values_and_grad(u, orders, g)[1]


@jax_funcify.register(pl_ops.PlackettLuceLoglikSum)
def _jax_plackett_luce_sum(op, node=None, **kwargs):
    return _pl_fns(node)[1]


@jax_funcify.register(pl_ops.PlackettLuceLoglikAndVJP)
def _jax_plackett_luce_loglik_and_vjp(op, node=None, **kwargs):
    return _pl_fns(node)[2]


def _top_k_fns(op):
    return top_k.loglik_fns(op.max_k)


@jax_funcify.register(top_k_ops.TopKLoglik)
def _jax_top_k_loglik(op, node=None, **kwargs):
    return _top_k_fns(op)[0]


@jax_funcify.register(top_k_ops.TopKLoglikSumAndGrad)
def _jax_top_k_sum_and_grad(op, node=None, **kwargs):
    return _top_k_fns(op)[1]


@jax_funcify.register(top_k_ops.TopKLoglikSum)
def _jax_top_k_sum(op, node=None, **kwargs):
    sum_and_grad = _top_k_fns(op)[1]
    return lambda L, orders, w: sum_and_grad(L, orders, w)[0]


@jax_funcify.register(top_k_ops.TopKLoglikAndGrad)
def _jax_top_k_loglik_and_grad(op, node=None, **kwargs):
    return _top_k_fns(op)[2]


@jax_funcify.register(ballots_ops.ExpandCounts)
@jax_funcify.register(ballots_ops.RepeatRows)
def _jax_repeat_rows(op, node=None, **kwargs):
    counts = None if node is None else node.inputs[1]
    return ballots.repeat_fn(counts.data if isinstance(counts, Constant) else None)


@jax_funcify.register(le_ops.LinearExtensionLoglik)
def _jax_linear_extension_loglik(op, node=None, **kwargs):
    return linear_extensions.loglik_fn(op)


@jax_funcify.register(le_ops.LinearExtensionLoglikGrad)
def _jax_linear_extension_loglik_grad(op, node=None, **kwargs):
    return linear_extensions.loglik_grad_fn(op)


# ----------------------------------------------------------------------------- draws
# (the exact CPU samplers of each RandomVariable, through a host callback: random.py)

random.register((
    BradleyTerryRV, PartialOrderRV, PartialOrderExpFamilyRV,
    ConditionalBernoulliRV, MallowsRV, NChooseKRV, OrdinalNChooseKRV, PartialRankingRV,
    PermutationExpFamilyRV, PermutationExpFamilyBetheRV, PermutationExpFamilyGlynnRV,
    PLAnchoredRankingRV, PlackettLuceRV, TopKRankingRV, MallowsPartialRV,
))
