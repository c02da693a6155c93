"""What the count-label distributions share: parameter conversion and checks, the build-time
check of observed labels, and the wiring of their draws.

:mod:`~pm_perm.distributions.conditional_bernoulli`, :mod:`~pm_perm.distributions.n_choose_k`
and :mod:`~pm_perm.distributions.ordinal_n_choose_k` use it (value conventions in each class
docstring).
"""

from __future__ import annotations

import math

import numpy as np
import pytensor.tensor as pt
from numba import types
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Variable
from pytensor.link.numba.dispatch import basic as numba_basic

from pm_perm.kernels._version import code_version
from pm_perm.kernels.count_draws import COUNT_PROBS_TOL, DRAW_ERRORS, make_count_draw_kernel
from pm_perm.ops import extern

__all__ = [
    "COUNT_PROBS_LENGTH",
    "SIMPLEX_TOL",
    "VERSION",
    "DrawError",
    "as_count",
    "as_logits",
    "check_observed_labels",
    "check_static_length",
    "draw_numba",
    "draw_rows",
    "mass_up_to",
    "minus_inf_if",
    "n_finite_logits",
    "on_dot",
    "on_largest",
    "version_of",
]

VERSION = code_version(__file__)  # numba cache version (see pm_perm.kernels._version)

#: Tolerance of the simplex checks of ``count_probs`` (the samplers check the same one).
SIMPLEX_TOL = COUNT_PROBS_TOL


def version_of(module_file):
    """The numba cache version of a distribution module's draws: its own sources, this module's
    (the draw wiring) and the kernels' (see :mod:`pm_perm.kernels._version`)."""
    return (code_version(module_file) * 1_000_003 + VERSION) % (1 << 62)


# ----------------------------------------------------------------------------- parameters


def as_logits(logits):
    """``logits`` (..., D) as a float64 tensor; ``ValueError`` / ``TypeError`` for a scalar or a
    dtype that is not real."""
    logits = pt.as_tensor_variable(logits)
    if logits.type.ndim < 1:
        raise ValueError("logits must have at least one dimension (..., D)")
    if logits.type.dtype not in (*pt.type.float_dtypes, *pt.type.int_dtypes):
        raise TypeError(f"logits must be real; got dtype {logits.type.dtype}")
    return pt.cast(logits, "float64")


def as_count(k, name="k"):
    """``k`` as an int64 tensor; ``TypeError`` for a dtype that is not an integer."""
    k = pt.as_tensor_variable(k)
    if k.type.dtype not in (*pt.type.int_dtypes, "bool"):
        raise TypeError(f"{name} must be an integer count; got dtype {k.type.dtype}")
    return pt.cast(k, "int64")


def check_static_length(count_probs, logits, name):
    """``ValueError`` when the last axis of ``count_probs`` is known not to be D + 1."""
    n, D = count_probs.type.shape[-1], logits.type.shape[-1]
    if n is not None and D is not None and n != D + 1:
        raise ValueError(f"{name} must have D + 1 = {D + 1} entries in its last axis; got {n}")


def on_dot(logits, on):
    """``sum_d logits_d [on_d]`` without ``-inf * 0 = NaN`` for items that are off."""
    return pt.sum(pt.switch(on, logits, 0.0), axis=-1)


def minus_inf_if(cond, expr):
    """``-inf`` where ``cond``, else ``expr``."""
    return pt.switch(cond, -np.inf, expr)


def n_finite_logits(logits):
    """Number of logits that are not ``-inf`` (items that can be on), shape (...)."""
    return pt.sum(pt.cast(pt.neq(logits, -np.inf), "int64"), axis=-1)


def mass_up_to(table, n):
    """``sum_{j <= n} table[..., j]``, broadcasting ``n`` (...) against the batch."""
    return pt.sum(pt.switch(pt.le(pt.arange(table.shape[-1]), n[..., None]), table, 0.0), axis=-1)


def on_largest(logits, k):
    """int64 labels (..., D) with ones on the ``k`` largest logits (ties by item index)."""
    rank = pt.argsort(pt.argsort(-logits, axis=-1), axis=-1)
    return pt.cast(pt.lt(rank, k[..., None]), "int64")


# ----------------------------------------------------------------------------- observed labels


def check_observed_labels(observed, kind, n_levels=None, D=None):
    """Reject malformed observed arrays before PyMC silently casts them to int64, and (``D``:
    the logits' last dimension, when known before run time) observed rows of another length.

    ``kind`` is ``"binary"`` (labels 0 / 1) or ``"ordinal"`` (labels ``0..n_levels - 1`` when
    ``n_levels`` is known). A ``pm.Data`` container is checked by the value it holds at build;
    values set later with ``pm.set_data`` are not (an invalid one has log-probability -inf).
    """
    if isinstance(observed, SharedVariable):
        observed = observed.get_value(borrow=True)
    if observed is None or isinstance(observed, Variable):
        return
    try:
        arr = np.asarray(observed)
    except Exception:  # pragma: no cover - exotic containers are left to PyMC
        return
    if arr.dtype == object:
        return
    if arr.ndim < 1:
        raise ValueError(f"observed {kind} labels must have shape (..., D); got a scalar")
    if D is not None and arr.shape[-1] != D:
        raise ValueError(
            f"observed {kind} labels have length {arr.shape[-1]} in their last axis but there are "
            f"{D} logits (one label per item); give observed the shape (..., {D})"
        )
    if arr.dtype.kind == "f":
        if np.isnan(arr).any():
            raise ValueError(
                f"observed {kind} labels contain NaN; structured labels cannot be imputed "
                "entry by entry: drop incomplete rows"
            )
        if np.any(arr != np.round(arr)):
            raise ValueError(
                f"observed {kind} labels must be integers; got non-integer values such as "
                f"{arr[arr != np.round(arr)].flat[0]!r} (PyMC would silently truncate them)"
            )
    elif arr.dtype.kind not in "iub":
        raise ValueError(f"observed {kind} labels must be integers; got dtype {arr.dtype}")
    if kind == "binary":
        if np.any((arr != 0) & (arr != 1)):
            raise ValueError("observed labels must be binary (0 or 1) for this distribution")
    elif n_levels is not None and (np.any(arr < 0) or np.any(arr >= n_levels)):
        raise ValueError(
            f"observed ordinal labels must lie in 0..{n_levels - 1} (R = {n_levels} levels, "
            f"0 = least relevant); got values in [{arr.min()}, {arr.max()}]"
        )


# ----------------------------------------------------------------------------- draws


def draw_rows(batch, D, params, draw_row):
    """Draws (*batch, D) int64 row by row (the ``rng_fn`` of the three RandomVariables).

    ``params``: list of ``(array, core_shape)``, each broadcast to ``(*batch, *core_shape)`` and
    flattened to rows; ``draw_row(*rows_i)`` returns the (D,) draw of row ``i``.
    """
    n = math.prod(batch)  # not -1: D may be 0 (no label; the numba draws give (*batch, 0))
    rows = [np.broadcast_to(a, (*batch, *core)).reshape(n, *core) for a, core in params]
    out = np.empty((n, D), dtype=np.int64)
    for i in range(n):
        out[i] = draw_row(*(r[i] for r in rows))
    return out.reshape(*batch, D)


# PyTensor's compiled draws of the three distributions call one C kernel (see
# pm_perm.ops.extern and pm_perm.kernels.count_draws.make_count_draw_kernel), drawing from the
# graph's
# own Generator (pm_perm.kernels._bitgen).
_DRAW = extern.extern_kernel(
    "pm_perm_cardinality_draw_kernel",
    types.int64(types.CPointer(types.uint64), types.CPointer(types.float64), types.intp,
                types.int64, types.CPointer(types.float64), types.intp,
                types.CPointer(types.int64), types.intc),
    make_count_draw_kernel(VERSION),
)


class DrawError(extern.StatusError):
    """Input errors of the draws (see :class:`~pm_perm.ops.extern.StatusError`)."""

    messages = extern.value_errors(DRAW_ERRORS)


#: The status of :class:`DrawError` for a ``count_probs`` of the wrong length.
COUNT_PROBS_LENGTH = DRAW_ERRORS.index("count_probs must have D + 1 entries per row (k = 0..D)")


def draw_numba(which):
    """``draw(rng, logits, k, count_probs (R, D + 1) or (D + 1,), out) -> out`` (D,) int64 in
    compiled code (``which``: ``pm_perm.kernels.count_draws.DRAW_*``; ``out`` None: allocated);
    raises ``ValueError``."""
    kernel = _DRAW().external

    @numba_basic.numba_njit
    def draw(rng, logits, k, count_probs, out):
        th, pk = np.ascontiguousarray(logits), np.ascontiguousarray(count_probs)
        if out is None:
            out = np.empty(th.shape[0], dtype=np.int64)
        y = extern.c_contiguous_out(out)
        R = pk.shape[0] if pk.ndim == 2 else 1
        bitgen = extern.bitgen_of(rng)
        status = kernel(bitgen.ctypes, th.ctypes, th.shape[0], k, pk.ctypes, R, y.ctypes, which)
        if status != 0:
            raise DrawError(status)
        return extern.copy_back(out, y)

    return draw
