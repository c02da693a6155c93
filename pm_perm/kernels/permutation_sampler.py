"""Exact draws from the permutation model by walking the backward table of the subset DP.

For logits ``W`` (M, M) and ``p(y) = prod_i exp(W[i, y[i]]) / perm(exp W)``, the backward table
``g`` of :mod:`pm_perm.kernels.subset_dp` (on the dual-scaled weights ``B``) gives every
conditional: ``p(y[i] = j | y[:i]) = B[i, j] g[T + {j}] / g[T]`` with
``T = {y[0], ..., y[i-1]}``. One table per distinct matrix (O(M 2^M) time, 2^M float64), then
O(M^2) per draw. The same size limits as :mod:`pm_perm.kernels.permanent`.
"""

from __future__ import annotations

import math

import numpy as np

from pm_perm._numba import njit
from pm_perm.kernels._bitgen import square_draw_kernel
from pm_perm.kernels._checks import (
    as_size,
    as_square_logits,
    raising_sampler,
    square_draw_errors,
    square_logits_status,
)
from pm_perm.kernels.assignment import dual_scaled, max_weight_assignment_core
from pm_perm.kernels.permanent import EXACT_MAX_M, check_exact_size, log_permanent
from pm_perm.kernels.subset_dp import DEBRUIJN, ENUMERATE_MAX_M, backward, ctz, padded, workspace

__all__ = [
    "DRAW_ERRORS",
    "draw_permutation_into",
    "make_permutation_draw_kernel",
    "sample_permutation_core",
    "sample_permutations",
]


@njit(cache=True)
def _draw_from_table(rng, B, g, out):
    """One exact draw into ``out`` (length >= 1) from the backward table ``g`` of ``B``;
    only the first ``len(out)`` rows are drawn (the rest is the fixed padding)."""
    M = B.shape[0]
    full = (1 << M) - 1
    table = DEBRUIJN
    T = 0
    for r in range(out.shape[0]):
        target = rng.random() * g[T]
        acc = 0.0
        last = -1
        s = full ^ T
        chosen = -1
        while s:
            low = s & (-s)
            j = ctz(low, table)
            t = B[r, j] * g[T | low]
            if t > 0.0:
                last = j
                acc += t
                if acc > target:
                    chosen = j
                    break
            s ^= low
        if chosen == -1:  # rounding: target fell past the float sum; take the last positive term
            chosen = last
        out[r] = chosen
        T |= 1 << chosen


@njit(cache=True)
def _sampler_table(W):
    """Padded scaled weights and their backward table, for :func:`_draw_from_table`."""
    B, _, _ = dual_scaled(W)
    B = padded(B)
    n = B.shape[0]
    g = workspace(n) if n > ENUMERATE_MAX_M else np.empty(1 << n)
    backward(B, g, g, B, False)  # f and P are not read without marginals
    return B, g


#: Messages of the exact sampler's input errors, indexed by the status of
#: :func:`draw_permutation_into`.
DRAW_ERRORS = square_draw_errors(
    "M is beyond the exact limit EXACT_MAX_M = 26 of the exact sampler")


@njit(cache=True)
def draw_permutation_into(rng, W, out):
    """One exact draw of ``y`` into ``out`` (M,) int64 for one (M, M) logits matrix; returns 0,
    or, without drawing, the index in ``DRAW_ERRORS`` of what is wrong with ``W`` (non-square
    or empty, M beyond ``EXACT_MAX_M``, NaN or ``+inf`` logits, ``perm(exp W) = 0``). The body
    of the C kernel of :func:`make_permutation_draw_kernel`, which cannot raise."""
    status = square_logits_status(W, EXACT_MAX_M)
    if status != 0:
        return status
    if not max_weight_assignment_core(W)[3]:
        return 4
    B, g = _sampler_table(W)
    _draw_from_table(rng, B, g, out)
    return 0


sample_permutation_core = raising_sampler(
    draw_permutation_into, DRAW_ERRORS, "sample_permutation_core",
    """One exact draw of ``y`` (M,) int64 for one (M, M) logits matrix.

    Checks its input: raises ``ValueError`` (a message of ``DRAW_ERRORS``) for a non-square
    matrix, M beyond ``EXACT_MAX_M``, NaN or ``+inf`` logits, or ``perm(exp W) = 0``.
    """)


def make_permutation_draw_kernel(version):
    """Body of the C callable that PyTensor's draws of ``PermutationExpFamily`` call
    (``numba.cfunc``, see :mod:`pm_perm.ops.extern`): ``draw_kernel(bitgen, w, m0, m1, out)``
    runs :func:`draw_permutation_into` on the C-contiguous (m0, m1) float64 logits at ``w`` with
    the caller's random stream (numpy's ``bitgen_t`` at ``bitgen``,
    :mod:`pm_perm.kernels._bitgen`), writing the draw to the (m0,) int64 array at ``out``, and
    returns the status. ``version`` keys numba's cache as in :func:`make_log_permanent_kernel`.
    """
    return square_draw_kernel(draw_permutation_into, version)


@njit(cache=True)
def _sample_batch(rng, W, which, counts, out):
    """Draw ``counts[b]`` permutations from ``W[b]`` into the rows ``which[b]`` of ``out``."""
    start = 0
    for b in range(W.shape[0]):
        c = counts[b]
        if c == 0:
            continue
        B, g = _sampler_table(W[b])
        for k in range(c):
            _draw_from_table(rng, B, g, out[which[start + k]])
        start += c


def sample_permutations(W, size=None, rng=None):
    """Exact draws from ``p(y) = exp(sum_i W[i, y[i]]) / perm(exp W)``.

    Parameters
    ----------
    W : array_like of float, shape (..., M, M)
        Logits; ``-inf`` forbidden. Every matrix must admit a permutation of positive weight.
    size : tuple of int, optional
        Full batch shape of the output (``W``'s batch shape broadcasts to it); default the batch
        shape of ``W``. This is the ``RandomVariable.rng_fn`` convention.
    rng : numpy.random.Generator or int, optional

    Returns
    -------
    ndarray of int64, shape (*size, M)
        ``y[..., i]`` is the column matched to row ``i``.

    Notes
    -----
    One backward table per distinct matrix (O(M 2^M), 2^M float64), then O(M^2) per draw.
    """
    rng = np.random.default_rng(rng)
    arr = as_square_logits(W)
    M = arr.shape[-1]
    check_exact_size(M)
    wbatch = arr.shape[:-2]
    size = wbatch if size is None else as_size(size)
    try:
        index = np.broadcast_to(np.arange(math.prod(wbatch)).reshape(wbatch), size)
    except ValueError as err:
        raise ValueError(
            f"logits with batch shape {wbatch} do not broadcast to size {size}"
        ) from err
    flat = arr.reshape((-1, M, M))
    if np.any(log_permanent(flat) == -np.inf):
        raise ValueError(
            "cannot sample: some logits matrix has no permutation avoiding its -inf entries "
            "(perm(exp W) = 0)"
        )
    index = index.ravel()
    order = np.argsort(index, kind="stable").astype(np.int64)
    counts = np.bincount(index, minlength=flat.shape[0]).astype(np.int64)
    out = np.empty((index.size, M), dtype=np.int64)
    _sample_batch(rng, flat, order, counts, out)
    return out.reshape(size + (M,))
