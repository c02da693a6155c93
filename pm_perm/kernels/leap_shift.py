"""The leap-and-shift move on a rank vector (Vitelli et al. 2018) and its proposal ratio.

A rank vector ``y`` is a permutation of ``0..M-1`` with ``y[i]`` = rank of item ``i``. The
proposal picks an item uniformly, then a new rank uniformly among the ``w(r)`` ranks within
``L`` of its rank ``r`` (inside ``0..M-1``, excluding ``r``); the item takes the new rank and the
items ranked in between shift by one towards its old rank. Used by
:class:`pm_perm.inference.step_methods.PermutationLeapShift`. Cost O(M) per move.

References
----------
V. Vitelli, O. Sorensen, M. Crispino, A. Frigessi, E. Arjas, "Probabilistic preference learning
with the Mallows rank model", JMLR 18 (2018), section 2.4.
"""

from __future__ import annotations

import math

import numpy as np

from pm_perm._numba import njit

__all__ = ["default_leap_size", "leap_shift", "leap_shift_log_hastings", "leap_window"]


def default_leap_size(M: int) -> int:
    """BayesMallows' default leap size ``max(1, M // 5)`` for ``M`` items."""
    return max(1, int(M) // 5)


def leap_window(rank: int, M: int, L: int) -> int:
    """``w(rank)``: the number of ranks ``r != rank`` of ``0..M-1`` with ``|r - rank| <= L``."""
    return min(M - 1, rank + L) - max(0, rank - L)


@njit(cache=True)
def leap_in_place(y, item, rank):
    """Leap-and-shift ``y`` in place: ``item`` moves to ``rank`` (its inverse: move it back)."""
    old = y[item]
    if rank > old:
        for k in range(y.shape[0]):
            if old < y[k] <= rank:
                y[k] -= 1
    else:
        for k in range(y.shape[0]):
            if rank <= y[k] < old:
                y[k] += 1
    y[item] = rank


def leap_shift(y, item: int, rank: int) -> np.ndarray:
    """The leap-and-shift of the rank vector ``y``: ``item`` moves to ``rank``, the items ranked
    between its old and new ranks shift by one towards its old rank (a new array).

    Parameters
    ----------
    y : array_like of int, shape (M,)
        A permutation of ``0..M-1`` read as ranks (``y[i]`` = rank of item ``i``).
    item, rank : int
        The item that leaps and its new rank (``0 <= item, rank < M``).

    Returns
    -------
    ndarray of int64, shape (M,)

    Examples
    --------
    >>> leap_shift([0, 1, 2, 3], 0, 2).tolist()   # item 0 to rank 2; items 1, 2 move up
    [2, 0, 1, 3]
    """
    y = np.array(y, dtype=np.int64, copy=True)
    M = y.shape[-1] if y.ndim == 1 else -1
    if M < 0 or not (0 <= item < M and 0 <= rank < M):
        raise ValueError(f"leap_shift needs a rank vector of shape (M,) and 0 <= item, rank < M; "
                         f"got shape {y.shape}, item {item}, rank {rank}")
    leap_in_place(y, item, rank)
    return y


def leap_shift_log_hastings(old_rank: int, new_rank: int, M: int, L: int) -> float:
    """``log q(y | y*) - log q(y* | y)`` of the leap-and-shift proposal with leap size ``L`` on
    ``M`` items, for the move of an item from ``old_rank`` to ``new_rank`` (``y`` to ``y*``).

    A leap of two or more ranks is reached in exactly one way and undone by the reverse leap,
    so the ratio is ``w(old_rank) / w(new_rank)`` (:func:`leap_window`). A leap of one rank is
    the swap of two adjacent ranks, proposed both by the item moving and by its neighbour
    moving the other way, in both directions alike: the ratio is 1 there.

    Examples
    --------
    >>> import math
    >>> math.exp(leap_shift_log_hastings(0, 2, 5, 2))   # w(0) = 2, w(2) = 4
    0.5
    """
    if abs(new_rank - old_rank) == 1:
        return 0.0
    return math.log(leap_window(old_rank, M, L)) - math.log(leap_window(new_rank, M, L))
