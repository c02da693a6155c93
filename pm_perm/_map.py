"""MAP fits shared by the ranking and matching models (private helpers).

``map_path``: MAP estimates along a grid of prior scales with one compiled log-posterior.
``laplace_whitening``: the Laplace approximation at a MAP, as a whitening for NUTS.

``pm.find_MAP`` compiles the model's log-density and gradient on every call; on the small
ranking models that compilation, not the optimisation, dominates a fit. Here the log-posterior
and its gradient are compiled once as one function and the prior scale (the ``pm.Data``
container ``"prior_sigma"``) is changed between L-BFGS-B runs, each starting from the previous
optimum (the ranking log-posteriors are concave, so the optimum does not depend on the start).
"""

from __future__ import annotations

import numpy as np
import pymc as pm
from scipy.optimize import minimize

__all__ = ["check_lbfgs_memory", "laplace_whitening", "map_path"]


def check_lbfgs_memory(maxcor):
    """Return ``maxcor`` if it is a positive integer (an L-BFGS-B memory), else raise."""
    if isinstance(maxcor, bool) or not isinstance(maxcor, int | np.integer) or maxcor < 1:
        raise ValueError(f"the L-BFGS-B memory (maxcor) must be a positive integer, got {maxcor!r}")
    return int(maxcor)


def map_path(model, sigmas, score=None, *, var="theta", maxiter=50_000, start=None, maxcor=10):
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
    """
    check_lbfgs_memory(maxcor)
    fn = model.compile_fn([model.logp(), model.dlogp()], point_fn=True)
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
