"""``OrdinalNChooseK``: graded relevance labels, and the ranking that is optimal under them.

Ordinal model of Swersky et al., "Probabilistic n-Choose-k Models for Classification and
Ranking" (NIPS 2012, sec. 3). The normaliser is exact: one tilted dynamic program of
:mod:`pm_perm.kernels.esp` per level.

Value convention: ``y[..., d]`` in {0, ..., R-1} is the relevance label of item ``d``;
**0 = least relevant**, R-1 = most relevant (drawn first).
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.distributions.dist_math import check_parameters
from pymc.distributions.shape_utils import rv_size_is_none
from pytensor.graph.basic import Variable
from pytensor.link.numba.dispatch import basic as numba_basic
from pytensor.link.numba.dispatch.random import numba_core_rv_funcify

from pm_perm.distributions import _count_labels as labels
from pm_perm.distributions._params import LOGITS_MSG, logits_ok, select_last, simplex_ok
from pm_perm.distributions._shapes import check_observed_batch, static_last_dim
from pm_perm.distributions._values import IntegerRV
from pm_perm.kernels._checks import as_float_array, c_array
from pm_perm.kernels.count_draws import DRAW_ORDINAL, sample_ordinal_core
from pm_perm.ops.cardinality import log_esp

_VERSION = labels.version_of(__file__)  # numba cache version (see pm_perm.kernels._version)

__all__ = ["OrdinalNChooseK", "OrdinalNChooseKRV", "optimal_ranking"]

# logp's refusal of parameters that admit no value at all (the draws refuse the same ones)
_NO_VALUE_MSG = (
    "the counts (or the count prior) need more items at levels >= 1 than there are finite "
    "logits, so no labelling has positive probability (items with logit -inf always get label 0)"
)


def optimal_ranking(logits):
    """Items sorted by decreasing logit (Swersky et al. 2012, Theorem 1).

    Under an ordinal n-choose-k model this ordering maximises the expected value of every
    monotonic ranking gain (NDCG, Precision@K), whatever the count prior. Returns int64
    indices, ``out[..., 0]`` = most relevant item. Ties are broken by item index; ``-inf``
    logits come last.

    Raises
    ------
    ValueError
        For NaN, ``+inf`` or finite logits beyond 1e300 (as the distributions' parameters), or
        logits with no dimension.
    """
    logits = as_float_array(logits, "logits", min_ndim=1)
    return np.argsort(-logits, axis=-1, kind="stable")



class OrdinalNChooseKRV(IntegerRV):
    """Ordinal labels drawn level by level from R-1 down to 1 (see ``OrdinalNChooseK``)."""

    name = "ordinal_n_choose_k"
    signature = "(n),(r,m),()->(n)"
    dist_name = "OrdinalNChooseK"

    @classmethod
    def rng_fn(cls, rng, logits, count_probs, use_prior, size):
        batch = (
            np.broadcast_shapes(logits.shape[:-1], count_probs.shape[:-2], np.shape(use_prior))
            if size is None
            else size
        )
        D = logits.shape[-1]
        R = count_probs.shape[-2]
        params = [(logits, (D,)), (count_probs, (R, D + 1)), (use_prior, ())]
        return labels.draw_rows(batch, D, params, lambda th, pk, up: _draw_row(rng, th, pk, up))


def _draw_row(rng, logits, count_probs, use_prior):
    if not use_prior:
        raise ValueError(_NO_COUNTS_MSG)
    return sample_ordinal_core(rng, c_array(logits), c_array(count_probs))


_NO_COUNTS_MSG = (
    "OrdinalNChooseK without counts= or count_probs= conditions on the observed counts and has "
    "no distribution over counts to draw from: pass counts= or count_probs= to draw"
)

ordinal_n_choose_k = OrdinalNChooseKRV()


def _count_table(count_probs, R):
    """``(log_scale, joint)`` with ``joint[..., a] * exp(log_scale)`` = ``sum prod_r
    count_probs[r, k_r]`` over the count vectors with ``k_1 + ... + k_{R-1} = a`` and
    ``k_0 = D - a`` (a = 0..D): the unnormalised count prior by the number of items at levels
    >= 1. Its sum is the normaliser of the sum-to-D constraint. R - 2 truncated convolutions
    (Toeplitz products, O(R D^2)), rescaled after each level so nothing underflows."""
    M = count_probs.shape[-1]
    idx = pt.arange(M)[:, None] - pt.arange(M)[None, :]
    lower = pt.ge(idx, 0)
    c = count_probs[..., 1, :]
    log_scale = pt.zeros(c.shape[:-1], dtype="float64")
    for r in range(2, R):
        toep = pt.switch(lower, pt.take(count_probs[..., r, :], pt.maximum(idx, 0), axis=-1), 0.0)
        c = pt.sum(toep * c[..., None, :], axis=-1)
        tot = pt.sum(c, axis=-1)
        log_scale = log_scale + pt.log(tot)
        c = c / tot[..., None]
    return log_scale, c * count_probs[..., 0, ::-1]


class OrdinalNChooseK(pm.Discrete):
    r"""Ordinal n-choose-k model for graded relevance labels (Swersky et al. 2012, sec. 3).

    Generative process: draw the counts :math:`k = (k_0, \dots, k_{R-1})` with
    :math:`\sum_r k_r = D`; for :math:`r = R-1` down to 1 choose :math:`k_r` of the
    not-yet-labelled items, subset :math:`c` with probability
    :math:`\exp(\sum_{d \in c}\theta_d) / e_{k_r}(e^{\theta_{\le r}})`; the remaining items get
    label 0. Hence

    .. math::

        \log p(y) = \sum_{r=1}^{R-1}\Big[\sum_{d: y_d = r}\theta_d
                    - \log e_{k_r}\big(e^{\theta_d} : y_d \le r\big)\Big] + \log p(k).

    ========  ===============================================
    Support   :math:`y \in \{0, \dots, R-1\}^D` (with the given counts, if any)
    ========  ===============================================

    Parameters
    ----------
    logits : tensor_like of float, shape (..., D)
        Item logits :math:`\theta` (``-inf`` = item always gets label 0).
    counts : tensor_like of int, shape (..., R), optional
        Fixed counts per level (``counts[..., r]`` items get label r), summing to D. Values
        with other counts have ``logp = -inf``.
    count_probs : tensor_like of float, shape (..., R, D + 1), optional
        Independent prior per level, ``count_probs[..., r, j] = p_r(k_r = j)`` (each row a
        simplex), combined with the constraint :math:`\sum_r k_r = D` and normalised exactly:
        :math:`p(k) = \prod_r p_r(k_r) / \sum_{k': \sum k' = D} \prod_r p_r(k'_r)`
        (O(R D^2)). May be random (e.g. ``pm.Dirichlet``); it gets gradients. ``R`` must be
        static (known when the graph is built).
    n_levels : int, optional
        R. Required when neither ``counts`` nor ``count_probs`` is given: the model then
        **conditions on the observed counts** (``logp = log p(y | k = counts of y)``, no count
        prior) and cannot be drawn from (prior/posterior predictive raise a ``ValueError``).

    Notes
    -----
    Value convention: ``y[..., d]`` is the label of item ``d``, **0 = least relevant**,
    R-1 = most relevant (chosen first). Items with a ``-inf`` logit can only get label 0; count
    vectors they make infeasible keep their prior mass, which is then lost (the pmf sums to
    the prior probability of the feasible counts); draws condition on the feasible count
    vectors (deterministically, whatever the seed). Counts or a count prior that admit no
    feasible count vector are refused: logp raises ``ParameterValueError`` (``-inf`` inside a
    model), a draw ``ValueError``. Observed rows must have one label per logit (``ValueError``
    at model build). Cost: logp and gradient O(D^2) per row at worst
    (R - 1 dynamic programs of O(D k_r)); a draw O(R D^2). With R = D and one item per level
    this is the Plackett-Luce model of the ranking "label D-1 first" (tested). The optimal
    ranking under any monotonic gain (NDCG, Precision@K) sorts the logits
    (:func:`optimal_ranking`, Theorem 1 of the paper). ``support_point`` gives the highest
    labels to the largest logits with counts from the per-level argmax of ``count_probs``
    (clipped to sum to D) - exactly the given counts when ``counts`` is used.

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> from pm_perm.distributions.ordinal_n_choose_k import OrdinalNChooseK
    >>> y = OrdinalNChooseK.dist(logits=np.array([2.0, 0.0, -1.0, 1.0]), counts=[2, 1, 1])
    >>> np.bincount(pm.draw(y, random_seed=1), minlength=3).tolist()
    [2, 1, 1]
    """

    rv_type = OrdinalNChooseKRV
    rv_op = ordinal_n_choose_k

    def __new__(cls, name, *args, observed=None, **kwargs):
        named = dict(zip(("logits", "counts", "count_probs", "n_levels"), args, strict=False))
        p = {**named, **kwargs}
        if observed is not None:
            labels.check_observed_labels(observed, "ordinal", _static_levels(p),
                            D=static_last_dim(p.get("logits")))
        check_observed_batch("OrdinalNChooseK", observed,
                             [("logits", p.get("logits"), 1), ("counts", p.get("counts"), 1),
                              ("count_probs", p.get("count_probs"), 2)])
        return super().__new__(cls, name, *args, observed=observed, **kwargs)

    @classmethod
    def dist(cls, logits, counts=None, count_probs=None, n_levels=None, **kwargs):
        logits = labels.as_logits(logits)
        D = logits.shape[-1]
        given = sum(x is not None for x in (counts, count_probs))
        if given > 1:
            raise ValueError("OrdinalNChooseK: pass at most one of counts= and count_probs=")
        if counts is not None:
            counts = labels.as_count(counts, "counts")
            if counts.type.ndim < 1:
                raise ValueError("counts must have shape (..., R)")
            count_probs = pt.cast(pt.eq(pt.arange(D + 1), counts[..., None]), "float64")
            use_prior = 1
        elif count_probs is not None:
            count_probs = pt.cast(pt.as_tensor_variable(count_probs), "float64")
            if count_probs.type.ndim < 2:
                raise ValueError("count_probs must have shape (..., R, D + 1)")
            labels.check_static_length(count_probs, logits, "count_probs")
            use_prior = 1
        else:
            if n_levels is None:
                raise ValueError(
                    "OrdinalNChooseK needs counts=, count_probs=, or n_levels= (R, to condition "
                    "on the observed counts)"
                )
            count_probs = pt.ones((int(n_levels), D + 1), dtype="float64")
            use_prior = 0
        R = count_probs.type.shape[-2]
        if n_levels is not None:
            if R is not None and R != int(n_levels):
                raise ValueError(f"n_levels = {n_levels} but counts/count_probs have R = {R}")
            count_probs = pt.specify_shape(
                count_probs, (*([None] * (count_probs.type.ndim - 2)), int(n_levels), None)
            )
        elif R is None:
            raise ValueError(
                "OrdinalNChooseK: the number of levels R must be static; pass n_levels=R or give "
                "counts/count_probs a known shape (e.g. shape=(R, D + 1) for a Dirichlet)"
            )
        if count_probs.type.shape[-2] < 2:
            raise ValueError("OrdinalNChooseK needs R >= 2 levels")
        return super().dist([logits, count_probs, pt.constant(use_prior, dtype="int8")], **kwargs)

    def support_point(rv, size, logits, count_probs, use_prior):
        R = count_probs.type.shape[-2]
        D = logits.shape[-1]
        kmax = pt.argmax(count_probs[..., 1:, :], axis=-1)  # (..., R-1), levels 1..R-1
        cum = pt.minimum(pt.cumsum(kmax[..., ::-1], axis=-1), D)  # levels ..R-2, ...
        rank = pt.argsort(pt.argsort(-logits, axis=-1), axis=-1)
        label = pt.sum(pt.lt(rank[..., None, :], cum[..., :, None]), axis=-2)
        label = pt.cast(pt.minimum(label, R - 1), "int64")
        if not rv_size_is_none(size):
            label = pt.broadcast_to(label, (*size, logits.shape[-1]))
        else:
            label = pt.broadcast_to(label, rv.shape)
        return label

    def logp(value, logits, count_probs, use_prior):
        R = count_probs.type.shape[-2]
        D = logits.shape[-1]
        levels = pt.arange(1, R)[:, None]  # (R-1, 1)
        v = value[..., None, :]  # (..., 1, D)
        th = logits[..., None, :]
        chosen = pt.eq(v, levels)
        theta_lev = pt.switch(pt.le(v, levels), th, -np.inf)  # (..., R-1, D)
        k_lev = pt.sum(pt.cast(chosen, "int64"), axis=-1)
        dot = pt.sum(pt.switch(chosen, th, 0.0), axis=-1)  # (..., R-1)
        lev_lp = labels.minus_inf_if(pt.eq(dot, -np.inf), dot - log_esp(theta_lev, k_lev))
        lp = pt.sum(lev_lp, axis=-1)
        in_range = pt.ge(value, 0) & pt.lt(value, R)
        if value.type.dtype in pt.type.float_dtypes:  # a non-integer label is outside the support
            in_range = in_range & pt.eq(value, pt.round(value))
        in_range = pt.all(in_range, axis=-1)
        # count prior with the sum-to-D constraint
        counts = pt.sum(pt.cast(pt.eq(value[..., None, :], pt.arange(R)[:, None]), "int64"), -1)
        pk = select_last(count_probs, counts)  # (..., R)
        log_scale, joint = _count_table(count_probs, R)
        log_norm = log_scale + pt.log(pt.sum(joint, axis=-1))
        log_prior = pt.sum(pt.log(pk), axis=-1) - log_norm
        lp = pt.switch(pt.eq(use_prior, 1), lp + log_prior, lp)
        lp = pt.switch(in_range, lp, -np.inf)
        simplex = simplex_ok(count_probs, labels.SIMPLEX_TOL)
        lp = check_parameters(
            lp,
            logits_ok(logits),
            pt.eq(count_probs.shape[-1], D + 1),
            pt.all(pt.ge(count_probs, 0.0)),
            pt.eq(use_prior, 0) | (simplex & pt.all(pt.gt(log_norm, -np.inf))),
            msg=(
                f"{LOGITS_MSG}; count_probs rows must be simplices of length D + 1; counts (or "
                "the count prior) must allow a total of D"
            ),
        )
        # feasible count vectors: at most the number of finite logits at levels >= 1
        feasible = labels.mass_up_to(joint, labels.n_finite_logits(logits))
        return check_parameters(lp, pt.eq(use_prior, 0) | pt.all(pt.gt(feasible, 0.0)),
                                msg=_NO_VALUE_MSG)


def _static_levels(kwargs):
    """R from n_levels / counts / count_probs when known before the graph is built."""
    if kwargs.get("n_levels") is not None:
        return int(kwargs["n_levels"])
    for key, axis in (("counts", -1), ("count_probs", -2)):
        x = kwargs.get(key)
        if x is None:
            continue
        shape = x.type.shape if isinstance(x, Variable) else np.shape(x)
        if len(shape) >= -axis and shape[axis] is not None:
            return int(shape[axis])
    return None


@numba_core_rv_funcify.register(OrdinalNChooseKRV)
def _numba_ordinal_n_choose_k(op, node):
    draw = labels.draw_numba(DRAW_ORDINAL)

    @numba_basic.numba_njit
    def core(rng, logits, count_probs, use_prior, out=None):
        if np.int64(use_prior) == 0:
            raise ValueError(
                "OrdinalNChooseK without counts= or count_probs= cannot be drawn from: pass "
                "counts= or count_probs="
            )
        if count_probs.shape[1] != logits.shape[0] + 1:
            raise labels.DrawError(labels.COUNT_PROBS_LENGTH)
        return draw(rng, logits, 0, count_probs, out)

    core.handles_out = True
    return core, _VERSION
