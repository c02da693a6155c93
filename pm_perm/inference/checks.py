"""Checks of optimiser and sampler outcomes: a failed fit is never reported as a result.

``check_optimum`` / ``check_find_map``: a converged L-BFGS-B optimum or :class:`MapFitError`;
``check_draws`` / ``sampler_warnings``: complete, finite draws with their divergences and r_hat,
or :class:`SamplingError`.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

__all__ = [
    "DEGENERATE_RTOL",
    "MapFitError",
    "STATIONARY_RTOL",
    "SamplingError",
    "SamplingInterrupted",
    "check_draws",
    "check_find_map",
    "check_lbfgs_memory",
    "check_optimum",
    "sampler_warnings",
]


class MapFitError(RuntimeError):
    """An optimiser stopped without converging (its result must not be reported as a fit)."""


class SamplingError(RuntimeError):
    """A sampler returned incomplete or non-finite draws."""


class SamplingInterrupted(KeyboardInterrupt):
    """Sampling was interrupted (Ctrl-C); no draws were kept."""


#: ``ABNORMAL_TERMINATION_IN_LNSRCH`` is accepted when the largest gradient component is at most
#: this times ``max(1, |f|)``: the line search failed only because f cannot decrease further
#: in float64 at a stationary point.
STATIONARY_RTOL = 1e-4


def check_optimum(res, what="the MAP fit"):
    """Raise :class:`MapFitError` unless the ``scipy.optimize.minimize`` result ``res`` is a
    converged optimum with a finite value and point.

    Accepted: ``res.success``, or a failed line search (L-BFGS-B ``ABNORMAL``) at a point whose
    gradient is at most ``STATIONARY_RTOL * max(1, |f|)`` in every component (a stationary
    point f cannot improve on in float64). Refused: iteration or evaluation limits, a failed
    line search away from a stationary point, non-finite values.
    """
    msg = str(getattr(res, "message", ""))
    finite = np.isfinite(res.fun) and np.all(np.isfinite(res.x))
    jac = np.asarray(getattr(res, "jac", np.nan), dtype=np.float64)
    grad = float(np.max(np.abs(jac))) if jac.size and np.all(np.isfinite(jac)) else np.inf
    stationary = grad <= STATIONARY_RTOL * max(1.0, abs(float(res.fun))) if finite else False
    if finite and (res.success or ("ABNORMAL" in msg and stationary)):
        return res
    raise MapFitError(
        f"{what} did not converge: {msg or 'no message'} (status {getattr(res, 'status', '?')}, "
        f"{getattr(res, 'nit', '?')} iterations, objective {float(res.fun):.6g}, largest "
        f"gradient component {grad:.3g}). The result is not reported. Typical causes: badly "
        "scaled features (rankers standardise them unless standardize=False; otherwise rescale "
        "the data), an iteration limit (raise maxiter or the L-BFGS-B memory), or a "
        "log-posterior that is not finite at the start"
    )


def check_find_map(fit):
    """Raise :class:`MapFitError` unless ``pm.find_MAP`` converged; returns ``fit``.

    When the optimiser stopped early (an iteration limit, a failed line search away from an
    optimum, a non-finite objective), ``pm.find_MAP`` warns and returns its last point all the
    same. This check applies :func:`check_optimum`'s rule to the optimiser result PyMC stores
    with the fit (a failed L-BFGS-B line search at a stationary point is accepted). It also
    refuses a degenerate mixture optimum: when the point has per-component variables (a
    ``"component"`` dimension of length K > 1 and another dimension, as the mixtures of
    :mod:`pm_perm.preferences` have) and every one of them is the same in all components (to
    ``DEGENERATE_RTOL``), the optimiser sits on the symmetric saddle, not on the mixture's
    mode. Cost: none beyond reading that result and the point.

    Parameters
    ----------
    fit : xarray.DataTree
        The result of ``pm.find_MAP(..., return_inferencedata=True)`` (its
        ``optimizer_result`` group).

    Returns
    -------
    xarray.DataTree
        ``fit``, unchanged.

    Raises
    ------
    MapFitError
        The optimiser did not converge; the message gives scipy's status and message, the
        iterations, the objective and the largest gradient component. Or the point is a
        degenerate mixture optimum (identical components); the message names the fix
        (multi-start, ``fit_map(n_starts=...)``, jitter).
    ValueError
        ``fit`` has no optimiser result (a ``dict`` from ``return_inferencedata=False``, or
        another DataTree).

    Examples
    --------
    >>> import pymc as pm
    >>> import pm_perm
    >>> with pm.Model():
    ...     x = pm.Normal("x", 0.0, 1.0)
    ...     _ = pm.Normal("y", x, 1.0, observed=[1.0, 2.0])
    ...     fit = pm.find_MAP(return_inferencedata=True, jitter=False, progressbar=False)
    >>> round(float(pm_perm.check_find_map(fit).posterior["x"].item()), 3)
    1.0
    """
    try:
        res = fit["optimizer_result"].to_dataset()
    except (KeyError, TypeError, AttributeError):
        raise ValueError(
            "check_find_map needs the result of pm.find_MAP(..., return_inferencedata=True), "
            "which stores the optimiser result (group 'optimizer_result'); got "
            f"{type(fit).__name__}"
        ) from None

    def item(name, default):
        return res[name].values.item() if name in res else default

    check_optimum(SimpleNamespace(
        success=bool(item("success", False)), message=str(item("message", "")),
        status=item("status", "?"), nit=item("nit", "?"), fun=float(item("fun", np.nan)),
        x=np.asarray(res["x"].values if "x" in res else np.nan, dtype=np.float64),
        jac=np.asarray(res["jac"].values if "jac" in res else np.nan, dtype=np.float64),
    ), what=f"pm.find_MAP ({item('method', 'optimiser')})")
    _check_distinct_components(fit)
    return fit


#: A MAP point's mixture components are "identical" when every per-component variable differs
#: between components by at most this times ``max(1, its largest magnitude)``.
DEGENERATE_RTOL = 1e-5


def _check_distinct_components(fit, dim="component"):
    """Raise :class:`MapFitError` when every per-component parameter of the MAP point (a
    variable with the ``dim`` dimension, of length K > 1, and at least one more dimension of
    its own; the weights, which have ``dim`` alone, are not one) is the same in all components:
    the symmetric saddle of a mixture, not its mode."""
    post = fit["posterior"] if "posterior" in getattr(fit, "children", {}) else None
    if post is None:
        return
    names, same = [], []
    for name, da in post.data_vars.items():
        dims = [d for d in da.dims if d not in ("chain", "draw")]
        if dim not in dims or len(dims) < 2 or da.sizes[dim] < 2:
            continue
        x = np.moveaxis(np.asarray(da.values, dtype=np.float64), da.dims.index(dim), 0)
        scale = max(1.0, float(np.max(np.abs(x)))) if np.all(np.isfinite(x)) else np.inf
        names.append(name)
        same.append(bool(np.max(np.abs(x - x[:1])) <= DEGENERATE_RTOL * scale))
    if names and all(same):
        K = post.sizes[dim]
        raise MapFitError(
            f"pm.find_MAP returned a degenerate mixture optimum: the {K} components are "
            f"identical ({', '.join(names)} equal across {dim!r} to {DEGENERATE_RTOL:g} "
            "relative), the symmetric saddle where every component is the one-component fit, "
            "not the mixture's mode. Start from points that break the symmetry: multi-start "
            "(pm_perm.preferences.fit_map(rm, n_starts=...) for pm_perm's ranking models), or "
            "pm.find_MAP(..., jitter=True) with several random_seed values, keeping the best")


def check_lbfgs_memory(maxcor):
    """Return ``maxcor`` if it is a positive integer (an L-BFGS-B memory), else raise."""
    if isinstance(maxcor, bool) or not isinstance(maxcor, int | np.integer) or maxcor < 1:
        raise ValueError(f"the L-BFGS-B memory (maxcor) must be a positive integer, got {maxcor!r}")
    return int(maxcor)


def check_draws(idata, var="theta", *, chains=None, draws=1000):
    """Check the draws of ``var`` in a ``pm.sample`` result; returns their diagnostics.

    Parameters
    ----------
    idata : xarray.DataTree
        The result of ``pm.sample`` (any NUTS sampler).
    var : str
        The variable whose draws are checked and summarised.
    chains, draws : int, optional
        What was asked of the sampler (``chains=None``: not checked).

    Returns
    -------
    dict
        ``"divergences"`` (int, None without the ``diverging`` statistic), ``"max_r_hat"``
        (float, None with one chain), ``"chains"``, ``"draws"`` (per chain); give it to
        :func:`sampler_warnings` for what to report. Cost: one r_hat computation.

    Raises
    ------
    SamplingError
        Fewer chains or draws than asked for, or non-finite draws of ``var``.
    """
    post = np.asarray(idata.posterior[var])
    if post.shape[1] < draws or (chains is not None and post.shape[0] < chains):
        raise SamplingError(
            f"the sampler returned {post.shape[0]} chain(s) x {post.shape[1]} draws of {var!r}, "
            f"fewer than the {chains} x {draws} requested (interrupted?); nothing is reported"
        )
    if not np.all(np.isfinite(post)):
        raise SamplingError(
            f"the sampler returned non-finite draws of {var!r} "
            f"({int(np.sum(~np.isfinite(post)))} values); nothing is reported"
        )
    diverging = idata.sample_stats.get("diverging")
    diagnostics = {
        "chains": int(post.shape[0]),
        "draws": int(post.shape[1]),
        "divergences": int(np.sum(diverging)) if diverging is not None else None,
        "max_r_hat": None,
    }
    if post.shape[0] > 1:
        import arviz as az

        rhat = az.rhat(idata, var_names=[var])
        diagnostics["max_r_hat"] = float(np.nanmax(np.asarray(rhat[var])))
    return diagnostics


def sampler_warnings(diagnostics, *, r_hat_max=1.01):
    """Warning strings for divergences and r_hat above ``r_hat_max`` (empty when clean)."""
    out = []
    if diagnostics.get("divergences"):
        out.append(f"{diagnostics['divergences']} divergent transitions: the posterior draws "
                   "may be biased (increase target_accept or reparametrise)")
    rhat = diagnostics.get("max_r_hat")
    if rhat is not None and rhat > r_hat_max:
        out.append(f"max r_hat = {rhat:.3f} > {r_hat_max}: the chains have not mixed (run "
                   "more tuning/draws)")
    return out
