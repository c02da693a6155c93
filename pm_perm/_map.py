"""MAP fits shared by the ranking and matching models (private helpers).

``map_path``: MAP estimates along a grid of prior scales with one compiled log-posterior.
``laplace_whitening``: the Laplace approximation at a MAP, as a whitening for NUTS.
``CompiledMAP``: ``pm.find_MAP``'s estimate (jittered start, L-BFGS-B on the log-density without
Jacobian terms) from functions compiled once per model, for models refitted on new data.

``pm.find_MAP`` compiles the model's log-density and gradient on every call; on the small
ranking models that compilation, not the optimisation, dominates a fit. Here the log-posterior
and its gradient are compiled once as one function and the prior scale (the ``pm.Data``
container ``"prior_sigma"``) is changed between L-BFGS-B runs, each starting from the previous
optimum (the ranking log-posteriors are concave, so the optimum does not depend on the start).

Both compile on PyTensor's Python linker by default (:mod:`pm_perm._modes`): a MAP fit evaluates
its graph a few hundred times, and numba's compilation of a ranking model's value-and-gradient
graph (10-30 s on a new machine) was most of a first fit. Each Op's ``perform`` calls the same
compiled, disk-cached kernels, so a warm fit costs about the same (0.65-1.1x on the ranking,
matching, ordinal and RankMatch models; 1.8x on a 3-bloc mixture;
``benchmarks/bench_map_backend.py``). ``mode=None`` compiles with numba instead, for a graph
whose Python overhead per evaluation is large (a ``Blockwise`` over thousands of small inputs of
an Op that, unlike the permanent Ops, has no batched ``perform``).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pymc as pm
from scipy.optimize import minimize

from pm_perm._modes import PYTHON_MODE

__all__ = [
    "CompiledMAP",
    "MapFitError",
    "SamplingError",
    "SamplingInterrupted",
    "check_draws",
    "check_find_map",
    "check_lbfgs_memory",
    "check_optimum",
    "checked_sample",
    "sampler_warnings",
    "laplace_whitening",
    "map_path",
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
    with the fit (a failed L-BFGS-B line search at a stationary point is accepted). Cost: none
    beyond reading that result.

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
        iterations, the objective and the largest gradient component.
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
    return fit


def check_lbfgs_memory(maxcor):
    """Return ``maxcor`` if it is a positive integer (an L-BFGS-B memory), else raise."""
    if isinstance(maxcor, bool) or not isinstance(maxcor, int | np.integer) or maxcor < 1:
        raise ValueError(f"the L-BFGS-B memory (maxcor) must be a positive integer, got {maxcor!r}")
    return int(maxcor)


def map_path(model, sigmas, score=None, *, var="theta", maxiter=50_000, start=None, maxcor=10,
             mode=PYTHON_MODE):
    """MAP of ``var`` for each prior scale in ``sigmas``; the best by ``score`` (or the first).

    Parameters
    ----------
    model : pymc.Model
        With a free, untransformed vector variable ``var`` (the only free variable) and a
        ``pm.Data`` container ``"prior_sigma"``.
    sigmas : sequence of float
    score : callable, optional
        ``score(sigma, theta) -> float``, higher is better (e.g. validation NDCG@5), or a tuple
        of floats compared lexicographically (a criterion, then tie-breakers). Ties left after
        that go to the earliest scale. Without it only the first scale is fitted.
    maxiter : int
        L-BFGS-B iteration limit (scipy defaults otherwise, as ``pm.find_MAP``).
    start : array_like, optional
        Starting point of the first fit (default zeros), e.g. the prior mean.
    maxcor : int
        L-BFGS-B memory (number of stored corrections; scipy's default 10). Ill-conditioned
        posteriors (strongly correlated features) converge in far fewer iterations with more,
        at O(maxcor n) extra work per iteration.
    mode : pytensor Mode or str, optional
        How the log-posterior and gradient are compiled. Default: PyTensor's Python linker
        (:data:`pm_perm._modes.PYTHON_MODE`; no compilation, so a fit on a new machine starts
        in a second instead of after 10-30 s of numba compilation, and costs about the same
        once running). ``None`` is PyTensor's default backend (numba), for graphs whose Python
        overhead per evaluation is large (e.g. a ``Blockwise`` over thousands of small inputs
        of an Op without a batched ``perform``).

    Returns
    -------
    sigma : float
        The chosen scale (``model``'s ``"prior_sigma"`` is left at it).
    theta : ndarray
        Its MAP estimate.
    scores : dict
        Scale -> score (empty without ``score``).
    results : dict
        Scale -> ``scipy.optimize.OptimizeResult``.

    Raises
    ------
    MapFitError
        A fit did not converge (:func:`check_optimum`); no estimate is returned.
    """
    check_lbfgs_memory(maxcor)
    fn = model.compile_fn([model.logp(), model.dlogp()], point_fn=True, mode=mode)
    x = np.zeros(int(np.prod(model.initial_point()[var].shape)))
    if start is not None:
        x = np.asarray(start, dtype=np.float64).reshape(x.shape).copy()

    def negative(theta):
        lp, grad = fn({var: theta})
        return -float(lp), -np.asarray(grad, dtype=np.float64)

    sigmas = tuple(sigmas) if score is not None else tuple(sigmas)[:1]
    best, scores, results = None, {}, {}
    options = {"maxiter": maxiter, "maxcor": maxcor}
    for sigma in sigmas:
        with model:
            pm.set_data({"prior_sigma": sigma})
        res = minimize(negative, x, jac=True, method="L-BFGS-B", options=options)
        check_optimum(res, f"the L-BFGS-B MAP fit at prior scale {sigma:g}")
        x = res.x
        results[sigma] = res
        value = None
        if score is not None:
            value = score(sigma, res.x)
            value = tuple(map(float, value)) if isinstance(value, tuple) else float(value)
            scores[sigma] = value
        if best is None or value > best[0]:
            best = (value, sigma, res.x.copy())
    with model:
        pm.set_data({"prior_sigma": best[1]})
    return best[1], best[2], scores, results


class CompiledMAP:
    """``pm.find_MAP(model, jitter=True, method="L-BFGS-B")`` with its functions compiled once.

    ``pm.find_MAP`` compiles the log-density, its gradient, the initial-point function and the
    function of the unobserved values on every call. A model refitted many times on new values
    of its ``pm.Data`` containers (cross-validation folds, bootstrap) pays that each time; here
    it is paid on the first fit only, and a refit costs the optimisation alone.

    What is optimised is what ``pm.find_MAP`` optimises: the model's log-density without the
    transforms' Jacobian terms, over every continuous value variable (in the transformed space),
    from the initial point jittered by U(-1, 1) with ``numpy.random.default_rng(seed)`` drawing
    the jitter's seed as ``find_MAP`` does, so the start is ``find_MAP``'s for the same seed.

    Parameters
    ----------
    model : pymc.Model
        With continuous free variables only.
    mode : pytensor Mode or str, optional
        How the value-and-gradient function is compiled: PyTensor's Python linker by default
        (as :func:`map_path`); ``None`` for PyTensor's default backend (numba).

    Notes
    -----
    Cost: building the three functions on the first fit (on the Python linker, their graph
    rewrites only: well under a second, against 10-30 s of numba compilation on a new machine
    for a ranking model), then one value-and-gradient evaluation per L-BFGS-B iteration. The
    functions read the model's ``pm.Data`` containers when called, so ``pm.set_data`` between
    fits is seen.
    """

    def __init__(self, model, mode=PYTHON_MODE):
        from pymc.initial_point import make_initial_point_fns_per_chain

        vars_ = list(model.value_vars)
        discrete = [v.name for v in vars_ if v.dtype.startswith(("int", "uint"))]
        if discrete:
            raise ValueError(f"CompiledMAP needs continuous free variables only; got {discrete}")
        self.model, self.vars = model, vars_
        loss = -model.logp(jacobian=False)
        self._f = model.compile_fn([loss, _grad_raveled(loss, vars_)], inputs=vars_,
                                   point_fn=False, on_unused_input="ignore", mode=mode)
        [self._ipfn] = make_initial_point_fns_per_chain(
            model=model, overrides=None, jitter_rvs=set(model.free_RVs), chains=1)
        unobserved = model.unobserved_value_vars
        self._names = [v.name for v in unobserved]
        # evaluated once per fit: the Python linker whatever ``mode`` is (FAST_COMPILE's linker
        # would compile C code for a simplex transform's softmax; pm_perm._modes)
        self._values = model.compile_fn(unobserved, inputs=vars_, point_fn=False,
                                        on_unused_input="ignore", mode=PYTHON_MODE)

    def fit(self, *, seed=0, maxiter=20_000):
        """One L-BFGS-B fit from a jittered start.

        Returns
        -------
        values : dict
            Name -> value of every unobserved variable at the optimum (transformed ones
            included), as ``find_MAP``'s point.
        res : scipy.optimize.OptimizeResult
            ``res.fun`` is the negative log-density (without Jacobian terms) at the optimum;
            the caller checks ``res.success``, which is False (with a message saying why) when
            the log-density or the point is not finite: e.g. a log-density of ``-inf``
            everywhere (a negative prior scale) lets L-BFGS-B "converge" at once on a zero
            gradient, and such a point is no estimate.
        """
        from pymc.blocking import DictToArrayBijection, RaveledVars

        rng = np.random.default_rng(seed)
        start = self._ipfn(int(rng.integers(2**30)))
        names = [v.name for v in self.vars]
        x0 = DictToArrayBijection.map({n: start[n] for n in names})

        def negative(x):
            point = DictToArrayBijection.rmap(RaveledVars(x, x0.point_map_info))
            value, grad = self._f(*(point[n] for n in names))
            return float(value), np.asarray(grad, dtype=np.float64)

        res = minimize(negative, x0.data, jac=True, method="L-BFGS-B",
                       options={"maxiter": maxiter})
        if not (np.isfinite(res.fun) and np.all(np.isfinite(res.x))):
            res.success = False
            res.message = (f"the log posterior at the optimum is {-float(res.fun)} (not finite): "
                           "check the model's parameters (e.g. prior scales must be positive "
                           f"and finite); optimiser message: {res.message}")
        point = DictToArrayBijection.rmap(RaveledVars(np.asarray(res.x), x0.point_map_info))
        out = self._values(*(point[n] for n in names))
        return dict(zip(self._names, out, strict=True)), res


def _grad_raveled(cost, wrt):
    """Gradient of the scalar ``cost`` with respect to each of ``wrt``, raveled and
    concatenated in that order (the layout of ``DictToArrayBijection.map``)."""
    import pytensor.tensor as pt
    from pytensor.gradient import grad

    return pt.concatenate([g.ravel() for g in grad(cost, wrt)])


def laplace_whitening(model, loc, *, var="theta"):
    """``(loc, L)`` with ``L L^T`` the inverse Hessian of ``-log p`` at ``loc`` (free ``var``).

    Central differences of the exact gradient (``2 n`` evaluations for ``n`` coordinates, step
    ``1e-4 max(1, |loc_k|)``); the symmetrised Hessian's eigenvalues are floored at ``1e-8`` of
    the largest. Sampling ``z`` with ``var = loc + L z`` then has about unit posterior scale.
    """
    dlogp = model.compile_dlogp()
    loc = np.asarray(loc, dtype=np.float64)
    n = loc.size
    H = np.empty((n, n))
    for k in range(n):
        h = 1e-4 * max(1.0, abs(loc[k]))
        step = np.zeros(n)
        step[k] = h
        H[k] = -(dlogp({var: loc + step}) - dlogp({var: loc - step})) / (2 * h)
    eig, V = np.linalg.eigh((H + H.T) / 2)
    eig = np.maximum(eig, 1e-8 * eig.max())
    return loc, V / np.sqrt(eig)


def checked_sample(model, *, var="theta", **kwargs):
    """``pm.sample`` on ``model`` whose draws are checked; returns ``(idata, diagnostics)``.

    Parameters
    ----------
    model : pymc.Model
    var : str
        The variable whose draws are checked and summarised.
    **kwargs
        To ``pm.sample`` (``draws``, ``tune``, ``chains``, ``random_seed``, ``callback``, ...).
        Without ``nuts_sampler`` (or with ``"pymc"``) PyMC's own NUTS runs (this function passes
        ``pm.sample`` a callback, which keeps it from switching to nutpie); ``nuts_sampler=
        "nutpie"`` (or a JAX sampler) runs that sampler, and then a ``callback`` is refused by
        ``pm.sample``.

    Returns
    -------
    idata : DataTree
    diagnostics : dict
        ``"divergences"`` (int), ``"max_r_hat"`` (float, None with one chain), ``"chains"``,
        ``"draws"`` (per chain).

    Raises
    ------
    SamplingInterrupted
        Ctrl-C (or a ``KeyboardInterrupt`` from the callback) during sampling: PyMC stops and
        would return the draws so far, padded or truncated; they are discarded, nothing is
        returned (a ``KeyboardInterrupt``, so an interactive session stops as expected).
    SamplingError
        Fewer draws than requested, or non-finite draws of ``var``.
    """
    import signal
    import threading

    interrupted = []
    user_callback = kwargs.pop("callback", None)

    def callback(trace, draw):
        if user_callback is not None:
            try:
                user_callback(trace=trace, draw=draw)
            except KeyboardInterrupt:
                interrupted.append("callback")
                raise

    previous = None
    if threading.current_thread() is threading.main_thread():
        default = signal.getsignal(signal.SIGINT)

        def on_sigint(signum, frame):
            interrupted.append("SIGINT")
            if callable(default):
                default(signum, frame)
            raise KeyboardInterrupt

        previous = signal.signal(signal.SIGINT, on_sigint)
    if user_callback is None and kwargs.get("nuts_sampler") not in (None, "pymc"):
        callback = None  # nutpie / JAX samplers take no callback (Ctrl-C: the SIGINT handler)
    try:
        with model:
            idata = pm.sample(callback=callback, **kwargs)
    except KeyboardInterrupt:
        interrupted.append("raised")
    except Exception:
        if not interrupted:  # e.g. PyMC's "Not enough samples" after an interrupt in tuning
            raise
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    if interrupted:
        raise SamplingInterrupted(
            "sampling was interrupted (Ctrl-C); the draws so far were discarded and the model "
            "was left as it was before the call"
        )
    return idata, check_draws(idata, var, chains=kwargs.get("chains"),
                              draws=kwargs.get("draws", 1000))


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
