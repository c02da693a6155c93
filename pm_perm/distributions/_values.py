"""Value handling shared by the logps of the integer-valued distributions.

A value that is a float variable (e.g. ``pm.logp(rv, pt.dvector())``) is checked for integer
entries inside each logp (:func:`integer_rows`): a row with a non-integer or non-finite entry gets
``logp = -inf``. A literal (a list or array) given to ``pm.logp`` is converted to the variable's
integer dtype by PyMC before any distribution code runs, as for every discrete PyMC distribution
(``[0.4, 1, 2]`` becomes ``[0, 1, 2]``); pm_perm does not change PyMC's ``pm.logp`` to prevent
that (a library must not patch its host): pass such a value as a float tensor
(``pt.as_tensor(np.asarray(value, dtype=float))``) to have it checked.
"""

from __future__ import annotations

import pytensor.tensor as pt
from pytensor.tensor.random.op import RandomVariable

__all__ = ["IntegerRV", "integer_rows", "value_rows"]


class IntegerRV(RandomVariable):
    """Shared declaration of pm_perm's RandomVariables: int64 values, printed under the name of
    their distribution (the class attribute ``dist_name``, e.g. ``"PlackettLuce"``)."""

    dtype = "int64"

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "dist_name" in cls.__dict__:
            cls._print_name = (cls.dist_name, f"\\operatorname{{{cls.dist_name}}}")


def integer_rows(value):
    """``(int_value, ok)`` for a logp whose Ops take int64 rank-form rows (..., M).

    A float ``value`` (a variable) is cast to int64
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
