"""Non-integer values of the integer-valued pm_perm distributions get ``logp = -inf``.

``pm.logp(rv, value)`` converts a literal ``value`` (a list or array, not a PyTensor variable)
to the random variable's dtype BEFORE any distribution code runs: for our int64 variables
``[0.4, 1, 2]`` silently becomes ``[0, 1, 2]``, and the log-probability of a different value
is returned. :func:`install` wraps ``pm.logp`` so that, for the random variables of pm_perm
(ops with ``integer_values = True``) only, a literal with non-integer (or non-finite)
entries is passed on as float64 instead; every pm_perm ``logp`` compares values with integers
exactly, so such a value gets ``-inf``. Integer-valued floats (``[0.0, 1.0, 2.0]``) and every
other distribution are unaffected. Values inside models are PyTensor variables and never go
through this conversion.
"""

from __future__ import annotations

import functools

import numpy as np
import pytensor.tensor as pt
from pytensor.graph.basic import Variable

__all__ = ["install", "integer_rows", "value_rows"]


def _ours(rv):
    owner = getattr(rv, "owner", None)
    return owner is not None and getattr(owner.op, "integer_values", False)


def install():
    """Wrap ``pymc.logp`` (idempotent)."""
    import pymc
    import pymc.logprob
    import pymc.logprob.basic as basic

    original = basic.logp
    if getattr(original, "_pm_perm_guard", False):
        return

    @functools.wraps(original)
    def logp(rv, value, *args, **kwargs):
        if not isinstance(value, Variable) and _ours(rv):
            arr = np.asarray(value)
            if arr.dtype.kind in "fc" and not np.all(np.isfinite(arr) & (arr == np.round(arr))):
                value = pt.as_tensor_variable(np.asarray(arr.real, dtype=np.float64))
        return original(rv, value, *args, **kwargs)

    logp._pm_perm_guard = True
    for module in (basic, pymc.logprob, pymc):
        if getattr(module, "logp", None) is original:
            module.logp = logp


def integer_rows(value):
    """``(int_value, ok)`` for a logp whose Ops take int64 rank-form rows (..., M).

    A float ``value`` (a variable, or a literal passed on by :func:`install`) is cast to int64
    with every row that has a non-integer or non-finite entry replaced by all ``-1`` (a valid,
    cheap order); ``ok`` (...) is False on those rows, whose logp must be set to ``-inf``.
    Integer values are returned unchanged with ``ok = None``.
    """
    if value.type.dtype not in pt.type.float_dtypes:
        return value, None
    ok = pt.all(pt.isfinite(value) & pt.eq(value, pt.round(value)), axis=-1)
    return pt.cast(pt.switch(ok[..., None], value, -1.0), "int64"), ok


def value_rows(value, M):
    """``value`` (..., M) as rows (n, M) for the rank-form Ops, n the product of its leading
    dimensions, written out rather than -1: NumPy cannot infer -1 for an empty array, which a
    value of M = 0 items known only at run time is (the logps then refuse M = 0 by their
    parameter check)."""
    return value.reshape((pt.prod(value.shape[:-1], dtype="int64"), M))
