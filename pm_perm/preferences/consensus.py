"""Summaries of the posterior of a latent consensus ranking ``rho`` (pure NumPy on draws).

Draws are rank vectors (rank form, 0-based: ``rho[i]`` = rank of item ``i``, 0 = first), given
as an array ``(..., n)`` or as the posterior of a PyMC run (``arviz.InferenceData`` or an
``xarray.DataTree`` with a ``posterior`` group, variable ``var_name``). The summaries are those
of BayesMallows (Vitelli et al. 2018; ``compute_consensus``, ``compute_posterior_intervals``):

* :func:`heat_matrix`: ``P(item i at rank r)``;
* :func:`cp_consensus`: the cumulative-probability consensus: ranks ``0, 1, ...`` are given in
  turn, each to the unassigned item with the largest posterior probability of being at that rank
  or better;
* :func:`map_consensus`: the most frequent ranking among the draws and its frequency;
* :func:`rank_intervals`: equal-tailed posterior intervals of each item's rank.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Consensus", "cp_consensus", "heat_matrix", "map_consensus", "rank_draws",
           "rank_intervals"]


@dataclass(frozen=True)
class Consensus:
    """A consensus ranking with the probability that goes with it.

    Attributes
    ----------
    ranking : ndarray of int64, shape (n,)
        Rank form: ``ranking[i]`` = rank of item ``i`` (0 = first).
    order : ndarray of int64, shape (n,)
        The items first to last (``order[r]`` = the item at rank ``r``).
    probability : ndarray, shape (n,) or float
        CP consensus: ``probability[r]`` = the posterior probability that ``order[r]`` is at rank
        ``r`` or better. MAP consensus: the posterior frequency of the whole ranking.
    """

    ranking: np.ndarray
    order: np.ndarray
    probability: np.ndarray | float


def rank_draws(posterior, var_name: str = "rho") -> np.ndarray:
    """The posterior draws of a rank vector as an int64 array ``(S, n)``, chains stacked.

    Parameters
    ----------
    posterior : array_like, shape (..., n), or InferenceData / DataTree
        Rank vectors (0-based, each a permutation of ``0..n-1``), or a PyMC result whose
        ``posterior`` group holds ``var_name`` with dims ``(chain, draw, n)``.
    var_name : str, default "rho"
        The consensus variable of a PyMC result.

    Raises
    ------
    ValueError
        For a result without ``var_name``, no draws, or a draw that is not a permutation of
        ``0..n-1`` (the message names the first such draw).
    """
    if hasattr(posterior, "posterior") or _is_datatree(posterior):
        group = posterior.posterior if hasattr(posterior, "posterior") else posterior["posterior"]
        if var_name not in group:
            raise ValueError(f"the posterior has no variable {var_name!r} (it has "
                             f"{sorted(group.data_vars)}); pass var_name= the consensus's name")
        posterior = group[var_name].values
    draws = np.asarray(posterior)
    if draws.ndim == 0 or draws.size == 0:
        raise ValueError(f"no draws: got an array of shape {draws.shape}; pass rank vectors of "
                         "shape (..., n)")
    n = draws.shape[-1]
    draws = draws.reshape(-1, n)
    if draws.dtype.kind == "f" and np.array_equal(draws, np.round(draws)):
        draws = draws.astype(np.int64)
    bad = ~(np.sort(draws, axis=1) == np.arange(n)).all(axis=1)
    if draws.dtype.kind not in "iu" or bad.any():
        k = int(np.argmax(bad)) if bad.any() else 0
        raise ValueError(f"draw {k} = {draws[k].tolist()} is not a rank vector (a permutation "
                         f"of 0..{n - 1}, rank form, 0 = first); convert 1-based ranks by "
                         "subtracting 1")
    return draws.astype(np.int64)


def _is_datatree(x):
    return type(x).__name__ == "DataTree"


def heat_matrix(posterior, var_name: str = "rho") -> np.ndarray:
    """``H[i, r]`` = posterior probability that item ``i`` is at rank ``r`` (rows and columns
    sum to 1). ``posterior`` and ``var_name``: as :func:`rank_draws`.

    Examples
    --------
    >>> heat_matrix([[0, 1], [0, 1], [1, 0], [0, 1]]).tolist()
    [[0.75, 0.25], [0.25, 0.75]]
    """
    draws = rank_draws(posterior, var_name)
    S, n = draws.shape
    H = np.zeros((n, n))
    np.add.at(H, (np.broadcast_to(np.arange(n), draws.shape), draws), 1.0 / S)
    return H


def cp_consensus(posterior, var_name: str = "rho") -> Consensus:
    """The cumulative-probability (CP) consensus of BayesMallows.

    For ``r = 0, 1, ..., n - 1`` in turn, rank ``r`` goes to the not yet ranked item with the
    largest posterior probability of a rank ``<= r`` (ties: the lower item index).
    ``posterior`` and ``var_name``: as :func:`rank_draws`.

    Returns
    -------
    Consensus
        ``probability[r]`` = ``P(rank of order[r] <= r)``.

    Examples
    --------
    >>> c = cp_consensus([[0, 1, 2], [1, 0, 2], [0, 2, 1], [1, 0, 2]])
    >>> c.order.tolist(), c.probability.tolist()
    ([0, 1, 2], [0.5, 0.75, 1.0])
    """
    cum = np.cumsum(heat_matrix(posterior, var_name), axis=1)
    n = cum.shape[0]
    free = np.ones(n, dtype=bool)
    order = np.empty(n, dtype=np.int64)
    prob = np.empty(n)
    for r in range(n):
        item = int(np.argmax(np.where(free, cum[:, r], -np.inf)))
        order[r], prob[r], free[item] = item, min(cum[item, r], 1.0), False
    return Consensus(np.argsort(order), order, prob)


def map_consensus(posterior, var_name: str = "rho") -> Consensus:
    """The maximum a posteriori consensus: the most frequent ranking among the draws (ties:
    the lexicographically smallest rank vector) and its frequency. ``posterior`` and
    ``var_name``: as :func:`rank_draws`.

    Examples
    --------
    >>> c = map_consensus([[0, 1, 2], [1, 0, 2], [1, 0, 2], [0, 2, 1]])
    >>> c.ranking.tolist(), c.probability
    ([1, 0, 2], 0.5)
    """
    draws = rank_draws(posterior, var_name)
    rows, counts = np.unique(draws, axis=0, return_counts=True)
    k = int(np.argmax(counts))
    ranking = rows[k].astype(np.int64)
    return Consensus(ranking, np.argsort(ranking), float(counts[k] / draws.shape[0]))


def rank_intervals(posterior, prob: float = 0.95, var_name: str = "rho") -> np.ndarray:
    """Equal-tailed posterior intervals of each item's rank.

    Parameters
    ----------
    posterior, var_name
        As :func:`rank_draws`.
    prob : float, default 0.95
        Posterior mass of each interval, in ``(0, 1)``.

    Returns
    -------
    ndarray of int64, shape (n, 2)
        ``[lower, upper]`` ranks (0-based, inclusive) of each item: the smallest ``lower`` with
        ``P(rank <= lower) > (1 - prob) / 2`` and the smallest ``upper`` with
        ``P(rank <= upper) >= (1 + prob) / 2``, so at most ``(1 - prob) / 2`` of the posterior
        lies on either side and each interval holds at least ``prob``.

    Examples
    --------
    >>> rank_intervals([[0, 1], [0, 1], [0, 1], [1, 0]], prob=0.5).tolist()
    [[0, 0], [1, 1]]
    """
    if not (isinstance(prob, int | float | np.floating) and 0 < prob < 1):
        raise ValueError(f"prob must be a number in (0, 1); got {prob!r}")
    cum = np.cumsum(heat_matrix(posterior, var_name), axis=1)
    tol = 1e-12  # the cumulative sums of 1/S are exact to rounding
    lower = np.argmax(cum > (1 - prob) / 2 + tol, axis=1)
    upper = np.argmax(cum >= (1 + prob) / 2 - tol, axis=1)
    return np.stack([lower, upper], axis=1).astype(np.int64)
