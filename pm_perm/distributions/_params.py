"""Parameter checks and table look-ups shared by the logps of the distributions."""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from pymc.distributions.dist_math import check_parameters

from pm_perm.kernels._checks import LOGIT_ABS_MAX
from pm_perm.kernels.plackett_luce import check_length_probs

__all__ = [
    "ABS_MAX",
    "LOGITS_MSG",
    "ballot_weights_inputs",
    "logits_ok",
    "select_last",
    "simplex_ok",
    "weighted_ballot_logp",
]

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
    the last entry (a wrong length is reported by ``check_parameters``, not by a shape error).

    One table (leading dimensions of length 1 that ``idx`` broadcasts away) is indexed directly
    (O(n) for n indices); a batch of tables by a one-hot mask over the last axis (O(n L):
    (n, L) temporaries, too big for millions of ballots)."""
    n = table.shape[-1]
    idx = pt.as_tensor_variable(idx)
    idx = pt.minimum(idx, n - 1)
    lead = table.type.ndim - 1
    if all(table.type.broadcastable[:-1]) and idx.type.ndim >= lead:
        return table[(0,) * lead][idx]
    return pt.sum(pt.switch(pt.eq(pt.arange(n), idx[..., None]), table, 0.0), axis=-1)


def count_weights_np(weights, msg):
    """``weights`` as float64 when every entry is a finite non-negative integer (ballots per
    distinct order), else ``ValueError`` with ``msg`` and the first five entries. The draws'
    check of a ranking distribution's ``weights`` (its ``logp`` checks them symbolically)."""
    w = np.asarray(weights, dtype=np.float64)
    if not np.all(np.isfinite(w) & (w >= 0) & (w == np.round(w))):
        raise ValueError(f"{msg}; got {np.asarray(weights).ravel()[:5]}")
    return w


def ballot_weights_inputs(weights, length_probs, M, check_weights_np):
    """The ``weights`` (default 1) and ``length_probs`` (default empty: complete rankings)
    inputs of a ranking distribution on M items, as float64 tensors. Literal values are checked
    at once: ``weights`` by ``check_weights_np`` (the distribution's, raising ``ValueError``),
    ``length_probs`` by :func:`pm_perm.kernels.plackett_luce.check_length_probs` when ``M`` (a
    static size or ``None``) is known."""
    if weights is None:
        weights = pt.constant(1.0, dtype="float64")
    else:
        if not isinstance(weights, pt.Variable):
            check_weights_np(weights)
        weights = pt.cast(pt.as_tensor_variable(weights), "float64")
    if length_probs is None:
        length_probs = pt.constant(np.zeros(0), dtype="float64")
    else:
        if not isinstance(length_probs, pt.Variable) and M is not None:
            check_length_probs(length_probs, M)
        length_probs = pt.cast(pt.as_tensor_variable(length_probs), "float64")
    return weights, length_probs


def weighted_ballot_logp(ll, value, is_int, weights, length_probs, M, conditions, msgs,
                         length_msg):
    """The end of a ranking logp from the model's log-probabilities ``ll`` of the rank-form
    ``value`` rows: the ``log length_probs[k]`` of each row ranking ``k`` items (when
    ``length_probs`` is not empty; its check, with ``length_msg``, joins ``conditions`` /
    ``msgs``), ``-inf`` for non-integer values (``is_int``, from ``integer_rows``), times the
    ``weights`` (rows of weight 0 give 0), then the parameter checks."""
    conditions, msgs = list(conditions), list(msgs)
    if length_probs.type.shape[-1] != 0:
        k = pt.sum(pt.ge(value, 0), axis=-1)
        ll = ll + pt.log(select_last(length_probs, k))
        conditions.append(pt.eq(length_probs.shape[-1], M + 1)
                          & pt.all(pt.ge(length_probs, 0))
                          & pt.all(pt.le(pt.abs(pt.sum(length_probs, axis=-1) - 1.0), 1e-6)))
        msgs.append(length_msg)
    if is_int is not None:  # a non-integer value is outside the support
        ll = pt.switch(is_int, ll, -np.inf)
    lp = pt.switch(pt.eq(weights, 0), 0.0, weights * ll)
    for cond, msg in zip(conditions, msgs, strict=True):
        lp = check_parameters(lp, cond, msg=msg)
    return lp
