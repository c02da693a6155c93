"""Clusters of assessors: a mixture of Mallows models, each cluster with a latent consensus.

The model (the mixture of Vitelli et al. 2018, section 4.3, with BayesMallows' default priors):

.. math::

    w \\sim \\operatorname{Dirichlet}(\\psi, \\dots, \\psi), \\quad
    \\rho_k \\sim \\text{uniform over permutations}, \\quad
    \\alpha_k \\sim \\operatorname{Exponential}(\\lambda), \\quad
    p(R_j) = \\sum_k w_k\\, \\frac{e^{-(\\alpha_k / n) d(R_j, \\rho_k)}}{Z_n(\\alpha_k)}

built by :func:`mallows_mixture_model` as a :class:`~pm_perm.distributions.RankingMixture` of
:class:`~pm_perm.Mallows` components: the assessors' cluster labels are summed out exactly, so
the observed variable ``"R"`` has one log-likelihood term per assessor
(``pm.compute_log_likelihood`` then ``az.loo`` / ``az.compare`` are per assessor, e.g. to choose
the number of clusters), ``pm.sample_posterior_predictive`` draws one ranking per assessor, and
``pm.sample`` assigns the leap-and-shift step to the consensus rankings ``rho`` (shape
``(K, n)``) and NUTS to ``alpha`` and ``w``.

The likelihood is symmetric in the cluster labels: chains (and, rarely, one chain) may give
the same clusters different labels. :func:`relabel_clusters` puts every draw in one labelling
(by matching the consensus rankings, then a canonical order of the labels), after which the
per-cluster summaries (:func:`pm_perm.preferences.consensus.cp_consensus` of ``rho[:, :, k]``,
the mean of ``alpha[k]``) and :func:`cluster_memberships` (the posterior probability of each
assessor's cluster, exact given each draw) are meaningful. ``pm.find_MAP`` cannot fit this model
(the consensus rankings are discrete: it warns
:class:`~pm_perm.ops.latent.LatentPermutationWarning`, naming ``pm.sample``).
"""

from __future__ import annotations

import math

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt

from pm_perm._modes import PYTHON_MODE
from pm_perm.distributions.mallows import Mallows, mallows_distance, mallows_log_normaliser
from pm_perm.distributions.mixture import RankingMixture
from pm_perm.distributions.permutation import PermutationExpFamily
from pm_perm.kernels._checks import as_count, first_non_permutation
from pm_perm.kernels.mallows import check_distance
from pm_perm.preferences.consensus import cp_consensus

__all__ = ["cluster_initvals", "cluster_memberships", "mallows_mixture_model",
           "relabel_clusters"]

_RANKINGS_FIX = ("pass complete rankings in rank form, one row per assessor (R[j, i] = the "
                 "0-based rank assessor j gave item i)")


def _complete_rankings(rankings):
    """``rankings`` (an array, or a RankingData of complete rankings expanded to one row per
    ballot) as an int64 (N, n) array, checked."""
    if hasattr(rankings, "orders") and hasattr(rankings, "counts"):
        rankings = np.repeat(rankings.orders, rankings.counts, axis=0)
    R = np.asarray(rankings)
    if R.ndim != 2 or R.shape[0] == 0 or R.shape[1] == 0:
        raise ValueError(f"rankings must have shape (assessors, items) with at least one of "
                         f"each; got shape {R.shape}: {_RANKINGS_FIX}")
    if R.dtype.kind == "f" and np.array_equal(R, np.round(R)):
        R = R.astype(np.int64)
    bad = first_non_permutation(R)
    if R.dtype.kind not in "iu" or bad is not None:
        j = bad[0] if bad is not None else 0
        raise ValueError(f"rankings row {j} = {R[j].tolist()} is not a complete ranking (a "
                         f"permutation of 0..{R.shape[1] - 1}); {_RANKINGS_FIX} (top-k or tied "
                         "rows are not supported by this model)")
    return R.astype(np.int64)


def _positive(x, name):
    try:
        ok = float(x) > 0 and np.isfinite(float(x)) and not isinstance(x, bool | str)
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"{name} must be a finite number > 0; got {x!r}")
    return float(x)


def mallows_mixture_model(rankings, n_clusters, *, distance="footrule", alpha_rate=0.001,
                          concentration=10.0, item_names=None):
    """A PyMC model of assessors in ``n_clusters`` clusters, each a Mallows model.

    Parameters
    ----------
    rankings : array_like of int, shape (N, n), or RankingData
        Complete rankings in rank form (``R[j, i]`` = the 0-based rank assessor ``j`` gave
        item ``i``), one row per assessor (a ``RankingData`` is expanded by its counts).
    n_clusters : int
        ``K >= 1``; ``K = 1`` is the plain Mallows model (the same variable names, so that
        ``az.compare`` can compare it with the mixtures).
    distance : str, default "footrule"
        As :class:`~pm_perm.Mallows`.
    alpha_rate : float, default 0.001
        Rate of each ``alpha_k ~ Exponential`` (BayesMallows' default).
    concentration : float, default 10
        ``psi`` of ``w ~ Dirichlet(psi, ..., psi)`` (BayesMallows' default; it keeps clusters
        from emptying).
    item_names : sequence of str, optional
        Coordinates of the ``item`` dimension (default ``RankingData.item_names`` or
        ``"0" .. "n-1"``).

    Returns
    -------
    pymc.Model
        Free variables ``rho`` (``(K, n)`` latent consensus rankings, dims ``("cluster",
        "item")``), ``alpha`` (``(K,)``), ``w`` (``(K,)``, only for ``K >= 2``); observed
        ``R`` (dims ``("assessor", "item")``), one log-likelihood term per assessor.

    Raises
    ------
    ValueError
        For rankings that are not complete rankings (the message names the first bad row),
        ``n_clusters`` that is not an integer >= 1, an unknown distance, and a non-positive
        ``alpha_rate`` or ``concentration``.

    Notes
    -----
    Cost of one log-density: ``K`` Mallows log-likelihoods of the ``N`` rankings (the
    normaliser is a log-sum-exp over the distance's exact distribution, independent of
    ``rho``). ``pm.sample`` evaluates it once per leap-and-shift proposal, ``K n`` proposals per
    iteration. Start the chains from distinct consensus rankings (:func:`cluster_initvals`):
    from the default start (every ``rho_k`` the identity) all clusters begin alike.

    Examples
    --------
    >>> import numpy as np
    >>> R = np.array([[0, 1, 2], [0, 2, 1], [2, 1, 0], [2, 0, 1]])
    >>> model = mallows_mixture_model(R, 2)
    >>> sorted(v.name for v in model.free_RVs), model["rho"].shape.eval().tolist()
    (['alpha', 'rho', 'w'], [2, 3])
    """
    if item_names is None:
        item_names = getattr(rankings, "item_names", None)
    R = _complete_rankings(rankings)
    K = as_count(n_clusters, "n_clusters", 1)
    check_distance(distance)
    rate = _positive(alpha_rate, "alpha_rate")
    psi = _positive(concentration, "concentration")
    N, n = R.shape
    items = [str(i) for i in (item_names if item_names is not None else range(n))]
    if len(items) != n:
        raise ValueError(f"item_names has {len(items)} names for {n} items")
    coords = {"cluster": np.arange(K), "item": items, "assessor": np.arange(N)}
    with pm.Model(coords=coords) as model:
        rho = PermutationExpFamily("rho", logits=np.zeros((K, n, n)), dims=("cluster", "item"))
        alpha = pm.Exponential("alpha", rate, dims="cluster")
        dims = ("assessor", "item")
        if K == 1:
            Mallows("R", rho=rho[0], alpha=alpha[0], distance=distance, observed=R, dims=dims)
        else:
            w = pm.Dirichlet("w", np.full(K, psi), dims="cluster")
            comps = [Mallows.dist(rho[k], alpha[k], distance=distance) for k in range(K)]
            RankingMixture("R", w=w, comp_dists=comps, observed=R, dims=dims)
    return model


def cluster_initvals(n_clusters, n_items, chains, random_seed=None):
    """Initial values for ``pm.sample(initvals=...)``: per chain, ``n_clusters`` consensus
    rankings drawn uniformly without repetition (when ``n_items!`` allows).

    Returns
    -------
    list of dict
        ``[{"rho": (K, n) int64}, ...]``, one per chain.

    Examples
    --------
    >>> init = cluster_initvals(3, 5, chains=2, random_seed=0)
    >>> len(init), init[0]["rho"].shape
    (2, (3, 5))
    """
    K = as_count(n_clusters, "n_clusters", 1)
    n = as_count(n_items, "n_items", 1)
    distinct = K <= math.factorial(min(n, 20))
    rng = np.random.default_rng(random_seed)
    out = []
    for _ in range(as_count(chains, "chains", 1)):
        rows = []
        while len(rows) < K:
            r = rng.permutation(n)
            if not distinct or all(not np.array_equal(r, s) for s in rows):
                rows.append(r)
        out.append({"rho": np.array(rows, dtype=np.int64)})
    return out


def _posterior(idata):
    return idata.posterior if hasattr(idata, "posterior") else idata["posterior"]


def relabel_clusters(idata, rho="rho", max_iter=50):
    """Undo label switching in place: one labelling of the clusters for every draw.

    Each draw's clusters are matched to reference clusters by their consensus rankings (the
    matching that maximises the summed reference probability of each matched ``rho_k``'s ranks,
    a max-weight matching); the reference is then each label's rank probabilities ``P(item i
    at rank r)`` over the relabelled draws, and the two steps repeat until no label changes
    (started from the last draw of chain 0). Canonical order: the labels are then sorted by
    their CP consensus read as the items first to last, lexicographically, so that the same
    clusters get the same labels whatever the sampler or the chains. Every posterior variable
    with the cluster dimension (that of ``rho``) is permuted consistently.

    Parameters
    ----------
    idata : arviz.InferenceData or DataTree
        With ``posterior[rho]`` of dims ``(chain, draw, cluster, item)``.
    rho : str, default "rho"
        The consensus rankings' variable.
    max_iter : int, default 50
        Bound on the match / reference rounds.

    Returns
    -------
    idata
    """
    from pm_perm.kernels.matching import max_weight_matching

    post = _posterior(idata)
    if rho not in post:
        raise ValueError(f"the posterior has no variable {rho!r}; pass rho= the name of the "
                         "(cluster, item) consensus rankings")
    da = post[rho]
    if da.ndim != 4:
        raise ValueError(f"{rho} must have dims (chain, draw, cluster, item); got {da.dims}")
    dim = da.dims[2]
    draws = np.asarray(da.values, dtype=np.int64)
    C, D, K, n = draws.shape
    flat = draws.reshape(C * D, K, n)
    onehot = (flat[..., None] == np.arange(n)).astype(float)  # (S, K, n, n)
    order = np.tile(np.arange(K), (C * D, 1))  # order[s, l] = the draw's cluster given label l
    ref = onehot[D - 1]  # the last draw of chain 0
    for _ in range(max_iter):
        score = np.einsum("skir,lir->skl", onehot, ref)
        new = np.argsort(max_weight_matching(score), axis=1)  # matching: cluster k -> label
        ref = np.take_along_axis(onehot, new[:, :, None, None], axis=1).mean(axis=0)
        done = np.array_equal(new, order)
        order = new
        if done:
            break
    labelled = np.take_along_axis(flat, order[:, :, None], axis=1).reshape(C, D, K, n)
    keys = [tuple(cp_consensus(labelled[:, :, k]).order) for k in range(K)]
    canon = np.array(sorted(range(K), key=lambda k: keys[k]))
    order = order[:, canon].reshape(C, D, K)
    for var in list(post.data_vars):
        v = post[var]
        if dim not in v.dims:
            continue
        axis = v.dims.index(dim)
        vals = np.moveaxis(np.asarray(v.values), axis, 2)
        idx = order.reshape(C, D, K, *([1] * (vals.ndim - 3)))
        vals = np.take_along_axis(vals, idx, axis=2)
        post[var] = v.copy(data=np.moveaxis(vals, 2, axis))
    return idata


def _membership_function(n, distance):
    rho = pt.tensor("rho", dtype="int64", shape=(None, None, n))
    alpha = pt.matrix("alpha", dtype="float64")
    w = pt.matrix("w", dtype="float64")
    R = pt.tensor("R", dtype="int64", shape=(None, n))
    d = mallows_distance(R[None, None, :, :], rho[:, :, None, :], distance)  # (S, K, N)
    log_z = mallows_log_normaliser(alpha, n, distance)  # (S, K)
    joint = pt.log(w)[..., None] - (alpha[..., None] / n) * d - log_z[..., None]
    probs = pt.exp(joint - pt.logsumexp(joint, axis=1, keepdims=True))
    # evaluated once: the Python linker compiles nothing (pm_perm._modes)
    return pytensor.function([rho, alpha, w, R], probs.mean(axis=0).T, mode=PYTHON_MODE)


def cluster_memberships(idata, rankings, *, distance="footrule", rho="rho", alpha="alpha",
                        w="w"):
    """Posterior probability of each assessor's cluster: ``P(z_j = k | data)``.

    The mean over the posterior draws of ``w_k p_k(R_j) / sum_l w_l p_l(R_j)``, exact for each
    draw (the Mallows normaliser from the distance's exact distribution). Relabel first
    (:func:`relabel_clusters`): without it the columns mix clusters.

    Parameters
    ----------
    idata : arviz.InferenceData or DataTree
        Posterior with ``rho`` ``(chain, draw, K, n)``, ``alpha`` ``(chain, draw, K)`` and
        ``w`` ``(chain, draw, K)`` (without ``w``, e.g. ``K = 1``: equal weights).
    rankings : array_like of int, shape (N, n), or RankingData
        Complete rankings (rank form), e.g. the data the model was fitted to.
    distance : str, default "footrule"
        The model's distance.
    rho, alpha, w : str
        The variables' names.

    Returns
    -------
    ndarray, shape (N, K)
        Each row sums to 1.
    """
    check_distance(distance)
    R = _complete_rankings(rankings)
    post = _posterior(idata)
    for name in (rho, alpha):
        if name not in post:
            raise ValueError(f"the posterior has no variable {name!r} (it has "
                             f"{sorted(post.data_vars)}); pass its name")
    rho_d = np.asarray(post[rho].values, dtype=np.int64)
    C, D, K, n = rho_d.shape
    if n != R.shape[1]:
        raise ValueError(f"rankings have {R.shape[1]} items, the posterior's {rho} {n}")
    alpha_d = np.asarray(post[alpha].values, dtype=np.float64).reshape(C * D, K)
    w_d = (np.asarray(post[w].values, dtype=np.float64).reshape(C * D, K) if w in post
           else np.full((C * D, K), 1.0 / K))
    f = _membership_function(n, distance)
    return np.asarray(f(rho_d.reshape(C * D, K, n), alpha_d, w_d, R))
