"""Parameter checks and table look-ups shared by the logps of the distributions."""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt

from pm_perm.kernels._checks import LOGIT_ABS_MAX

__all__ = ["ABS_MAX", "LOGITS_MSG", "logits_ok", "select_last", "simplex_ok"]

#: ``LOGIT_ABS_MAX`` as a float64 constant (a Python float would be tried as float32 first: an
#: overflow warning).
ABS_MAX = pt.constant(LOGIT_ABS_MAX, dtype="float64")

#: The message of the parameter check :func:`logits_ok`.
LOGITS_MSG = "logits must be -inf or finite with |logits| <= 1e300 (no NaN or +inf)"


def logits_ok(logits):
    """True when every logit is ``-inf`` (forbidden) or finite with ``|logit| <= 1e300``; NaN,
    ``+inf`` and larger finite values are invalid."""
    return pt.all(pt.eq(logits, -np.inf) | pt.le(pt.abs(logits), ABS_MAX))


def simplex_ok(probs, tol):
    """True when every row (last axis) of the non-negative ``probs`` sums to 1 within ``tol``
    (non-negativity is checked by the caller)."""
    return pt.all(pt.lt(pt.abs(pt.sum(probs, axis=-1) - 1.0), tol))


def select_last(table, idx):
    """``table[..., idx]`` along the last axis, broadcasting; an index beyond the end selects
    the last entry (a wrong length is reported by ``check_parameters``, not by a shape error)."""
    n = table.shape[-1]
    idx = pt.minimum(idx, n - 1)
    return pt.sum(pt.switch(pt.eq(pt.arange(n), idx[..., None]), table, 0.0), axis=-1)
