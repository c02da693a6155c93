"""``PLAnchoredRanking``: complete and top-k rankings under Plackett-Luce tilted by an item x
position matrix (the Plackett-Luce-anchored full model of issue 53).

Likelihood: :mod:`pm_perm.ops.pl_tilted` (kernel :mod:`pm_perm.kernels.pl_tilted`); exact
draws: :mod:`pm_perm.kernels.pl_tilted_sampler`. Values follow the rank-form convention of
:class:`~pm_perm.distributions.PartialRanking`.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.distributions.shape_utils import rv_size_is_none
from pytensor.link.numba.dispatch import basic as numba_basic
from pytensor.link.numba.dispatch.random import numba_core_rv_funcify
from pytensor.tensor.blockwise import Blockwise

from pm_perm.distributions._ballots import ballot_arguments, ballot_logp
from pm_perm.distributions._params import (
    ballot_weights_inputs,
    count_weights_np,
    weighted_ballot_logp,
)
from pm_perm.distributions._patterns import (
    ballot_length_numba,
    coarsen_numba,
    finish_draws,
    observed_pattern,
    pattern_input,
    pattern_support_point,
)
from pm_perm.distributions._shapes import (
    check_observed_orders,
    observed_utility_rows,
    refuse_empty,
)
from pm_perm.distributions._values import IntegerRV, integer_rows, value_rows
from pm_perm.kernels._version import code_version
from pm_perm.kernels.partial_orders import check_partial_order_size
from pm_perm.kernels.permanent import EXACT_MAX_M
from pm_perm.kernels.pl_tilted import middle_tie_rows
from pm_perm.kernels.pl_tilted_sampler import (
    pl_tilted_draw_into,
    pl_tilted_log_table,
    sample_pl_tilted,
)
from pm_perm.kernels.plackett_luce import check_length_probs
from pm_perm.ops.pl_tilted import PLTiltedLoglik, pl_tilted_loglik

_VERSION = code_version(__file__)  # numba cache version (see pm_perm.kernels._version)

__all__ = ["PLAnchoredRanking", "PLAnchoredRankingRV", "TIE_MSG"]

_NAME = "PLAnchoredRanking"
_WEIGHTS_MSG = f"{_NAME}: weights must be non-negative integers (ballots per distinct order)"
_LENGTH_MSG = (f"{_NAME}: length_probs must have M + 1 non-negative entries summing to 1 "
               "(probabilities of ranking k = 0..M items)")
_PARAMS_MSG = f"{_NAME}: utilities and deviations must be finite (no NaN or inf)"

#: The error for a ballot with tied items before its end (not supported by the likelihood).
TIE_MSG = (f"{_NAME} supports complete and top-k ballots (a tie only at the end of a ballot): a "
           "ballot has tied items before its end. Use PartialRanking (the full model, exact for "
           "ties anywhere) or PlackettLuce (exact for ties), or break the ties")

#: The names of the parameters, in order (positional arguments are matched to them).
_PARAMS = ("utilities", "deviations", "weights", "length_probs", "pattern")

_blockwise_loglik = Blockwise(PLTiltedLoglik(), signature="(m),(m,m),(n,m)->(n)")


def _check_weights_np(weights):
    return count_weights_np(weights, _WEIGHTS_MSG)


class PLAnchoredRankingRV(IntegerRV):
    """Exact draws: utilities (..., M), deviations (..., M, M), weights (...), length_probs
    (..., L), pattern (..., P) -> (..., M) int64.

    A complete order from the model (:mod:`pm_perm.kernels.pl_tilted_sampler`); cut to its
    first ``k ~ length_probs`` items when ``length_probs`` is given (L = M + 1; L = 0: complete),
    or coarsened to ``pattern`` (P = M; P = 0: none), which takes precedence. Weights do not
    affect draws but are checked as in ``logp``.
    """

    name = "pl_anchored_ranking"
    signature = "(m),(m,m),(),(l),(p)->(m)"
    dist_name = _NAME

    @classmethod
    def rng_fn(cls, rng, utilities, deviations, weights, length_probs, pattern, size):
        u = np.asarray(utilities, dtype=np.float64)
        D = np.asarray(deviations, dtype=np.float64)
        w = _check_weights_np(weights)
        lp = np.asarray(length_probs, dtype=np.float64)
        pattern = np.asarray(pattern)
        M = u.shape[-1]
        if lp.shape[-1]:
            check_length_probs(lp, M)
        if size is None:
            size = np.broadcast_shapes(u.shape[:-1], D.shape[:-2], w.shape, lp.shape[:-1],
                                       pattern.shape[:-1])
        y = sample_pl_tilted(u, D, size=tuple(size), rng=rng)
        return finish_draws(y, pattern, lp, M, rng, cls.dist_name)


pl_anchored_ranking = PLAnchoredRankingRV()


@numba_core_rv_funcify.register(PLAnchoredRankingRV)
def _numba_pl_anchored_ranking(op, node):
    coarsen = coarsen_numba()
    check_length, cut_length = ballot_length_numba("PLAnchoredRanking", "M")
    max_m = EXACT_MAX_M

    @numba_basic.numba_njit
    def core_draw(rng, utilities, deviations, weights, length_probs, pattern, out=None):
        M = utilities.shape[0]
        w = np.float64(weights.item())
        if not (np.isfinite(w) and w >= 0.0 and w == np.floor(w)):
            raise ValueError("PLAnchoredRanking: weights must be non-negative integers "
                             "(ballots per distinct order)")
        if M > max_m:
            raise ValueError("PLAnchoredRanking: too many items for the exact sampler")
        L = length_probs.shape[0]
        total = check_length(length_probs, M)
        u = np.ascontiguousarray(utilities)
        D = np.ascontiguousarray(deviations)
        logh, logsig = np.empty(1 << M), np.empty(1 << M)
        status = pl_tilted_log_table(u, D, logh, logsig)  # never raises: a status
        if status == 1:
            raise ValueError("PLAnchoredRanking: utilities and deviations must be finite "
                             "(no NaN or inf)")
        if status != 0:
            raise ValueError("PLAnchoredRanking: utilities (M,) need deviations (M, M)")
        y = np.empty(M, dtype=np.int64) if out is None else out
        pl_tilted_draw_into(u, D, logh, rng, y)
        if pattern.shape[0] != 0:  # the pattern wins over length_probs (checked all the same)
            return coarsen(y, pattern)
        if L:
            cut_length(rng, y, length_probs, total, M)
        return y

    core_draw.handles_out = True
    return core_draw, _VERSION


def _check_observed(observed, M):
    """Reject malformed observed orders, and ballots tied before their end, at model build."""
    rows = observed_utility_rows(observed, M)
    if rows is None:
        return
    bad = middle_tie_rows(rows)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"observed row {i} ({rows[i].tolist()}): {TIE_MSG}")


class PLAnchoredRanking(pm.Discrete):
    r"""Complete and top-k rankings under Plackett-Luce tilted by item x position deviations.

    .. math::

        p(\pi \mid u, D) = \frac{1}{Z(u, D)} \prod_{t=0}^{M-1}
            \frac{e^{u_{\pi_t}}}{\sum_{s \ge t} e^{u_{\pi_s}}}
            \; \exp\Big(\sum_i D_{i, y_i}\Big)

    (``pi_t`` the item at position ``t``, ``y_i`` the position of item ``i``). ``D = 0`` is
    :class:`~pm_perm.distributions.PlackettLuce` exactly; ``u = 0`` is the permutation
    exponential family with logits ``D`` (:class:`~pm_perm.distributions.PartialRanking`). A
    top-k ballot has the probability of all the complete orders that start with it.

    ========  ==========================================================================
    Support   rank-form orders (the convention of :class:`PartialRanking`): complete, top-k
              (``-1`` = unranked), and a tie block only at the END of a ballot
    Mode      ``support_point``: items by decreasing utility (a point of the support, not the
              mode; cut or coarsened as the draws)
    ========  ==========================================================================

    Parameters
    ----------
    utilities : tensor_like of float, shape (..., M)
        Finite. Shift-invariant (give them a ``pm.ZeroSumNormal`` prior or fix one).
    deviations : tensor_like of float, shape (..., M, M)
        ``D[i, j]``: tilt of item ``i`` at position ``j``; finite. Invariant to adding a
        constant to a row or a column (``pm_perm.preferences.anchored`` uses zero-sum ones).
    weights : tensor_like of int, shape (...), optional
        Counts of the distinct orders, with the meaning of :class:`PlackettLuce`'s ``weights``:
        in a model with ``observed`` distinct orders (n, M), one row per BALLOT (per-ballot
        ``pm.compute_log_likelihood`` and posterior predictive, a summed logp costed per
        distinct order); with ``.dist`` and ``pm.logp``, ``w * log p(row)`` per row.
    length_probs : tensor_like of float, shape (..., M + 1), optional
        Probabilities of ranking ``k = 0..M`` items: draws are top-k (``k ~ length_probs``) and
        ``logp`` adds ``log length_probs[k]``.
    pattern : tensor_like of int, shape (..., M), optional
        Draws only: each complete draw coarsened to it (its length and tie blocks), as
        :class:`PartialRanking`'s ``pattern``.
    keep_pattern : bool, default True
        Model level only: the observed value is the pattern of the posterior predictive draws.

    Raises
    ------
    ValueError
        Observed ballots with tied items before their end (at build, naming the row and
        :class:`PartialRanking` / :class:`PlackettLuce`; at run time by the parameter check of
        ``logp``), not rank form, invalid counts, M beyond the exact limit.

    Notes
    -----
    One subset table per ``(u, D)``: logp and gradient cost O(M 2^M) plus O(M^2) per distinct
    order. Draws: one table of ``log h`` per distinct ``(u, D)`` and O(M^2) per draw in the
    NumPy draws (``rng_fn``); the compiled (numba) draws build the table for EVERY drawn row,
    O(M 2^M) each (at M = 14, about 1.2 ms per draw against 7 microseconds: for many ballots
    of many items, compile the posterior predictive with
    ``compile_kwargs={"mode": "FAST_COMPILE"}``).

    Examples
    --------
    >>> import numpy as np, pymc as pm, pm_perm
    >>> from pm_perm.distributions import PLAnchoredRanking
    >>> u, D = np.array([1.0, 0.0, -1.0]), np.zeros((3, 3))
    >>> y = PLAnchoredRanking.dist(u, D)
    >>> lp = pm.logp(y, np.array([[0, 1, 2], [0, -1, -1]])).eval()
    >>> np.round(np.exp(lp), 4).tolist()    # Plackett-Luce at D = 0
    [0.4863, 0.6652]
    >>> pm.draw(y, random_seed=1).shape
    (3,)
    """

    rv_type = PLAnchoredRankingRV

    @classmethod
    def rv_op(cls, utilities, deviations, weights, length_probs, pattern, *, size=None,
              rng=None, return_next_rng=False):
        if rng is None:
            rng = pt.random.shared_rng(seed=None)
        next_rng, rv = pl_anchored_ranking(utilities, deviations, weights, length_probs,
                                           pattern, size=size, rng=rng, return_next_rng=True)
        return (next_rng, rv) if return_next_rng else rv

    def __new__(cls, name, *args, observed=None, keep_pattern=True, **kwargs):
        if len(args) > len(_PARAMS):
            raise TypeError(f"{_NAME} takes at most {len(_PARAMS)} positional parameters "
                            f"{_PARAMS}; got {len(args)}")
        for key, value in zip(_PARAMS, args, strict=False):  # by name: weights is the third
            if key in kwargs:
                raise TypeError(f"{_NAME}: {key} given twice")
            kwargs[key] = value
        check_observed_orders(_NAME, observed, _check_observed, "utilities", 1, (), kwargs)
        _, kwargs, observed = ballot_arguments(_NAME, name, (), kwargs, observed)
        kwargs = observed_pattern(observed, keep_pattern, kwargs, 0)
        return super().__new__(cls, name, observed=observed, **kwargs)

    @classmethod
    def dist(cls, utilities, deviations, weights=None, length_probs=None, pattern=None,
             **kwargs):
        u = pt.as_tensor_variable(utilities)
        D = pt.as_tensor_variable(deviations)
        if u.type.ndim < 1 or D.type.ndim < 2:
            raise ValueError(f"{_NAME}: utilities must have shape (..., M) and deviations "
                             f"(..., M, M); got ndim {u.type.ndim} and {D.type.ndim}")
        refuse_empty(_NAME, "utilities", u, 1)
        M = u.type.shape[-1]
        for m in D.type.shape[-2:]:
            if M is not None and m is not None and m != M:
                raise ValueError(f"{_NAME}: deviations must have shape (..., {M}, {M}) for {M} "
                                 f"utilities; got {D.type.shape}")
        if M is not None:
            check_partial_order_size(M)  # refuse at once, naming the alternatives
        u, D = pt.cast(u, "float64"), pt.cast(D, "float64")
        weights, length_probs = ballot_weights_inputs(weights, length_probs, M, _check_weights_np)
        pattern = pattern_input(pattern, M, _NAME)
        return super().dist([u, D, weights, length_probs, pattern], **kwargs)

    def support_point(rv, size, utilities, deviations, weights, length_probs, pattern):
        y = pt.argsort(pt.argsort(-utilities, axis=-1), axis=-1)
        if pattern.type.shape[-1] != 0:  # the pattern wins, as in the draws
            y = pattern_support_point(y, pattern)
        elif length_probs.type.shape[-1] != 0:
            k = pt.argmax(length_probs, axis=-1)
            y = pt.switch(pt.ge(y, k[..., None]), -1, y)
        y = pt.broadcast_to(y, rv.shape if rv_size_is_none(size)
                            else (*size, utilities.shape[-1]))
        return pt.cast(y, "int64")

    def logp(value, utilities, deviations, weights, length_probs, pattern):
        # one row per ballot (weights=counts in a model): computed on the distinct orders
        shared = all(utilities.type.broadcastable[:-1] + deviations.type.broadcastable[:-2]
                     + length_probs.type.broadcastable[:-1])
        return ballot_logp(value, lambda rows: PLAnchoredRanking._logp_rows(
            rows, utilities, deviations, weights, length_probs), shared)

    @staticmethod
    def _logp_rows(value, utilities, deviations, weights, length_probs):
        M = utilities.shape[-1]
        value, is_int = integer_rows(value)
        if all(utilities.type.broadcastable[:-1] + deviations.type.broadcastable[:-2]):
            u = utilities[(0,) * (utilities.type.ndim - 1)]  # one (u, D): one table
            D = deviations[(0,) * (deviations.type.ndim - 2)]
            ll = pl_tilted_loglik(u, D, value_rows(value, M)).reshape(value.shape[:-1])
        else:  # a (u, D) per row: one table per row
            ll = _blockwise_loglik(utilities, deviations, value[..., None, :])[..., 0]
        finite = pt.all(pt.isfinite(utilities)) & pt.all(pt.isfinite(deviations))
        conditions = [pt.ge(M, 1), finite,
                      pt.all(pt.isfinite(weights) & pt.ge(weights, 0)
                             & pt.eq(weights, pt.round(weights))),
                      ~finite | pt.all(~pt.isnan(ll))]  # NaN with finite parameters: a tie
        msgs = [f"{_NAME}: no item to rank (M = 0)", _PARAMS_MSG, _WEIGHTS_MSG, TIE_MSG]
        return weighted_ballot_logp(ll, value, is_int, weights, length_probs, M, conditions,
                                    msgs, _LENGTH_MSG)
