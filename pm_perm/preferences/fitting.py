"""Fits of the ranking models of :mod:`pm_perm.preferences.models`: MAP (:func:`fit_map`), the
type-II MAP that chooses a hyperparameter by the Laplace evidence (:func:`fit_map_type2`) or by
cross-validation (:func:`fit_map_cv`), NUTS
(:func:`fit_nuts`), new counts for a built model (:func:`set_counts`, cross-validation folds), and
the order model's arrays from a fit (:func:`posterior_params`).

Every function takes a :class:`~pm_perm.preferences.models.RankingModel`; value convention and
the models' parametrisations: :mod:`pm_perm.preferences.models`.
"""

from __future__ import annotations

import weakref

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.util import get_default_varnames
from pytensor.compile.sharedvalue import SharedVariable

from pm_perm._progress import stage
from pm_perm.inference import CompiledMAP, MapFitError, check_lbfgs_memory, checked_sample
from pm_perm.preferences._families import (
    ANCHORED,
    anchored_params,
    check_family,
    check_probability_vectors,
    n_lengths,
    param_name,
)
from pm_perm.preferences.models import (
    RankingModel,
    _check_fixed_tau,
    _check_unit,
    full_model,  # noqa: F401  (doctests)
    rank_one_model,  # noqa: F401  (doctests)
)
from pm_perm.preferences.posterior import relabel_components

__all__ = [
    "POSITION_MIX_GRID",
    "TAU_GRID",
    "fit_map",
    "fit_map_cv",
    "fit_map_type2",
    "fit_nuts",
    "posterior_params",
    "set_counts",
]


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

#: The ``pm.Data`` containers of a ranking model that no fit changes (:func:`set_counts` sets
#: the counts, :func:`fit_map_type2` the hyperparameter): the MAP engine compiles them as
#: constants, so the work that depends on them alone (casts, ballot lengths, the orders' parse
#: in :mod:`pm_perm.ops.pl_tilted`) is done once per engine, not at every evaluation.
FROZEN_DATA = ("orders",)


def _map_engine(rm, lbfgs_memory):
    """The model's one :class:`CompiledMAP` (compiled once, reused by every MAP fit of ``rm``),
    with the L-BFGS-B memory set. A mixture's objective is per ballot, so L-BFGS-B fits counts
    of any size. The containers :data:`FROZEN_DATA` are constants of the engine; if one has
    been set to other values since (``pm.set_data``), a new engine is compiled."""
    engine = _COMPILED_MAP.get(rm.model)
    frozen = {name: rm.model[name] for name in FROZEN_DATA if name in rm.model.named_vars
              and isinstance(rm.model[name], SharedVariable)}
    held = getattr(engine, "frozen_data", None)  # None: an engine a caller compiled and set
    if held is not None and any(not np.array_equal(var.get_value(borrow=True), held[name])
                                for name, var in frozen.items()):
        engine = None
    if engine is None:
        values = {name: var.get_value() for name, var in frozen.items()}
        engine = _COMPILED_MAP[rm.model] = CompiledMAP(
            rm.model, scale=rm.data.n_rankings if rm.components > 1 else None,
            givens={var: pt.constant(values[name], dtype=var.type.dtype)
                    for name, var in frozen.items()})
        engine.frozen_data = values
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
    point = _best_start(_map_engine(rm, lbfgs_memory), rm, seed, n_starts, maxiter)
    return _map_point(point)


def _map_point(point, **optimizer):
    """:func:`fit_map`'s result from an engine's fit (``"_info"`` becomes ``"_optimizer"``)."""
    info = point.pop("_info")
    out = {k: np.asarray(point[k]) for k in get_default_varnames(point, False)}
    out["_optimizer"] = {"log_posterior": info["log_posterior"],
                         "n_iterations": info["iterations"], "message": info["message"],
                         "n_converged": info.get("n_converged", 1), **optimizer}
    return out


#: The deviation scales :func:`fit_map_type2` compares by default: 0 (the rank-one model) and
#: ``2^k / 16`` for ``k = 0..6`` (0.0625 to 4; ``HalfNormal(1)``, the NUTS prior, puts 95 % of its
#: mass below 2).
TAU_GRID = (0.0,) + tuple(2.0**k / 16 for k in range(7))
#: The position mixes (0 = harmonic, 1 = linear profile) :func:`fit_map_type2` compares by default
#: for a rank-one model built with ``positions=<number>``.
POSITION_MIX_GRID = (0.0, 0.25, 0.5, 0.75, 1.0)


def fit_map_type2(rm, *, grid=None, seed=0, n_starts=1, maxiter=20_000, lbfgs_memory=10,
                  patience=2):
    """MAP with a hyperparameter chosen by the Laplace evidence (type-II maximum likelihood):
    the full (or top-k) model's deviation scale ``tau`` (the shrinkage toward the rank-one model
    learned from the data), or a rank-one model's position mix ``lam`` (harmonic to linear profile).

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
        A full model built with a fixed ``tau`` (``full_model(data, tau=0.0)``, any value; or
        ``top_k_model(data, tau=0.0)``), or
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
    from pm_perm.inference.laplace import laplace_log_evidence

    name, default, check = _hyperparameter(rm)
    grid = sorted(check(t) for t in (default if grid is None else grid))
    if not grid:
        raise ValueError(f"grid is empty: give at least one value of {name}")
    engine = _map_engine(rm, lbfgs_memory)
    keep = None
    evidence, best = {}, None
    for i, t in enumerate(grid):
        engine.set_data(**{name: np.float64(t)})
        with stage(f"{name} = {t:g} ({i + 1} of at most {len(grid)})"):
            if i == 0:
                point = _best_start(engine, rm, seed, n_starts, maxiter)
            else:
                point = engine.fit(maxiter=maxiter, what=f"the MAP fit at {name} = {t:g}")
                if "b_raw" in rm.model.named_vars:  # rank-one tilt: a = b = 0 can be a saddle
                    point = _better_of_jittered(engine, point, seed + i, maxiter)
            x = engine.x.copy()
            if keep is None:
                keep = _order_model_coordinates(engine)

            H = _negative_hessian(engine, x, keep, name == "tau" and t == 0.0, rm=rm)
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
    out = _map_point(point, **{name: t, "log_evidence": evidence})
    out[name] = np.asarray(t)
    return out


def _hyperparameter(rm):
    """``(name, default grid, check)`` of the model's type-II hyperparameter, or raise."""
    named = rm.model.named_vars
    if (rm.family in ("full", "pl-anchored", "top-k") and "tau" in named
            and rm.model["tau"] not in rm.model.free_RVs):
        return "tau", TAU_GRID, _check_fixed_tau
    if rm.family == "rank-one" and "position_mix" in named:
        return "position_mix", POSITION_MIX_GRID, _check_unit
    raise ValueError("fit_map_type2 needs a full or top-k model with a fixed tau "
                     "(full_model(data, tau=0.0), top_k_model(data, tau=0.0)) or a rank-one "
                     "model with a position mix "
                     "(rank_one_model(data, positions=0.0))")


def _better_of_jittered(engine, point, seed, maxiter):
    """``point`` (``engine.x`` at it) or the fit from a jittered start, whichever is higher;
    ``engine.x`` left at the one returned (the PL-anchored rank-one tilt
    ``D = tau (B a)(B b)^T``: its previous optimum ``a = b = 0`` stays a stationary point)."""
    x = engine.x.copy()
    try:
        other = engine.fit(seed=seed, maxiter=maxiter, what="the MAP fit from a jittered start")
    except MapFitError:
        other = None
    if other is None or other["_info"]["log_posterior"] <= point["_info"]["log_posterior"]:
        engine.x = x
        return point
    return other


def _best_start(engine, rm, seed, n_starts, maxiter):
    """The best of ``n_starts`` jittered fits (as :func:`fit_map`); ``engine.x`` left at it."""
    best, messages = None, []
    for s in range(n_starts):
        try:
            with _start_stage(s, n_starts):
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


def _start_stage(s, n_starts):
    """The progress stage of start ``s`` (0-based) of a multi-start fit (none for one start)."""
    import contextlib

    return stage(f"start {s + 1} of {n_starts}") if n_starts > 1 else contextlib.nullcontext()


#: How :func:`fit_map_type2` differences the gradient for the Laplace Hessian
#: (:func:`pm_perm.inference.laplace.negative_hessian`'s ``scheme``): "forward", ``n + 1``
#: gradients for ``n`` coordinates (half of "central"'s ``2 n``; the log evidence agrees to
#: about 1e-8 relative on the small-data sets of ``benchmarks/bench_small_data.py``).
HESSIAN_SCHEME = "forward"


def _negative_hessian(engine, x, keep, prior_only_deviation, rm=None):
    """The Hessian of ``-log p`` over the coordinates ``keep`` of the raveled point ``x``, by
    finite differences of the exact gradient (:data:`HESSIAN_SCHEME`: ``n + 1`` gradient
    evaluations for ``n`` coordinates by forward differences, ``2 n`` by central ones).

    ``prior_only_deviation``: the full model at ``tau = 0``, where ``W = u c^T`` does not depend
    on ``delta_raw``: the gradient of ``log p`` with respect to ``delta_raw`` is its standard
    normal prior's, ``-delta_raw``, whatever the other coordinates, and no other coordinate's
    gradient depends on ``delta_raw``. Its block of the Hessian is then exactly the identity
    and its cross terms zero (what the differences give, up to rounding), so only the other
    coordinates are differenced: on 20 items 19 + 1 gradient evaluations instead of
    380 + 1 (forward differences).

    ``rm`` a PL-anchored model (:mod:`~pm_perm.preferences.anchored`): the gradients are
    :func:`~pm_perm.preferences.anchored.log_p_gradient`'s (no work per order), the same
    numbers up to rounding."""
    from pm_perm.inference.laplace import negative_hessian

    skip = np.zeros(x.size, dtype=bool)
    if prior_only_deviation:
        start = 0
        for name, _shape, size, _dtype in engine._layout:
            if name == "delta_raw":
                skip[start:start + size] = True
            start += size
    diff = keep[~skip[keep]]

    log_p_grad = None
    if rm is not None and rm.family == ANCHORED:
        from pm_perm.preferences.anchored import log_p_gradient

        log_p_grad = log_p_gradient(rm, engine)

    def grad(z):  # of log p, unscaled (a mixture's engine objective is per ballot)
        full = x.copy()
        full[diff] = z
        if log_p_grad is not None:
            return log_p_grad(full)[diff]
        return -engine.value_and_grad(full)[1][diff] * engine.scale

    where = np.flatnonzero(~skip[keep])
    H = np.eye(keep.size)  # the skipped block: the N(0, 1) prior's precision, no cross terms
    H[np.ix_(where, where)] = negative_hessian(grad, x[diff], scheme=HESSIAN_SCHEME)
    return H


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
             progressbar=None, sampler=None, **kwargs):
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
    centred full model (``full_model(..., parametrization="centered")``). ``progressbar``:
    the sampler's progress bar; by default shown when the standard error is a terminal and not
    inside :func:`pm_perm._progress.quiet` (the CLI's ``--quiet``).

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
    if progressbar is None:
        from pm_perm._progress import enabled

        progressbar = enabled()
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
        Holds ``"W"`` (or ``"u"`` for Plackett-Luce, ``"u"`` and ``"D"`` for the PL-anchored
        models of :mod:`~pm_perm.preferences.anchored`), ``"length_probs"`` and, for K > 1
        components, ``"mixture_weights"`` (K,).
    family : str
        One of ``FAMILIES``.

    Returns
    -------
    dict
        ``"params"``: W (S, K, M, M), the top-k model's logits (S, K, M, k + 1), u (S, K, M),
        or for ``"pl-anchored"`` ``D`` and ``u`` packed as (S, 1, M, M + 1) (``D`` the first M
        columns, ``u`` the last);
        ``"weights"`` (S, K); ``"length_probs"`` (S, M + 1), for top-k (S, k + 1). S = 1 for a
        MAP point; draws flattened over chains.

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
    for k in (name, "length_probs") + (("u",) if family == ANCHORED else ()):
        if k not in post:
            raise ValueError(f"source has no {k!r} (needed for family {family!r}); pass the "
                             "fit_map point or posterior of a model of that family")

    def get(v):
        a = np.asarray(post[v] if draw_axis == 0 else post[v].values)
        return a[None] if draw_axis == 0 else a.reshape((-1,) + a.shape[2:])

    params, lp = get(name), get("length_probs")
    if family == ANCHORED:
        params = anchored_params(get("u"), params)
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
    n_len = n_lengths(family, params)
    if lp.shape != (params.shape[0], n_len):
        what = (f"K = {n_len - 1} positions; give K + 1" if family == "top-k" else
                f"M = {n_len - 1} items; give M + 1")
        raise ValueError(f"length_probs has shape {lp.shape[1:]} but {name!r} has {what} = "
                         f"{n_len} probabilities (lengths 0..{n_len - 1})")
    if not np.all(np.isfinite(params)):
        raise ValueError(f"{name!r} holds non-finite values; pass a converged fit")
    for label, probs in (("mixture_weights", w), ("length_probs", lp)):
        check_probability_vectors(label, probs)
    return {"params": params, "weights": w, "length_probs": lp}


# fit_map_cv lives in _cv.py (module size); it is this module's public name
from pm_perm.preferences._cv import fit_map_cv  # noqa: E402
