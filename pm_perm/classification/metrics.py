"""Held-out metrics for the count-prior experiments, in NumPy (no PyTensor graph needed).

Log-likelihoods are in nats per image; the n-choose-k one uses the exact normaliser
:func:`pm_perm.kernels.esp.log_esp`.
"""

from __future__ import annotations

import numpy as np
from scipy.special import log_softmax

from pm_perm.kernels.esp import log_esp


def _softplus(x):
    return np.logaddexp(0.0, x)


def _check_logits_y(logits, Y):
    logits, Y = np.asarray(logits, dtype=np.float64), np.asarray(Y)
    if logits.ndim != 2:
        raise ValueError(f"logits must be a (n, D) array, one row per example; got shape "
                         f"{logits.shape}")
    if Y.shape != logits.shape:
        raise ValueError(f"Y must have the shape of logits {logits.shape}; got {Y.shape}")
    if not np.isin(Y, (0, 1)).all():
        raise ValueError("Y must be binary (0/1 labels); got other values")
    if not np.all(np.isfinite(logits)):
        raise ValueError("logits contain NaN or inf; check the model's parameters and inputs")
    return logits, Y


def bernoulli_nll(logits, Y):
    """Per-row negative log-likelihood of independent Bernoulli outputs, shape (n,).

    Parameters
    ----------
    logits : array_like of float, shape (n, D)
        Finite logits of the D outputs.
    Y : array_like of {0, 1}, shape (n, D)
        Binary labels.

    Raises
    ------
    ValueError
        For shapes other than these, labels other than 0/1, or non-finite logits.
    """
    logits, Y = _check_logits_y(logits, Y)
    return np.sum(_softplus(logits) - Y * logits, axis=-1)


def nchoosek_nll(logits, count_logits, Y):
    """Per-row NLL of ``NChooseK(logits, softmax(count_logits))``, shape (n,).

    ``-log p(y) = -log pi_s + log e_s(exp theta) - theta . y`` with ``s = sum y``.

    Parameters
    ----------
    logits : array_like of float, shape (n, D)
        Finite logits ``theta`` of the D outputs.
    count_logits : array_like of float, shape (n, D + 1)
        Logits of the count prior over ``s = 0..D``; ``-inf`` gives a count probability 0.
    Y : array_like of {0, 1}, shape (n, D)
        Binary labels.

    Raises
    ------
    ValueError
        For shapes other than these, labels other than 0/1, non-finite ``logits``, or
        ``count_logits`` with NaN or ``+inf``.
    """
    logits, Y = _check_logits_y(logits, Y)
    count_logits = np.asarray(count_logits, dtype=np.float64)
    n, D = logits.shape
    if count_logits.shape != (n, D + 1):
        raise ValueError(f"count_logits must have shape (n, D + 1) = {(n, D + 1)}, one logit per "
                         f"count 0..D; got {count_logits.shape}")
    if np.isnan(count_logits).any() or np.isposinf(count_logits).any():
        raise ValueError("count_logits contain NaN or +inf; check the count prior's parameters")
    s = Y.sum(axis=-1).astype(np.int64)
    log_pi = log_softmax(count_logits, axis=-1)
    lp = np.take_along_axis(log_pi, s[:, None], axis=-1)[:, 0]
    return -(lp + np.sum(Y * logits, axis=-1) - log_esp(logits, s))


def poisson_binomial_pmf(p):
    """Count distribution of independent Bernoulli(p_d) outputs, shape (..., D + 1).

    The count distribution implied by logistic regression (paper, Fig. 1); O(D^2) per row.

    Raises
    ------
    ValueError
        If ``p`` is a scalar or holds values outside [0, 1] (or NaN).
    """
    p = np.asarray(p, dtype=np.float64)
    if p.ndim < 1:
        raise ValueError("p must have shape (..., D), one probability per output; got a scalar")
    if not np.all((p >= 0) & (p <= 1)):
        raise ValueError("p must hold probabilities in [0, 1]; got values outside it or NaN "
                         "(pass expit(logits) for logits)")
    q = np.zeros(p.shape[:-1] + (p.shape[-1] + 1,))
    q[..., 0] = 1.0
    for d in range(p.shape[-1]):
        pd = p[..., d : d + 1]
        q[..., 1:] = q[..., 1:] * (1 - pd) + q[..., :-1] * pd
        q[..., 0] *= 1 - pd[..., 0]
    return q


def topk_accuracy(scores, target, K):
    """Fraction of rows whose target is among the K largest scores (ties broken by index).

    Sorting the logits is the optimal top-K prediction of every model here (the mode of the
    conditional Bernoulli with K items on; Swersky et al. 2012, Theorem 1).

    Parameters
    ----------
    scores : array_like of float, shape (n, C)
        Class scores, no NaN (``-inf`` / ``+inf`` rank last / first).
    target : array_like of int, shape (n,)
        True class of each row, in 0..C-1.
    K : int
        Number of top classes counted, 1 <= K <= C.

    Raises
    ------
    ValueError
        For shapes other than these, NaN scores, non-integer or out-of-range targets, or K
        outside 1..C.
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 2:
        raise ValueError(f"scores must be a (n, C) array, one row per example; got shape "
                         f"{scores.shape}")
    n, C = scores.shape
    target = np.asarray(target)
    if target.shape != (n,) or target.dtype.kind not in "iu":
        raise ValueError(f"target must be an integer class index per row of scores, shape "
                         f"({n},); got {target.dtype} of shape {target.shape}")
    bad = (target < 0) | (target >= C)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"target must hold class indices in 0..C-1 = 0..{C - 1}; row {i} has "
                         f"{target[i]} (number the classes 0..{C - 1})")
    if isinstance(K, bool) or not isinstance(K, (int, np.integer)) or not 1 <= K <= C:
        raise ValueError(f"K must be an integer in 1..C = 1..{C} (C = number of classes); "
                         f"got {K!r}")
    if np.isnan(scores).any():
        raise ValueError("scores contain NaN; check the model's parameters and features")
    top = np.argsort(-scores, axis=-1, kind="stable")[:, :K]
    return float(np.mean(np.any(top == target[:, None], axis=-1)))
