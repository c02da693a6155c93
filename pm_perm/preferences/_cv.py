"""Cross-validated type-II fits: :func:`fit_map_cv` (re-exported by
:mod:`pm_perm.preferences.fitting`, where users find it beside ``fit_map_type2``).

Kept apart from ``fitting.py`` to keep modules small; it uses that module's MAP engine, so the
names it needs are imported when a fit runs (``fitting`` imports this module at its end).
"""

from __future__ import annotations

import numpy as np

from pm_perm._progress import stage
from pm_perm.preferences._pl_start import check_final_start, final_from_plackett_luce
from pm_perm.preferences.posterior import pointwise_loglik


def _fitting():
    from pm_perm.preferences import fitting

    return fitting


def fit_map_cv(rm, *, grid=None, folds=5, seed=0, n_starts=1, maxiter=20_000, lbfgs_memory=10,
               patience=2, final_start=None):
    """MAP with the hyperparameter of :func:`fit_map_type2` (``tau`` or ``position_mix``) chosen
    by K-fold cross-validation on the model's own ballots, with the one-standard-error rule.

    The ballots (one per count) are permuted by ``numpy.random.default_rng(seed)`` and dealt in
    turn into ``folds`` folds. For each value of ``grid`` (ascending) the model is fitted on all
    ballots as in :func:`fit_map_type2` (the first value from ``n_starts`` jittered starts, each
    later one from the previous optimum, and for the rank-one PL-anchored tilt also from a
    jittered start, the higher MAP kept); then on each fold's complement, starting from that
    optimum. The value's score is each ballot's log-likelihood (the order's; its length left
    out) under the fit without its fold, averaged per ballot. The value returned is the SMALLEST
    whose score is within one standard error of the best score (the SE of the mean per-ballot
    difference to the best value, paired over the same ballots; Breiman et al. 1984), so an
    exact tie goes to the smaller value: at ``tau = 0`` the PL-anchored models are
    Plackett-Luce exactly, and a larger ``tau`` is taken only when held-out ballots show it is
    better beyond noise. The point is the all-ballot fit at that value (no Laplace Hessian).

    With ``final_start="plackett-luce"`` (PL-anchored models) that final point starts from the
    Plackett-Luce MAP (:func:`fit_map` of ``plackett_luce_model`` on the same ballots, same
    ``seed`` and ``n_starts``; the deviations at 0): at ``tau = 0`` the model IS Plackett-Luce,
    so the point returned is Plackett-Luce's MAP itself, not refitted (two L-BFGS-B runs on the
    same objective stop at points that differ by the stopping tolerance, a gap a held-out
    comparison with Plackett-Luce can resolve); at ``tau > 0`` the fit from that start and the
    scan's fit are compared, the higher MAP kept. The scan and the choice are unchanged.

    Why not the Laplace evidence (:func:`fit_map_type2`): for the rank-one tilt
    ``D = tau (B a)(B b)^T`` of :func:`~pm_perm.preferences.anchored.pl_anchored_model` the
    posterior of ``(a, b)`` is bilinear, with a stationary point at ``a = b = 0`` and two mirror
    modes, where a Gaussian approximation is poor; on small Plackett-Luce data the evidence
    chose ``tau > 0`` and lost to Plackett-Luce on held-out ballots (``docs/benchmarks.md``,
    "Small data, V4"). Cost: ``folds + 2`` MAP fits per value (the fold fits warm-started).

    Parameters
    ----------
    rm : RankingModel
        A model :func:`fit_map_type2` accepts (a fixed ``tau`` or a position mix).
    grid : sequence of float, optional
        As :func:`fit_map_type2`.
    folds : int
        Number of folds, at least 2 and at most the number of ballots.
    seed : int
        Seed of the folds and of the jittered starts (as :func:`fit_map_type2`).
    n_starts, maxiter, lbfgs_memory
        As :func:`fit_map`.
    patience : int or None
        Stop after this many values in a row whose score is not above the best so far by
        more than one SE (the paired SE of their difference); ``None``: the whole grid.
    final_start : {None, "plackett-luce"}
        The start of the final fit: ``None``, the scan's fit; ``"plackett-luce"`` (PL-anchored
        models only), the Plackett-Luce MAP (see above). One more MAP fit (Plackett-Luce's).

    Returns
    -------
    dict
        As :func:`fit_map_type2`, ``"_optimizer"`` holding the chosen value under its name,
        ``"cv_loglik"`` ``{value: mean held-out log-likelihood per ballot}`` and ``"cv_se"``
        ``{value: SE of its difference to the best}`` of the values fitted, and ``"folds"``.
        The model's containers are left at the chosen value and all ballots.

    Raises
    ------
    ValueError
        As :func:`fit_map_type2`, or ``folds`` not an integer in [2, number of ballots], or
        ``final_start`` not one of its values (``"plackett-luce"`` for a PL-anchored model).
    pm_perm.inference.MapFitError
        A fit (all ballots or a fold's) did not converge.

    Examples
    --------
    >>> from pm_perm.preferences.models import full_model
    >>> from pm_perm.preferences.synthetic import simulate_rankings
    >>> data = simulate_rankings(30, utilities=[1.0, 0.5, 0.0, -0.5], rng=0)
    >>> point = fit_map_cv(full_model(data, tau=0.0), grid=(0.0, 0.5), folds=2)
    >>> sorted(point["_optimizer"]["cv_loglik"]) == [0.0, 0.5]
    True
    """
    name, default, check = _fitting()._hyperparameter(rm)
    grid = sorted(check(t) for t in (default if grid is None else grid))
    if not grid:
        raise ValueError(f"grid is empty: give at least one value of {name}")
    base = rm.built_on if rm.built_on is not None else rm.data
    counts = np.rint(rm.model["counts"].get_value()).astype(np.int64)
    n = int(counts.sum())
    if isinstance(folds, bool) or not isinstance(folds, int | np.integer) or not 2 <= folds <= n:
        raise ValueError(f"folds must be an integer from 2 to the number of ballots ({n}); got "
                         f"{folds!r}")
    check_final_start(final_start, rm)
    order_of = np.random.default_rng(seed).permutation(np.repeat(np.arange(counts.size), counts))
    fold_of = np.arange(n) % folds
    fold_counts = [np.bincount(order_of[fold_of == k], minlength=counts.size)
                   for k in range(folds)]
    engine = _fitting()._map_engine(rm, lbfgs_memory)
    scores, fits, best, below = {}, {}, None, 0
    for i, t in enumerate(grid):
        engine.set_data(**{name: np.float64(t)})
        with stage(f"{name} = {t:g} ({i + 1} of at most {len(grid)}), {folds}-fold CV"):
            if i == 0:
                point = _fitting()._best_start(engine, rm, seed, n_starts, maxiter)
            else:
                engine.x = fits[grid[i - 1]][1]
                point = engine.fit(maxiter=maxiter, what=f"the MAP fit at {name} = {t:g}")
                if "b_raw" in rm.model.named_vars:  # rank-one tilt: a = b = 0 can be a saddle
                    point = _fitting()._better_of_jittered(engine, point, seed + i, maxiter)
            fits[t] = (point, engine.x.copy())
            scores[t] = _cv_scores(engine, rm, base, counts, fold_counts, order_of, fold_of,
                                   fits[t][1], maxiter, f"{name} = {t:g}")
        if best is None or _beyond_one_se(scores[t] - scores[best])[0] > 0:
            best, below = t, 0
        else:
            below += 1
            if patience is not None and below >= patience:
                break
    best = max(scores, key=lambda v: scores[v].mean())
    se = {v: _beyond_one_se(s - scores[best])[1] for v, s in scores.items()}
    t = min(v for v in scores if _beyond_one_se(scores[v] - scores[best])[0] >= 0)
    point, x = fits[t]
    engine.set_data(**{name: np.float64(t)})
    engine.x = x
    if final_start is not None:
        point = final_from_plackett_luce(engine, rm, base, counts, point, t,
                                         seed=seed, n_starts=n_starts, maxiter=maxiter)
    out = _fitting()._map_point(point, **{name: t, "folds": folds,
                               "cv_loglik": {v: float(s.mean()) for v, s in scores.items()},
                               "cv_se": se})
    out[name] = np.asarray(t)
    return out


def _beyond_one_se(d):
    """``(excess, se)``: the mean of the per-ballot differences ``d`` beyond one standard
    error of it (``mean - se`` if positive, ``mean + se`` if negative, 0 within one SE)."""
    se = float(np.std(d, ddof=1) / np.sqrt(d.size)) if d.size > 1 else 0.0
    m = float(d.mean())
    return (m - se if m > se else m + se if m < -se else 0.0), se


def _cv_scores(engine, rm, base, counts, fold_counts, order_of, fold_of, x, maxiter, what):
    """Each ballot's log-likelihood under the fit without its fold (the fold fits start at
    ``x``); the model's counts and ``engine.x`` are left at all ballots and ``x``."""
    out = np.empty(order_of.size)
    try:
        for k, held in enumerate(fold_counts):
            _fitting().set_counts(rm, counts - held)
            engine.x = x
            point = _fitting()._map_point(engine.fit(maxiter=maxiter,
                                          what=f"the MAP fit without fold {k + 1} at {what}"))
            rows = np.flatnonzero(held)
            ll = np.zeros(counts.size)
            ll[rows] = pointwise_loglik(_fitting().posterior_params(point, rm.family), rm.family,
                                        base.orders[rows])[0]
            out[fold_of == k] = ll[order_of[fold_of == k]]
    finally:
        _fitting().set_counts(rm, counts)
        engine.x = x
    return out
