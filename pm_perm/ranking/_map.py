"""MAP estimates along a grid of prior scales with one compiled log-posterior (private helper).

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

__all__ = ["map_path"]


def map_path(model, sigmas, score=None, *, var="theta", maxiter=50_000):
    """MAP of ``var`` for each prior scale in ``sigmas``; the best by ``score`` (or the first).

    Parameters
    ----------
    model : pymc.Model
        With a free, untransformed vector variable ``var`` (the only free variable) and a
        ``pm.Data`` container ``"prior_sigma"``.
    sigmas : sequence of float
    score : callable, optional
        ``score(sigma, theta) -> float``, higher is better (e.g. validation NDCG@5). Without it
        only the first scale is fitted.
    maxiter : int
        L-BFGS-B iteration limit (scipy defaults otherwise, as ``pm.find_MAP``).

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
    fn = model.compile_fn([model.logp(), model.dlogp()], point_fn=True)
    x = np.zeros(int(np.prod(model.initial_point()[var].shape)))

    def negative(theta):
        lp, grad = fn({var: theta})
        return -float(lp), -np.asarray(grad, dtype=np.float64)

    sigmas = tuple(sigmas) if score is not None else tuple(sigmas)[:1]
    best, scores, results = None, {}, {}
    for sigma in sigmas:
        with model:
            pm.set_data({"prior_sigma": sigma})
        res = minimize(negative, x, jac=True, method="L-BFGS-B", options={"maxiter": maxiter})
        x = res.x
        results[sigma] = res
        value = -np.inf
        if score is not None:
            value = scores[sigma] = float(score(sigma, res.x))
        if best is None or value > best[0]:
            best = (value, sigma, res.x.copy())
    with model:
        pm.set_data({"prior_sigma": best[1]})
    return best[1], best[2], scores, results
