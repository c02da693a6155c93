"""Held-out metrics for the count-prior experiments, in NumPy (no PyTensor graph needed).

Log-likelihoods are in nats per image; the n-choose-k one uses the exact normaliser
:func:`pm_perm.kernels.cardinality.log_esp`.
"""

from __future__ import annotations

import numpy as np
from scipy.special import log_softmax

from pm_perm.kernels.cardinality import log_esp


def _softplus(x):
    return np.logaddexp(0.0, x)


def bernoulli_nll(logits, Y):
    """Per-row negative log-likelihood of independent Bernoulli outputs, shape (n,)."""
    logits, Y = np.asarray(logits, dtype=np.float64), np.asarray(Y)
    return np.sum(_softplus(logits) - Y * logits, axis=-1)


def nchoosek_nll(logits, count_logits, Y):
    """Per-row NLL of ``NChooseK(logits, softmax(count_logits))``, shape (n,).

    ``-log p(y) = -log pi_s + log e_s(exp theta) - theta . y`` with ``s = sum y``.
    """
    logits, Y = np.asarray(logits, dtype=np.float64), np.asarray(Y)
    s = Y.sum(axis=-1).astype(np.int64)
    log_pi = log_softmax(np.asarray(count_logits, dtype=np.float64), axis=-1)
    lp = np.take_along_axis(log_pi, s[:, None], axis=-1)[:, 0]
    return -(lp + np.sum(Y * logits, axis=-1) - log_esp(logits, s))


def poisson_binomial_pmf(p):
    """Count distribution of independent Bernoulli(p_d) outputs, shape (..., D + 1).

    The count distribution implied by logistic regression (paper, Fig. 1); O(D^2) per row.
    """
    p = np.asarray(p, dtype=np.float64)
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
    """
    scores = np.asarray(scores)
    top = np.argsort(-scores, axis=-1, kind="stable")[:, :K]
    return float(np.mean(np.any(top == np.asarray(target)[:, None], axis=-1)))
