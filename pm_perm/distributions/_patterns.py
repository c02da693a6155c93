"""The ``pattern`` input of the ranking distributions: draws that keep a ballot's pattern.

A pattern (:mod:`pm_perm.kernels.patterns`) is a rank-form row whose positions a draw keeps: a
draw with a pattern is a complete ranking from the model coarsened to it, so it ranks as many
items as the pattern and ties the same positions. The pattern enters the draws only, never the
log-probability. At model level an observed ranking variable takes the observed rows as its
patterns (``keep_pattern=True``), so ``pm.sample_posterior_predictive`` replicates each ballot
with its own length and tie blocks.
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from numba import types
from pymc.pytensorf import constant_fold
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.link.numba.dispatch import basic as numba_basic

from pm_perm.kernels._version import code_version
from pm_perm.kernels.patterns import PATTERN_ERRORS, coarsen_to_patterns, make_coarsen_kernel
from pm_perm.kernels.rank_form import validate_orders
from pm_perm.ops import extern

_VERSION = code_version(__file__)  # numba cache version (see pm_perm.kernels._version)

__all__ = ["ballot_length_numba", "check_pattern_np", "coarsen_draws", "coarsen_numba",
           "cut_draws", "finish_draws", "observed_pattern", "pattern_input",
           "pattern_support_point"]

_LENGTH_MSG = PATTERN_ERRORS[1]

# The numba draws call the coarsening through a C symbol (see pm_perm.ops.extern).
_COARSEN = extern.extern_kernel(
    "pm_perm_coarsen_kernel",
    types.int64(types.CPointer(types.int64), types.intp, types.CPointer(types.int64),
                types.intp),
    make_coarsen_kernel(_VERSION),
)


class _PatternError(extern.StatusError):
    """The coarsening's errors (statuses of :func:`pm_perm.kernels.patterns.coarsen_into`)."""

    messages = extern.value_errors(PATTERN_ERRORS)


def _static_value(x):
    """NumPy value of ``x`` when known before run time (array, constant, shared), else None."""
    if isinstance(x, SharedVariable):
        return np.asarray(x.get_value(borrow=True))
    if isinstance(x, pt.Variable):
        try:
            (v,) = constant_fold([x], raise_not_constant=True)
        except Exception:  # not constant: checked by the draws
            return None
        return np.asarray(v)
    return np.asarray(x)


def check_pattern_np(pattern, M, dist_name):
    """Raise ``ValueError`` unless ``pattern`` (..., M) holds valid rank-form rows (or is empty,
    (..., 0): no pattern). Returns it as int64."""
    p = np.asarray(pattern)
    if p.ndim == 0 or p.shape[-1] not in (0, M):
        raise ValueError(f"{dist_name}: {_LENGTH_MSG}; got shape {p.shape} for M = {M}")
    if p.shape[-1] == 0:
        return p.astype(np.int64)
    return validate_orders(p.reshape(-1, M), M, name=f"{dist_name}: pattern").reshape(p.shape)


def pattern_input(pattern, M, dist_name):
    """``pattern`` as the int64 input of the RandomVariable: an empty vector when None; checked
    at once when its value is known (M, the static number of items, may be None)."""
    if pattern is None:
        return pt.constant(np.zeros(0, dtype=np.int64))
    value = _static_value(pattern)
    if value is not None and value.dtype != object:
        check_pattern_np(value, value.shape[-1] if M is None and value.ndim else M, dist_name)
    pattern = pt.as_tensor_variable(pattern)
    if pattern.type.ndim < 1:
        raise ValueError(f"{dist_name}: pattern must have shape (..., M); got a scalar")
    if pattern.type.dtype not in pt.type.integer_dtypes:
        pattern = pt.round(pattern)  # rank form: integral values (the draws check them)
    return pt.cast(pattern, "int64")


def observed_pattern(observed, keep_pattern, kwargs, n_args):
    """The ``__new__`` hook: with ``keep_pattern`` (default) an observed variable's draws keep
    each observed row's pattern (``pattern`` = the observed value, whatever expression it is),
    unless a pattern is given. ``n_args`` positional arguments: the 4th is ``pattern``."""
    if keep_pattern not in (True, False):
        raise ValueError(f"keep_pattern must be True or False; got {keep_pattern!r}")
    if keep_pattern and observed is not None and kwargs.get("pattern") is None and n_args < 4:
        kwargs["pattern"] = observed
    return kwargs


def coarsen_draws(y, pattern, dist_name):
    """``rng_fn``'s step: complete draws ``y`` (*size, M) coarsened to ``pattern`` (broadcast to
    them; empty = ``y`` unchanged), raising ``ValueError`` for an invalid pattern."""
    pattern = np.asarray(pattern)
    if pattern.shape[-1] == 0:
        return y
    return coarsen_to_patterns(y, pattern, name=f"{dist_name}: pattern")


def coarsen_numba():
    """``coarsen(y, pattern) -> y`` in compiled code: the (M,) int64 draw ``y`` coarsened in
    place to ``pattern`` (M,) (empty: unchanged); raises ``ValueError``
    (:data:`pm_perm.kernels.patterns.PATTERN_ERRORS`) for an invalid pattern."""
    kernel = _COARSEN().external

    @numba_basic.numba_njit
    def coarsen(y, pattern):
        if pattern.shape[0] == 0:
            return y
        p = np.ascontiguousarray(pattern)
        yc = extern.c_contiguous_out(y)
        if not y.flags.c_contiguous:
            for i in range(y.shape[0]):
                yc[i] = y[i]
        status = kernel(yc.ctypes, yc.shape[0], p.ctypes, p.shape[0])
        if status != 0:
            raise _PatternError(status)
        return extern.copy_back(y, yc)

    return coarsen


def cut_draws(y, length_probs, n, rng):
    """Rank-form draws ``y`` (*size, M) cut after ``k ~ length_probs`` ((..., n + 1), k <= n)
    ranked items: positions ``>= k`` become unranked (-1). One uniform per draw from ``rng``."""
    cdf = np.cumsum(np.broadcast_to(length_probs, (*y.shape[:-1], n + 1)), axis=-1)
    u = np.asarray(rng.random(y.shape[:-1]))[..., None] * cdf[..., -1:]
    k = np.minimum((cdf <= u).sum(-1), n)
    return np.where(y < k[..., None], y, -1)


def finish_draws(y, pattern, length_probs, n, rng, dist_name):
    """``rng_fn``'s last step for the ballot distributions: complete draws ``y`` (*size, M)
    coarsened to ``pattern`` when one is given (:func:`coarsen_draws`), else cut after
    ``k ~ length_probs`` ranked items (:func:`cut_draws`, ``k <= n``) when those are given, else
    ``y`` unchanged."""
    if np.shape(pattern)[-1]:
        return coarsen_draws(y, pattern, dist_name)
    if np.shape(length_probs)[-1]:
        return cut_draws(y, length_probs, n, rng)
    return y


def ballot_length_numba(dist_name, bound, tol=1e-6):
    """``(check_length, cut_length)`` in compiled code, for the draws cut after ``k ~
    length_probs`` ranked items (the alternative to a pattern).

    ``check_length(length_probs, n) -> total``: ``length_probs`` empty or a simplex of ``n + 1``
    entries (``bound`` names ``n`` in the messages, e.g. ``"M"`` or ``"K"``; sum within ``tol``
    of 1), else ``ValueError`` naming ``dist_name``; returns its sum (0 when empty).
    ``cut_length(rng, y, length_probs, total, n) -> y``: draws ``k`` (at most ``n``) and makes
    the positions ``>= k`` of the rank-form draw ``y`` (M,) unranked (-1), in place.
    """
    size_msg = f"{dist_name}: length_probs must have {bound} + 1 entries"
    simplex_msg = f"{dist_name}: length_probs must be a simplex"

    @numba_basic.numba_njit
    def check_length(length_probs, n):
        L = length_probs.shape[0]
        if L != 0 and L != n + 1:
            raise ValueError(size_msg)
        total = 0.0
        for k in range(L):
            if not length_probs[k] >= 0:
                raise ValueError(simplex_msg)
            total += length_probs[k]
        if L and abs(total - 1.0) >= tol:
            raise ValueError(simplex_msg)
        return total

    @numba_basic.numba_njit
    def cut_length(rng, y, length_probs, total, n):
        u = rng.random() * total
        k = 0
        acc = length_probs[0]
        while k < n and acc <= u:
            k += 1
            acc += length_probs[k]
        for i in range(y.shape[0]):  # rank form of the top k: positions >= k are unranked
            if y[i] >= k:
                y[i] = -1
        return y

    return check_length, cut_length


def pattern_support_point(y, pattern):
    """A complete ranking ``y`` (..., M) coarsened to ``pattern`` (..., M) (empty: ``y``), so
    that a variable with a pattern starts at a value of its draws' support."""
    if pattern.type.shape[-1] == 0:
        return y
    M = y.shape[-1]
    s = pt.sort(pt.switch(pt.lt(pattern, 0), M, pattern), axis=-1)
    s = pt.switch(pt.eq(s, M), -1, s)
    y, s = pt.broadcast_arrays(y, s)
    return pt.take_along_axis(s, pt.cast(y, "int64"), axis=-1)
