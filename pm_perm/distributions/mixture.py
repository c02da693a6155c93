"""``RankingMixture``: a finite mixture of pm_perm ranking distributions, as an observed variable.

``RankingMixture("ballots", w=w, comp_dists=[PlackettLuce.dist(u[0]), ...], observed=orders)``
has the log-probability ``logsumexp_k(log w_k + log p_k(row))`` per row (exact marginalisation
over each row's component), draws a component from ``w`` and then that component's exact draw,
and gives each row's membership probabilities (:func:`mixture_memberships`).

Why not ``pm.Mixture``: it works with pm_perm's ranking distributions row by row, but it
resizes every component to the batch of the value, so a :class:`~pm_perm.PartialRanking`
component evaluates one ``M x M`` logits table PER ROW (O(n M 2^M) instead of O(M 2^M + n M)),
and with ``weights=counts`` on the components it multiplies each component's log-probability by
the count INSIDE the sum over components (a different, wrong likelihood). ``RankingMixture``
reuses ``pm.Mixture``'s draws and evaluates each component's log-probability on its own
parameters (one table per component) and, with counts, on the distinct orders only.

Counts. ``RankingMixture(name, ..., weights=counts, observed=orders)`` observes one row per
BALLOT (``orders[i]`` repeated ``counts[i]`` times): ``pm.compute_log_likelihood`` has one entry
per ballot (``az.loo`` / ``az.compare`` need no extra step), ``pm.sample_posterior_predictive``
draws one replicated ballot per observed ballot (with its observed pattern: length and tie
blocks; ``keep_pattern``), and the log-probability is computed on the
distinct orders and repeated per ballot (summed: ``sum(counts * logsumexp_k(...))``).
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from pymc.distributions.dist_math import check_parameters
from pymc.distributions.distribution import _support_point, support_point
from pymc.distributions.mixture import Mixture, MixtureRV
from pymc.distributions.shape_utils import rv_size_is_none
from pymc.logprob.abstract import _logprob, _logprob_helper
from pytensor.tensor.random.utils import normalize_size_param

from pm_perm.distributions._ballots import distinct_rows, observed_ballots, per_ballot
from pm_perm.distributions._patterns import pattern_input
from pm_perm.distributions.mallows import MallowsRV
from pm_perm.distributions.partial_ranking import PartialRankingRV
from pm_perm.distributions.plackett_luce import PlackettLuceRV
from pm_perm.distributions.top_k import TopKRankingRV
from pm_perm.kernels.rank_form import validate_orders

__all__ = ["RankingMixture", "RankingMixtureRV", "mixture_memberships"]

# with a draw pattern and count weights
_COMPONENT_RVS = (PlackettLuceRV, PartialRankingRV, TopKRankingRV)
_COMPONENT_NAMES = {PlackettLuceRV: "PlackettLuce", PartialRankingRV: "PartialRanking",
                    TopKRankingRV: "TopKRanking"}
_ANY_COMPONENT_RVS = (*_COMPONENT_RVS, MallowsRV)  # Mallows: complete rankings, no counts
_COUNTS_MSG = "weights must be non-negative integers (ballots per distinct order)"


# --- counts as one row per ballot ------------------------------------------------------------
# --- the distribution ------------------------------------------------------------------------

class RankingMixtureRV(MixtureRV):
    """Draws: the component of each row from ``w`` (inverse CDF of one uniform), then that
    component's draw; its own log-probability (:func:`_ranking_mixture_logp`).

    ``pm.Mixture``'s draw graph with the component index drawn from a uniform instead of
    ``pt.random.categorical``, whose JAX implementation in PyTensor 3.3 samples from
    ``softmax(logit(w))`` instead of ``w`` (e.g. 0.775 for ``w = (0.65, 0.35)``).
    """

    _print_name = ("RankingMixture", "\\operatorname{RankingMixture}")

    @classmethod
    def rv_op(cls, weights, *components, size=None):
        rng = pt.random.shared_rng(seed=None)
        size = normalize_size_param(size)
        if rv_size_is_none(size):
            shape = tuple(pt.broadcast_shape(*components))
            size = shape[:-1]
        components = cls._resize_components(size, *components)
        stacked = pt.stack(components, axis=-2)  # (..., K, M)
        w = pt.broadcast_to(weights, stacked.shape[:-1])  # (..., K)
        next_rng, u = pt.random.uniform(size=w.shape[:-1], rng=rng, return_next_rng=True)
        cdf = pt.cumsum(w, axis=-1)
        k = pt.sum(pt.lt(cdf[..., :-1], (u * cdf[..., -1])[..., None]), axis=-1)
        out = pt.take_along_axis(stacked, k[..., None, None], axis=-2)[..., 0, :]
        comps_s = ",".join("(s0)" for _ in components)
        return cls(inputs=[rng, weights, *components], outputs=[next_rng, out],
                   extended_signature=f"[rng],(w),{comps_s}->[rng],(s0)",
                   )(rng, weights, *components)


@_support_point.register(RankingMixtureRV)
def _ranking_mixture_support_point(op, rv, rng, weights, *components):
    """The support point of the heaviest component (an average of orders is not an order)."""
    points = pt.stack([support_point(c) for c in components], axis=0)
    return points[pt.argmax(weights, axis=-1)]


def _component_logps(components, rows):
    """(n, K) log-probabilities of the rows under each component, on the components' own
    parameters (one logits table per component, whatever the batch of the mixture)."""
    return pt.stack([_logprob_helper(_unsized(c), rows) for c in components], axis=-1)


def _unsized(component):
    """The component without the mixture's size and without its pattern (its own parameters'
    batch only; the pattern enters the draws only), so that its logp is built on the rows it
    is given, nothing broadcast to the mixture's rows."""
    node = component.owner
    params = node.op.dist_params(node)
    if isinstance(node.op, _COMPONENT_RVS):
        params = [*params[:-1], pattern_input(None, None, "")]
    _, rv = node.op(*params, rng=node.op.rng_param(node), return_next_rng=True)
    return rv


def _with_pattern(component, pattern):
    """``component`` (a ``.dist``) drawing with ``pattern`` (its own pattern, if it has one,
    wins): the same parameters and random generator."""
    node = component.owner
    *params, own = node.op.dist_params(node)
    if own.type.shape[-1] != 0:
        return component
    name = _COMPONENT_NAMES[type(node.op)]
    _, rv = node.op(*params, pattern_input(pattern, None, name), rng=node.op.rng_param(node),
                    return_next_rng=True)
    return rv


def _mixture_parts(weights, components, value):
    """``(log w + component logps (n, K), counts or None)`` on the distinct rows of ``value``."""
    distinct = distinct_rows(value)
    rows, counts = (value, None) if distinct is None else distinct
    return pt.log(weights) + _component_logps(components, rows), counts


@_logprob.register(RankingMixtureRV)
def _ranking_mixture_logp(op, values, rng, weights, *components, **kwargs):
    (value,) = values
    joint, counts = _mixture_parts(weights, components, value)
    # the parameter check on the distinct rows, then the repeat per ballot: the summed logp is
    # then Sum(repeat_rows(...)), which the ballots rewrite turns into a sum per distinct row
    ll = check_parameters(
        pt.logsumexp(joint, axis=-1), pt.all(pt.ge(weights, 0)), pt.all(pt.le(weights, 1)),
        pt.all(pt.isclose(pt.sum(weights, axis=-1), 1)),
        msg="0 <= w <= 1, sum(w) == 1")
    return ll if counts is None else per_ballot(ll, counts)


def mixture_memberships(rv, value):
    """Exact membership probabilities ``p(component k | row) = w_k p_k(row) / p(row)``.

    Parameters
    ----------
    rv : TensorVariable
        A :class:`RankingMixture` (``.dist`` or a model variable).
    value : tensor_like, shape (n, M)
        Rank-form rows; for a model variable with counts, its observed value (one row per
        ballot; computed on the distinct orders and repeated).

    Returns
    -------
    TensorVariable, shape (n, K)
        Each row sums to 1; a symbolic expression of ``rv``'s parameters (``.eval()`` it, or
        compile it with the model's variables replaced by values).
    """
    if not isinstance(getattr(rv.owner, "op", None), RankingMixtureRV):
        raise TypeError(f"mixture_memberships needs a RankingMixture variable; got {rv}")
    _, weights, *components = rv.owner.inputs
    value = pt.as_tensor_variable(value)
    joint, counts = _mixture_parts(weights, components, value)
    probs = pt.exp(joint - pt.logsumexp(joint, axis=-1, keepdims=True))
    return probs if counts is None else pt.repeat(probs, pt.cast(counts, "int64"), axis=0)


class RankingMixture(Mixture):
    r"""Finite mixture of pm_perm ranking distributions, observed row by row or with counts.

    .. math::

        \log p(y) = \operatorname{logsumexp}_k \left(\log w_k + \log p_k(y)\right)

    ========  ==========================================================
    Support   rank-form orders (``docs/guide/preferences_data.md``), as the components'
    ========  ==========================================================

    Parameters
    ----------
    w : tensor_like of float, shape (K,)
        Mixture weights (non-negative, summing to 1).
    comp_dists : list of K unnamed distributions
        :class:`~pm_perm.PlackettLuce`, :class:`~pm_perm.PartialRanking` or
        :class:`~pm_perm.TopKRanking` ``.dist`` s of the same
        number of items, without ``weights`` (give the counts to the mixture). A component with
        ``length_probs`` draws top-k ballots, and its ``log length_probs[k]`` term enters the
        mixture (give every component the same ``length_probs`` for a length model shared by
        the components). Or :class:`~pm_perm.Mallows` ``.dist`` s (complete rankings; each
        ``rho_k`` may be a latent permutation: clusters of assessors,
        :mod:`pm_perm.preferences.mallows_clusters`).
    weights : tensor_like of int, shape (n,), optional
        With ``observed`` the distinct orders (n, M): the count of each. The variable then holds
        one row per BALLOT (``orders[i]`` repeated ``weights[i]`` times): one pointwise
        log-likelihood per ballot, one posterior predictive ballot per observed ballot, the
        log-probability computed on the distinct orders. ``pm.Data`` counts and orders can be
        changed by ``pm.set_data`` (a refit reuses the compiled functions).
    keep_pattern : bool, default True
        Model level only (with ``observed``), as for the components
        (:class:`~pm_perm.PlackettLuce`): each component draws with the observed value as its
        ``pattern`` (unless it has its own), so ``pm.sample_posterior_predictive`` replicates
        each observed ballot with its own length and tie blocks (a complete ranking drawn from
        the mixture, coarsened to the ballot's pattern). The pattern enters the draws only,
        never the log-probability. ``False``: lengths from the components' ``length_probs``
        (complete rankings without), no ties.

    Notes
    -----
    Draws: the component of each row from ``w``, then that component's exact draw (coarsened
    to the row's pattern: ``keep_pattern``). Cost of the
    log-probability: each component's on the (distinct) rows, e.g. O(M 2^M + n M) for
    ``PartialRanking`` components. The likelihood is symmetric in the component labels: an
    optimiser started where every component is the same (e.g. ``pm.find_MAP`` without jitter
    from the prior means) stays on that saddle (:func:`pm_perm.inference.check_find_map`
    refuses it; start from jittered points), and draws need relabelling
    (:func:`pm_perm.preferences.posterior.relabel_components`).
    Membership probabilities: :func:`mixture_memberships`.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pm_perm
    >>> from pm_perm.distributions import RankingMixture, mixture_memberships
    >>> comps = [pm_perm.PlackettLuce.dist([2.0, 0.0, -2.0]),
    ...          pm_perm.PlackettLuce.dist([-2.0, 0.0, 2.0])]
    >>> y = RankingMixture.dist(w=[0.5, 0.5], comp_dists=comps)
    >>> p = float(np.exp(pm.logp(y, [0, 1, 2]).eval()))   # (p_1 + p_2) / 2
    >>> p1 = np.exp(2) / (np.exp(2) + 1 + np.exp(-2)) / (1 + np.exp(-2))
    >>> p2 = np.exp(-2) / (np.exp(2) + 1 + np.exp(-2)) / (1 + np.exp(2))
    >>> round(p, 6), round(float(p1 + p2) / 2, 6)
    (0.38269, 0.38269)
    >>> mixture_memberships(y, [[0, 1, 2]]).eval().round(4).tolist()   # p(k | order)
    [[0.9975, 0.0025]]
    """

    rv_type = RankingMixtureRV
    rv_op = RankingMixtureRV.rv_op

    def __new__(cls, name, w, comp_dists, weights=None, observed=None, keep_pattern=True,
                **kwargs):
        if keep_pattern not in (True, False):
            raise ValueError(f"keep_pattern must be True or False; got {keep_pattern!r}")
        if weights is not None:
            if observed is None:
                raise ValueError("RankingMixture: weights= (counts) needs observed= (the distinct "
                                 "orders they count)")
            observed = observed_ballots(observed, weights)
            if kwargs.get("shape") is None and kwargs.get("size") is None:
                # with dims, e.g. ("ballot", "item"): a new ballot dim gets its length here
                kwargs["shape"] = tuple(observed.shape)
        if keep_pattern and observed is not None:
            # the draws keep each observed row's pattern (length and tie blocks), as the
            # components' own keep_pattern: each component draws with the observed value as
            # its pattern (the pattern enters the draws only, never the logp)
            comps = list(comp_dists) if isinstance(comp_dists, list | tuple) else [comp_dists]
            if all(isinstance(getattr(c.owner, "op", None), _COMPONENT_RVS) for c in comps):
                obs = observed
                if not isinstance(observed, pt.Variable):  # checked here, named as observed
                    obs = np.asarray(observed)
                    obs = validate_orders(obs.reshape(-1, obs.shape[-1]) if obs.ndim else obs,
                                          None, name="RankingMixture: observed"
                                          ).reshape(obs.shape)
                comp_dists = [_with_pattern(c, obs) for c in comps]
        return super().__new__(cls, name, w, comp_dists, observed=observed, **kwargs)

    @classmethod
    def dist(cls, w, comp_dists, weights=None, **kwargs):
        if weights is not None:
            raise ValueError("RankingMixture.dist: weights= (counts) is for an observed model "
                             "variable (RankingMixture(name, ..., weights=counts, observed="
                             "orders)); for pm.logp multiply the rows' log-probabilities instead")
        comps = list(comp_dists) if isinstance(comp_dists, list | tuple) else [comp_dists]
        if len(comps) < 2:
            raise ValueError(f"RankingMixture needs a list of at least 2 components; got "
                             f"{len(comps)}")
        for c in comps:
            op = getattr(getattr(c, "owner", None), "op", None)
            if not isinstance(op, _ANY_COMPONENT_RVS):
                raise ValueError("RankingMixture components must be PlackettLuce.dist, "
                                 "PartialRanking.dist or TopKRanking.dist variables (or "
                                 f"Mallows.dist, complete rankings); got {c}")
            if isinstance(op, MallowsRV):
                continue
            w_c = op.dist_params(c.owner)[1]
            try:
                unit = bool(np.all(pt.get_underlying_scalar_constant_value(w_c) == 1.0))
            except Exception:
                unit = False
            if not unit:
                raise ValueError("RankingMixture components must not have weights: give the "
                                 "counts to the mixture (weights=counts with observed=orders)")
        return super().dist(w, comps, **kwargs)

