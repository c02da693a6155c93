"""The Plackett-Luce-anchored models of ranking data (issue 53, variants V3 (full deviations)
and V4 (rank-one deviations) of ``benchmarks/bench_small_data.py``).

``p(pi | u, D) = PL(pi; u) exp(sum_i D[i, pi(i)]) / Z(u, D)``: Plackett-Luce tilted by an item x
position matrix ``D`` (kernel :mod:`pm_perm.kernels.pl_tilted`). ``D = tau B delta_raw B^T``
(``delta_raw`` standard normal, ``B`` the Helmert basis of
:func:`~pm_perm.preferences.models.zero_sum_basis`: zero-sum over items and positions, as the
full model's deviations), ``u ~ ZeroSumNormal(prior_sigma)`` as in
:func:`~pm_perm.preferences.models.plackett_luce_model`. ``tau = 0`` is Plackett-Luce EXACTLY
(complete and top-k ballots), so the evidence-chosen ``tau``
(:func:`~pm_perm.preferences.fitting.fit_map_type2`) can only add the deviations the data
support. The model of :func:`~pm_perm.preferences.models.full_model` shrinks toward rank one
``u c^T`` instead, which is not Plackett-Luce even at ``tau = 0``.

``deviations="rank-one"``: ``D = tau (B a)(B b)^T``, the outer product of a zero-sum item
vector and a zero-sum position vector (``a``, ``b`` standard normal, ``M - 1`` coordinates each):
``2 (M - 1)`` deviation coordinates instead of ``(M - 1)^2``, so the Laplace evidence's Hessian
and the fits are much cheaper; ``tau = 0`` is again Plackett-Luce exactly. The posterior of
``(a, b)`` is bilinear: ``a = b = 0`` is a stationary point at every ``tau`` (a saddle once the
data pull away from Plackett-Luce), so ``fit_map_type2`` refits each ``tau > 0`` from a jittered
start as well as from the previous optimum and keeps the better; ``(a, b)`` and ``(-a, -b)``
give the same ``D`` (two modes: the Laplace evidence of one of them is ``log 2`` below the
two modes' sum, a bias toward smaller ``tau``).

Scope: one component, complete and top-k ballots (a tie block only at the end of a ballot);
MAP fits (:func:`~pm_perm.preferences.fitting.fit_map`, ``fit_map_type2``) and NUTS
(:func:`~pm_perm.preferences.fitting.fit_nuts`, at a fixed ``tau``). ``pm-perm preferences
--model full`` fits the full variant by default where it applies (:mod:`pm_perm.cli.preferences`),
``--model rank-one`` the rank-one variant by MAP with ``tau`` by cross-validation
(``fit_map_cv``; the evidence lost on small data, ``docs/benchmarks.md``, "Small data, V4";
"Small data, V5 and V6"). The
ballots are an observed :class:`~pm_perm.distributions.PLAnchoredRanking` ``"ballots"`` with
``weights=counts`` and ``length_probs``, as the one-component models of
:mod:`~pm_perm.preferences.models`: ``pm.compute_log_likelihood`` has one row per BALLOT (so
``az.loo`` / ``az.compare`` are per ballot), and ``pm.sample_posterior_predictive`` draws one
ballot per observed ballot with its pattern (length, tied last block). The posterior helpers
(:func:`~pm_perm.preferences.fitting.posterior_params`, :mod:`pm_perm.preferences.posterior`,
:mod:`pm_perm.preferences.analysis`) take the family :data:`FAMILY`, whose ``params`` pack
``D`` and ``u`` as (S, 1, M, M + 1); :func:`heldout_loglik` scores a MAP point directly.
"""

from __future__ import annotations

import numpy as np
import pymc as pm

from pm_perm.kernels.pl_tilted import check_no_middle_ties, pl_tilted_loglik
from pm_perm.preferences.models import (
    RankingModel,
    _check_data,
    _check_fixed_tau,
    _check_scale,
    _coords,
    _utilities,
    _zero_sum_matrices,
    _zero_sum_rows,
    zero_sum_basis,
)

__all__ = ["DEVIATIONS", "FAMILY", "heldout_loglik", "log_p_gradient", "pl_anchored_model"]

#: The ``family`` of the models built here (full and rank-one tilt alike).
FAMILY = "pl-anchored"
#: The structures of the deviation matrix ``D`` (``deviations=`` of :func:`pl_anchored_model`).
DEVIATIONS = ("full", "rank-one")


def pl_anchored_model(data, *, prior_sigma=3.0, tau=0.0, deviations="full"):
    """Plackett-Luce tilted by a zero-sum item x position matrix of scale ``tau``.

    Parameters
    ----------
    data : RankingData
        Complete or top-k ballots (ties only at the end of a ballot).
    prior_sigma : float
        Prior scale of the utilities ``u ~ ZeroSumNormal(prior_sigma)``.
    tau : float
        The deviation scale ``>= 0``, the ``pm.Data`` container ``"tau"`` (fixed, for
        :func:`~pm_perm.preferences.fitting.fit_map_type2`, which chooses it by the Laplace
        evidence); ``tau = 0`` is the Plackett-Luce model.
    deviations : {"full", "rank-one"}
        ``"full"``: ``D = tau B delta_raw B^T`` (``delta_raw`` (M-1) x (M-1) standard normal);
        ``"rank-one"``: ``D = tau (B a_raw)(B b_raw)^T`` (``a_raw`` over items, ``b_raw`` over
        positions, M - 1 standard normal coordinates each).

    Returns
    -------
    RankingModel
        ``family`` :data:`FAMILY`; free variables ``u_raw``, ``delta_raw`` (rank-one: ``a_raw``
        and ``b_raw``), ``length_probs``; deterministics ``u`` (1, M) and ``D`` (1, M, M); the
        observed ``"ballots"`` (one row per ballot, dims ``("ballot", "item")``).

    Raises
    ------
    ValueError
        ``prior_sigma`` not a positive finite number, ``tau`` not a finite number ``>= 0``,
        ``deviations`` not one of :data:`DEVIATIONS`, fewer than 2 items, no ballots, or a
        ballot with tied items before its end (named, with the alternatives).

    Examples
    --------
    >>> from pm_perm.preferences.synthetic import simulate_rankings
    >>> from pm_perm.preferences.fitting import fit_map_type2
    >>> data = simulate_rankings(30, utilities=[1.0, 0.5, 0.0, -0.5], rng=0)
    >>> point = fit_map_type2(pl_anchored_model(data), grid=(0.0, 0.5))
    >>> heldout_loglik(point, data.orders).shape == (data.n_distinct,)
    True
    >>> rm = pl_anchored_model(data, deviations="rank-one")
    >>> sorted(v.name for v in rm.model.free_RVs)
    ['a_raw', 'b_raw', 'length_probs', 'u_raw']
    """
    from pm_perm.distributions import PLAnchoredRanking

    prior_sigma = _check_scale("prior_sigma", prior_sigma)
    tau = _check_fixed_tau(tau)
    if not isinstance(deviations, str) or deviations not in DEVIATIONS:
        raise ValueError(f"deviations must be one of {DEVIATIONS} (the structure of the item x "
                         f"position tilt D); got {deviations!r}")
    _check_data(data, 1)
    check_no_middle_ties(data.orders, what="ballots (distinct orders)")
    M = data.n_items
    with pm.Model(coords=_coords(data, 1)) as model:
        u = _utilities(data, 1, prior_sigma, None)
        tau_data = pm.Data("tau", np.float64(tau))
        D = pm.Deterministic("D", tau_data * _deviations(deviations, M),
                             dims=("component", "item", "position"))
        orders = pm.Data("orders", data.orders, dims=("order", "item"))
        counts = pm.Data("counts", data.counts.astype(np.float64), dims="order")
        length_probs = pm.Dirichlet("length_probs", a=np.ones(M + 1), dims="length")
        # one row per BALLOT (pm_perm.distributions._ballots): per-ballot pointwise
        # log-likelihoods and posterior predictive draws; the summed logp costs per order
        PLAnchoredRanking("ballots", u[0], D[0], weights=counts, length_probs=length_probs,
                          observed=orders, dims=("ballot", "item"))
    return RankingModel(model, FAMILY, 1, data)


def _deviations(deviations, M):
    """The unscaled zero-sum deviation matrix (1, M, M) and its standard normal coordinates."""
    B = zero_sum_basis(M)
    if deviations == "full":
        delta = pm.Normal("delta_raw", 0.0, 1.0,
                          dims=("component", "item_basis", "position_basis"))
        return _zero_sum_matrices(delta, B)
    a = _zero_sum_rows(pm.Normal("a_raw", 0.0, 1.0, dims=("component", "item_basis")), B)
    b = _zero_sum_rows(pm.Normal("b_raw", 0.0, 1.0, dims=("component", "position_basis")), B)
    return a[:, :, None] * b[:, None, :]


def heldout_loglik(point, orders):
    """``log p(order)`` of each rank-form order under a fitted point's ``u`` and ``D``.

    Parameters
    ----------
    point : dict
        A MAP point of :func:`pl_anchored_model` (``"u"`` (1, M) and ``"D"`` (1, M, M)).
    orders : array_like of int, shape (n, M)

    Returns
    -------
    ndarray of float64, shape (n,)
        Natural log; the ballot length's probability is not included.
    """
    for k in ("u", "D"):
        if k not in point:
            raise ValueError(f"point has no {k!r}; pass a fit of pl_anchored_model")
    return pl_tilted_loglik(np.asarray(point["u"])[0], np.asarray(point["D"])[0], orders)


def log_p_gradient(rm, engine):
    """The gradient of ``log p`` (no Jacobian terms) over ``engine``'s raveled point, for a
    model of :func:`pl_anchored_model` and its MAP engine (``fitting._map_engine``), as
    ``-engine.value_and_grad(x)[1] * engine.scale`` but with no work per order: the priors'
    gradient and the transpose of ``(u, D)``'s Jacobian from a small compiled graph, the
    likelihood's gradient in ``(u, D)`` from the kernel on the orders'
    :func:`~pm_perm.kernels.pl_tilted.plan_weights` (the ballots' counts at the call). For the
    many gradients of a Laplace Hessian (:func:`~pm_perm.preferences.fitting.fit_map_type2`):
    on 313,430 top-5 orders of 20 items about half an evaluation of the engine. The ballot
    lengths' term depends on ``length_probs`` alone and its coordinates get the prior's
    gradient only: use the result on the other coordinates."""
    import pytensor.tensor as pt

    from pm_perm._modes import PYTHON_MODE
    from pm_perm.inference.map import _grad_raveled
    from pm_perm.kernels.pl_tilted import orders_plan, pl_tilted_seeded_grad, plan_weights

    model = rm.model
    if rm.family != FAMILY:
        raise ValueError(f"log_p_gradient needs a model of pl_anchored_model (family "
                         f"{FAMILY!r}); got family {rm.family!r}")
    compiled = getattr(engine, "_anchored_gradient", None)
    if compiled is None:
        u, D = model.replace_rvs_by_values([model["u"][0], model["D"][0]])
        gu, gD = pt.dvector("gu"), pt.dmatrix("gD")
        cost = model.logp(vars=model.free_RVs, jacobian=False) + (u * gu).sum() + (D * gD).sum()
        kwargs = {"point_fn": False, "on_unused_input": "ignore", "mode": PYTHON_MODE}
        f_ud = model.compile_fn([u, D], inputs=engine.vars, **kwargs)
        f_grad = model.compile_fn(_grad_raveled(cost, engine.vars),
                                  inputs=[*engine.vars, gu, gD], **kwargs)
        orders = getattr(engine, "frozen_data", {}).get("orders", model["orders"].get_value())
        plan = orders_plan(np.ascontiguousarray(orders, dtype=np.int64))
        compiled = engine._anchored_gradient = (f_ud, f_grad, plan)
    f_ud, f_grad, plan = compiled
    counts = np.ascontiguousarray(model["counts"].get_value(), dtype=np.float64)
    items, lengths, set_ids, last_ids, sets = plan
    seeds = plan_weights(items, lengths, set_ids, last_ids, sets.shape[0], counts,
                         items.shape[1])

    def grad(x):
        point = engine.unravel(x)
        args = [point[v.name] for v in engine.vars]
        u, D = (np.ascontiguousarray(a, dtype=np.float64) for a in f_ud(*args))
        gu, gD = np.empty(u.shape[0]), np.empty(D.shape)
        pl_tilted_seeded_grad(u, D, sets, *seeds, gu, gD)
        return np.asarray(f_grad(*args, gu, gD), dtype=np.float64)

    return grad
