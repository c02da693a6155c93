"""``PartialRanking``: top-k and tied rankings under the permutation exponential family.

The value convention of ranking data in pm_perm is stated once, in :class:`PartialRanking`.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.distributions.dist_math import check_parameters
from pymc.distributions.shape_utils import rv_size_is_none
from pymc.pytensorf import constant_fold
from pytensor.compile.sharedvalue import SharedVariable
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
from pm_perm.distributions.permutation import NO_ITEM_MSG, permutation_draw_numba
from pm_perm.kernels._version import code_version
from pm_perm.kernels.partial_orders import check_partial_order_size
from pm_perm.kernels.permutation_sampler import sample_permutations
from pm_perm.kernels.rank_form import validate_orders
from pm_perm.ops.matching import max_weight_matching
from pm_perm.ops.partial_orders import partial_order_loglik

_VERSION = code_version(__file__)  # numba cache version (see pm_perm.kernels._version)

__all__ = ["PartialRanking", "PartialRankingRV"]

#: Tolerance of the simplex check of ``length_probs`` (as NChooseK's count_probs).
_SIMPLEX_TOL = 1e-6


def _check_draw_parameters(weights, length_probs, M):
    """The checks of :meth:`PartialRanking.logp` on the parameters, raising for draws (the
    logits are checked by the permutation sampler)."""
    count_weights_np(weights, "PartialRanking: weights must be non-negative integers (counts)")
    if length_probs.shape[-1] not in (0, M + 1):
        raise ValueError(f"PartialRanking: length_probs must have M + 1 = {M + 1} entries")
    if length_probs.shape[-1] and not (
        np.all(length_probs >= 0) and np.all(np.abs(length_probs.sum(-1) - 1.0) < _SIMPLEX_TOL)
    ):
        raise ValueError("PartialRanking: length_probs must be a simplex (k = 0..M items ranked)")


class PartialRankingRV(IntegerRV):
    """Draws of rank-form rankings: complete, top-k with ``k ~ length_probs``, or of a pattern.

    Inputs: ``logits`` (..., M, M), ``weights`` (...) (logp only), ``length_probs`` (..., M + 1)
    or an empty vector (complete rankings), ``pattern`` (..., M) or an empty vector (none; a
    pattern coarsens each complete draw to it, :mod:`pm_perm.kernels.patterns`, and takes
    precedence over ``length_probs``, which is still checked).
    """

    name = "partial_ranking"
    signature = "(m,m),(),(l),(p)->(m)"
    dist_name = "PartialRanking"

    @classmethod
    def rng_fn(cls, rng, logits, weights, length_probs, pattern, size):
        M = logits.shape[-1]
        _check_draw_parameters(weights, length_probs, M)
        pattern = np.asarray(pattern)
        batch = np.broadcast_shapes(logits.shape[:-2], np.shape(weights), length_probs.shape[:-1],
                                    pattern.shape[:-1])
        size = batch if size is None else tuple(size)
        y = sample_permutations(logits, size=size, rng=rng)
        return finish_draws(y, pattern, length_probs, M, rng, cls.dist_name)


partial_ranking = PartialRankingRV()


@numba_core_rv_funcify.register(PartialRankingRV)
def _numba_partial_ranking(op, node):
    draw = permutation_draw_numba()  # the exact sampler's C kernel (see pm_perm.ops.extern)
    coarsen = coarsen_numba()
    check_length, cut_length = ballot_length_numba("PartialRanking", "M", _SIMPLEX_TOL)

    @numba_basic.numba_njit
    def core_draw(rng, logits, weights, length_probs, pattern, out=None):
        M = logits.shape[0]
        w = weights.item()
        if not (np.isfinite(w) and w >= 0 and w == np.floor(w)):
            raise ValueError("PartialRanking: weights must be non-negative integers (counts)")
        L = length_probs.shape[0]
        total = check_length(length_probs, M)
        y = draw(rng, logits, np.empty(M, dtype=np.int64) if out is None else out)
        if pattern.shape[0] != 0:  # the pattern wins over length_probs (checked all the same)
            return coarsen(y, pattern)
        if L:
            cut_length(rng, y, length_probs, total, M)
        return y

    core_draw.handles_out = True
    return core_draw, _VERSION


def _constant_value(x):
    """NumPy value of ``x`` when known at build (array, constant, shared), else None."""
    if isinstance(x, SharedVariable):
        return x.get_value(borrow=True)
    if x is None or isinstance(x, pt.Variable):
        try:
            (v,) = constant_fold([x], raise_not_constant=True)
            return np.asarray(v)
        except Exception:  # not constant: checked at run time by logp
            return None
    try:
        return np.asarray(x)
    except Exception:
        return None


class PartialRanking(pm.Discrete):
    r"""Partial and tied rankings under the permutation exponential family.

    .. math::

        p(y) = \frac{\sum_{\pi \text{ consistent with } y} \exp\left(\sum_i W_{i, \pi_i}\right)}
                    {\operatorname{perm}(\exp W)}

    **Value convention (the one place in pm_perm).** A ranking of ``M`` items is an int64 vector
    ``y`` of length ``M`` in RANK FORM, as for :class:`PermutationExpFamily`: item ``i`` sits at
    position ``y[i]``, 0 = first/best.

    * strict complete order: ``y`` is a permutation of ``0..M-1``;
    * top-k order: the ``k`` ranked items have distinct positions ``0..k-1``; every UNRANKED item
      has ``y[i] = -1``; the unranked items fill positions ``k..M-1`` in any order (the likelihood
      sums over all of them);
    * ties (weak orders): tied items share the SMALLEST position of their block ("min" ranking):
      a tie block of size ``s`` starting at position ``p`` gives its ``s`` items the value ``p``,
      and no item has a value in ``p+1..p+s-1``; the block's items fill positions ``p..p+s-1`` in
      any order. Unranked items (``-1``) form an implicit last block;
    * valid rows: the non-negative values are "min" ranks as above, and every item is either
      ranked or ``-1``. A row with exactly one ``-1`` is the same event as the complete order
      with that item last; both are valid;
    * ``weights``: the non-negative integer count of each distinct order (``weights=data.counts``).
      In a model with ``observed``, the variable then has one row per BALLOT (the orders
      expanded by their counts); with ``PartialRanking.dist(weights=w)`` and ``pm.logp``, the
      logp of a row is ``w * log p(order)`` (see ``weights`` below).

    Reading and writing such data (PrefLib files, plain arrays): the user guide page "Ranking
    data" (``docs/guide/preferences_data.md``).

    ========  ==========================================================================
    Support   rank-form orders (above); draws are complete or top-k, or of the ``pattern``
              (top-k and tied)
    Mode      ``support_point``: the max-weight matching of ``W`` as a complete order
              (coarsened to ``pattern`` when given)
    ========  ==========================================================================

    Parameters
    ----------
    logits : tensor_like of float, shape (..., M, M)
        ``W[i, j]``: logit of item ``i`` at position ``j``; ``-inf`` forbids it. NaN / ``+inf``,
        and logits under which no permutation has positive probability, fail the parameter check.
        The likelihood is invariant to adding a constant to a row or a column of ``W``: give such
        shifts proper priors.
    weights : tensor_like of int, shape (...), optional
        Count of each observed distinct order (default 1); non-negative integers. In a model
        with ``observed`` distinct orders (n, M) and counts (n,), the variable has one row per
        BALLOT (the orders expanded by their counts, rows of count 0 dropped; logp per ballot
        ``log p(order)`` + ``log length_probs[k]``), exactly as :class:`PlackettLuce`'s
        ``weights`` (per-ballot ``pm.compute_log_likelihood``, ``az.loo`` and posterior
        predictive, a summed logp per distinct order, ``dims`` starting with a ballot dim).
        With ``PartialRanking.dist(..., weights=w)`` and ``pm.logp(d, value)``: per row,
        ``logp = w * log p(row)``. Invalid counts (NaN, infinite, negative or fractional) are
        refused at build when known, else by the parameter check of ``logp`` and by the draws
        (which otherwise ignore them).
    length_probs : tensor_like of float, shape (..., M + 1), optional
        Probability that a ranking ranks ``k = 0..M`` items (a simplex; may be a random variable,
        e.g. ``pm.Dirichlet``). When given, draws are top-k orders with ``k ~ length_probs`` (a
        complete draw cut after its first ``k`` items), and the logp adds
        ``log length_probs[k]`` with ``k`` the number of items that are not ``-1`` (tied items
        count as ranked), so it is the log-probability of the draws; ``k = M - 1`` and
        ``k = M`` are different lengths of the same event. Without it, draws are complete
        rankings and the logp is that of the observed partial order alone.
    pattern : tensor_like of int, shape (..., M), optional
        Draws only (``logp`` ignores it): per row, a rank-form order whose positions the draw
        keeps (its number of ranked items and its tie blocks). A draw is a complete ranking
        from the model coarsened to it: the item at complete position ``j`` gets the ``j``-th
        smallest value of the pattern, unranked (``-1``) counted as last
        (:mod:`pm_perm.kernels.patterns`), so it has the probability of that tied or top-k
        order under the model. Rows must be valid rank form (the draws raise ``ValueError``
        otherwise; a constant pattern is checked by ``dist``). Takes precedence over
        ``length_probs`` for the draws (``length_probs`` is still checked, and still enters
        ``logp``).
    keep_pattern : bool, default True
        Model level only (``PartialRanking(name, ..., observed=...)``): without a ``pattern``,
        the observed value is the pattern, so ``pm.sample_posterior_predictive`` draws each
        replicated ballot with its observed ballot's length and ties. ``False``: draws as
        without ``pattern``.

    Notes
    -----
    ``pm.logp(PartialRanking.dist(..., weights=w), y) = w * log p(order y)``
    (+ ``w * log length_probs[k]``); a model-level variable with ``weights`` and ``observed`` has
    one row per ballot instead (above). Rows that are not valid rank form have ``-inf``; rows of
    weight 0 contribute 0. With ``logits`` of shape
    (M, M) all orders share one suffix subset table (:mod:`pm_perm.kernels.partial_orders`): the
    logp and its gradient cost O(M 2^M) for the table plus O(M) per distinct order (plus
    O(s 2^s) per tie block of size s inside an order). Exact up to ``M = EXACT_MAX_M`` (26) and the
    memory budget; beyond it ``ValueError`` names the alternatives (Plackett-Luce, fewer items).
    Draws: one exact permutation draw (the subset DP sampler) per ranking. Observed data that are
    not valid rank form raise ``ValueError`` naming the row when the model is built.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pm_perm
    >>> W = np.outer([3.0, 2, 1, 0], [3.0, 2, 1, 0]) / 3   # item 0 likes the top, item 3 the end
    >>> ballots = np.array([[0, 1, -1, -1], [1, 0, 2, -1], [0, 0, 2, 2]])   # top-2, top-3, ties
    >>> d = pm_perm.PartialRanking.dist(logits=W, weights=np.array([5, 2, 1]))
    >>> pm.logp(d, ballots).eval().round(3).tolist()
    [-6.994, -4.545, -0.858]
    >>> pm.draw(pm_perm.PartialRanking.dist(logits=W, length_probs=[0, 0, 1, 0, 0]),
    ...         random_seed=1).tolist()                     # a top-2 ballot
    [1, 0, -1, -1]
    """

    rv_type = PartialRankingRV
    rv_op = partial_ranking

    def __new__(cls, name, *args, observed=None, keep_pattern=True, **kwargs):
        check_observed_orders("PartialRanking", observed, _check_observed, "logits", 2, args,
                              kwargs)
        args, kwargs, observed = ballot_arguments("PartialRanking", name, args, kwargs, observed)
        kwargs = observed_pattern(observed, keep_pattern, kwargs, len(args))
        return super().__new__(cls, name, *args, observed=observed, **kwargs)

    @classmethod
    def dist(cls, logits, weights=None, length_probs=None, pattern=None, **kwargs):
        logits = pt.as_tensor_variable(logits)
        if logits.type.ndim < 2:
            raise ValueError(f"logits must have shape (..., M, M); got ndim={logits.type.ndim}")
        logits = pt.cast(logits, "float64")
        m0, m1 = logits.type.shape[-2:]
        if m0 is not None and m1 is not None and m0 != m1:
            raise ValueError(f"logits must be square in the last two dims; got {logits.type.shape}")
        refuse_empty("PartialRanking", "logits", logits, 2)
        if m0 is not None:
            check_partial_order_size(m0)  # refuse at once, naming the alternatives
        if weights is None:
            weights = np.float64(1.0)
        w = _constant_value(weights)
        if w is not None and not (
            w.dtype.kind in "iub" or (w.dtype.kind == "f" and np.all(np.isfinite(w)))
        ):
            raise ValueError(f"weights must be non-negative integers (counts); got {w.dtype}")
        if w is not None and not np.all((w >= 0) & (w == np.round(w))):
            bad = w.ravel()[np.argmax(~((w >= 0) & (w == np.round(w))).ravel())].item()
            raise ValueError(
                "weights must be non-negative integers (the count of each distinct order); "
                f"got e.g. {bad!r}"
            )
        weights = pt.cast(pt.as_tensor_variable(weights), "float64")
        if length_probs is None:
            length_probs = np.zeros(0)
        length_probs = pt.cast(pt.as_tensor_variable(length_probs), "float64")
        L = length_probs.type.shape[-1]
        if m0 is not None and L is not None and L not in (0, m0 + 1):
            raise ValueError(f"length_probs must have M + 1 = {m0 + 1} entries (k = 0..M); got {L}")
        pattern = pattern_input(pattern, m0, "PartialRanking")
        return super().dist([logits, weights, length_probs, pattern], **kwargs)

    def support_point(rv, size, logits, weights, length_probs, pattern):
        mode = pattern_support_point(max_weight_matching(logits), pattern)  # the draws' support
        if not rv_size_is_none(size):
            return pt.broadcast_to(mode, (*size, logits.shape[-1]))
        return pt.broadcast_to(mode, rv.shape)

    def logp(value, logits, weights, length_probs, pattern):
        # one row per ballot (weights=counts in a model): computed on the distinct orders
        shared = all(logits.type.broadcastable[:-2] + length_probs.type.broadcastable[:-1])
        return ballot_logp(value, lambda rows: PartialRanking._logp_rows(
            rows, logits, weights, length_probs), shared)

    @staticmethod
    def _logp_rows(value, logits, weights, length_probs):
        M = logits.shape[-1]
        value, is_int = integer_rows(value)
        batch_axes = tuple(range(logits.type.ndim - 2))
        if all(s == 1 for s in logits.type.shape[:-2]):
            # one W (PyMC hands it over with the batch dims of the value, of length 1): every
            # row shares one suffix table
            W = pt.squeeze(logits, axis=batch_axes) if batch_axes else logits
            lp = partial_order_loglik(W, value_rows(value, M)).reshape(value.shape[:-1])
        else:  # a logits matrix per row: one table per row
            lp = partial_order_loglik(logits, value[..., None, :])[..., 0]
        checks = [  # (condition, message): one message per parameter
            # M = 0 known only at run time: refused as the draws refuse it (``dist`` refuses a
            # static one)
            (pt.ge(M, 1), NO_ITEM_MSG),
            (logits_ok(logits), LOGITS_MSG),
            (pt.all(pt.isfinite(weights) & pt.ge(weights, 0.0)
                    & pt.eq(weights, pt.round(weights))),
             "weights must be non-negative integers (the count of each distinct order)"),
        ]
        if length_probs.type.shape[-1] != 0:
            k = pt.sum(pt.ge(value, 0), axis=-1)
            lp = lp + pt.log(select_last(length_probs, k))
            checks.append((
                pt.eq(length_probs.shape[-1], M + 1)
                & pt.all(pt.ge(length_probs, 0.0))
                & simplex_ok(length_probs, _SIMPLEX_TOL),
                "length_probs must be a simplex of M + 1 entries (non-negative, summing to 1: "
                "the probabilities of ranking k = 0..M items)",
            ))
        if is_int is not None:  # a non-integer value is outside the support
            lp = pt.switch(is_int, lp, -np.inf)
        lp = pt.switch(pt.eq(weights, 0.0), 0.0, weights * lp)
        for cond, msg in checks:
            lp = check_parameters(lp, cond, msg=msg)
        return check_parameters(
            lp,
            pt.all(~pt.isnan(lp)),
            msg="the logits admit no permutation (every one uses a -inf entry)",
        )


def _check_observed(observed, M):
    """Reject observed orders that are not valid rank form at model build, naming the row.

    A ``pm.Data`` container is checked by the value it holds at build; values set later with
    ``pm.set_data`` are not (an invalid row has log-probability -inf).
    """
    arr = _constant_value(observed)
    if arr is None or arr.dtype == object:
        return
    if arr.ndim == 0:
        raise ValueError("observed rankings must have shape (..., M); got a scalar")
    m = arr.shape[-1]
    if M is not None and m != M:
        raise ValueError(f"observed rankings have length {m} but the logits are {M} x {M}")
    if arr.dtype.kind == "f" and np.isnan(arr).any():
        raise ValueError(
            "observed rankings contain NaN; mark unranked items with -1 (rank form), "
            "not NaN: PartialRanking does not impute"
        )
    validate_orders(arr.reshape(-1, m), m, name="observed")
