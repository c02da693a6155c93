"""Rank-form orders (top-k and weak orders): parsing into blocks and validation.

The value convention is stated once, in ``docs/guide/preferences_data.md``: ``y[i]`` is the
position of item ``i`` (0 = first), tied items share the smallest position of their block,
unranked items hold ``-1`` and form an implicit last block. Shared by the likelihood kernels
and the data layer; O(M) per order.
"""

from __future__ import annotations

import numpy as np

from pm_perm._numba import njit
from pm_perm.kernels._checks import c_array

__all__ = ["order_blocks", "order_blocks_work", "order_work", "position_suffix_sums",
           "validate_orders"]


@njit(cache=True)
def order_blocks(y, seq, starts):
    """Parse one rank-form order ``y`` (M,) into its blocks.

    Writes the items in position order into ``seq`` (M,) (tied and unranked items in item order)
    and the first position of each block into ``starts`` (at least M + 1 long); block ``b`` holds
    ``seq[starts[b]:starts[b + 1]]``; the unranked items (if any) are the last block. Returns the
    number of blocks, or ``-1`` if ``y`` is not a valid rank-form order (a value outside
    ``-1..M-1``, or positions that are not "min" ranks of consecutive blocks).
    """
    M = y.shape[0]
    return order_blocks_work(y, seq, starts, np.empty(M + 1, dtype=np.int64),
                             np.empty(M + 1, dtype=np.int64))


@njit(cache=True, inline="always")
def order_blocks_work(y, seq, starts, count, fill):
    """:func:`order_blocks` with caller-owned work arrays ``count`` and ``fill`` (M + 1,), for
    loops over many orders (no allocation per order)."""
    M = y.shape[0]
    count[:] = 0  # count[v + 1]: items with value v (v = -1 .. M-1)
    for i in range(M):
        v = y[i]
        if v < -1 or v >= M:
            return -1
        count[v + 1] += 1
    ranked = M - count[0]
    # the values present must be exactly the block starts 0, s_0, s_0 + s_1, ... < ranked
    p = 0
    nb = 0
    while p < ranked:
        c = count[p + 1]
        if c == 0:
            return -1
        for v in range(p + 1, p + c):
            if count[v + 1] != 0:
                return -1
        starts[nb] = p
        nb += 1
        p += c
    for v in range(ranked, M):
        if count[v + 1] != 0:
            return -1
    if count[0] > 0:
        starts[nb] = ranked
        nb += 1
    starts[nb] = M
    fill[0] = ranked  # next free slot of each value in seq
    for v in range(M):
        fill[v + 1] = v
    for i in range(M):
        k = y[i] + 1
        seq[fill[k]] = i
        fill[k] += 1
    return nb


@njit(cache=True, inline="always")
def order_work(M):
    """The work arrays of :func:`order_blocks_work` for orders of ``M`` items: ``(seq (M,),
    starts, count, fill (M + 1,))``, int64."""
    seq = np.empty(M, dtype=np.int64)
    starts = np.empty(M + 1, dtype=np.int64)
    count = np.empty(M + 1, dtype=np.int64)
    fill = np.empty(M + 1, dtype=np.int64)
    return seq, starts, count, fill


@njit(cache=True, inline="always")
def position_suffix_sums(b):
    """``out`` (M + 1,): ``out[s]`` = the sum of the position scalings ``b`` (M,) over the last
    ``s`` positions (``out[0] = 0``), summed from the last position backwards."""
    M = b.shape[0]
    out = np.zeros(M + 1)
    for s in range(1, M + 1):
        out[s] = out[s - 1] + b[M - s]
    return out


@njit(cache=True)
def _first_invalid(orders):
    seq = np.empty(orders.shape[1], dtype=np.int64)
    starts = np.empty(orders.shape[1] + 1, dtype=np.int64)
    for k in range(orders.shape[0]):
        if order_blocks(orders[k], seq, starts) < 0:
            return k
    return -1


def validate_orders(orders, M, name="orders"):
    """Return ``orders`` as a C-contiguous, writable int64 array (n, M) of valid rank-form orders
    (a copy when ``orders`` is read-only or of another dtype or layout).

    Raises ``ValueError`` naming the first invalid row and why. ``M=None`` accepts any width.
    """
    arr = np.asarray(orders)
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
            raise ValueError(f"{name} must be integers (rank form, -1 = unranked); got non-integer "
                             "or non-finite floats")
    elif arr.dtype.kind not in "iu":
        raise ValueError(f"{name} must be integers (rank form, -1 = unranked); got {arr.dtype}")
    if arr.ndim != 2 or (M is not None and arr.shape[1] != M):
        width = "M" if M is None else M
        raise ValueError(f"{name} must have shape (n, {width}) (one rank-form row per order); got "
                         f"shape {arr.shape}")
    arr = c_array(arr, np.int64)  # writable: one compiled variant of the kernels (c_array)
    k = _first_invalid(arr)
    if k >= 0:
        raise ValueError(
            f"{name}[{k}] = {arr[k].tolist()} is not a valid rank-form order: item i holds its "
            "position (0 = first), tied items the smallest position of their block with the "
            "next block starting right after it, unranked items -1 (after all ranked ones)"
        )
    return arr
