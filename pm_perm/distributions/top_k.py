"""``TopKRanking``: ballots of at most K items under the exact top-k item-by-position model.

Value convention: rank form, as :class:`pm_perm.PartialRanking` (``-1`` = unranked).
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.distributions.dist_math import check_parameters
from pymc.distributions.shape_utils import rv_size_is_none
from pytensor.link.numba.dispatch import basic as numba_basic
from pytensor.link.numba.dispatch.random import numba_core_rv_funcify

from pm_perm.distributions._ballots import ballot_arguments, ballot_logp
from pm_perm.distributions._params import (
    LOGITS_MSG,
    count_weights_np,
    logits_ok,
    select_last,
    simplex_ok,
)
from pm_perm.distributions._patterns import (
    ballot_length_numba,
    coarsen_numba,
    finish_draws,
    observed_pattern,
    pattern_input,
    pattern_support_point,
)
from pm_perm.distributions._shapes import check_observed_orders, refuse_empty
from pm_perm.distributions._values import IntegerRV, integer_rows, value_rows
from pm_perm.distributions.partial_ranking import _check_observed as _check_rank_form
from pm_perm.distributions.partial_ranking import _constant_value
from pm_perm.kernels._checks import finite_or_minus_inf
from pm_perm.kernels._version import code_version
from pm_perm.kernels.top_k import check_top_k_size
from pm_perm.kernels.top_k_sampler import draw_top_k_into, sample_top_k
from pm_perm.ops.top_k import top_k_loglik

_VERSION = code_version(__file__)  # numba cache version (see pm_perm.kernels._version)

__all__ = ["TopKRanking", "TopKRankingRV"]

_SIMPLEX_TOL = 1e-6
_WEIGHTS_MSG = "weights must be non-negative integers (the count of each distinct order)"
_NO_LIST_MSG = "TopKRanking: the logits admit no top-K list (every one uses a -inf logit)"
_PATTERN_MSG = "TopKRanking: a pattern ranks more items than the K positions of the logits"


def _complete(y, K):
    """Top-K draws (*size, M) -> complete rankings: the items out of the top K take positions
    K, K + 1, ... in item order (the model's positions beyond K are exchangeable)."""
    out = y.copy()
    rest = out < 0
    out[rest] = (K + np.cumsum(rest, axis=-1) - 1)[rest]
    return out


class TopKRankingRV(IntegerRV):
    """Draws of rank-form ballots of the top-k model: top-K lists, or cut after
    ``k ~ length_probs`` items, or coarsened to a ``pattern``.

    Inputs: ``logits`` (..., M, K + 1), ``weights`` (...) (logp only), ``length_probs``
    (..., K + 1) or empty, ``pattern`` (..., M) or empty (a rank-form row ranking at most K
    items whose positions the draw keeps; it takes precedence over ``length_probs``).
    """

    name = "top_k_ranking"
    signature = "(m,q),(),(l),(p)->(m)"
    dist_name = "TopKRanking"

    @classmethod
    def rng_fn(cls, rng, logits, weights, length_probs, pattern, size):
        M, K = logits.shape[-2], logits.shape[-1] - 1
        count_weights_np(weights, f"TopKRanking: {_WEIGHTS_MSG}")
        if length_probs.shape[-1] not in (0, K + 1) or (length_probs.shape[-1] and not (
                np.all(length_probs >= 0)
                and np.all(np.abs(length_probs.sum(-1) - 1.0) < _SIMPLEX_TOL))):
            raise ValueError(f"TopKRanking: length_probs must be a simplex of K + 1 = {K + 1} "
                             "entries (k = 0..K items ranked)")
        pattern = np.asarray(pattern)
        batch = np.broadcast_shapes(logits.shape[:-2], np.shape(weights),
                                    length_probs.shape[:-1], pattern.shape[:-1])
        size = batch if size is None else tuple(size)
        y = sample_top_k(np.broadcast_to(logits, (*size, M, K + 1)), rng=rng)
        if pattern.shape[-1]:
            if np.any((pattern >= 0).sum(-1) > K):
                raise ValueError(_PATTERN_MSG)
            y = _complete(y, K)  # a coarsening needs complete rankings
        return finish_draws(y, pattern, length_probs, K, rng, cls.dist_name)


top_k_ranking = TopKRankingRV()


@numba_core_rv_funcify.register(TopKRankingRV)
def _numba_top_k_ranking(op, node):
    coarsen = coarsen_numba()
    check_length, cut_length = ballot_length_numba("TopKRanking", "K", _SIMPLEX_TOL)

    @numba_basic.numba_njit
    def core_draw(rng, logits, weights, length_probs, pattern, out=None):
        M, K = logits.shape[0], logits.shape[1] - 1
        w = weights.item()
        if not (np.isfinite(w) and w >= 0 and w == np.floor(w)):
            raise ValueError("TopKRanking: weights must be non-negative integers (counts)")
        L = length_probs.shape[0]
        total = check_length(length_probs, K)
        if K < 1 or K > M or not finite_or_minus_inf(logits):
            raise ValueError("TopKRanking: logits must be (M, K + 1) with 1 <= K <= M, each "
                             "-inf or finite")
        y = np.empty(M, dtype=np.int64) if out is None else out
        if not draw_top_k_into(rng, np.ascontiguousarray(logits), y):
            raise ValueError("TopKRanking: the logits admit no top-K list")
        if pattern.shape[0] != 0:
            ranked = 0
            for i in range(M):
                ranked += pattern[i] >= 0
            if ranked > K:
                raise ValueError("TopKRanking: a pattern ranks more items than K")
            nxt = K
            for i in range(M):
                if y[i] < 0:
                    y[i] = nxt
                    nxt += 1
            return coarsen(y, pattern)
        if L:
            cut_length(rng, y, length_probs, total, K)
        return y

    core_draw.handles_out = True
    return core_draw, _VERSION


class TopKRanking(pm.Discrete):
    r"""Ballots of at most K items under the exact top-k item-by-position model.

    .. math::

        p(t) = \frac{\exp\left(\sum_{j<K} W_{t_j, j} + \sum_{i \notin t} V_i\right)}{Z},
        \qquad Z = e^{\sum_i V_i} \operatorname{perm}_K\left(e^{W_{ij} - V_i}\right)

    for a top-K list ``t`` (``t_j`` the item at position ``j``) of ``M`` items: ``W[i, j]`` the
    logit of item ``i`` at position ``j < K`` and ``V[i]`` that of item ``i`` NOT being in the
    top K (positions ``K..M-1`` are exchangeable). ``logits`` is ``[W | V]``, shape
    (..., M, K + 1). The normaliser is the K x M rectangular permanent, by a dynamic program
    over subsets of the K positions (:mod:`pm_perm.kernels.top_k`): O(M K 2^K), for any M.
    With ``K = M`` it is :class:`PartialRanking`'s full model (``V`` unused); with ``K = 1`` a
    multinomial of first choices.

    Values: rank form, exactly as :class:`PartialRanking` (item ``i`` holds its position,
    ``-1`` = unranked, tied items share the smallest position of their block). A ballot ranks
    ``k <= K`` items (tied items count as ranked); its probability sums over the top-K lists
    that agree with it: a tie block's items fill its positions in any order (an exact ``s x s``
    permanent; every tie pattern inside the top K is supported), the unranked items fill
    positions ``k..K-1`` in any way and the rest are out.

    Parameters
    ----------
    logits : tensor_like of float, shape (..., M, K + 1)
        ``[W | V]`` as above; ``-inf`` forbids an item at a position (or out of the top K).
        NaN / ``+inf``, and logits under which no top-K list has positive probability, fail the
        parameter check. Adding a constant to a row of ``logits`` or to a column of ``W``
        changes no probability.
    weights : tensor_like of int, shape (...), optional
        As :class:`PartialRanking`'s ``weights``: the count of each distinct ballot. In a model
        with ``observed`` distinct ballots (n, M) and counts (n,) the variable has one row per
        BALLOT (the orders expanded by their counts), its summed logp costs per distinct
        ballot; with ``TopKRanking.dist(weights=w)`` and ``pm.logp``, per row
        ``w * log p(row)``.
    length_probs : tensor_like of float, shape (..., K + 1), optional
        Probability that a ballot ranks ``k = 0..K`` items: draws are cut after ``k`` items
        and the logp adds ``log length_probs[k]``. Without it, draws are top-K lists.
    pattern : tensor_like of int, shape (..., M), optional
        Draws only: rank-form rows (at most K items ranked) whose positions each draw keeps,
        as :class:`PartialRanking`'s ``pattern``.
    keep_pattern : bool, default True
        Model level: the observed ballots are the pattern of the posterior predictive draws.

    Notes
    -----
    Cost per logits matrix: O(M^3) (the assignment duals that scale the weights) plus
    O(M K 2^K), then O(M) per distinct ballot of length K and O(M r 2^r) per ballot leaving
    ``r = K - k`` positions to its unranked items (for a length held by many ballots, O(M^2 r
    2^r) once and O(2^r) to O(k 3^r) per ballot from shared tables,
    :mod:`pm_perm.kernels.top_k_ballots`). ``K <= TOP_K_MAX_K`` (24) and the memory
    budget for (M + 1) tables of 2^K float64. Observed rows that are not valid rank form, or rank
    more than K items, raise ``ValueError`` naming the row when the model is built.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pm_perm
    >>> L = np.zeros((5, 3)); L[0, 0] = 2.0          # 5 items, K = 2; item 0 likes the top
    >>> ballots = np.array([[0, 1, -1, -1, -1], [-1, 0, -1, -1, -1], [0, 0, -1, -1, -1]])
    >>> pm.logp(pm_perm.TopKRanking.dist(L), ballots).eval().round(3).tolist()
    [-1.819, -2.433, -1.692]
    """

    rv_type = TopKRankingRV
    rv_op = top_k_ranking

    def __new__(cls, name, *args, observed=None, keep_pattern=True, **kwargs):
        check_observed_orders("TopKRanking", observed, _check_observed_for(args, kwargs),
                              "logits", 2, args, kwargs)
        args, kwargs, observed = ballot_arguments("TopKRanking", name, args, kwargs, observed)
        kwargs = observed_pattern(observed, keep_pattern, kwargs, len(args))
        return super().__new__(cls, name, *args, observed=observed, **kwargs)

    @classmethod
    def dist(cls, logits, weights=None, length_probs=None, pattern=None, **kwargs):
        logits = pt.as_tensor_variable(logits)
        if logits.type.ndim < 2:
            raise ValueError("logits must have shape (..., M, K + 1); got ndim="
                             f"{logits.type.ndim}")
        logits = pt.cast(logits, "float64")
        M, Q = logits.type.shape[-2:]
        refuse_empty("TopKRanking", "logits", logits, 2)
        if M is not None and Q is not None:
            check_top_k_size(M, Q - 1)  # refuse at once, naming the limits
        if weights is None:
            weights = np.float64(1.0)
        w = _constant_value(weights)
        if w is not None and not (
            w.dtype.kind in "iub" or (w.dtype.kind == "f" and np.all(np.isfinite(w)))
        ) or (w is not None and not np.all((w >= 0) & (w == np.round(w)))):
            raise ValueError(f"{_WEIGHTS_MSG}; got {w.ravel()[:5].tolist()}")
        weights = pt.cast(pt.as_tensor_variable(weights), "float64")
        if length_probs is None:
            length_probs = np.zeros(0)
        length_probs = pt.cast(pt.as_tensor_variable(length_probs), "float64")
        n_len = length_probs.type.shape[-1]
        if Q is not None and n_len is not None and n_len not in (0, Q):
            raise ValueError(f"length_probs must have K + 1 = {Q} entries (k = 0..K); got "
                             f"{n_len}")
        pattern = pattern_input(pattern, M, "TopKRanking")
        value = _constant_value(pattern) if pattern.type.shape[-1] != 0 else None
        if value is not None and Q is not None and np.any((value >= 0).sum(-1) > Q - 1):
            raise ValueError(f"{_PATTERN_MSG} (K = {Q - 1})")
        return super().dist([logits, weights, length_probs, pattern], **kwargs)

    def support_point(rv, size, logits, weights, length_probs, pattern):
        # the top-K list of the largest position logits, greedily, then the pattern
        M, K = logits.shape[-2], logits.shape[-1] - 1
        score = logits[..., :-1] - logits[..., -1:]
        best = pt.argsort(-pt.max(score, axis=-1), axis=-1)  # items by their best position
        rank = pt.argsort(best, axis=-1)
        mode = pt.switch(pt.lt(rank, K), rank, -1)
        if pattern.type.shape[-1] != 0:
            mode = pattern_support_point(pt.switch(pt.lt(mode, 0), rank, mode), pattern)
        del M
        if not rv_size_is_none(size):
            return pt.broadcast_to(mode, (*size, logits.shape[-2]))
        return pt.broadcast_to(mode, rv.shape)

    def logp(value, logits, weights, length_probs, pattern):
        shared = all(logits.type.broadcastable[:-2] + length_probs.type.broadcastable[:-1])
        return ballot_logp(value, lambda rows: TopKRanking._logp_rows(
            rows, logits, weights, length_probs), shared)

    @staticmethod
    def _logp_rows(value, logits, weights, length_probs):
        M, K = logits.shape[-2], logits.shape[-1] - 1
        value, is_int = integer_rows(value)
        batch_axes = tuple(range(logits.type.ndim - 2))
        if all(s == 1 for s in logits.type.shape[:-2]):
            L = pt.squeeze(logits, axis=batch_axes) if batch_axes else logits
            # rows (n, M) as they are (as PlackettLuce: a reshape made PyTensor cast the
            # orders to int64 twice per evaluation)
            rows = value if value.type.ndim == 2 else value_rows(value, M)
            lp = top_k_loglik(L, rows).reshape(value.shape[:-1])
        else:
            lp = top_k_loglik(logits, value[..., None, :])[..., 0]
        checks = [
            (pt.ge(K, 1) & pt.le(K, M), "logits must have shape (..., M, K + 1) with "
                                        "1 <= K <= M"),
            (logits_ok(logits), LOGITS_MSG),
            (pt.all(pt.isfinite(weights) & pt.ge(weights, 0.0)
                    & pt.eq(weights, pt.round(weights))), _WEIGHTS_MSG),
        ]
        if length_probs.type.shape[-1] != 0:
            k = pt.sum(pt.ge(value, 0), axis=-1)
            lp = lp + pt.log(select_last(length_probs, k))
            checks.append((
                pt.eq(length_probs.shape[-1], K + 1) & pt.all(pt.ge(length_probs, 0.0))
                & simplex_ok(length_probs, _SIMPLEX_TOL),
                "length_probs must be a simplex of K + 1 entries (the probabilities of ranking "
                "k = 0..K items)",
            ))
        if is_int is not None:
            lp = pt.switch(is_int, lp, -np.inf)
        lp = pt.switch(pt.eq(weights, 0.0), 0.0, weights * lp)
        for cond, msg in checks:
            lp = check_parameters(lp, cond, msg=msg)
        return check_parameters(lp, pt.all(~pt.isnan(lp)),
                                msg="the logits admit no top-K list (every one uses a -inf "
                                    "entry)")


def _check_observed_for(args, kwargs):
    """The build-time check of observed ballots: rank form (as PartialRanking), no NaN, and at
    most K items ranked when K is known."""
    logits = kwargs.get("logits", args[0] if args else None)

    def check(observed, _last_dim):
        shape = None if logits is None else _constant_value(pt.as_tensor_variable(logits).shape)
        M, K = (None, None) if shape is None else (int(shape[-2]), int(shape[-1]) - 1)
        _check_rank_form(observed, M)  # (the last dim of the logits is K + 1, not M)
        arr = _constant_value(observed)
        if arr is None or arr.dtype == object or K is None:
            return
        ranked = (arr.reshape(-1, arr.shape[-1]) >= 0).sum(-1)
        if np.any(ranked > K):
            row = int(np.argmax(ranked > K))
            raise ValueError(f"observed[{row}] ranks {int(ranked[row])} items, more than the "
                             f"K = {K} positions of the logits: give logits of shape (M, "
                             f"{int(ranked.max())} + 1) or cut the ballots to their first {K} "
                             "items")

    return check
