"""What to do with a ranking model's posterior: relabel mixture draws, draw replicated ballots,
pointwise log-likelihoods, component memberships and PSIS-LOO per ballot.

The inputs are a :class:`~pm_perm.preferences.models.RankingModel` with its draws (e.g. from
:func:`~pm_perm.preferences.fitting.fit_nuts`), or the arrays of
:func:`~pm_perm.preferences.fitting.posterior_params`.

Posterior predictive. ``pm.sample_posterior_predictive`` of the observed ``"ballots"`` variable
(one component or a :class:`~pm_perm.distributions.RankingMixture`) draws partial ballots, one
per observed ballot, each with that ballot's pattern: its length and tie blocks;
:func:`predictive_ballots` draws replicated data sets of any number of ballots through it.

Label switching: the mixture likelihood is symmetric in the component labels, so
:func:`relabel_components` matches each draw's components to a reference by a max-weight
matching on the distance between their position-marginal matrices.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
from scipy.special import logsumexp

from pm_perm.preferences._families import ANCHORED, anchored_parts, check_family, param_name

__all__ = [
    "loo_with_counts",
    "membership_probabilities",
    "pointwise_loglik",
    "predictive_ballots",
    "relabel_components",
]


def _flat_draws(idata, draws, rng):
    """(chain, draw) pairs of ``draws`` posterior draws picked at random (all when None)."""
    post = idata["posterior"]
    C, D = post.sizes["chain"], post.sizes["draw"]
    idx = np.arange(C * D)
    if draws is not None and draws < idx.size:
        idx = np.sort(rng.choice(idx.size, draws, replace=False))
    return idx // D, idx % D


def predictive_ballots(rm, idata, *, draws=100, n_ballots=None, seed=None, batch=20,
                       keep_pattern=True):
    """Posterior predictive ballots: one replicated data set of ``n_ballots`` partial ballots
    per posterior draw.

    With ``keep_pattern`` (default) replicated ballot ``b`` has the PATTERN of observed ballot
    ``b`` (its number of ranked items and its tie blocks; :mod:`pm_perm.kernels.patterns`): a
    complete ranking drawn from the model, coarsened to that pattern. The replicated data sets
    then have the data's length distribution and ties exactly, and check the orders given
    them. With ``n_ballots`` other than the number of ballots, the patterns are those of
    ``n_ballots`` ballots drawn from the data with replacement (seeded by ``seed``). With
    ``keep_pattern=False`` a ballot ranks ``k ~ length_probs`` items and has no ties (the
    model's own predictive of the ballot lengths).

    Keeping patterns: ``pm.sample_posterior_predictive`` of the observed ``"ballots"`` variable
    (:class:`~pm_perm.PartialRanking` / :class:`~pm_perm.PlackettLuce`, or for K > 1 the
    :class:`~pm_perm.distributions.RankingMixture` of them, whose draws keep the observed rows'
    patterns), with the ``pm.Data`` ``"orders"`` and ``"counts"`` set to the ``n_ballots``
    patterns with count 1 for the call and restored after it. ``keep_pattern=False``: draws
    by :func:`pm_perm.preferences.synthetic.draw_ballots` (component of each ballot from the
    draw's mixture weights, then an exact draw from that component, cut after
    ``k ~ length_probs``).

    Parameters
    ----------
    rm : RankingModel
    idata : InferenceData / DataTree with ``posterior``
        E.g. from :func:`~pm_perm.preferences.fitting.fit_nuts`.
    draws : int or None
        Number of posterior draws used (picked at random without replacement, seeded by
        ``seed``); None = all.
    n_ballots : int, optional
        Ballots per replicated data set; default the number of ballots in the data.
    seed : int, optional
    batch : int
        Posterior draws per ``pm.sample_posterior_predictive`` call (bounds the memory of the
        int64 draws: ``batch * n_ballots * M`` entries).
    keep_pattern : bool, default True
        Replicate each observed ballot's pattern (above); False: lengths from ``length_probs``.

    Returns
    -------
    ndarray of int8, shape (draws, n_ballots, M)
        Rank form (``-1`` = not ranked), one row per ballot.
    """
    if keep_pattern not in (True, False):
        raise ValueError(f"keep_pattern must be True or False; got {keep_pattern!r}")
    rng = np.random.default_rng(seed)
    data, M = rm.data, rm.data.n_items
    N = int(data.n_rankings if n_ballots is None else n_ballots)
    chains, steps = _flat_draws(idata, draws, rng)
    patterns = _ballot_patterns(data, N, rng) if keep_pattern else None
    if not keep_pattern:
        from pm_perm.preferences.synthetic import draw_ballots

        post = idata["posterior"]
        name = param_name(rm.family)
        key = "utilities" if rm.family == "plackett-luce" else "logits"
        out = []
        if rm.family == ANCHORED:
            from pm_perm.preferences._anchored_draws import draw
            from pm_perm.preferences._families import anchored_params

            return np.stack([draw(anchored_params(post["u"].values[c, d, 0],
                                                  post["D"].values[c, d, 0]), N,
                                  post["length_probs"].values[c, d], rng).astype(np.int8)
                             for c, d in zip(chains, steps, strict=True)])
        for c, d in zip(chains, steps, strict=True):
            w = post["mixture_weights"].values[c, d] if rm.components > 1 else None
            lp = post["length_probs"].values[c, d]
            if rm.family == "top-k":  # lengths 0..K: pad to 0..M
                lp = np.pad(lp, (0, M + 1 - lp.size))
            y = draw_ballots(N, **{key: post[name].values[c, d]}, mixture_weights=w,
                             length_probs=lp, rng=rng)
            out.append(y.astype(np.int8))
        return np.stack(out)
    import xarray as xr

    post = idata["posterior"]
    post = post.to_dataset() if hasattr(post, "to_dataset") else post
    out = []
    with rm.model:
        pm.set_data({"orders": patterns, "counts": np.ones(N)}, coords={"order": np.arange(N)})
        try:
            for start in range(0, chains.size, batch):
                sel = slice(start, start + batch)
                sub = post.isel(chain=xr.DataArray(chains[sel], dims="sample"),
                                draw=xr.DataArray(steps[sel], dims="sample"))
                sub = sub.drop_vars(["chain", "draw"]).rename_dims(sample="draw")
                sub = sub.assign_coords(draw=np.arange(sub.sizes["draw"])).expand_dims("chain")
                pp = pm.sample_posterior_predictive(
                    sub, var_names=["ballots"],
                    random_seed=int(rng.integers(2**31)), progressbar=False,
                    return_inferencedata=False)
                out.append(np.asarray(pp["ballots"]).reshape(-1, N, M).astype(np.int8))
        finally:
            pm.set_data({"orders": data.orders, "counts": data.counts.astype(np.float64)},
                        coords={"order": np.arange(data.n_distinct)})
    return np.concatenate(out)


def _ballot_patterns(data, n, rng):
    """The patterns of ``n`` replicated ballots (n, M): the data's ballots, one row per ballot,
    when ``n`` is their number; else ``n`` of them drawn with replacement."""
    counts = np.asarray(data.counts, dtype=np.int64)
    if n == int(counts.sum()):
        rows = np.repeat(np.arange(counts.size), counts)
    else:
        rows = rng.choice(counts.size, size=n, p=counts / counts.sum())
    return np.ascontiguousarray(np.asarray(data.orders, dtype=np.int64)[rows])


def _component_marginals(family, params):
    """Item x position marginals (..., K, M, M) used to compare components across draws."""
    if family == "plackett-luce":  # utilities are already comparable: use them as a profile
        return params[..., :, None]
    if family == "top-k":
        from pm_perm.kernels.top_k import top_k_marginals

        return top_k_marginals(params)[1]
    from pm_perm.kernels.permanent import permutation_marginals

    return permutation_marginals(params)


def relabel_components(idata, family, reference=None):
    """Undo label switching in place: permute each draw's components to match a reference.

    The reference is ``reference`` (K, ...) in the units of the component profile (position
    marginals for W models, utilities for Plackett-Luce), default the first draw of chain 0.
    Each draw's permutation maximises the agreement ``-sum_k ||profile_k - reference_perm(k)||^2``
    (a max-weight matching, :func:`pm_perm.kernels.matching.max_weight_matching`). Every variable
    with a
    ``component`` dimension is permuted consistently. Returns ``idata``.
    """
    check_family(family)
    from pm_perm.kernels.matching import max_weight_matching

    post = idata["posterior"]
    name = param_name(family)
    prof = _component_marginals(family, np.asarray(post[name].values))
    C, D, K = prof.shape[:3]
    flat = prof.reshape(C * D, K, -1)
    ref = flat[0] if reference is None else np.asarray(reference).reshape(K, -1)
    dist = ((flat[:, :, None, :] - ref[None, None, :, :]) ** 2).sum(-1)  # (S, K, K)
    perm = max_weight_matching(-dist)  # perm[s, k] = reference label of draw component k
    order = np.argsort(perm, axis=1).reshape(C, D, K)  # component placed at each label
    for var in list(post.data_vars):
        da = post[var]
        if "component" not in da.dims:
            continue
        axis = da.dims.index("component")
        vals = np.moveaxis(np.asarray(da.values), axis, 2)
        vals = np.take_along_axis(vals, order.reshape(C, D, K, *([1] * (vals.ndim - 3))), axis=2)
        post[var] = da.copy(data=np.moveaxis(vals, 2, axis))
    return idata


# --- pointwise log-likelihoods, memberships, LOO ------------------------------------------------

def _component_and_mixture_loglik(family, params, weights, orders):
    """One draw: per-component ``(K, n)`` and mixture ``(n,)`` log-likelihoods of the orders,
    by the numba kernels directly (nothing to compile per call, unlike a PyTensor function of
    these orders)."""
    if family == "plackett-luce":
        from pm_perm.kernels.plackett_luce import plackett_luce_loglik as kernel
    elif family == "top-k":
        from pm_perm.kernels.top_k import top_k_loglik as kernel
    elif family == ANCHORED:
        from pm_perm.kernels.pl_tilted import pl_tilted_loglik

        def kernel(params, orders):
            return pl_tilted_loglik(*anchored_parts(params), orders)
    else:
        from pm_perm.kernels.partial_orders import partial_order_loglik as kernel
    comp = kernel(params, orders)
    with np.errstate(divide="ignore"):  # a zero weight: that component contributes nothing
        logw = np.log(weights)
    return comp, logsumexp(logw[:, None] + comp, axis=0)


def pointwise_loglik(post, family, orders, *, max_draws=None, rng=None):
    """Per-draw, per-distinct-order log-likelihood of the order model, shape (S, n).

    ``post`` from :func:`~pm_perm.preferences.fitting.posterior_params`; ``orders`` any (n, M)
    rank-form array (e.g. held-out data). With ``max_draws``, a random subset of draws (seeded
    ``rng``) is used. Natural log; multiply by the counts for the log-likelihood of all ballots.
    """
    check_family(family)
    params, weights = post["params"], post["weights"]
    S = params.shape[0]
    idx = np.arange(S)
    if max_draws is not None and S > max_draws:
        idx = np.sort(np.random.default_rng(rng).choice(S, max_draws, replace=False))
    orders = np.asarray(orders)
    return np.stack([_component_and_mixture_loglik(family, params[s], weights[s], orders)[1]
                     for s in idx])


def membership_probabilities(post, family, orders):
    """Posterior membership probabilities of each distinct order (hence of each of its ballots).

    Returns an array (n, K): ``E_draws[ p(component k | order) ]``, where ``p(k | order) ∝
    w_k p_k(order)``. Every ballot of one distinct order has the same probabilities.
    """
    check_family(family)
    params, weights = post["params"], post["weights"]
    orders = np.asarray(orders)
    total = 0.0
    for s in range(params.shape[0]):
        comp, mix = _component_and_mixture_loglik(family, params[s], weights[s], orders)
        with np.errstate(divide="ignore"):
            total = total + np.exp(np.log(weights[s])[:, None] + comp - mix[None, :])
    return (total / params.shape[0]).T


def loo_with_counts(loglik, counts, *, r_eff=1.0):
    """PSIS-LOO per BALLOT from per-distinct-order log-likelihood draws and counts, as ArviZ's
    own ELPD object (``az.loo``'s type: ``az.compare`` accepts it).

    Leaving out one ballot of a group of ``c`` identical ballots divides the posterior by that
    ballot's likelihood alone, so every one of the ``c`` ballots has the same LOO predictive
    density as a single ballot of that order: PSIS is run once per distinct order (arviz's
    Pareto smoothing, ``arviz_stats``' ``psislw``), and the elpd sums it ``c`` times. This equals
    ``az.loo`` on the data expanded to one row per ballot (tested), at the cost of the
    distinct orders only (the pointwise arrays hold one float per ballot).

    The models of :mod:`pm_perm.preferences.models` (and any model whose ranking variable has
    ``weights=counts`` and ``observed``) already give ``pm.compute_log_likelihood`` one entry per
    ballot, so plain ``az.loo`` is right for them; this function is the cheap route when the
    draws are held per distinct order (:func:`pointwise_loglik`).

    Parameters
    ----------
    loglik : ndarray, shape (S, n)
        Draws x distinct orders (:func:`pointwise_loglik`).
    counts : array_like of int, shape (n,)
    r_eff : float
        Relative efficiency of the draws (1 for independent draws).

    Returns
    -------
    arviz_stats.utils.ELPDDataLOO
        As ``az.loo(..., pointwise=True)`` on the expanded data: ``elpd`` (sum over ballots),
        ``se`` (over ballots), ``p``, ``n_data_points`` (ballots), ``elpd_i`` and ``pareto_k``
        (DataArrays over dim ``"ballot"``, one entry per ballot, in the order of the expanded
        rows). Also (attributes, readable as ``result["name"]``): ``p_loo`` (= ``p``),
        ``elpd_per_ballot``, ``n_ballots``, ``counts``, and per distinct order
        ``elpd_distinct`` and ``pareto_k_distinct`` (n,).

    Raises
    ------
    ValueError
        ``loglik`` is not (draws, n), or the counts are not n non-negative integers with a
        positive sum.
    """
    import xarray as xr
    from arviz_stats.base import array_stats
    from arviz_stats.loo.loo_helper import _warn_pareto_k
    from arviz_stats.utils import ELPDDataLOO
    from scipy.special import logsumexp

    from pm_perm.ops.ballots import check_counts

    ll = np.asarray(loglik, dtype=np.float64)
    if ll.ndim != 2:
        raise ValueError(f"loglik must be (draws, n); got shape {ll.shape}")
    c = check_counts(counts, ll.shape[1])
    N = int(c.sum())
    if N == 0:
        raise ValueError("loo_with_counts: the counts sum to 0 (no ballots)")
    lw, k = array_stats.psislw(ll, r_eff=r_eff, axis=0)  # lw: (n, S)
    elpd_d = logsumexp(lw + ll.T, axis=1) - logsumexp(lw, axis=1)
    lpd_d = logsumexp(ll, axis=0) - np.log(ll.shape[0])
    elpd = float(c @ elpd_d)
    var = float(c @ (elpd_d - elpd / N) ** 2) / (N - 1) if N > 1 else 0.0  # ddof 1, as az.loo
    k = np.asarray(k, dtype=np.float64)
    pareto_k = np.repeat(k, c)
    warn, good_k = _warn_pareto_k(pareto_k, ll.shape[0])
    out = ELPDDataLOO(
        elpd=elpd, se=float(np.sqrt(N * var)), p=float(c @ (lpd_d - elpd_d)),
        n_samples=ll.shape[0], n_data_points=N, scale="log", warning=warn, good_k=good_k,
        elpd_i=xr.DataArray(np.repeat(elpd_d, c), dims="ballot"),
        pareto_k=xr.DataArray(pareto_k, dims="ballot"))
    out.p_loo, out.elpd_per_ballot, out.n_ballots, out.counts = out.p, elpd / N, N, c
    out.elpd_distinct, out.pareto_k_distinct = elpd_d, k
    return out
