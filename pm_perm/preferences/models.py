"""PyMC models of ranking data (Plackett-Luce, rank-one, full item x position, mixtures) and
their fits.

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

import weakref
from dataclasses import dataclass

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.util import get_default_varnames

from pm_perm.inference import CompiledMAP, MapFitError, check_lbfgs_memory, checked_sample
from pm_perm.preferences._families import (
    FAMILIES,
    check_family,
    check_probability_vectors,
    param_name,
)
from pm_perm.preferences.posterior import relabel_components

__all__ = [
    "CENTERED_MIN_BALLOTS_PER_ENTRY",
    "FAMILIES",
    "RankingModel",
    "component_logliks",
    "POSITION_MIX_GRID",
    "POSITION_PROFILES",
    "TAU_GRID",
    "fit_map",
    "fit_map_type2",
    "fit_nuts",
    "full_model",
    "harmonic_positions",
    "plackett_luce_model",
    "posterior_params",
    "rank_one_model",
    "set_counts",
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


def _zero_sum_matrices(Z, B):
    """``B Z[k] B^T`` for each k: (K, n-1, n-1) -> (K, n, n), zero-sum over rows and columns."""
    T = pt.tensordot(Z, B, axes=([2], [1]))  # T[k, a, j] = sum_b Z[k, a, b] B[j, b]
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


# --- fitting -----------------------------------------------------------------------------------

def set_counts(rm, counts):
    """The same model with new counts of its distinct orders (e.g. a cross-validation fold).

    The counts (and for a mixture the number of ballots and the ballot-length counts) are
    ``pm.Data`` containers of the model, so this changes them in place (``pm.set_data``) and
    :func:`fit_map` reuses the functions compiled for the previous fit (a refit costs the
    optimisation alone, not the compilation).

    Parameters
    ----------
    rm : RankingModel
        A model built by one of this module's builders (or returned by ``set_counts``).
    counts : array_like of int, shape (n_distinct,)
        New counts, aligned with the orders of the data the model was BUILT on; zeros allowed
        (an order absent from a fold).

    Returns
    -------
    RankingModel
        With ``data`` the new ballots (orders with count 0 dropped) and ``built_on`` the data
        the counts align with. The ``pm.Model`` object is the same as ``rm``'s, now holding the
        new counts: do not go on using ``rm`` with its old counts.
    """
    base = rm.built_on if rm.built_on is not None else rm.data
    counts = _checked_counts(counts, base.n_distinct)
    if counts.sum() == 0:
        raise ValueError("set_counts: all counts are zero (no ballots to fit)")
    lengths = np.bincount(base.ranked_lengths(), weights=counts, minlength=base.n_items + 1)
    new = {"counts": counts.astype(np.float64), "n_ballots": np.float64(counts.sum()),
           "length_counts": lengths.astype(np.float64)}
    # one component: the lengths are part of the ballots' likelihood (only "counts" exists)
    pm.set_data({k: v for k, v in new.items() if k in rm.model.named_vars}, model=rm.model)
    return RankingModel(rm.model, rm.family, rm.components, base.with_counts(counts), base,
                        rm.parametrization)


def _checked_counts(counts, n):
    c = np.asarray(counts)
    if c.dtype.kind not in "iu" or c.shape != (n,) or (c < 0).any():
        raise ValueError(f"counts must be {n} non-negative integers (one per distinct order of "
                         f"the model's data); got dtype {c.dtype}, shape {c.shape}")
    return c.astype(np.int64)


_COMPILED_MAP = weakref.WeakKeyDictionary()  # pm.Model -> CompiledMAP


def _map_engine(rm, lbfgs_memory):
    """The model's one :class:`CompiledMAP` (compiled once, reused by every MAP fit of ``rm``),
    with the L-BFGS-B memory set. A mixture's objective is per ballot, so L-BFGS-B fits counts
    of any size."""
    engine = _COMPILED_MAP.get(rm.model)
    if engine is None:
        engine = _COMPILED_MAP[rm.model] = CompiledMAP(
            rm.model, scale=rm.data.n_rankings if rm.components > 1 else None)
    engine.options["maxcor"] = check_lbfgs_memory(lbfgs_memory)
    return engine


def fit_map(rm, *, seed=0, n_starts=1, maxiter=20_000, lbfgs_memory=10):
    """MAP estimate (L-BFGS-B, as ``pm.find_MAP``), best of ``n_starts`` jittered starts.

    Starts are the model's initial point with U(-1, 1) jitter (seeded from ``seed``), which
    breaks the symmetry between mixture components. A start whose fit does not converge
    (:func:`pm_perm.inference.check_optimum`) is discarded; if none converges a
    :class:`pm_perm.inference.MapFitError` (a ``RuntimeError``) says so (a failed fit is never
    returned as a result).

    The log-density and its gradient are compiled on the model's first fit and reused by later
    fits of the same model (:class:`pm_perm.inference.CompiledMAP`), e.g. after :func:`set_counts`.
    Start and objective are ``pm.find_MAP(model, jitter=True, random_seed=...)``'s; the optimum
    agrees with ``find_MAP``'s to L-BFGS-B's stopping tolerance.

    Parameters
    ----------
    rm : RankingModel
        Not the centred full model (it has no MAP).
    seed : int
        Seed of the first start's jitter (start ``s`` uses ``seed + 7919 s``).
    n_starts : int
        Number of jittered starts.
    maxiter : int
        L-BFGS-B iteration limit per start.
    lbfgs_memory : int
        L-BFGS-B memory (``maxcor``; scipy's default 10).

    Returns
    -------
    dict
        Variable name -> MAP value (numpy arrays, as ``posterior_params`` expects), plus
        ``"_optimizer"``: ``{"log_posterior", "n_iterations", "message", "n_converged"}``.
    """
    if rm.parametrization == "centered":
        raise ValueError("the centred full model has no MAP (its density grows without bound as "
                         "tau -> 0); build it with full_model(..., parametrization='noncentered') "
                         "for fit_map, and use the centred one for NUTS (fit_nuts)")
    engine = _map_engine(rm, lbfgs_memory)
    best, messages, n_converged = None, [], 0
    for s in range(n_starts):
        try:
            values = engine.fit(seed=seed + 7919 * s, maxiter=maxiter,
                                what=f"the MAP fit from start {s}")
        except MapFitError as err:
            messages.append(str(err))
            continue
        info = values.pop("_info")
        n_converged += 1
        if best is None or info["log_posterior"] > best[0]["log_posterior"]:
            point = {k: np.asarray(values[k]) for k in get_default_varnames(values, False)}
            best = (info, point)
    if best is None:
        raise MapFitError(f"MAP fit of the {rm.family} model (K={rm.components}) failed: the "
                          f"optimiser did not converge from any of {n_starts} start(s): "
                          f"{messages}")
    info, point = best
    point["_optimizer"] = {"log_posterior": info["log_posterior"],
                           "n_iterations": info["iterations"], "message": info["message"],
                           "n_converged": n_converged}
    return point


#: The deviation scales :func:`fit_map_type2` compares by default: 0 (the rank-one model) and
#: ``2^k / 16`` for ``k = 0..6`` (0.0625 to 4; ``HalfNormal(1)``, the NUTS prior, puts 95 % of its
#: mass below 2).
TAU_GRID = (0.0,) + tuple(2.0**k / 16 for k in range(7))
#: The position mixes (0 = harmonic, 1 = linear profile) :func:`fit_map_type2` compares by default
#: for a rank-one model built with ``positions=<number>``.
POSITION_MIX_GRID = (0.0, 0.25, 0.5, 0.75, 1.0)


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


def fit_map_type2(rm, *, grid=None, seed=0, n_starts=1, maxiter=20_000, lbfgs_memory=10,
                  patience=2):
    """MAP with a hyperparameter chosen by the Laplace evidence (type-II maximum likelihood):
    the full model's deviation scale ``tau`` (the shrinkage toward the rank-one model learned
    from the data), or a rank-one model's position mix ``lam`` (harmonic to linear profile).

    For each value of ``grid`` (ascending; the first from ``n_starts`` jittered starts as
    :func:`fit_map`, each later one from the previous optimum), the MAP of the other variables
    and the Laplace estimate of ``log p(y | value)``
    (:func:`pm_perm.inference.laplace.laplace_log_evidence`, the Hessian by
    :func:`~pm_perm.inference.laplace.negative_hessian` of the exact gradient); the point of the
    value of largest evidence is returned. ``tau = 0`` is the rank-one model itself, so on
    data that hold no evidence of a departure from rank one the fit IS the rank-one fit. The
    scan stops after ``patience`` values in a row below the best so far (the evidence of a
    scale hyperparameter typically rises to one maximum and then falls; ``patience=None``
    scans the whole grid): the large scales, the slowest fits, are skipped when the evidence
    already falls.

    Why type-II and not the joint MAP or a grid by held-out score: the joint MAP of a
    hierarchical scale and the values it scales is degenerate (non-centred: a fixed penalty
    ``|tau delta|_F`` that does not grow with the dimension, so it overfits small data or snaps
    to ``tau = 0``; centred: unbounded as ``tau -> 0``). The evidence integrates ``(u, delta)``
    out, so it weighs the fit of a larger ``tau`` against the ``(M-1)^2`` extra directions it
    opens (the Occam factor in ``log det H``); given ``tau`` the log posterior is concave in
    ``W`` (an exponential family with a normal prior) and near-Gaussian in ``(u, delta)``, where
    Laplace is accurate. Held-out selection would need refits per fold and wastes ballots; NUTS
    on the hierarchical model (``full_model(tau=None)``, :func:`fit_nuts`) integrates ``tau``
    too and is the choice when the uncertainty about ``tau`` matters. The ballot-length block
    (``length_probs``) does not depend on the hyperparameter and is left out of the Hessian; as
    in :func:`fit_map` the log density has no Jacobian terms (only the simplex variables have
    them, and none of them depends on the hyperparameter).

    Parameters
    ----------
    rm : RankingModel
        A full model built with a fixed ``tau`` (``full_model(data, tau=0.0)``, any value), or
        a rank-one model built with a position mix (``rank_one_model(data, positions=0.0)``).
    grid : sequence of float, optional
        Candidate values: scales ``>= 0`` (default :data:`TAU_GRID`) or mixes in [0, 1]
        (default :data:`POSITION_MIX_GRID`).
    seed, n_starts, maxiter, lbfgs_memory
        As :func:`fit_map`.
    patience : int or None
        Stop after this many values in a row below the best; ``None``: the whole grid.

    Returns
    -------
    dict
        As :func:`fit_map` (the MAP point at the chosen value, with ``"tau"`` or
        ``"position_mix"``), ``"_optimizer"`` also holding that name (the chosen value) and
        ``"log_evidence"``: ``{value: Laplace log evidence}`` of the values fitted. The model's
        container is left at the chosen value.

    Raises
    ------
    ValueError
        ``rm`` is neither such a model, or ``grid`` is empty or holds a value out of range.
    pm_perm.inference.MapFitError
        A fit did not converge.

    Examples
    --------
    >>> from pm_perm.preferences.synthetic import simulate_rankings
    >>> data = simulate_rankings(30, utilities=[1.0, 0.5, 0.0, -0.5], rng=0)
    >>> point = fit_map_type2(full_model(data, tau=0.0), grid=(0.0, 0.5))
    >>> sorted(point["_optimizer"]["log_evidence"]) == [0.0, 0.5]
    True
    """
    from pm_perm.inference.laplace import laplace_log_evidence, negative_hessian

    name, default, check = _hyperparameter(rm)
    grid = sorted(check(t) for t in (default if grid is None else grid))
    if not grid:
        raise ValueError(f"grid is empty: give at least one value of {name}")
    engine = _map_engine(rm, lbfgs_memory)
    keep = None
    evidence, best = {}, None
    for i, t in enumerate(grid):
        engine.set_data(**{name: np.float64(t)})
        if i == 0:
            point = _best_start(engine, rm, seed, n_starts, maxiter)
        else:
            point = engine.fit(maxiter=maxiter, what=f"the MAP fit at {name} = {t:g}")
        x = engine.x.copy()
        if keep is None:
            keep = _order_model_coordinates(engine)

        def grad(z, x=x, keep=keep):
            full = x.copy()
            full[keep] = z
            return -engine.value_and_grad(full)[1][keep]

        H = negative_hessian(grad, x[keep])
        log_post = point["_info"]["log_posterior"]
        evidence[t] = laplace_log_evidence(log_post, H) if _positive_definite(H) else -np.inf
        if best is None or evidence[t] > evidence[best[0]]:
            best, below = (t, point), 0
        else:
            below += 1
            if patience is not None and below >= patience:
                break
    t, point = best
    if not np.isfinite(evidence[t]):
        raise MapFitError(f"fit_map_type2: the Hessian of -log p is not positive definite at "
                          f"any {name}'s MAP (no Laplace evidence); the fits are not at a mode")
    engine.set_data(**{name: np.float64(t)})
    info = point.pop("_info")
    out = {k: np.asarray(point[k]) for k in get_default_varnames(point, False)}
    out[name] = np.asarray(t)
    out["_optimizer"] = {"log_posterior": info["log_posterior"],
                         "n_iterations": info["iterations"], "message": info["message"],
                         "n_converged": info.get("n_converged", 1), name: t,
                         "log_evidence": evidence}
    return out


def _hyperparameter(rm):
    """``(name, default grid, check)`` of the model's type-II hyperparameter, or raise."""
    named = rm.model.named_vars
    if rm.family == "full" and "tau" in named and rm.model["tau"] not in rm.model.free_RVs:
        return "tau", TAU_GRID, _check_fixed_tau
    if rm.family == "rank-one" and "position_mix" in named:
        return "position_mix", POSITION_MIX_GRID, _check_unit
    raise ValueError("fit_map_type2 needs a full model with a fixed tau "
                     "(full_model(data, tau=0.0)) or a rank-one model with a position mix "
                     "(rank_one_model(data, positions=0.0))")


def _best_start(engine, rm, seed, n_starts, maxiter):
    """The best of ``n_starts`` jittered fits (as :func:`fit_map`); ``engine.x`` left at it."""
    best, messages = None, []
    for s in range(n_starts):
        try:
            out = engine.fit(seed=seed + 7919 * s, maxiter=maxiter,
                             what=f"the MAP fit from start {s}")
        except MapFitError as err:
            messages.append(str(err))
            continue
        if best is None or out["_info"]["log_posterior"] > best[0]["_info"]["log_posterior"]:
            best = (out, engine.x.copy())
    if best is None:
        raise MapFitError(f"MAP fit of the {rm.family} model (K={rm.components}) failed: the "
                          f"optimiser did not converge from any of {n_starts} start(s): "
                          f"{messages}")
    best[0]["_info"]["n_converged"] = n_starts - len(messages)
    engine.x = best[1]
    return best[0]


def _order_model_coordinates(engine):
    """Indices of the raveled point that are not the ballot-length probabilities."""
    keep, start = [], 0
    for name, _shape, size, _dtype in engine._layout:
        if not name.startswith("length_probs"):
            keep.extend(range(start, start + size))
        start += size
    return np.asarray(keep, dtype=np.int64)


def _positive_definite(H):
    return bool(np.all(np.isfinite(H))) and np.linalg.eigvalsh(H)[0] > 0


def fit_nuts(rm, *, draws=1000, tune=1000, chains=4, seed=0, target_accept=0.9,
             progressbar=False, sampler=None, **kwargs):
    """NUTS posterior (``pm.sample`` through :func:`pm_perm.inference.checked_sample`); mixture
    draws are relabelled (:func:`~pm_perm.preferences.posterior.relabel_components`) whatever
    the sampler.

    ``sampler``: ``"nutpie"`` (the default when nutpie is installed: compiled NUTS, chains in
    threads, with nutpie's low-rank mass-matrix adaptation, which follows the strong
    correlations between the entries of ``W`` that a diagonal mass matrix cannot: on Meath about
    half the leapfrog steps of the diagonal adaptation), ``"pymc"`` (PyMC's NUTS, chains in
    processes), ``"numpyro"`` or ``"blackjax"`` (PyMC's JAX samplers). Other keyword arguments
    go to ``pm.sample`` (e.g. ``cores``, or ``nuts=`` with options of the NUTS implementation,
    such as nutpie's ``adaptation``). For large data use the
    centred full model (``full_model(..., parametrization="centered")``).

    Returns
    -------
    arviz.InferenceData / DataTree
        With ``posterior`` holding the model's variables (relabelled for K > 1).

    Raises
    ------
    pm_perm.inference.SamplingInterrupted
        Ctrl-C during sampling (a ``KeyboardInterrupt``; the draws so far are discarded).
    pm_perm.inference.SamplingError
        Fewer draws than requested or non-finite draws of the order model's parameters.
    """
    if sampler is None:
        import importlib.util

        sampler = "nutpie" if importlib.util.find_spec("nutpie") is not None else "pymc"
    if sampler == "nutpie":
        kwargs.update(nuts_sampler="nutpie", nuts={"adaptation": "low_rank",
                                                   **kwargs.get("nuts", {})})
    elif sampler == "pymc":
        kwargs.update(compute_convergence_checks=False)
    elif sampler in ("numpyro", "blackjax"):
        kwargs.update(nuts_sampler=sampler, compute_convergence_checks=False)
    else:
        raise ValueError("sampler must be 'nutpie', 'pymc', 'numpyro' or 'blackjax'; got "
                         f"{sampler!r}")
    idata, _ = checked_sample(rm.model, var=param_name(rm.family), draws=draws, tune=tune,
                              chains=chains, random_seed=seed, target_accept=target_accept,
                              progressbar=progressbar, **kwargs)
    idata.attrs["pm_perm_sampler"] = sampler
    if rm.components > 1:
        relabel_components(idata, rm.family)
    return idata


def posterior_params(source, family):
    """Arrays of the order model from a MAP point or posterior draws, with a draw axis.

    Parameters
    ----------
    source : dict (from :func:`fit_map`) or InferenceData / DataTree with ``posterior``
        Holds ``"W"`` (or ``"u"`` for Plackett-Luce), ``"length_probs"`` and, for K > 1
        components, ``"mixture_weights"`` (K,).
    family : str
        One of ``FAMILIES``.

    Returns
    -------
    dict
        ``"params"``: W (S, K, M, M) or u (S, K, M); ``"weights"`` (S, K); ``"length_probs"``
        (S, M + 1). S = 1 for a MAP point; draws flattened over chains.

    Raises
    ------
    ValueError
        ``family`` is not one of ``FAMILIES``; ``source`` lacks the family's parameter or
        ``"length_probs"``; it has K > 1 components but no ``"mixture_weights"`` of length K;
        ``"length_probs"`` is not of length M + 1; the parameter holds non-finite values; or the
        mixture weights or length probabilities are not probability vectors (finite,
        non-negative, summing to 1 within 1e-6).
    """
    check_family(family)
    name = param_name(family)
    if isinstance(source, dict):
        post, draw_axis = source, 0
    else:
        post, draw_axis = source["posterior"], 2
    for k in (name, "length_probs"):
        if k not in post:
            raise ValueError(f"source has no {k!r} (needed for family {family!r}); pass the "
                             "fit_map point or posterior of a model of that family")

    def get(v):
        a = np.asarray(post[v] if draw_axis == 0 else post[v].values)
        return a[None] if draw_axis == 0 else a.reshape((-1,) + a.shape[2:])

    params, lp = get(name), get("length_probs")
    K = params.shape[1] if params.ndim > 1 else 0
    if "mixture_weights" in post:
        w = get("mixture_weights")
    elif K == 1:
        w = np.ones((params.shape[0], 1))
    else:
        raise ValueError(f"source has {name!r} with {K} components but no 'mixture_weights'; "
                         "add the mixture weights (length K) to the point")
    if w.shape != params.shape[:2]:
        raise ValueError(f"mixture_weights has shape {w.shape[1:]} but {name!r} has {K} "
                         f"components; give {K} mixture weights")
    M = params.shape[-1]
    if lp.shape != (params.shape[0], M + 1):
        raise ValueError(f"length_probs has shape {lp.shape[1:]} but {name!r} has M = {M} "
                         f"items; give M + 1 = {M + 1} probabilities (lengths 0..M)")
    if not np.all(np.isfinite(params)):
        raise ValueError(f"{name!r} holds non-finite values; pass a converged fit")
    for label, probs in (("mixture_weights", w), ("length_probs", lp)):
        check_probability_vectors(label, probs)
    return {"params": params, "weights": w, "length_probs": lp}
