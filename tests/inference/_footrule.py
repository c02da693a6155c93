"""A footrule Mallows model with a latent consensus written by hand (tests of the latent-rho
step methods; pm_perm's own ``Mallows`` distribution is tested elsewhere).

``p(R[j] | rho, alpha) = exp(-(alpha / n) sum_i |R[j, i] - rho[i]|) / Z_n(alpha)``, rho uniform
(a ``PermutationExpFamily`` with zero logits, whose constant normaliser PyTensor folds), and
``log Z_n(alpha) = logsumexp_d(log c_d - alpha d / n)`` from the exact counts ``c_d`` of the
permutations at footrule distance ``d`` from the identity: it depends on alpha only, so a rho
proposal costs the distance sum and not a normaliser.
"""

import math

import numpy as np
import pymc as pm
import pytensor.tensor as pt

import pm_perm


def footrule_counts(n):
    """``{d: c_d}``: the number of permutations of ``n`` items at footrule distance ``d`` from
    the identity, exact (Python integers), by a dynamic program over the cuts between positions
    ``k`` and ``k + 1``: ``sum_i |s[i] - i| = 2 sum_k h_k`` with ``h_k`` the number of rows
    ``<= k`` matched to columns ``> k`` (equally, of columns ``<= k`` matched below)."""
    table = {(0, 0): 1}  # (open pairs h, distance so far) -> count
    for _k in range(n):
        nxt = {}
        for (h, d), c in table.items():
            # row k and column k: matched together, both to open ones, one of them, or neither
            for h2, ways in ((h, 1 + 2 * h), (h - 1, h * h), (h + 1, 1)):
                if h2 >= 0 and ways:
                    key = (h2, d + 2 * h2)
                    nxt[key] = nxt.get(key, 0) + c * ways
        table = nxt
    return {d: c for (h, d), c in table.items() if h == 0}


def footrule_log_normaliser(alpha, n):
    """``log Z_n(alpha)`` as a PyTensor expression of ``alpha`` (exact)."""
    counts = footrule_counts(n)
    d = np.array(sorted(counts), dtype=np.float64)
    log_c = np.array([math.log(counts[k]) for k in sorted(counts)])
    return pt.logsumexp(log_c - alpha * d / n)


def footrule_mallows_model(R, rate=0.1):
    """The model for complete rankings ``R`` (N, n) in rank form: ``rho`` uniform, ``alpha ~
    Exponential(rate)``."""
    R = np.asarray(R)
    N, n = R.shape
    with pm.Model() as model:
        rho = pm_perm.PermutationExpFamily("rho", logits=np.zeros((n, n)))
        alpha = pm.Exponential("alpha", rate)
        dist = pt.abs(pt.as_tensor_variable(R) - rho[None, :]).sum()
        pm.Potential("lik", -(alpha / n) * dist - N * footrule_log_normaliser(alpha, n))
    return model


def footrule_mallows_draws(rho, alpha, size, seed):
    """Exact draws from the footrule Mallows model: a PermutationExpFamily with logits
    ``W[i, j] = -(alpha / n) |j - rho[i]|``."""
    n = len(rho)
    W = -(alpha / n) * np.abs(np.arange(n)[None, :] - np.asarray(rho)[:, None])
    return pm.draw(pm_perm.PermutationExpFamily.dist(logits=W), draws=size, random_seed=seed)
