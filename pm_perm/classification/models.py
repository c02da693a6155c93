"""Linear multi-label and top-K classifiers as PyMC models, and their MAP fit.

Every model here is a PyMC model whose log posterior is the training objective: Normal(0, sigma)
priors on the weights are the L2 penalty ``lambda * ||W||^2`` with ``lambda = 1 / (2 sigma^2)``
(in units of the summed, not averaged, log-likelihood). ``sigma`` is a ``pm.Data`` container, so
one compiled model serves a whole regularisation path (:func:`classifier_map` warm-starts along
it).

Models (``X`` (n, F) features, ``D`` classes)
    * :func:`multiobject_nchoosek_model`: ``NChooseK`` with logits ``X W + b`` and an
      input-dependent count prior ``p(k | x) = softmax(X V + c)``, k = 0..D (Swersky et al. 2012,
      sec. 5.1).
    * :func:`logistic_model`: independent Bernoulli outputs with logits ``X W + b`` (logistic
      regression; its implied count distribution is Poisson-binomial).
    * :func:`topk_gain_model`: ``sum_i log E[G_K(y, t_i)]``, the log expected top-K gain of the
      single target class ``t_i`` under the conditional Bernoulli with ``K`` items on (eq. 8);
      K = 1 is softmax regression.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from pm_perm.distributions.n_choose_k import NChooseK
from pm_perm.inference import CompiledMAP
from pm_perm.ops.cardinality import log_expected_topk_gain

BIAS_SIGMA = 10.0


def _weights(name, shape, sigma):
    return pm.Normal(name, 0.0, sigma, shape=shape)


def _check_xy(X, Y=None, target=None):
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"X must be a (n, F) feature matrix, got shape {X.shape}")
    if Y is not None:
        Y = np.asarray(Y)
        if Y.shape[0] != X.shape[0] or Y.ndim != 2 or not np.isin(Y, (0, 1)).all():
            raise ValueError("Y must be a binary (n, D) array with one row per row of X")
    if target is not None:
        target = np.asarray(target)
        if target.shape != (X.shape[0],) or target.dtype.kind not in "iu":
            raise ValueError("target must be an integer class index per row of X, shape (n,)")
    return X


def multiobject_nchoosek_model(X, Y, sigma=1.0):
    """Binary n-choose-k model with an input-dependent count prior ``softmax(X V + c)``.

    Parameters
    ----------
    X : array_like of float, shape (n, F)
        Features (no constant column needed: ``b`` and ``c`` are the intercepts).
    Y : array_like of int, shape (n, D)
        Binary labels.
    sigma : float
        Prior standard deviation of ``W`` and ``V`` (the L2 strength); a ``pm.Data`` named
        ``"sigma"`` in the model. Intercepts have prior sd 10.

    Returns
    -------
    pymc.Model
        Free variables ``W`` (F, D), ``b`` (D,), ``V`` (F, D + 1), ``c`` (D + 1,).

    Notes
    -----
    Cost per log-posterior + gradient: O(n F D) for the products, O(n D^2) for the normalisers.
    """
    X = _check_xy(X, Y=Y)
    n, F = X.shape
    D = np.asarray(Y).shape[1]
    with pm.Model() as model:
        s = pm.Data("sigma", float(sigma))
        W = _weights("W", (F, D), s)
        b = _weights("b", (D,), BIAS_SIGMA)
        V = _weights("V", (F, D + 1), s)
        c = _weights("c", (D + 1,), BIAS_SIGMA)
        count_probs = pm.math.softmax(pt.dot(X, V) + c, axis=-1)
        NChooseK("y", logits=pt.dot(X, W) + b, count_probs=count_probs, observed=Y)
    return model


def logistic_model(X, Y, sigma=1.0):
    """Logistic regression (independent Bernoulli outputs) with logits ``X W + b``.

    Parameters and cost as :func:`multiobject_nchoosek_model`; free variables ``W``, ``b``.
    """
    X = _check_xy(X, Y=Y)
    D = np.asarray(Y).shape[1]
    with pm.Model() as model:
        s = pm.Data("sigma", float(sigma))
        W = _weights("W", (X.shape[1], D), s)
        b = _weights("b", (D,), BIAS_SIGMA)
        pm.Bernoulli("y", logit_p=pt.dot(X, W) + b, observed=Y)
    return model


def topk_gain_model(X, target, n_classes, K, sigma=1.0):
    """Linear classifier trained on the log expected top-K gain of the target class.

    Parameters
    ----------
    X : array_like of float, shape (n, F)
    target : array_like of int, shape (n,)
        Target class per row, in 0..n_classes-1.
    n_classes : int
        Number of classes D.
    K : int
        Number of predictions allowed, 1 <= K <= D (K = 1: softmax regression).
    sigma : float
        Prior sd of ``W`` (``pm.Data`` ``"sigma"``); the bias has prior sd 10.

    Returns
    -------
    pymc.Model
        A ``pm.Potential`` ``"gain"`` = ``sum_i log p(y_{t_i} = 1 | sum y = K)``.

    Raises
    ------
    ValueError
        For ``X`` not of shape (n, F), ``target`` not integers of shape (n,) in
        0..n_classes-1, or ``K`` outside 1..n_classes.

    Notes
    -----
    Cost per log-posterior + gradient: O(n F D + n D K) (two ``log_esp`` calls per row).
    """
    X = _check_xy(X, target=target)
    target = np.asarray(target)
    bad = (target < 0) | (target >= n_classes)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"target must hold class indices in 0..n_classes-1 = 0..{n_classes - 1}; "
                         f"row {i} has {target[i]} (number the classes 0..{n_classes - 1})")
    if not 1 <= K <= n_classes:
        raise ValueError(f"K must be in 1..n_classes={n_classes}, got {K}")
    with pm.Model() as model:
        s = pm.Data("sigma", float(sigma))
        W = _weights("W", (X.shape[1], n_classes), s)
        b = _weights("b", (n_classes,), BIAS_SIGMA)
        gain = log_expected_topk_gain(pt.dot(X, W) + b, target, K)
        pm.Potential("gain", gain.sum())
    return model


def classifier_map(model, *, mode=None, maxiter=500, lbfgs_memory=20, ftol=1e-7, gtol=1e-5):
    """The MAP engine (:class:`pm_perm.inference.CompiledMAP`) with this module's options.

    The objective is ``-model.logp()`` (the models here have no transformed variables), its
    gradient over the value variables raveled into one vector, compiled once: refit it along a
    path of prior scales with ``engine.fit(maxiter=..., sigma=s)``, each fit warm-started at the
    previous optimum. A fit that stops early (e.g. at ``maxiter``) issues a ``RuntimeWarning``
    and returns its point with ``_info["converged"]`` False (``on_failure="warn"``): a short
    path of quick fits is a deliberate choice here.

    Parameters
    ----------
    model : pymc.Model
        One of this module's models.
    mode : str or pytensor Mode, optional
        Compilation mode (default: PyTensor's, the numba backend: these graphs are dense
        products over many rows, whose Python overhead per evaluation would be large).
    maxiter, lbfgs_memory, ftol, gtol
        L-BFGS-B's iteration limit per fit, memory (``maxcor``) and tolerances.

    Returns
    -------
    CompiledMAP
        ``fit(...)`` returns ``{name: array}`` at the optimum plus ``"_info"`` (iterations,
        seconds, log posterior, ``converged``, scipy's message).
    """
    return CompiledMAP(model, mode=mode, maxiter=maxiter, maxcor=lbfgs_memory, ftol=ftol,
                       gtol=gtol, on_failure="warn")
