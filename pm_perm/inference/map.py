"""MAP estimates with the log posterior and its gradient compiled once per model.

``pm.find_MAP`` compiles the model's log-density and gradient on every call; for models refitted
on new data (cross-validation folds, a path over prior scales) that compilation, not the
optimisation, dominates. :func:`map_path` fits along a grid of prior scales (the ``pm.Data``
container ``"prior_sigma"``), each fit starting from the previous optimum; :class:`CompiledMAP`
is ``pm.find_MAP``'s estimate (jittered start, L-BFGS-B on the log-density without Jacobian
terms) from functions compiled once.

Both compile on PyTensor's Python linker by default (:mod:`pm_perm._modes`): a MAP fit evaluates
its graph a few hundred times, each Op's ``perform`` calls the same compiled, disk-cached kernels
as the numba backend, and so a first fit does not wait for numba to compile the model's graph.
``mode=None`` compiles with numba instead, for a graph whose Python overhead per evaluation is
large (a ``Blockwise`` over thousands of small inputs of an Op without a batched ``perform``).
"""

from __future__ import annotations

import numpy as np
import pymc as pm
from scipy.optimize import minimize

from pm_perm._modes import PYTHON_MODE
from pm_perm.inference.checks import check_lbfgs_memory, check_optimum

__all__ = ["CompiledMAP", "map_path"]


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
