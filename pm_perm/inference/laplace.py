"""The Laplace approximation at a MAP estimate: the curvature of ``-log p`` there, a whitening
for NUTS (and the whitened parametrisation of a normal prior that uses it), and the Laplace
estimate of the log evidence."""

from __future__ import annotations

import numpy as np

__all__ = ["laplace_log_evidence", "laplace_whitening", "negative_hessian", "whitened_normal"]


def negative_hessian(grad, x, *, rel_step=None, scheme="central", grad_at_x=None):
    """Hessian of ``-log p`` at ``x`` by finite differences of ``grad`` (the gradient of
    ``log p``), symmetrised.

    Parameters
    ----------
    grad : callable
        ``grad(x) -> ndarray (n,)``, the exact gradient of ``log p``.
    x : array_like of float, shape (n,)
    rel_step : float, optional
        Step ``rel_step * max(1, |x_k|)`` along coordinate ``k``; default ``1e-4`` (central) or
        ``1e-6`` (forward).
    scheme : {"central", "forward"}
        ``"central"``: ``(grad(x + h e_k) - grad(x - h e_k)) / 2h``, ``2 n`` gradient
        evaluations, error O(h^2). ``"forward"``: ``(grad(x + h e_k) - grad(x)) / h``, ``n + 1``
        evaluations (``n`` with ``grad_at_x``), error O(h) plus rounding O(eps / h): at the
        default step about 1e-6 relative per entry for the models of this library, where the
        gradient is exact to rounding.
    grad_at_x : array_like of float, shape (n,), optional
        ``grad(x)`` when already known (forward scheme only).

    Returns
    -------
    ndarray, shape (n, n)

    Raises
    ------
    ValueError
        ``scheme`` is neither ``"central"`` nor ``"forward"``.
    """
    from pm_perm._progress import Progress

    if scheme not in ("central", "forward"):
        raise ValueError(f"scheme must be 'central' or 'forward'; got {scheme!r}")
    central = scheme == "central"
    if rel_step is None:
        rel_step = 1e-4 if central else 1e-6
    x = np.asarray(x, dtype=np.float64)
    n = x.size
    H = np.empty((n, n))
    if not central:
        g0 = np.asarray(grad(x) if grad_at_x is None else grad_at_x, dtype=np.float64)
    with Progress("Laplace Hessian (coordinates)", total=n) as progress:
        for k in range(n):
            h = rel_step * max(1.0, abs(x[k]))
            step = np.zeros(n)
            step[k] = h
            if not central:
                step[k] = h = (x[k] + h) - x[k]  # the step as represented (exact difference)
            if central:
                H[k] = -(np.asarray(grad(x + step)) - np.asarray(grad(x - step))) / (2 * h)
            else:
                H[k] = -(np.asarray(grad(x + step)) - g0) / h
            progress.update(k + 1)
    return (H + H.T) / 2


def laplace_whitening(model, loc, *, var="theta"):
    """``(loc, L)`` with ``L L^T`` the inverse Hessian of ``-log p`` at ``loc`` (free ``var``).

    The Hessian is :func:`negative_hessian` of the model's exact gradient; its eigenvalues are
    floored at ``1e-8`` of the largest. Sampling ``z`` with ``var = loc + L z`` then has about
    unit posterior scale.
    """
    dlogp = model.compile_dlogp()
    loc = np.asarray(loc, dtype=np.float64)
    H = negative_hessian(lambda x: dlogp({var: x}), loc)
    eig, V = np.linalg.eigh(H)
    eig = np.maximum(eig, 1e-8 * eig.max())
    return loc, V / np.sqrt(eig)


def whitened_normal(name, mu, sigma, *, dims=None, whitening=None):
    """``name ~ N(mu, sigma^2)`` in the current model, free or through a whitening.

    Parameters
    ----------
    name : str
    mu, sigma : float, array_like or tensor
        Prior mean and scale.
    dims : str or tuple of str, optional
    whitening : tuple (loc, L), optional
        E.g. :func:`laplace_whitening` at the MAP. Then ``name = loc + L z`` is a
        ``pm.Deterministic`` of a free ``z`` (flat prior, same ``dims``) and the normal prior on
        ``name`` is the ``pm.Potential`` ``name + "_prior"``: the same posterior of ``name`` (a
        linear map has a constant Jacobian), whose ``z`` is close to standard normal, which
        NUTS explores with short trajectories however correlated the coordinates are.

    Returns
    -------
    TensorVariable
        The variable ``name``.
    """
    import pymc as pm
    import pytensor.tensor as pt

    if whitening is None:
        return pm.Normal(name, mu, sigma=sigma, dims=dims)
    loc, L = (np.asarray(a, dtype=np.float64) for a in whitening)
    z = pm.Flat("z", dims=dims)
    theta = pm.Deterministic(name, loc + pt.dot(L, z), dims=dims)
    pm.Potential(f"{name}_prior", pm.logp(pm.Normal.dist(mu, sigma), theta).sum())
    return theta


def laplace_log_evidence(logp, H):
    """Laplace estimate of the log evidence,
    ``log p(y) ~ log p(y, theta*) + n/2 log(2 pi) - 1/2 log det H``.

    Parameters
    ----------
    logp : float
        ``log p(y, theta*)`` at the mode ``theta*`` (prior included).
    H : ndarray, shape (n, n)
        The Hessian of ``-log p(y, theta)`` there (:func:`negative_hessian`), positive definite.
    """
    return float(logp) + H.shape[0] / 2 * np.log(2 * np.pi) - 0.5 * np.linalg.slogdet(H)[1]
