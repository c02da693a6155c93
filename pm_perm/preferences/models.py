"""PyMC models of ranking data (Plackett-Luce, rank-one, full item x position, mixtures).

Their fits (MAP, type-II MAP, NUTS) and the arrays of a fit are in
:mod:`pm_perm.preferences.fitting`.

Every builder takes a :class:`~pm_perm.preferences.data.RankingData` (value convention there:
rank form, ``-1`` = not ranked, ties share the smallest position) and returns a
:class:`RankingModel`, whose ``.model`` is an ordinary ``pm.Model``: it works with
``pm.find_MAP``, ``pm.sample`` (NUTS), and the posterior predictive of
:mod:`pm_perm.preferences.posterior`. Likelihoods cost per DISTINCT order (``counts`` multiply
the log-likelihood), exactly (no sampling of the unranked items' order).

Models (``K`` components; ``K = 1`` is a single population)

``plackett_luce_model``
    Utilities ``u[k, i]``; p(order) by the Plackett-Luce rule (ties: the exact probability that
    a tie block fills its positions in any order; unranked items: no term).
``rank_one_model``
    ``W[k, i, j] = u[k, i] c[j]`` in ``p(pi) ∝ exp(sum_i W[i, pi(i)])``: item i's strength times a
    decreasing position profile ``c`` (fixed: by default Plackett-Luce's first-order profile
    ``c_j = H_{M-1-j}``, :func:`harmonic_positions`; or learned, ordered).
``full_model``
    Any item x position matrix, shrunk toward the rank-one model (see its docstring).
``top_k_model``
    The exact top-k item-by-position model (:class:`~pm_perm.TopKRanking`) for any number of
    items: free logits for positions ``0..K-1`` and one "not in the top K" logit per item,
    shrunk toward the rank-one mean (one population).

Identifiability: ``p(pi)`` is unchanged when a constant is added to a row or a column of ``W``
(every permutation uses each row and column once), and Plackett-Luce is unchanged by a shift of
``u``: utilities are zero-sum (a ``ZeroSumNormal`` prior, written in the basis of
:func:`zero_sum_basis`), the full model's deviation from rank one is zero-sum over rows and over
columns, and a learned ``c`` is pinned to run from 1 down to 0.

Mixtures are marginalised exactly over each ballot's component:
``log p(order) = logsumexp_k(log w_k + log p_k(order))``. The likelihood is symmetric in the
component labels. Label switching is handled where pm_perm returns draws: :func:`fit_nuts`
relabels them (:func:`pm_perm.preferences.posterior.relabel_components`) whatever the sampler
(nutpie, PyMC, numpyro, blackjax); draws from a plain ``pm.sample`` call need that function
applied. MAP: the model's initial point (PyMC's: the prior means) has identical components,
the symmetric saddle where every component is the one-component fit, and ``pm.find_MAP``
without jitter stays there; :func:`pm_perm.inference.check_find_map` refuses such an optimum,
naming :func:`fit_map`, whose jittered multi-start breaks the symmetry. (Component-specific
initial values cannot be built in: PyMC cannot rewrite a model with ``initval`` s, so
``pm.compute_log_likelihood`` and ``pm.sample_posterior_predictive`` would fail on it.)

The number of items a ballot ranks is itself a count: ``length_probs ~ Dirichlet(1)`` over
``k = 0..M`` ranked items, observed through the ballots' lengths. It is independent of the
order model, adds the same term to every model's log-likelihood (so it is left out of the
pointwise log-likelihoods) and drives the ballot lengths of the posterior predictive.

Likelihood. One component: the ballots are an observed :class:`~pm_perm.PartialRanking`
(Plackett-Luce: :class:`~pm_perm.PlackettLuce`) ``"ballots"`` on the distinct orders
(``pm.Data`` ``"orders"``) with ``weights`` their counts (``pm.Data`` ``"counts"``) and
``length_probs``: one row per BALLOT (dim ``"ballot"``), so ``pm.compute_log_likelihood`` and
``az.loo`` are per ballot and ``pm.sample_posterior_predictive`` draws one partial ballot per
observed ballot, while the summed log-likelihood costs per distinct order. Its log density
differs from a multinomial observation of the length counts only by the constant multinomial
coefficient: the MAP is the same. K components: an observed
:class:`~pm_perm.distributions.RankingMixture` ``"ballots"`` of the components (with the shared
``length_probs``) on the same ``pm.Data``, with ``weights=counts``: one row per BALLOT, so
``pm.compute_log_likelihood`` has one entry per ballot (``az.loo`` / ``az.compare`` per ballot)
and ``pm.sample_posterior_predictive`` draws one replicated ballot per observed ballot; its
log-probability is computed on the distinct orders. (``pm.Mixture`` would weight each
component's log-probability by the count INSIDE the sum over components.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from pm_perm.preferences._families import (
    FAMILIES,
    check_family,
)

__all__ = [
    "CENTERED_MIN_BALLOTS_PER_ENTRY",
    "FAMILIES",
    "RankingModel",
    "component_logliks",
    "POSITION_PROFILES",
    "full_model",
    "harmonic_positions",
    "plackett_luce_model",
    "rank_one_model",
    "top_k_model",
    "zero_sum_basis",
]

@dataclass(frozen=True)
class RankingModel:
    """A built ranking model.

    Attributes
    ----------
    model : pymc.Model
        Free variables: ``u_raw`` (or ``theta`` with item features), ``c_steps`` (learned
        positions), ``tau`` and ``delta_raw`` (full model; centred: ``tau`` and ``W_raw``),
        ``mixture_weights`` (K > 1), ``length_probs``. Deterministics ``u`` (K, M) and ``W``
        (K, M, M; not for Plackett-Luce).
        K = 1: observed ``"ballots"`` (PartialRanking / PlackettLuce), one row per ballot (dim
        ``"ballot"``), on the ``pm.Data`` ``"orders"`` and ``"counts"``; K > 1: the observed
        ``RankingMixture`` ``"ballots"`` on the same ``pm.Data``, also one row per ballot (see
        the module docstring).
    family : str
        One of ``FAMILIES``.
    components : int
    data : RankingData
        The ballots the model currently holds (after :func:`set_counts`, the fold's ballots).
    built_on : RankingData or None
        The data whose distinct orders the model's likelihood holds, when it differs from
        ``data`` (set by :func:`set_counts`, whose counts align with these orders).
    parametrization : str
        ``"noncentered"`` or ``"centered"`` (the full model's coordinates; see
        :func:`full_model`); ``"noncentered"`` for the other families.
    """

    model: pm.Model
    family: str
    components: int
    data: object
    built_on: object = None
    parametrization: str = "noncentered"


def component_logliks(family, params, orders):
    """Symbolic per-component, per-order log-likelihoods, shape (K, n).

    ``params`` is the logits ``W`` (K, M, M) or, for Plackett-Luce, the utilities ``u`` (K, M).
    """
    check_family(family)
    if family == "plackett-luce":
        from pm_perm.ops.plackett_luce import plackett_luce_loglik

        return plackett_luce_loglik(params, orders)
    from pm_perm.ops.partial_orders import partial_order_loglik

    return partial_order_loglik(params, orders)


def _check_scale(name, value):
    """``value`` as a float if it is a positive finite number (a prior scale), else raise."""
    v = np.asarray(value)
    if v.shape != () or v.dtype.kind not in "iuf" or not 0.0 < v < np.inf:
        raise ValueError(f"{name} must be a positive finite number (a prior scale), got {value!r}")
    return float(v)


def _check_data(data, components):
    if isinstance(components, bool) or not isinstance(components, int | np.integer) \
            or components < 1:
        raise ValueError(f"components must be a positive integer, got {components!r}")
    if data.n_items < 2:
        raise ValueError(f"ranking models need at least 2 items, got {data.n_items}")
    if data.n_distinct == 0:
        where = f"{data.source}: " if getattr(data, "source", None) else ""
        raise ValueError(f"{where}no ballots to fit (the data has no rows)")


def _coords(data, components):
    M = data.n_items
    return {"component": np.arange(components), "item": list(data.item_names),
            "position": np.arange(M), "length": np.arange(M + 1),
            "order": np.arange(data.n_distinct), "item_basis": np.arange(M - 1),
            "position_basis": np.arange(M - 1)}


def zero_sum_basis(n):
    """Orthonormal basis of the zero-sum vectors of length ``n``: the (n, n - 1) Helmert matrix.

    Column ``k - 1`` (``k = 1..n-1``) is ``(1, ..., 1, -k, 0, ..., 0) / sqrt(k (k + 1))`` with
    ``k`` ones. ``B.T @ B = I`` and ``B @ B.T = I - 1 1^T / n``, so ``u = B z`` with
    ``z ~ Normal(0, sigma)`` (``n - 1`` entries) has exactly the distribution of
    ``pm.ZeroSumNormal(sigma)`` over ``n`` entries, and ``B Z B^T`` with an ``(n-1) x (n-1)``
    normal ``Z`` that of ``pm.ZeroSumNormal(sigma, n_zerosum_axes=2)``.

    Why the ranking models use it instead of ``pm.ZeroSumNormal``: the same prior, but a plain
    ``Normal`` and a product with a constant matrix compile in about a tenth of the time on
    PyTensor's numba backend (``docs/benchmarks.md``).
    """
    B = np.zeros((n, n - 1))
    for k in range(1, n):
        B[:k, k - 1] = 1.0 / np.sqrt(k * (k + 1))
        B[k, k - 1] = -k / np.sqrt(k * (k + 1))
    return B


def _zero_sum_rows(z, B):
    """``z @ B.T``: (K, n-1) basis coordinates -> (K, n) zero-sum rows."""
    return pt.dot(z, B.T)


def _zero_sum_matrices(Z, B, Bcol=None):
    """``B Z[k] Bcol^T`` for each k: (K, n-1, m-1) -> (K, n, m), zero-sum over rows and columns
    (``Bcol`` defaults to ``B``)."""
    Bcol = B if Bcol is None else Bcol
    T = pt.tensordot(Z, Bcol, axes=([2], [1]))  # T[k, a, j] = sum_b Z[k, a, b] Bcol[j, b]
    return pt.tensordot(B, T, axes=([1], [1])).dimshuffle(1, 0, 2)  # [i, k, j] -> [k, i, j]


def _utilities(data, components, prior_sigma, item_features):
    """``u`` (K, M), zero-sum over items; ``u = X theta`` (X centred) with item features.

    Without features, ``u = u_raw B^T`` with ``u_raw ~ Normal(0, prior_sigma)`` (K, M - 1) and
    ``B`` the Helmert basis (:func:`zero_sum_basis`): ``u ~ ZeroSumNormal(prior_sigma)``."""
    K, M = components, data.n_items
    if item_features is None:
        z = pm.Normal("u_raw", 0.0, prior_sigma, dims=("component", "item_basis"))
        return pm.Deterministic("u", _zero_sum_rows(z, zero_sum_basis(M)),
                                dims=("component", "item"))
    X = np.asarray(item_features, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] != M or not np.all(np.isfinite(X)):
        raise ValueError(f"item_features must be a finite (n_items={M}, n_features) array, got "
                         f"shape {X.shape}")
    Xc = X - X.mean(axis=0)  # a shift of u is not identified: centre the features
    if np.any(np.abs(Xc).max(axis=0) == 0):
        raise ValueError("item_features has a constant column: it is not identified (a shift "
                         "of every utility changes no probability); drop it")
    theta = pm.Normal("theta", 0.0, prior_sigma, shape=(K, X.shape[1]))
    return pm.Deterministic("u", pt.dot(theta, Xc.T), dims=("component", "item"))


def _likelihood(family, params, data, components):
    """The ballots' likelihood (one population, or a mixture) and the ballot-length model.

    One component: an observed :class:`~pm_perm.PartialRanking` (``PlackettLuce`` for that
    family) ``"ballots"`` on the distinct orders (``pm.Data`` ``"orders"``) with
    ``weights=counts`` (``pm.Data`` ``"counts"``) and ``length_probs``: one row per ballot
    (dims ``("ballot", "item")``), each of logp ``log p(order) + log length_probs[k]`` (summed:
    ``counts * (...)`` per distinct order), and ``pm.sample_posterior_predictive`` draws one
    partial ballot per observed ballot (a complete ranking cut after ``k ~ length_probs``
    items).
    A mixture: :func:`_mixture_likelihood`, the exact marginal
    ``logsumexp_k(log w_k + log p_k(order) + log length_probs[k])`` per ballot.
    """
    M = data.n_items
    length_probs = pm.Dirichlet("length_probs", a=np.ones(M + 1), dims="length")
    # The counts are data containers, not constants: a refit on new counts of the same distinct
    # orders (cross-validation folds, bootstrap) by set_counts reuses the compiled functions.
    if components == 1:
        from pm_perm.distributions import PartialRanking, PlackettLuce

        orders = pm.Data("orders", data.orders, dims=("order", "item"))
        counts = pm.Data("counts", data.counts.astype(np.float64), dims="order")
        # one row per BALLOT (the orders expanded by their counts, pm_perm.distributions._ballots):
        # pointwise log-likelihoods and posterior predictive draws are per ballot, while the
        # summed log-likelihood costs per distinct order
        if family == "plackett-luce":
            PlackettLuce("ballots", utilities=params[0], weights=counts,
                         length_probs=length_probs, observed=orders, dims=("ballot", "item"))
        else:
            PartialRanking("ballots", logits=params[0], weights=counts,
                           length_probs=length_probs, observed=orders, dims=("ballot", "item"))
        return
    _mixture_likelihood(family, params, data, components, length_probs)


def _mixture_likelihood(family, params, data, components, length_probs):
    """K > 1: the ballots are an observed :class:`~pm_perm.distributions.RankingMixture`
    ``"ballots"`` of the components (``PlackettLuce`` / ``PartialRanking`` with the shared
    ``length_probs``), one row per ballot (``weights=counts`` on the ``pm.Data`` ``"orders"``
    and ``"counts"``), its log-probability computed on the distinct orders."""
    from pm_perm.distributions import PartialRanking, PlackettLuce, RankingMixture

    orders = pm.Data("orders", data.orders, dims=("order", "item"))
    counts = pm.Data("counts", data.counts.astype(np.float64), dims="order")
    w = pm.Dirichlet("mixture_weights", a=np.ones(components), dims="component")
    if family == "plackett-luce":
        comps = [PlackettLuce.dist(params[k], length_probs=length_probs)
                 for k in range(components)]
    else:
        comps = [PartialRanking.dist(params[k], length_probs=length_probs)
                 for k in range(components)]
    RankingMixture("ballots", w=w, comp_dists=comps, weights=counts, observed=orders)


def plackett_luce_model(data, *, components=1, prior_sigma=3.0, item_features=None):
    """Plackett-Luce model of (partial, tied) rankings with zero-sum normal utilities.

    Parameters
    ----------
    data : RankingData
    components : int
        Number of mixture components ``K``.
    prior_sigma : float
        Prior scale of the utilities ``u[k] ~ ZeroSumNormal(prior_sigma)`` (or of ``theta``;
        see :func:`zero_sum_basis`).
    item_features : array_like, shape (M, d), optional
        Item covariates: ``u[k] = X_c theta[k]`` with ``X_c`` the column-centred features and
        ``theta ~ Normal(0, prior_sigma)``.

    Returns
    -------
    RankingModel

    Raises
    ------
    ValueError
        ``prior_sigma`` is not a positive finite number, ``components`` is not a positive
        integer, or the data has fewer than 2 items or no ballots.
    """
    prior_sigma = _check_scale("prior_sigma", prior_sigma)
    _check_data(data, components)
    with pm.Model(coords=_coords(data, components)) as model:
        u = _utilities(data, components, prior_sigma, item_features)
        _likelihood("plackett-luce", u, data, components)
    return RankingModel(model, "plackett-luce", components, data)


#: The fixed position profiles of :func:`rank_one_model` and :func:`full_model`.
POSITION_PROFILES = ("harmonic", "linear")


def harmonic_positions(M):
    """Plackett-Luce's first-order position profile ``c_j = H_{M-1-j}`` (harmonic numbers,
    ``H_0 = 0``): ``c = (H_{M-1}, ..., 1.5, 1, 0)``.

    At equal utilities the derivative of Plackett-Luce's log-probability of a complete order
    with respect to the utility of the item in position ``j`` is
    ``1 - sum_{l <= j} 1 / (M - l) = 1 - H_M + H_{M-1-j}``. So the rank-one model
    ``W = u c^T`` with this ``c`` agrees with Plackett-Luce to first order in ``u``, on the same
    utility scale (the same prior suits both). Steps are small between the first positions
    (``1 / (M - 1)``) and large between the last ones (``1``): the linear profile
    ``(M-1-j)/(M-1)`` has equal steps and misfits Plackett-Luce data.

    Examples
    --------
    >>> harmonic_positions(3).tolist()
    [1.5, 1.0, 0.0]
    """
    if M == 1:
        return np.zeros(1)
    return np.concatenate([np.cumsum(1.0 / np.arange(1, M))[::-1], [0.0]])


def _positions(M, learn_positions, profile="harmonic"):
    """Position profile ``c`` (M,): learned (decreasing from 1 to 0), a fixed profile, or (a
    number ``lam``) the mix ``(1 - lam) c_harm + lam c_lin`` in the ``pm.Data``
    ``"position_mix"`` (``c_lin`` the linear profile scaled to the harmonic one's range)."""
    from pm_perm.preferences.synthetic import default_positions

    if not isinstance(profile, str) and not learn_positions:
        lam = _check_unit(profile)
        h = harmonic_positions(M)
        lin = default_positions(M) * h[0]
        return h + pm.Data("position_mix", np.float64(lam)) * (lin - h)
    if profile not in POSITION_PROFILES:
        raise ValueError(f"positions must be one of {POSITION_PROFILES} or a number in [0, 1] "
                         f"(a mix of the two); got {profile!r}")
    if not learn_positions:
        c = harmonic_positions(M) if profile == "harmonic" else default_positions(M)
        return pt.as_tensor_variable(c)
    steps = pm.Dirichlet("c_steps", a=np.ones(M - 1))  # c_j = 1 - (sum of the first j steps)
    return pm.Deterministic("c", pt.concatenate([pt.ones(1), 1.0 - pt.cumsum(steps)]),
                            dims="position")


def rank_one_model(data, *, components=1, prior_sigma=3.0, learn_positions=False,
                   item_features=None, positions="harmonic"):
    """Rank-one item x position model ``W[k, i, j] = u[k, i] c[j]``.

    ``p(pi) ∝ exp(sum_i u_i c_{pi(i)})``: with ``c`` decreasing, items of larger ``u`` tend to
    earlier positions; the differences between the ``c_j`` set how much more decisive the first
    choices are than the last ones (Petterson et al.'s RankMatch structure).

    Parameters
    ----------
    data : RankingData
    components : int
    prior_sigma : float
        ``u[k] ~ ZeroSumNormal(prior_sigma)`` (or ``theta ~ Normal(0, prior_sigma)`` with features).
    learn_positions : bool
        Learn ``c`` (shared by the components) as ``c_0 = 1``, ``c_j = 1 - sum_{l<=j} s_l`` with
        ``s ~ Dirichlet(1)`` over M - 1 steps: decreasing from 1 to 0, which fixes the scale and
        shift that ``u`` would otherwise trade with it. Default: a fixed profile (``positions``).
    item_features : array_like, shape (M, d), optional
        As in :func:`plackett_luce_model`.
    positions : {"harmonic", "linear"} or float
        The fixed profile (without ``learn_positions``): ``"harmonic"`` (default),
        ``c_j = H_{M-1-j}`` (:func:`harmonic_positions`), with which the model agrees with
        Plackett-Luce to first order in ``u``; or ``"linear"``, ``c_j = (M-1-j)/(M-1)`` (the
        default before issue 53). On data drawn from Plackett-Luce (40-100 ballots over 15-19
        items, ``benchmarks/bench_small_data.py``) the linear profile lost 0.29-0.53 nats per
        held-out ballot to Plackett-Luce (pooled), the harmonic one 0.08, still about 2-2.6
        standard errors: rank one is not Plackett-Luce beyond first order (``docs/
        benchmarks.md``, "Small data"). On the Irish elections the linear profile fits better.
        A number ``lam`` in [0, 1]: the profile ``(1 - lam) c_harm + lam c_lin`` (``c_lin`` the
        linear profile scaled to the harmonic one's range ``H_{M-1}``), ``lam`` in the
        ``pm.Data`` ``"position_mix"``, for :func:`fit_map_type2`, which chooses it by the
        Laplace evidence.

    Returns
    -------
    RankingModel
        Inputs are checked as by :func:`plackett_luce_model` (same ``ValueError`` cases).
    """
    prior_sigma = _check_scale("prior_sigma", prior_sigma)
    _check_data(data, components)
    with pm.Model(coords=_coords(data, components)) as model:
        u = _utilities(data, components, prior_sigma, item_features)
        c = _positions(data.n_items, learn_positions, positions)
        W = pm.Deterministic("W", u[:, :, None] * c[None, None, :],
                             dims=("component", "item", "position"))
        _likelihood("rank-one", W, data, components)
    return RankingModel(model, "rank-one", components, data)


def full_model(data, *, components=1, prior_sigma=3.0, shrinkage_scale=1.0, item_features=None,
               parametrization="noncentered", positions="harmonic", tau=None):
    """Full item x position logit matrix, shrunk hierarchically toward the rank-one model.

    ``W[k] = u[k] c^T + tau * delta[k]`` with ``c`` fixed (as in :func:`rank_one_model`;
    ``positions``),
    ``delta[k] ~ ZeroSumNormal(1)`` over both the item and the position axis (a row or column
    shift of ``W`` changes no probability), and ``tau ~ HalfNormal(shrinkage_scale)``: the data
    decide how far the matrix departs from rank one. The zero-sum normals are written in the
    Helmert basis ``B`` of :func:`zero_sum_basis` (``delta[k] = B delta_raw[k] B^T`` with an
    ``(M-1) x (M-1)`` standard normal ``delta_raw``; ``u = u_raw B^T``): the same prior as
    ``pm.ZeroSumNormal``, much cheaper to compile.

    Two parametrisations of the same model (same posterior of ``u``, ``tau`` and of ``W`` up to
    the row and column shifts that change no probability):

    ``"noncentered"`` (default)
        Free variables ``u_raw``, ``tau``, ``delta_raw``; ``W`` is a deterministic. Use it for
        MAP (:func:`fit_map`) and for NUTS on small data (a few ballots per entry of ``W``).
    ``"centered"``
        Free variables ``u_raw``, ``tau`` and ``W_raw``, the coordinates of ``W`` itself:
        ``W[k] = B W_raw[k] B^T`` with ``W_raw[k] ~ Normal(B^T m[k] B, tau)``, i.e. ``W[k]`` is
        normal with scale ``tau`` around the rank-one mean ``m[k] = u[k] (c - mean(c))^T`` on
        the double zero-sum subspace. Use it for NUTS on large data: with many ballots per
        entry of ``W`` the data pin ``W`` down, and the non-centred coordinates
        ``(tau, delta_raw)`` lie on a thin curved ridge (``W = tau delta``); on Meath (64,081
        ballots, M = 14) NUTS takes about 4x fewer leapfrog steps per draw centred
        (``docs/benchmarks.md``). It has NO MAP: its density grows without bound as
        ``tau -> 0`` with ``W`` at the rank-one mean, so :func:`fit_map` refuses it. Its ``W``
        is double-centred (zero row and column sums), the non-centred ``W`` is not; the two
        differ by row shifts, which change no probability.
    ``"auto"``
        ``"centered"`` when the data hold at least ``CENTERED_MIN_BALLOTS_PER_ENTRY`` ballots
        per entry of ``W`` (``n_rankings >= 10 M^2``), else ``"noncentered"`` (for NUTS; not
        for MAP).

    Why this family: among all distributions over permutations whose item-position marginals
    ``P[i, j] = p(pi(i) = j)`` equal given values, the one of maximum entropy has the form
    ``p(pi) ∝ exp(sum_i W[i, pi(i)])`` (the ``W[i, j]`` are the Lagrange multipliers of the
    ``M^2`` marginal constraints), and every doubly stochastic matrix in the interior of the
    Birkhoff polytope is attained by some ``W``. So the full model assumes nothing beyond the
    item-position marginals; rank one and Plackett-Luce-like structure are special cases.

    Learning the shrinkage by MAP: the JOINT MAP of ``(tau, delta)`` is not a fit of the
    hierarchy (it is a fixed group-lasso penalty ``|tau delta|_F / shrinkage_scale`` on the
    deviation, which does not adapt to the amount of data: on 40-100 ballots drawn from
    Plackett-Luce it lands either at ``tau ~ 4``, losing 2-5 nats per held-out ballot to
    Plackett-Luce, or at ``tau ~ 0.001``). Build the model with a fixed ``tau`` (any number; it is a
    ``pm.Data`` container) and fit it with :func:`fit_map_type2`, which chooses ``tau`` by the
    Laplace estimate of the evidence ``p(y | tau)`` (type-II maximum likelihood, ``tau = 0``
    included: the rank-one model); ``pm-perm preferences --model full --fit map`` does. NUTS
    (:func:`fit_nuts`) integrates the hierarchical ``tau`` (``tau=None``) properly.

    Parameters
    ----------
    data : RankingData
    components : int
    prior_sigma : float
        Prior scale of the rank-one part's ``u``.
    shrinkage_scale : float
        Prior scale of ``tau`` (``tau=None``).
    item_features : array_like, shape (M, d), optional
        Covariates of the rank-one part's ``u`` (as in :func:`plackett_luce_model`).
    parametrization : {"noncentered", "centered", "auto"}
        See above.
    positions : {"harmonic", "linear"}
        The rank-one part's fixed position profile (:func:`rank_one_model`).
    tau : float, optional
        A fixed deviation scale ``>= 0`` instead of the ``HalfNormal`` prior: the ``pm.Data``
        container ``"tau"`` (non-centred only), for :func:`fit_map_type2`. ``tau = 0`` is the
        rank-one model (``delta`` then has its prior only).

    Returns
    -------
    RankingModel

    Raises
    ------
    ValueError
        As :func:`plackett_luce_model`; also a ``shrinkage_scale`` that is not a positive
        finite number, an unknown ``parametrization`` or ``positions``, or a ``tau`` that is
        not a finite number ``>= 0`` or is given with the centred parametrisation.
    """
    prior_sigma = _check_scale("prior_sigma", prior_sigma)
    shrinkage_scale = _check_scale("shrinkage_scale", shrinkage_scale)
    _check_data(data, components)
    parametrization = _full_parametrization(parametrization, data)
    if tau is not None:
        tau = _check_fixed_tau(tau)
        if parametrization != "noncentered":
            raise ValueError("a fixed tau needs parametrization='noncentered' (the centred "
                             "model's W has scale tau itself: tau = 0 has no density)")
    dims = ("component", "item", "position")
    with pm.Model(coords=_coords(data, components)) as model:
        u = _utilities(data, components, prior_sigma, item_features)
        c = _positions(data.n_items, False, positions)
        if tau is None:
            tau = pm.HalfNormal("tau", shrinkage_scale)
        else:
            tau = pm.Data("tau", np.float64(tau))
        B = zero_sum_basis(data.n_items)
        raw_dims = ("component", "item_basis", "position_basis")
        if parametrization == "noncentered":
            delta = pm.Normal("delta_raw", 0.0, 1.0, dims=raw_dims)
            W = u[:, :, None] * c[None, None, :] + tau * _zero_sum_matrices(delta, B)
        else:
            # W = B W_raw B^T with W_raw ~ N(B^T m B, tau), m = u (c - mean c)^T: W is normal
            # around the rank-one mean on the double zero-sum subspace. B^T m B is the outer
            # product of B^T u and B^T c (B^T 1 = 0).
            if item_features is None:
                zu = model["u_raw"]
            else:
                zu = pt.dot(u, B)
            mean = zu[:, :, None] * pt.dot(c, B)[None, None, :]
            W = _zero_sum_matrices(pm.Normal("W_raw", mean, tau, dims=raw_dims), B)
        W = pm.Deterministic("W", W, dims=dims)
        _likelihood("full", W, data, components)
    return RankingModel(model, "full", components, data, parametrization=parametrization)


def top_k_model(data, K=None, *, prior_sigma=3.0, shrinkage_scale=1.0, item_features=None,
                positions="harmonic", tau=None, components=1, parametrization="noncentered"):
    """Exact top-k item-by-position model, shrunk hierarchically toward the rank-one model.

    Ballots rank at most ``K`` of the ``M`` items (:class:`~pm_perm.TopKRanking`): ``W[i, j]``
    is the logit of item ``i`` at position ``j < K`` and ``V[i]`` that of item ``i`` not being
    in the top K (positions ``K..M-1`` are exchangeable), ``p(t) ∝ exp(sum_{j<K} W[t_j, j] +
    sum_{i not in t} V[i])``. The normaliser is a K x M rectangular permanent, a DP over
    subsets of the K positions (O(M K 2^K)): any number of items. With ``K = M`` it is
    :func:`full_model`'s likelihood.

    ``logits = [W | V] = u m^T + tau * delta`` with ``m = (c_0, ..., c_{K-1}, c_out)``: ``c``
    the fixed position profile of :func:`rank_one_model` over the M positions (``positions``)
    and ``c_out`` its mean over positions ``K..M-1`` (0 when ``K = M``), ``u`` the zero-sum
    utilities, ``delta ~ ZeroSumNormal(1)`` over items and over the ``K + 1`` columns (a shift
    of a row or of a column of the logits changes no probability), ``tau ~
    HalfNormal(shrinkage_scale)`` or fixed. The ballot lengths: ``length_probs ~
    Dirichlet(1)`` over ``k = 0..K`` (dim ``"top_length"``).

    ``parametrization``: ``"noncentered"`` (the default; free ``delta_raw``, the Helmert
    coordinates of ``delta``) or ``"centered"`` (free ``W_raw``, those of ``W`` itself, normal
    with scale ``tau`` around the rank-one mean; ``W`` double-centred, a row and column shift of
    the non-centred ``W``), the same posterior as :func:`full_model`'s two forms. The centred
    form is for NUTS on many ballots: at 100 items and 5,000 top-10 ballots it takes 4x fewer
    leapfrog steps per draw (31 against 131; ``docs/benchmarks.md``, #top-k-nuts). It has no
    MAP and no fixed ``tau``, so the non-centred form stays the default: MAP and the type-II
    fits (:func:`fit_map_type2`, the CLI's ``--fit map``) need it.

    Parameters
    ----------
    data : RankingData
    K : int, optional
        Positions modelled; default the data's longest ballot (tied items count as ranked).
    prior_sigma, shrinkage_scale, item_features, positions
        As in :func:`full_model`.
    tau : float, optional
        A fixed deviation scale ``>= 0`` (the ``pm.Data`` ``"tau"``) instead of the prior
        (non-centred only).
    components : int
        Number of mixture components ``C``: with ``C > 1`` the ballots are an observed
        :class:`~pm_perm.distributions.RankingMixture` of ``C`` top-k components (own ``u``
        and ``delta``, shared ``tau`` and ``length_probs``, ``mixture_weights ~
        Dirichlet(1)``), as :func:`full_model`'s mixtures.

    Returns
    -------
    RankingModel
        Family ``"top-k"``; deterministic ``"W"`` (C, M, K + 1), the logits.

    Raises
    ------
    ValueError
        As :func:`full_model`; also ``K`` not in ``1..M``, ballots longer than ``K``, K
        beyond ``TOP_K_MAX_K`` or the memory budget, an unknown ``parametrization``, or a fixed
        ``tau`` with the centred one.
    """
    from pm_perm.distributions import TopKRanking
    from pm_perm.kernels.top_k import check_top_k_size

    prior_sigma = _check_scale("prior_sigma", prior_sigma)
    shrinkage_scale = _check_scale("shrinkage_scale", shrinkage_scale)
    _check_data(data, components)
    M = data.n_items
    longest = int(max(1, data.ranked_lengths().max()))
    K = longest if K is None else K
    if isinstance(K, bool) or not isinstance(K, int | np.integer) or not 1 <= K <= M:
        raise ValueError(f"K must be an integer in 1..M = {M} (positions modelled); got {K!r}")
    if longest > K:
        raise ValueError(f"the data hold ballots of {longest} ranked items, more than K = {K}: "
                         f"use K >= {longest} (the default) or cut the ballots")
    check_top_k_size(M, int(K))
    K = int(K)
    if parametrization not in ("noncentered", "centered"):
        raise ValueError("parametrization must be 'noncentered' or 'centered' (top-k model); got "
                         f"{parametrization!r}")
    if tau is not None:
        tau = _check_fixed_tau(tau)
        if parametrization != "noncentered":
            raise ValueError("a fixed tau needs parametrization='noncentered' (the centred "
                             "model's W has scale tau itself: tau = 0 has no density)")
    coords = {**_coords(data, components), "top_position": np.arange(K + 1),
              "top_length": np.arange(K + 1), "top_position_basis": np.arange(K)}
    with pm.Model(coords=coords) as model:
        u = _utilities(data, components, prior_sigma, item_features)
        c = _positions(M, False, positions)
        c_out = pt.mean(c[K:]) if K < M else pt.zeros(())
        mean = u[:, :, None] * pt.concatenate([c[:K], c_out[None]])[None, None, :]
        tau = pm.HalfNormal("tau", shrinkage_scale) if tau is None else pm.Data(
            "tau", np.float64(tau))
        Bm, Bk = zero_sum_basis(M), zero_sum_basis(K + 1)
        raw_dims = ("component", "item_basis", "top_position_basis")
        if parametrization == "noncentered":
            delta = pm.Normal("delta_raw", 0.0, 1.0, dims=raw_dims)
            W = mean + tau * _zero_sum_matrices(delta, Bm, Bk)
        else:  # W_raw ~ N(Bm^T mean Bk, tau), as full_model's centred form
            zu = model["u_raw"] if item_features is None else pt.dot(u, Bm)
            m_raw = pt.dot(pt.concatenate([c[:K], c_out[None]]), Bk)
            W_raw = pm.Normal("W_raw", zu[:, :, None] * m_raw[None, None, :], tau, dims=raw_dims)
            W = _zero_sum_matrices(W_raw, Bm, Bk)
        W = pm.Deterministic("W", W, dims=("component", "item", "top_position"))
        length_probs = pm.Dirichlet("length_probs", a=np.ones(K + 1), dims="top_length")
        orders = pm.Data("orders", data.orders, dims=("order", "item"))
        counts = pm.Data("counts", data.counts.astype(np.float64), dims="order")
        if components == 1:
            TopKRanking("ballots", logits=W[0], weights=counts, length_probs=length_probs,
                        observed=orders, dims=("ballot", "item"))
        else:
            from pm_perm.distributions import RankingMixture

            w = pm.Dirichlet("mixture_weights", a=np.ones(components), dims="component")
            comps = [TopKRanking.dist(W[k], length_probs=length_probs)
                     for k in range(components)]
            RankingMixture("ballots", w=w, comp_dists=comps, weights=counts, observed=orders)
    return RankingModel(model, "top-k", components, data, parametrization=parametrization)


#: ``parametrization="auto"`` of :func:`full_model` is centred from this many ballots per entry
#: of the M x M logits matrix.
CENTERED_MIN_BALLOTS_PER_ENTRY = 10


def _full_parametrization(parametrization, data):
    if parametrization == "auto":
        many = data.n_rankings >= CENTERED_MIN_BALLOTS_PER_ENTRY * data.n_items**2
        return "centered" if many else "noncentered"
    if parametrization not in ("noncentered", "centered"):
        raise ValueError("parametrization must be 'noncentered', 'centered' or 'auto'; got "
                         f"{parametrization!r}")
    return parametrization


def _check_unit(lam):
    v = np.asarray(lam)
    if v.shape != () or v.dtype.kind not in "iuf" or not 0.0 <= v <= 1.0:
        raise ValueError(f"positions as a number is a mix in [0, 1] (0 harmonic, 1 linear); got "
                         f"{lam!r}")
    return float(v)


def _check_fixed_tau(tau):
    v = np.asarray(tau)
    if v.shape != () or v.dtype.kind not in "iuf" or not 0.0 <= v < np.inf:
        raise ValueError(f"tau must be a finite number >= 0 (a fixed deviation scale), got {tau!r}")
    return float(v)
