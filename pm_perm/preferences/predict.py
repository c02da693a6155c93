r"""Prediction for a new assessor: how a partial ballot goes on, under a ranking model's posterior.

Given the top of a new ballot (its first items in order, ties allowed), the posterior predictive
probability of each remaining item coming next (:func:`predict_next`) and of each ordered
continuation by its next ``n_next`` items (:func:`predict_top`):

.. math::

    p(c \mid \text{prefix}, \text{data}) =
    \frac{E_{\text{post}}[p(\text{prefix} + c \mid \theta)]}
         {E_{\text{post}}[p(\text{prefix} \mid \theta)]}

The prefix is evidence: it reweights the posterior draws (and, in a mixture, the components), so
this is NOT the average over draws of the conditionals ``p(c | prefix, theta)``. Every term is
the exact probability of a top-k (or tied) order, which the distributions give in closed form,
averaged over the draws by a log-sum-exp (log space throughout). The event is the order, not the
ballot's length: a ``length_probs`` term of the model is left out, as are the ``weights``
(counts) of the observed data.

Models. ``model`` is a ``pm.Model`` (user-written or built by :mod:`pm_perm.preferences.models`)
whose observed ranking variable (``var_name``) is a :class:`~pm_perm.PlackettLuce`, a
:class:`~pm_perm.PartialRanking` or a :class:`~pm_perm.PermutationExpFamily` (complete rankings;
its partial orders have the probabilities :class:`~pm_perm.PartialRanking` gives for the same
logits), or a mixture of them (``pm.Mixture``, or a subclass such as pm_perm's own): the
variable's own distribution, with its parameters at each posterior draw, is evaluated on the
candidate orders (one graph, compiled once per model and vectorised over the draws). A
:class:`~pm_perm.preferences.models.RankingModel` with ``K > 1`` components (its ballots a
``pm.Potential``) goes through :func:`~pm_perm.preferences.fitting.posterior_params` and
:func:`~pm_perm.preferences.posterior.pointwise_loglik` instead.

Items are named by their index ``0..M-1`` in the model's arrays, or by name when the observed
variable's last dimension has coordinates (e.g. the ``"item"`` coordinate of the package's
models, the PrefLib file's names).
"""

from __future__ import annotations

import itertools
import math
import weakref

import numpy as np
from scipy.special import logsumexp

__all__ = ["predict_next", "predict_top"]

#: Distributions (by class name) whose ``logp`` takes rank-form partial orders and whose ``dist``
#: takes the order parameters first, then optional ``weights`` and ``length_probs``.
_RANK_FORM_DISTRIBUTIONS = ("PlackettLuce", "PartialRanking")

#: pm.Model -> {var_name: (compiled law, its free variables, item names)}: a model's law is
#: compiled once, then evaluated at any posterior and prefix
_COMPILED = weakref.WeakKeyDictionary()

#: Entries of one (draws x candidates) block of log-likelihoods evaluated at once (memory bound).
_BLOCK = 1 << 21


def predict_next(model, posterior, prefix, *, var_name="ballots", rank_form=False):
    """Posterior predictive probability of each remaining item being next after ``prefix``.

    ``p(next = i | prefix, data) = E_post[p(prefix + i | theta)] / E_post[p(prefix | theta)]``
    (module docstring): the prefix reweights the draws and, in a mixture, the memberships.

    Parameters
    ----------
    model : pymc.Model or RankingModel
        A model with an observed ranking variable ``var_name`` (module docstring), or a
        :class:`~pm_perm.preferences.models.RankingModel` (any family, any ``K``).
    posterior : DataTree / InferenceData with ``posterior``, or dict
        Posterior draws (``pm.sample``, :func:`~pm_perm.preferences.fitting.fit_nuts`) or a MAP
        point (``pm.find_MAP``, :func:`~pm_perm.preferences.fitting.fit_map`) holding the model's
        free variables (for a ``K > 1`` RankingModel: what ``posterior_params`` needs).
    prefix : sequence of int or str, or array_like of int
        The new ballot's top items in order, best first (``rank_form=False``: item indices
        ``0..M-1`` or item names; empty for the first position), or a rank-form row of length
        ``M`` (``rank_form=True``: ``-1`` = not ranked yet; tied items share a position).
    var_name : str
        The observed ranking variable of ``model`` (ignored for a ``K > 1`` RankingModel).
    rank_form : bool
        Read ``prefix`` as a rank-form row.

    Returns
    -------
    dict
        ``"items"`` (R,) the remaining items' indices, most probable first; ``"names"`` their
        names (indices as strings when the model has none); ``"probs"`` and ``"log_probs"``
        (R,) their probabilities of being next (summing to 1); ``"log_evidence"`` the log
        posterior predictive probability of the prefix itself, ``log E_post[p(prefix)]``.

    Raises
    ------
    ValueError
        The prefix repeats an item, names an unknown one, is longer than ``M`` or ranks every
        item (nothing is left to predict), or is not valid rank form; the model has no such
        observed variable, or the posterior lacks one of its free variables; the prefix has
        probability 0 under every draw.
    TypeError
        ``var_name`` is not one of the supported ranking distributions.

    Notes
    -----
    Cost: one evaluation of the model's log-likelihood on ``R + 1`` orders per posterior draw
    (``R`` remaining items; Plackett-Luce O(M) per order, ``PartialRanking`` O(M 2^M) per draw
    for its table), plus building the graph once per call.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pm_perm
    >>> from pm_perm.preferences.predict import predict_next
    >>> with pm.Model(coords={"ballot": [0], "item": ["a", "b", "c"]}) as m:
    ...     u = pm.Normal("u", 0.0, 1.0, dims="item")
    ...     y = pm_perm.PlackettLuce("ballots", utilities=u, observed=[[0, 1, 2]],
    ...                              dims=("ballot", "item"))
    >>> out = predict_next(m, {"u": np.log([3.0, 2.0, 1.0])}, ["a"])   # a point: exact PL
    >>> out["names"], out["probs"].round(3).tolist()
    (('b', 'c'), [0.667, 0.333])
    """
    out = predict_top(model, posterior, prefix, 1, var_name=var_name, rank_form=rank_form)
    return {"items": out["completions"][:, 0], "names": tuple(n[0] for n in out["names"]),
            "probs": out["probs"], "log_probs": out["log_probs"],
            "log_evidence": out["log_evidence"]}


def predict_top(model, posterior, prefix, n_next, *, var_name="ballots", rank_form=False,
                max_completions=100_000):
    """Posterior predictive probability of each ordered continuation of ``prefix`` by
    ``n_next`` items.

    ``p(c | prefix, data) = E_post[p(prefix + c | theta)] / E_post[p(prefix | theta)]`` for
    every sequence ``c`` of ``n_next`` distinct remaining items (module docstring).

    Parameters
    ----------
    model, posterior, prefix, var_name, rank_form
        As in :func:`predict_next`.
    n_next : int
        Items each continuation ranks after the prefix (1 to the number of remaining items).
    max_completions : int
        Refuse more continuations than this (there are ``R! / (R - n_next)!`` of ``R``
        remaining items).

    Returns
    -------
    dict
        ``"completions"`` (C, n_next) item indices, in the order they follow the prefix, most
        probable first; ``"names"`` the same as tuples of names; ``"probs"`` and
        ``"log_probs"`` (C,) (summing to 1); ``"log_evidence"`` as in :func:`predict_next`.

    Raises
    ------
    ValueError
        As :func:`predict_next`; ``n_next`` is not between 1 and the number of remaining items,
        or there are more than ``max_completions`` continuations.
    TypeError
        As :func:`predict_next`.

    Notes
    -----
    Cost: one evaluation of the model's log-likelihood on ``C + 1`` orders per posterior draw
    (see :func:`predict_next`), in blocks of about two million (draw, order) entries.
    """
    loglik, names = _order_loglik(model, posterior, var_name)
    M = len(names)
    row = _prefix_row(prefix, names, rank_form)
    remaining = np.flatnonzero(row < 0)
    if remaining.size == 0:
        raise ValueError("the prefix ranks every item: no item is left to predict")
    if isinstance(n_next, bool) or not isinstance(n_next, int | np.integer) \
            or not 1 <= n_next <= remaining.size:
        raise ValueError(f"n_next must be an integer from 1 to the {remaining.size} remaining "
                         f"items; got {n_next!r}")
    n_cand = math.perm(remaining.size, int(n_next))
    if n_cand > max_completions:
        raise ValueError(f"{n_cand} continuations of {n_next} of the {remaining.size} remaining "
                         f"items exceed max_completions={max_completions}; lower n_next or "
                         "raise max_completions")
    seqs = np.array(list(itertools.permutations(remaining, int(n_next))),
                    dtype=np.int64).reshape(n_cand, int(n_next))
    cand = np.repeat(row[None], n_cand, axis=0)
    ranked = M - remaining.size  # the next free position (after any tie block of the prefix)
    cand[np.arange(n_cand)[:, None], seqs] = ranked + np.arange(int(n_next))
    log_mean = _log_mean_likelihood(loglik, np.vstack([row[None], cand]))
    log_evidence = float(log_mean[0])
    if not log_evidence > -np.inf:
        raise ValueError("the prefix has probability 0 under every posterior draw (its items "
                         "cannot hold those positions under the model)")
    log_probs = log_mean[1:] - log_evidence
    order = np.argsort(-log_probs, kind="stable")
    seqs = seqs[order]
    return {"completions": seqs, "names": [tuple(names[i] for i in s) for s in seqs],
            "probs": np.exp(log_probs[order]), "log_probs": log_probs[order],
            "log_evidence": log_evidence}


def _log_mean_likelihood(loglik, orders):
    """``log E_post[p(order)]`` (n,) of each order: log-sum-exp over the draws of ``loglik``
    (a function of (n, M) orders returning (S, n)), in blocks of ``_BLOCK`` entries."""
    first = loglik(orders[:1])
    S = first.shape[0]
    step = max(1, _BLOCK // S)
    ll = [first] + [loglik(orders[i:i + step]) for i in range(1, orders.shape[0], step)]
    with np.errstate(divide="ignore"):  # an order of probability 0 under every draw: -inf
        return logsumexp(np.hstack(ll), axis=0) - np.log(S)


# --- the prefix -------------------------------------------------------------------------------

def _prefix_row(prefix, names, rank_form):
    """The prefix as a rank-form row (M,) int64, checked."""
    from pm_perm.kernels.rank_form import validate_orders

    M = len(names)
    if rank_form:
        row = np.asarray(prefix)
        if row.ndim != 1 or row.shape[0] != M:
            raise ValueError(f"a rank-form prefix must be one row of M = {M} entries (-1 = not "
                             f"ranked yet); got shape {row.shape}")
        return validate_orders(row[None], M, name="prefix")[0]
    if isinstance(prefix, str | bytes) or np.ndim(prefix) != 1:
        raise ValueError("prefix must be a sequence of items, best first (indices or names); "
                         f"got {prefix!r}")
    items = list(prefix)
    if len(items) > M:
        raise ValueError(f"the prefix ranks {len(items)} items but the model has M = {M}")
    row = np.full(M, -1, dtype=np.int64)
    for pos, item in enumerate(items):
        i = _item_index(item, names)
        if row[i] >= 0:
            raise ValueError(f"item {names[i]!r} appears twice in the prefix (positions "
                             f"{row[i]} and {pos}); a ballot ranks each item once")
        row[i] = pos
    return row


def _item_index(item, names):
    """Index of ``item`` (an index ``0..M-1`` or a name), or a ValueError naming the items."""
    M = len(names)
    if isinstance(item, str):
        if item in names:
            return names.index(item)
    elif isinstance(item, int | np.integer) and not isinstance(item, bool | np.bool_):
        if 0 <= item < M:
            return int(item)
        if item == -1:
            raise ValueError("unknown item -1 in the prefix: an item list holds items, best "
                             "first; for a rank-form row (-1 = not ranked) pass rank_form=True")
    shown = ", ".join(names[:10]) + (", ..." if M > 10 else "")
    raise ValueError(f"unknown item {item!r} in the prefix: the model's items are the indices "
                     f"0..{M - 1} or the names {shown}")


# --- the order model's log-likelihood per draw --------------------------------------------------

def _order_loglik(model, posterior, var_name):
    """``(loglik, names)``: ``loglik(orders)`` (S, n) per posterior draw, no length term, and
    the item names (indices as strings when the model has none)."""
    from pm_perm.preferences.fitting import posterior_params
    from pm_perm.preferences.models import RankingModel

    if isinstance(model, RankingModel) and model.components > 1:
        from pm_perm.preferences.posterior import pointwise_loglik

        post = posterior_params(posterior, model.family)
        return (lambda orders: pointwise_loglik(post, model.family, orders),
                tuple(str(n) for n in model.data.item_names))
    if isinstance(model, RankingModel):
        model = model.model
    return _graph_loglik(model, posterior, var_name)


def _observed(model, var_name):
    """The observed ranking variable ``var_name`` of ``model``, checked."""
    observed = [v.name for v in model.observed_RVs]
    if var_name not in model.named_vars:
        raise ValueError(f"the model has no variable {var_name!r}; its observed variables: "
                         f"{observed}")
    rv = model[var_name]
    if rv in model.potentials:
        raise ValueError(f"{var_name!r} is a pm.Potential, not a distribution: there is no order "
                         "model to evaluate; for a mixture of pm_perm.preferences.models pass "
                         "its RankingModel")
    if rv not in model.observed_RVs:
        raise ValueError(f"{var_name!r} is not an observed variable; the model's: {observed}")
    return rv


def _order_law(rv, var_name, size=None):
    """A distribution with ``rv``'s law over orders at the same parameters (symbolic, in terms
    of the model's variables), without weights and length term, of batch shape ``size``."""
    import inspect

    from pymc.distributions.mixture import MixtureRV

    from pm_perm.distributions import PartialRanking
    from pm_perm.distributions.permutation import PermutationExpFamilyRV

    node = rv.owner
    op = node.op
    if isinstance(op, MixtureRV):  # pm.Mixture or a subclass (pm_perm's RankingMixture)
        _, w, *components = node.inputs
        _check_shared(w, op.ndims_params[0], "mixture weights", var_name)
        return _distribution_class(type(op)).dist(
            w, [_order_law(c, var_name) for c in components], size=size)
    params = op.dist_params(node)
    if isinstance(op, PermutationExpFamilyRV):  # complete rankings: the same law's partial orders
        cls, params = PartialRanking, params[:1]
    else:
        cls = _distribution_class(type(op))
        if cls is None or cls.__name__ not in _RANK_FORM_DISTRIBUTIONS:
            name = getattr(op, "dist_name", None) or type(op).__name__
            raise TypeError(f"{var_name!r} is (or mixes) a {name}: predictions need an observed "
                            f"{', '.join(_RANK_FORM_DISTRIBUTIONS)} or PermutationExpFamily, or "
                            "a mixture of them (distributions over rank-form orders)")
    keys = [p.name for p in inspect.signature(cls.dist).parameters.values()
            if p.kind is p.POSITIONAL_OR_KEYWORD]
    kwargs = dict(zip(keys, params, strict=False))
    for key, param, core in zip(keys, params, op.ndims_params, strict=False):
        if key in ("weights", "length_probs", "pattern"):
            kwargs[key] = None  # the counts and the ballot length are not the order's event
        else:
            _check_shared(param, core, key, var_name)
    return cls.dist(**kwargs, size=size)


def _check_shared(param, core, key, var_name):
    """Raise unless ``param`` (core ndim ``core``) is one value shared by every row."""
    batch = param.type.ndim - core
    if not all(param.type.broadcastable[:batch]):
        raise ValueError(f"the {key} of {var_name!r} differ between its rows (batch shape "
                         f"{param.type.shape[:batch]}): a new assessor has no row of their "
                         "own; give the rows one shared parameter")


def _distribution_class(rv_type):
    """The pm.Distribution subclass whose ``rv_type`` is ``rv_type``, or None."""
    import pymc as pm

    stack = [pm.Distribution]
    while stack:
        cls = stack.pop()
        if cls.__dict__.get("rv_type") is rv_type:
            return cls
        stack.extend(cls.__subclasses__())
    return None


def _graph_loglik(model, posterior, var_name):
    """``(loglik, names)`` of the observed variable's law at the posterior's draws."""
    cache = _COMPILED.setdefault(model, {})
    if var_name not in cache:
        cache[var_name] = _compile_law(model, var_name)
    fn, free, names = cache[var_name]
    draws = _posterior_draws(posterior, free, var_name)
    values = [draws[v.name] for v in free]

    def loglik(orders):
        return np.asarray(fn(*values, np.ascontiguousarray(orders, dtype=np.int64)))

    return loglik, names


def _compile_law(model, var_name):
    """``(fn, free, names)``: ``fn(*draws of free, orders)`` (S, n) of the observed variable's
    law, vectorised over the draws of the free variables ``free`` it depends on (Python linker:
    it runs a few times per call, and its Ops call the compiled kernels), and the item names."""
    import pymc as pm
    import pytensor
    import pytensor.tensor as pt
    from pytensor.graph.replace import graph_replace, vectorize_graph
    from pytensor.graph.traversal import ancestors

    from pm_perm._modes import PYTHON_MODE

    rv = _observed(model, var_name)
    orders = pt.lmatrix("orders")
    ll = pm.logp(_order_law(rv, var_name, size=orders.shape[:1]), orders, warn_rvs=False)
    observed = {v: model.rvs_to_values[v] for v in model.observed_RVs}
    ll = graph_replace(ll, observed, strict=False)  # a parameter may use observed data
    graph = set(ancestors([ll]))
    free = [v for v in model.free_RVs if v in graph]
    batched = {v: v.type.clone(shape=(None, *v.type.shape))(v.name) for v in free}
    ll = vectorize_graph(ll, batched)
    if not free:  # no free parameter: one "draw"
        ll = ll[None]
    fn = pytensor.function([*batched.values(), orders], ll, mode=PYTHON_MODE,
                           on_unused_input="ignore")
    M = rv.type.shape[-1]
    if M is None:  # the observed data's width (data, no random variable)
        M = pytensor.function([], model.rvs_to_values[rv].shape[-1], mode=PYTHON_MODE)()
    M = int(M)
    dims = model.named_vars_to_dims.get(var_name) or ()
    coords = model.coords.get(dims[-1]) if len(dims) == rv.type.ndim else None
    names = tuple(str(n) for n in coords) if coords is not None and len(coords) == M else \
        tuple(str(i) for i in range(M))
    return fn, free, names


def _posterior_draws(posterior, free, var_name):
    """Each free variable's draws (S, ...) from a DataTree / InferenceData posterior (chains
    flattened) or a MAP point (S = 1)."""
    if isinstance(posterior, dict):
        source, lead = posterior, 0
    else:
        source, lead = posterior["posterior"], 2
    out, S = {}, None
    for v in free:
        if v.name not in source:
            raise ValueError(f"the posterior has no {v.name!r}, a free variable of the model "
                             f"that {var_name!r} depends on; pass the model's own draws or MAP "
                             "point")
        a = np.asarray(source[v.name] if lead == 0 else source[v.name].values)
        a = a[None] if lead == 0 else a.reshape((-1, *a.shape[2:]))
        if a.ndim != v.type.ndim + 1 or (S is not None and a.shape[0] != S):
            raise ValueError(f"the posterior's {v.name!r} has shape {a.shape[1:]} per draw; the "
                             f"model's is {v.type.ndim}-dimensional")
        S = a.shape[0]
        out[v.name] = a.astype(v.type.dtype)
    return out
