"""The exact posterior of the footrule Mallows model with a latent consensus (slow, definitional).

Model (the scaling of BayesMallows, Vitelli et al. 2018): complete rankings ``R[j]`` (rank form,
``R[j, i]`` = rank of item ``i``, 0-based) of ``n`` items are independent given the consensus
``rho`` and the scale ``alpha``, ``p(R[j] | rho, alpha) = exp(-(alpha / n) d(R[j], rho)) /
Z_n(alpha)`` with the footrule distance ``d(r, s) = sum_i |r[i] - s[i]|``; ``rho`` is uniform
over the ``n!`` permutations and ``alpha`` has a prior given by its log-density on a grid.

:func:`footrule_mallows_posterior` enumerates all ``n!`` consensus rankings (``n <= 8``) and
integrates ``alpha`` by the trapezoidal rule on a grid (its only approximation: choose the grid
fine and wide enough for the posterior of ``alpha``). Nothing here is used by the production
code.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from pm_perm.reference.permutations import all_permutations

__all__ = ["MallowsPosterior", "footrule_log_normaliser_enum", "footrule_mallows_posterior"]


def footrule_log_normaliser_enum(alpha, n: int) -> np.ndarray:
    """``log Z_n(alpha) = log sum_s exp(-(alpha / n) sum_i |s[i] - i|)`` over all ``n!``
    permutations ``s`` (``n <= 8``), for each value of ``alpha`` (array_like)."""
    d = np.abs(all_permutations(n) - np.arange(n)).sum(axis=1)
    values, counts = np.unique(d, return_counts=True)  # a sum over distances, not over n!
    alpha = np.asarray(alpha, dtype=np.float64)
    return logsumexp(np.log(counts) - (alpha[..., None] / n) * values, axis=-1)


@dataclass(frozen=True)
class MallowsPosterior:
    """The exact posterior of :func:`footrule_mallows_posterior`.

    Attributes
    ----------
    perms : ndarray of int64, shape (n!, n)
        Every consensus ranking (rank form), lexicographic order.
    prob : ndarray, shape (n!,)
        Posterior probability of each (``alpha`` integrated out).
    heat : ndarray, shape (n, n)
        ``heat[i, r]`` = P(``rho[i] = r``), item ``i`` at rank ``r``.
    map_rank : ndarray of int64, shape (n,)
        The most probable consensus; ``map_prob`` its probability.
    map_prob : float
    alpha_grid, alpha_density : ndarray, shape (G,)
        The grid and the posterior density of ``alpha`` on it.
    alpha_mean, alpha_sd : float
        Posterior mean and standard deviation of ``alpha``.
    """

    perms: np.ndarray
    prob: np.ndarray
    heat: np.ndarray
    map_rank: np.ndarray
    map_prob: float
    alpha_grid: np.ndarray
    alpha_density: np.ndarray
    alpha_mean: float
    alpha_sd: float


def footrule_mallows_posterior(R, alpha_grid, alpha_log_prior) -> MallowsPosterior:
    """Exact posterior of ``rho`` and ``alpha`` for complete rankings ``R`` (n <= 8).

    Parameters
    ----------
    R : array_like of int, shape (N, n)
        Complete rankings in rank form (each row a permutation of ``0..n-1``).
    alpha_grid : array_like of float, shape (G,)
        Increasing grid of ``alpha >= 0`` covering the posterior of ``alpha``.
    alpha_log_prior : array_like of float, shape (G,)
        The prior log-density of ``alpha`` on the grid (up to a constant).

    Returns
    -------
    MallowsPosterior
    """
    R = np.asarray(R, dtype=np.int64)
    N, n = R.shape
    if not (np.sort(R, axis=1) == np.arange(n)).all():
        raise ValueError("every row of R must be a complete ranking (a permutation of 0..n-1)")
    grid = np.asarray(alpha_grid, dtype=np.float64)
    if grid.ndim != 1 or grid.size < 2 or (np.diff(grid) <= 0).any() or grid[0] < 0:
        raise ValueError("alpha_grid must be an increasing 1-d grid of values >= 0")
    perms = all_permutations(n)
    dist = np.abs(R[None, :, :] - perms[:, None, :]).sum(axis=(1, 2))  # (n!,)
    # trapezoid weights: half intervals at both ends, full in between
    w = np.empty_like(grid)
    w[1:-1] = (grid[2:] - grid[:-2]) / 2
    w[0], w[-1] = (grid[1] - grid[0]) / 2, (grid[-1] - grid[-2]) / 2
    log_w = np.log(w)
    log_alpha = np.asarray(alpha_log_prior, dtype=np.float64) - N * footrule_log_normaliser_enum(
        grid, n)
    # the posterior of rho depends on it only through its total distance: one column per value
    values, inverse = np.unique(dist, return_inverse=True)
    log_joint = log_alpha[:, None] - (grid[:, None] / n) * values[None, :]  # (G, distinct)
    log_mult = np.log(np.bincount(inverse))  # consensus rankings at each total distance
    log_evidence = logsumexp(log_joint + log_w[:, None] + log_mult[None, :])
    prob = np.exp(logsumexp(log_joint + log_w[:, None], axis=0) - log_evidence)[inverse]
    density = np.exp(logsumexp(log_joint + log_mult[None, :], axis=1) - log_evidence)
    heat = np.zeros((n, n))
    np.add.at(heat, (np.broadcast_to(np.arange(n), perms.shape), perms), prob[:, None])
    k = int(np.argmax(prob))
    mean = float(np.sum(w * density * grid))
    sd = float(np.sqrt(np.sum(w * density * (grid - mean) ** 2)))
    return MallowsPosterior(perms, prob, heat, perms[k].copy(), float(prob[k]), grid, density,
                            mean, sd)
