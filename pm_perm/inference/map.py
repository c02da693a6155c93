"""MAP estimates by L-BFGS-B with the log posterior and its gradient compiled once per model.

``pm.find_MAP`` compiles the model's log-density and gradient on every call; for models refitted
on new data (cross-validation folds, a path over prior scales, restarts) that compilation, not
the optimisation, dominates. :class:`CompiledMAP` is the one MAP engine of the library: one
compiled value-and-gradient of ``-log p`` over the model's value variables raveled into one
vector, fits from a jittered start (``pm.find_MAP``'s), a given start or the previous optimum
(warm start), ``pm.Data`` updates between fits, and one convergence rule
(:func:`~pm_perm.inference.checks.check_optimum`). :func:`map_path` fits along a grid of prior
scales with it.

The engine compiles on PyTensor's Python linker by default (:mod:`pm_perm._modes`): a MAP fit
evaluates its graph a few hundred times, each Op's ``perform`` calls the same compiled,
disk-cached kernels as the numba backend, and so a first fit does not wait for numba to compile
the model's graph. ``mode=None`` compiles with numba instead, for a graph whose Python overhead
per evaluation is large (a ``Blockwise`` over thousands of small inputs of an Op without a
batched ``perform``, or dense products over many rows).
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import pymc as pm
from scipy.optimize import minimize

from pm_perm._modes import PYTHON_MODE
from pm_perm._progress import Progress
from pm_perm.inference.checks import MapFitError, check_lbfgs_memory, check_optimum
from pm_perm.ops.latent import MAP_MESSAGE, LatentPermutationError

__all__ = ["CompiledMAP", "map_path"]

_ON_FAILURE = ("raise", "warn")


class CompiledMAP:
    """MAP estimates of a PyMC model by L-BFGS-B, the objective compiled once.

    What is optimised is what ``pm.find_MAP`` optimises: the model's log-density without the
    transforms' Jacobian terms, over every continuous value variable (in the transformed
    space), raveled into one vector in the order of ``model.value_vars``. Each :meth:`fit`
    starts from

    * a jittered start (``seed`` given): the initial point jittered by U(-1, 1), with
      ``numpy.random.default_rng(seed)`` drawing the jitter's seed as ``find_MAP`` does, so the
      start is ``find_MAP(jitter=True, random_seed=seed)``'s;
    * ``start`` (given), a raveled vector;
    * otherwise the current point :attr:`x`: the model's initial point before the first fit,
      then the previous fit's optimum (a warm start, e.g. along a path of prior scales).

    Parameters
    ----------
    model : pymc.Model
        With continuous free variables only: a latent discrete variable (e.g. a permutation)
        raises :class:`~pm_perm.ops.latent.LatentPermutationError` (a ``ValueError``) naming
        the supported route, ``pm.sample`` with pm_perm's swap step.
    mode : pytensor Mode or str, optional
        How the value-and-gradient function is compiled: PyTensor's Python linker by default;
        ``None`` for PyTensor's default backend (numba).
    maxiter : int
        L-BFGS-B iteration limit of a fit (a fit may override it).
    maxcor : int
        L-BFGS-B memory (number of stored corrections; scipy's default 10). Ill-conditioned
        posteriors (strongly correlated features) converge in far fewer iterations with more,
        at O(maxcor n) extra work per iteration.
    ftol, gtol : float, optional
        L-BFGS-B's stopping tolerances (scipy's defaults when None).
    on_failure : {"raise", "warn"}
        A fit that does not pass :func:`~pm_perm.inference.checks.check_optimum` raises
        :class:`~pm_perm.inference.checks.MapFitError` (``"raise"``, the default: no failed
        fit is reported as a result), or, by explicit opt-in (``"warn"``), issues that error's
        text as a ``RuntimeWarning`` and returns the point with ``_info["converged"]`` False
        (for a caller that chose a small ``maxiter`` on purpose, e.g. a quick path).
    scale : float or scalar TensorVariable, optional
        The optimiser minimises ``-log p / scale``: e.g. the number of ballots (a ``pm.Data``
        expression of the model, read at each fit), so that the objective and its gradient are
        per observation and L-BFGS-B's tolerances and line search work whatever the counts
        (a multiplicity of 10^18 makes the unscaled gradient overflow the kernels' weights).
        The optimum is the same; ``log_posterior`` in ``_info`` is unscaled. Must be positive
        and finite.
    givens : dict, optional
        Replacements in the compiled objective (``pytensor.function``'s ``givens``), e.g. a
        ``pm.Data`` container that no fit changes by a constant of its value: the work that
        depends on it alone is then done once, when the objective is compiled.

    Attributes
    ----------
    x : ndarray, shape (n,)
        The current point (raveled): the start of the next fit without ``seed`` or ``start``.
    result : scipy.optimize.OptimizeResult or None
        The last fit's optimiser result.
    options : dict
        L-BFGS-B options of every fit (``maxcor``, and ``ftol``, ``gtol`` when given); they may
        be changed between fits.

    Notes
    -----
    Cost: building the functions on construction (on the Python linker, their graph rewrites
    only: well under a second), then one value-and-gradient evaluation per L-BFGS-B iteration.
    The functions read the model's ``pm.Data`` containers when called, so ``pm.set_data``
    between fits (or :meth:`set_data`) is seen.
    """

    def __init__(self, model, *, mode=PYTHON_MODE, maxiter=20_000, maxcor=10, ftol=None,
                 gtol=None, on_failure="raise", scale=None, givens=None):
        vars_ = list(model.value_vars)
        discrete = [v.name for v in vars_ if v.dtype.startswith(("int", "uint"))]
        if discrete:
            raise LatentPermutationError(MAP_MESSAGE.format(names=", ".join(map(repr, discrete))))
        if on_failure not in _ON_FAILURE:
            raise ValueError(f"on_failure must be one of {_ON_FAILURE}; got {on_failure!r}")
        self.model, self.vars = model, vars_
        self.maxiter, self.on_failure = int(maxiter), on_failure
        self.options = {"maxcor": check_lbfgs_memory(maxcor)}
        self.options.update({k: v for k, v in (("ftol", ftol), ("gtol", gtol)) if v is not None})
        import pytensor.tensor as pt

        scale = pt.as_tensor_variable(1.0 if scale is None else scale, dtype="float64")
        loss = -model.logp(jacobian=False) / scale
        self._f = model.compile_fn([loss, _grad_raveled(loss, vars_), scale], inputs=vars_,
                                   point_fn=False, on_unused_input="ignore", mode=mode,
                                   givens=givens)
        self._scale = 1.0
        self._names = [v.name for v in vars_]
        self._x = self._layout = self._ipfn = None  # the initial point: built when first needed
        unobserved = model.unobserved_value_vars
        self._out_names = [v.name for v in unobserved]
        # evaluated once per fit: the Python linker whatever ``mode`` is (FAST_COMPILE's linker
        # would compile C code for a simplex transform's softmax; pm_perm._modes)
        self._values = model.compile_fn(unobserved, inputs=vars_, point_fn=False,
                                        on_unused_input="ignore", mode=PYTHON_MODE)
        self.result = None

    @property
    def x(self):
        """The current point, raveled (see the class docstring)."""
        if self._x is None:
            self._x = self._ravel(self.model.initial_point())
        return self._x

    @x.setter
    def x(self, value):
        self._x = np.asarray(value, dtype=np.float64).reshape(self.x.shape).copy()

    def _ravel(self, point):
        from pymc.blocking import DictToArrayBijection

        raveled = DictToArrayBijection.map({n: point[n] for n in self._names})
        self._layout = raveled.point_map_info
        return np.asarray(raveled.data, dtype=np.float64).copy()

    def unravel(self, x=None):
        """Dict ``{name: array}`` of the value variables at ``x`` (default :attr:`x`)."""
        from pymc.blocking import DictToArrayBijection, RaveledVars

        x = self.x if x is None else np.asarray(x, dtype=np.float64)
        return DictToArrayBijection.rmap(RaveledVars(x, self._layout))

    def set_data(self, **data):
        """``pm.set_data(data)`` on the model (seen by the next fit)."""
        if data:
            pm.set_data(data, model=self.model)

    def jittered_start(self, seed):
        """``pm.find_MAP(jitter=True, random_seed=seed)``'s start, raveled."""
        from pymc.initial_point import make_initial_point_fns_per_chain

        if self._ipfn is None:
            [self._ipfn] = make_initial_point_fns_per_chain(
                model=self.model, overrides=None, jitter_rvs=set(self.model.free_RVs), chains=1)
        return self._ravel(self._ipfn(int(np.random.default_rng(seed).integers(2**30))))

    @property
    def scale(self):
        """The objective's ``scale`` at the last evaluation (1.0 before any): ``-log p`` and its
        gradient are :meth:`value_and_grad`'s times this."""
        return self._scale

    def value_and_grad(self, x):
        """``(-log p, -grad log p)`` at the raveled point ``x`` (no Jacobian terms), divided by
        the engine's ``scale``."""
        point = self.unravel(x)
        value, grad, scale = self._f(*(point[n] for n in self._names))
        if not (np.isfinite(scale) and scale > 0):
            raise ValueError(f"CompiledMAP: the objective's scale must be positive and finite; "
                             f"got {float(scale)}")
        self._scale = float(scale)
        return float(value), np.asarray(grad, dtype=np.float64)

    def fit(self, start=None, *, seed=None, maxiter=None, what="the L-BFGS-B MAP fit", **data):
        """One L-BFGS-B fit; keyword arguments other than these are ``pm.Data`` values set
        first (:meth:`set_data`).

        Parameters
        ----------
        start : array_like of float, shape (n,), optional
            Raveled start (see the class docstring for the default).
        seed : int, optional
            Start from ``find_MAP``'s jittered start for this seed instead.
        maxiter : int, optional
            Iteration limit of this fit (default: the engine's).
        what : str
            The fit's name in the error or warning.

        Returns
        -------
        dict
            Name -> value of every unobserved variable at the optimum (transformed ones and
            deterministics included, as ``find_MAP``'s point), plus ``"_info"``:
            ``iterations``, ``seconds``, ``log_posterior`` (without Jacobian terms),
            ``converged`` and scipy's ``message``.

        Raises
        ------
        MapFitError
            The fit did not converge (``on_failure="raise"``), e.g. an iteration limit, or a
            log-density or point that is not finite: a log-density of ``-inf`` everywhere (a
            negative prior scale) lets L-BFGS-B "converge" at once on a zero gradient, and such
            a point is no estimate.
        """
        self.set_data(**data)
        if seed is not None:
            x0 = self.jittered_start(seed)
        elif start is not None:
            x0 = np.asarray(start, dtype=np.float64).reshape(self.x.shape)
        else:
            x0 = self.x
        t0 = time.perf_counter()
        with Progress("MAP (L-BFGS-B)") as progress:
            res = minimize(self.value_and_grad, x0.copy(), jac=True, method="L-BFGS-B",
                           options={"maxiter": self.maxiter if maxiter is None else int(maxiter),
                                    **self.options},
                           callback=_progress_callback(progress, self) if progress.active
                           else None)
        if not (np.isfinite(res.fun) and np.all(np.isfinite(res.x))):
            res.success = False
            res.message = (f"the log posterior at the optimum is {-float(res.fun) * self._scale} "
                           "(not finite): "
                           "check the model's parameters (e.g. prior scales must be positive "
                           f"and finite); optimiser message: {res.message}")
        self.result = res
        converged = True
        try:
            check_optimum(res, what)
        except MapFitError as err:
            if self.on_failure == "raise":
                raise
            converged = False
            warnings.warn(str(err), RuntimeWarning, stacklevel=2)
        self._x = np.asarray(res.x, dtype=np.float64)
        point = self.unravel()
        out = dict(zip(self._out_names, self._values(*(point[n] for n in self._names)),
                       strict=True))
        out["_info"] = {"iterations": int(res.nit), "seconds": time.perf_counter() - t0,
                        "log_posterior": -float(res.fun) * self._scale, "converged": converged,
                        "message": str(res.message)}
        return out


def map_path(model, sigmas, score=None, *, var="theta", maxiter=50_000, start=None, maxcor=10,
             mode=PYTHON_MODE):
    """MAP of ``var`` for each prior scale in ``sigmas``; the best by ``score`` (or the first).

    One :class:`CompiledMAP` fits every scale, each from the previous optimum.

    Parameters
    ----------
    model : pymc.Model
        With a free, untransformed variable ``var`` (the only free variable) and a ``pm.Data``
        container ``"prior_sigma"``.
    sigmas : sequence of float
    score : callable, optional
        ``score(sigma, theta) -> float``, higher is better (e.g. validation NDCG@5), or a tuple
        of floats compared lexicographically (a criterion, then tie-breakers). Ties left after
        that go to the earliest scale. Without it only the first scale is fitted.
    maxiter : int
        L-BFGS-B iteration limit (scipy defaults otherwise, as ``pm.find_MAP``).
    start : array_like, optional
        Starting point of the first fit (default: the model's initial point, zeros for a
        zero-mean prior), e.g. the prior mean.
    maxcor : int
        L-BFGS-B memory (:class:`CompiledMAP`).
    mode : pytensor Mode or str, optional
        As :class:`CompiledMAP`.

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
    engine = CompiledMAP(model, mode=mode, maxiter=maxiter, maxcor=maxcor)
    if start is not None:
        engine.x = start
    sigmas = tuple(sigmas) if score is not None else tuple(sigmas)[:1]
    best, scores, results = None, {}, {}
    for sigma in sigmas:
        theta = engine.fit(prior_sigma=sigma,
                           what=f"the L-BFGS-B MAP fit at prior scale {sigma:g}")[var]
        results[sigma] = engine.result
        value = None
        if score is not None:
            value = score(sigma, theta)
            value = tuple(map(float, value)) if isinstance(value, tuple) else float(value)
            scores[sigma] = value
        if best is None or value > best[0]:
            best = (value, sigma, np.array(theta, dtype=np.float64))
    engine.set_data(prior_sigma=best[1])
    return best[1], best[2], scores, results


#: scipy's default relative-reduction tolerance of L-BFGS-B (factr 1e7 times the machine epsilon)
_LBFGSB_FTOL = 1e7 * np.finfo(float).eps


def _progress_callback(progress, engine):
    """L-BFGS-B's per-iteration callback: the iteration, ``-log p`` and its last relative
    reduction next to the tolerance that stops the fit (``ftol``), on the progress line. The
    number of iterations left is not known in advance, so no time left is estimated."""
    state = {"nit": 0, "prev": None}
    ftol = engine.options.get("ftol", _LBFGSB_FTOL)

    def callback(intermediate_result):
        f = float(intermediate_result.fun)
        state["nit"] += 1
        change = ""
        if state["prev"] is not None:
            rel = (state["prev"] - f) / max(abs(state["prev"]), abs(f), 1.0)
            change = f", reduction {rel:.1e} (stops below {ftol:.1e})"
        state["prev"] = f
        progress.update(f"iteration {state['nit']}",
                        f"-log p {f * engine._scale:.8g}{change}")

    return callback


def _grad_raveled(cost, wrt):
    """Gradient of the scalar ``cost`` with respect to each of ``wrt``, raveled and
    concatenated in that order (the layout of ``DictToArrayBijection.map``)."""
    import pytensor.tensor as pt
    from pytensor.gradient import grad

    return pt.concatenate([g.ravel() for g in grad(cost, wrt)])
