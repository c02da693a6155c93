"""Count-structured labels: ``ConditionalBernoulli``, ``NChooseK`` and ``OrdinalNChooseK``.

Models of Swersky et al., "Probabilistic n-Choose-k Models for Classification and Ranking"
(NIPS 2012). All normalisers are exact: ``log e_k(exp theta)`` by the tilted dynamic program
of :mod:`pm_perm.kernels.cardinality` (O(D k) per row, gradient = conditional marginals).

Value conventions
-----------------
* ``ConditionalBernoulli`` and ``NChooseK``: ``y[..., d]`` in {0, 1} says whether item ``d``
  is on (int64); the count is ``sum(y, -1)``.
* ``OrdinalNChooseK``: ``y[..., d]`` in {0, ..., R-1} is the relevance label of item ``d``;
  **0 = least relevant**, R-1 = most relevant (drawn first).
"""

from __future__ import annotations

import math

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from numba import types
from pymc.distributions.dist_math import check_parameters
from pymc.distributions.shape_utils import rv_size_is_none
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Variable
from pytensor.link.numba.dispatch import basic as numba_basic
from pytensor.link.numba.dispatch.random import numba_core_rv_funcify
from pytensor.tensor.random.op import RandomVariable

from pm_perm.distributions._shapes import check_observed_batch, static_last_dim
from pm_perm.kernels._checks import LOGIT_ABS_MAX, as_float_array, c_array
from pm_perm.kernels._tilted_dp import n_finite as _n_finite
from pm_perm.kernels._version import code_version
from pm_perm.kernels.count_draws import (
    COUNT_PROBS_TOL,
    DRAW_CONDITIONAL_BERNOULLI,
    DRAW_ERRORS,
    DRAW_NCHOOSEK,
    DRAW_ORDINAL,
    sample_conditional_bernoulli_core,
    sample_nchoosek_core,
    sample_ordinal_core,
)
from pm_perm.kernels.count_draws import K_OUT_OF_RANGE as _K_OUT_OF_RANGE
from pm_perm.kernels.count_draws import make_count_draw_kernel as make_draw_kernel
from pm_perm.kernels.esp import nchoosek_marginals
from pm_perm.ops._extern import (
    StatusError,
    bitgen_of,
    c_contiguous_out,
    copy_back,
    extern_kernel,
    value_errors,
)
from pm_perm.ops.cardinality import log_esp

# a float64 constant: a Python float would be tried as float32 first (overflow warning)
_ABS_MAX = pt.constant(LOGIT_ABS_MAX, dtype="float64")

_VERSION = code_version(__file__)  # numba cache version (see pm_perm.kernels._version)

__all__ = [
    "ConditionalBernoulli",
    "NChooseK",
    "OrdinalNChooseK",
    "nchoosek_marginals",
    "optimal_ranking",
]

_SIMPLEX_TOL = COUNT_PROBS_TOL  # the samplers check the same tolerance


# ----------------------------------------------------------------------------- helpers


def _as_logits(logits):
    logits = pt.as_tensor_variable(logits)
    if logits.type.ndim < 1:
        raise ValueError("logits must have at least one dimension (..., D)")
    if logits.type.dtype not in (*pt.type.float_dtypes, *pt.type.int_dtypes):
        raise TypeError(f"logits must be real; got dtype {logits.type.dtype}")
    return pt.cast(logits, "float64")


def _as_count(k, name="k"):
    k = pt.as_tensor_variable(k)
    if k.type.dtype not in (*pt.type.int_dtypes, "bool"):
        raise TypeError(f"{name} must be an integer count; got dtype {k.type.dtype}")
    return pt.cast(k, "int64")


def _logits_ok(logits):
    """Logits may be -inf (item never on); NaN, +inf and |logits| > LOGIT_ABS_MAX are invalid."""
    return pt.all(pt.eq(logits, -np.inf) | pt.le(pt.abs(logits), _ABS_MAX))


def _on_dot(logits, on):
    """``sum_d logits_d [on_d]`` without ``-inf * 0 = NaN`` for items that are off."""
    return pt.sum(pt.switch(on, logits, 0.0), axis=-1)


def _select_last(table, idx):
    """``table[..., idx]`` along the last axis, broadcasting; an index beyond the end selects
    the last entry (a wrong length is reported by ``check_parameters``, not by a shape error)."""
    n = table.shape[-1]
    idx = pt.minimum(idx, n - 1)
    return pt.sum(pt.switch(pt.eq(pt.arange(n), idx[..., None]), table, 0.0), axis=-1)


def _check_static_length(count_probs, logits, name):
    n, D = count_probs.type.shape[-1], logits.type.shape[-1]
    if n is not None and D is not None and n != D + 1:
        raise ValueError(f"{name} must have D + 1 = {D + 1} entries in its last axis; got {n}")


def _minus_inf_if(cond, expr):
    return pt.switch(cond, -np.inf, expr)


# logp's refusal of parameters that admit no value at all (the draws refuse the same ones)
_CB_NO_VALUE_MSG = (
    "k is larger than the number of finite logits, so no value has positive probability (items "
    "with logit -inf are never on): lower k or make more logits finite"
)
_NK_NO_VALUE_MSG = (
    "count_probs puts no mass on a feasible count (k <= the number of finite logits; items with "
    "logit -inf are never on), so no value has positive probability"
)
_ON_NO_VALUE_MSG = (
    "the counts (or the count prior) need more items at levels >= 1 than there are finite "
    "logits, so no labelling has positive probability (items with logit -inf always get label 0)"
)


def _n_finite_logits(logits):
    """Number of logits that are not ``-inf`` (items that can be on), shape (...)."""
    return pt.sum(pt.cast(pt.neq(logits, -np.inf), "int64"), axis=-1)


def _mass_up_to(table, n):
    """``sum_{j <= n} table[..., j]``, broadcasting ``n`` (...) against the batch."""
    return pt.sum(pt.switch(pt.le(pt.arange(table.shape[-1]), n[..., None]), table, 0.0), axis=-1)


def _check_observed(observed, kind, n_levels=None, D=None):
    """Reject malformed observed arrays before PyMC silently casts them to int64, and (``D``:
    the logits' last dimension, when known before run time) observed rows of another length.

    A ``pm.Data`` container is checked by the value it holds at build; values set later with
    ``pm.set_data`` are not (an invalid one has log-probability -inf).
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


# ----------------------------------------------------------------------------- ConditionalBernoulli


class ConditionalBernoulliRV(RandomVariable):
    """Binary vector with exactly ``k`` ones: ``p(y) = exp(theta . y) / e_k(exp theta)``."""

    name = "conditional_bernoulli"
    signature = "(n),()->(n)"
    dtype = "int64"
    _print_name = ("ConditionalBernoulli", "\\operatorname{ConditionalBernoulli}")

    @classmethod
    def rng_fn(cls, rng, logits, k, size):
        batch = np.broadcast_shapes(logits.shape[:-1], np.shape(k)) if size is None else size
        D = logits.shape[-1]
        n = math.prod(batch)  # not -1: D may be 0 (no label; the numba draws give (*batch, 0))
        th = np.broadcast_to(logits, (*batch, D)).reshape(n, D)
        kk = np.broadcast_to(k, batch).reshape(n)
        out = np.empty(th.shape, dtype=np.int64)
        for i in range(th.shape[0]):
            row = c_array(th[i])
            if not (0 <= kk[i] <= _n_finite(row)):
                raise ValueError(DRAW_ERRORS[_K_OUT_OF_RANGE])
            out[i] = sample_conditional_bernoulli_core(rng, row, int(kk[i]))
        return out.reshape(*batch, D)


conditional_bernoulli = ConditionalBernoulliRV()


class ConditionalBernoulli(pm.Discrete):
    r"""Conditional Bernoulli: binary ``y`` with exactly ``k`` ones.

    .. math::

        p(y \mid k) = \frac{\exp(\theta^\top y)}{e_k(e^{\theta})}, \qquad
        e_k(w) = \sum_{|c| = k} \prod_{d \in c} w_d .

    ========  ===============================================
    Support   :math:`y \in \{0, 1\}^D,\ \sum_d y_d = k`
    Mean      :math:`p(y_d = 1 \mid k)` (the gradient of :math:`\log e_k`)
    ========  ===============================================

    Parameters
    ----------
    logits : tensor_like of float, shape (..., D)
        Item logits :math:`\theta`; ``-inf`` = item never on. NaN / ``+inf`` are invalid.
        The likelihood is invariant to adding a constant to all logits: use a
        ``pm.ZeroSumNormal`` or a proper prior.
    k : tensor_like of int, shape (...)
        Number of ones, ``0 <= k <= D``, and at most the number of finite logits.

    Raises
    ------
    ParameterValueError
        From logp (``ValueError`` from a draw) for invalid logits, ``k`` outside 0..D, or a
        ``k`` larger than the number of finite logits (no value is possible). Inside a model
        the check gives ``logp = -inf``, as every parameter check.
    ValueError
        At model build, for observed data that are not binary or whose rows do not have one
        label per logit.

    Notes
    -----
    Value convention: ``y[..., d] = 1`` iff item ``d`` is on (int64). Cost: logp and its
    gradient O(D k) per row (one tilted dynamic program); a draw O(D k). ``support_point``
    puts the ones on the ``k`` largest logits (the mode). Values that are not binary or do not
    have ``k`` ones have ``logp = -inf``.

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> from pm_perm.distributions.cardinality import ConditionalBernoulli
    >>> y = ConditionalBernoulli.dist(logits=np.array([2.0, 0.0, -1.0, 1.0]), k=2)
    >>> int(pm.draw(y, random_seed=1).sum())
    2

    References
    ----------
    Chen, Dempster & Liu (1994), Weighted finite population sampling to maximize entropy.
    Swersky et al. (2012), Probabilistic n-Choose-k Models for Classification and Ranking.
    """

    rv_type = ConditionalBernoulliRV
    rv_op = conditional_bernoulli

    def __new__(cls, name, *args, observed=None, **kwargs):
        p = {**dict(zip(("logits", "k"), args, strict=False)), **kwargs}
        if observed is not None:
            _check_observed(observed, "binary", D=static_last_dim(p.get("logits")))
        check_observed_batch("ConditionalBernoulli", observed,
                             [("logits", p.get("logits"), 1), ("k", p.get("k"), 0)])
        return super().__new__(cls, name, *args, observed=observed, **kwargs)

    @classmethod
    def dist(cls, logits, k, **kwargs):
        return super().dist([_as_logits(logits), _as_count(k)], **kwargs)

    def support_point(rv, size, logits, k):
        rank = pt.argsort(pt.argsort(-logits, axis=-1), axis=-1)
        mode = pt.cast(pt.lt(rank, k[..., None]), "int64")
        if not rv_size_is_none(size):
            mode = pt.broadcast_to(mode, (*size, logits.shape[-1]))
        return mode

    def logp(value, logits, k):
        on = pt.eq(value, 1)
        dot = _on_dot(logits, on)
        binary = pt.all(on | pt.eq(value, 0), axis=-1)
        ok = binary & pt.eq(pt.sum(value, axis=-1), k)
        lp = _minus_inf_if(pt.eq(dot, -np.inf), dot - log_esp(logits, k))
        lp = pt.switch(ok, lp, -np.inf)
        lp = check_parameters(
            lp,
            _logits_ok(logits),
            pt.ge(k, 0),
            pt.le(k, logits.shape[-1]),
            msg=(
                "logits must be -inf or finite with |logits| <= 1e300 (no NaN or +inf), "
                "and 0 <= k <= D"
            ),
        )
        return check_parameters(lp, pt.le(k, _n_finite_logits(logits)), msg=_CB_NO_VALUE_MSG)


# PyTensor's compiled draws of the three distributions call one C kernel (see
# pm_perm.ops._extern and pm_perm.kernels.cardinality.make_draw_kernel), drawing from the graph's
# own Generator (pm_perm.kernels._bitgen).
_DRAW = extern_kernel(
    "pm_perm_cardinality_draw_kernel",
    types.int64(types.CPointer(types.uint64), types.CPointer(types.float64), types.intp,
                types.int64, types.CPointer(types.float64), types.intp,
                types.CPointer(types.int64), types.intc),
    make_draw_kernel(_VERSION),
)


class _DrawError(StatusError):
    """Input errors of the draws (see :class:`StatusError`)."""

    messages = value_errors(DRAW_ERRORS)


_COUNT_PROBS_LENGTH = DRAW_ERRORS.index("count_probs must have D + 1 entries per row (k = 0..D)")


def _draw_numba(which):
    """``draw(rng, logits, k, count_probs (R, D + 1) or (D + 1,), out) -> out`` (D,) int64 in
    compiled code (``which``: ``pm_perm.kernels.cardinality.DRAW_*``; ``out`` None: allocated);
    raises ``ValueError``."""
    kernel = _DRAW().external

    @numba_basic.numba_njit
    def draw(rng, logits, k, count_probs, out):
        th, pk = np.ascontiguousarray(logits), np.ascontiguousarray(count_probs)
        if out is None:
            out = np.empty(th.shape[0], dtype=np.int64)
        y = c_contiguous_out(out)
        R = pk.shape[0] if pk.ndim == 2 else 1
        bitgen = bitgen_of(rng)
        status = kernel(bitgen.ctypes, th.ctypes, th.shape[0], k, pk.ctypes, R, y.ctypes, which)
        if status != 0:
            raise _DrawError(status)
        return copy_back(out, y)

    return draw


@numba_core_rv_funcify.register(ConditionalBernoulliRV)
def _numba_conditional_bernoulli(op, node):
    draw = _draw_numba(DRAW_CONDITIONAL_BERNOULLI)

    @numba_basic.numba_njit
    def core(rng, logits, k, out=None):
        return draw(rng, logits, np.int64(k), logits, out)

    core.handles_out = True
    return core, _VERSION


# ----------------------------------------------------------------------------- NChooseK


class NChooseKRV(RandomVariable):
    """Count ``k ~ count_probs``, then ``y | k ~ ConditionalBernoulli(logits, k)``."""

    name = "n_choose_k"
    signature = "(n),(m)->(n)"
    dtype = "int64"
    _print_name = ("NChooseK", "\\operatorname{NChooseK}")

    @classmethod
    def rng_fn(cls, rng, logits, count_probs, size):
        batch = (
            np.broadcast_shapes(logits.shape[:-1], count_probs.shape[:-1]) if size is None else size
        )
        D = logits.shape[-1]
        if count_probs.shape[-1] != D + 1:
            raise ValueError(f"NChooseK: count_probs must have D + 1 = {D + 1} entries")
        n = math.prod(batch)  # not -1: D may be 0
        th = np.broadcast_to(logits, (*batch, D)).reshape(n, D)
        pk = np.broadcast_to(count_probs, (*batch, D + 1)).reshape(n, D + 1)
        out = np.empty(th.shape, dtype=np.int64)
        for i in range(th.shape[0]):
            th_i, pk_i = c_array(th[i]), c_array(pk[i])
            out[i] = sample_nchoosek_core(rng, th_i, pk_i)
        return out.reshape(*batch, D)


n_choose_k = NChooseKRV()


class NChooseK(pm.Discrete):
    r"""Binary n-choose-k model: a count prior, then a conditional Bernoulli given the count.

    .. math::

        p(y) = \pi_{s}\,\frac{\exp(\theta^\top y)}{e_{s}(e^{\theta})}, \qquad s = \sum_d y_d .

    ========  ===============================================
    Support   :math:`y \in \{0, 1\}^D`
    Mean      :func:`nchoosek_marginals`: :math:`\sum_k \pi_k\, p(y_d = 1 \mid k)`
    ========  ===============================================

    Parameters
    ----------
    logits : tensor_like of float, shape (..., D)
        Item logits :math:`\theta` (``-inf`` = never on). Shift-invariant likelihood.
    count_probs : tensor_like of float, shape (..., D + 1)
        Prior :math:`\pi_k = p(\sum y = k)`, k = 0..D, a simplex (non-negative, sums to 1 within
        1e-6). May be a random variable (e.g. ``pm.Dirichlet``); it gets gradients.

    Notes
    -----
    Value convention: ``y[..., d] = 1`` iff item ``d`` is on (int64). Cost: logp and gradient
    O(D s) per row. Counts above the number of finite logits cannot be realised; prior mass
    on them is lost (the pmf then sums to less than 1), so keep ``count_probs`` at 0 there.
    Draws condition on a feasible value: the count is drawn from ``count_probs`` restricted to
    the feasible counts and renormalised (deterministically, whatever the seed). Parameters
    with no mass on a feasible count admit no value: logp raises ``ParameterValueError``
    (``-inf`` inside a model) and a draw ``ValueError``, as for invalid logits or a
    ``count_probs`` that is not a simplex. Observed rows must have one label per logit
    (``ValueError`` at model build).
    Identity (tested): with the Poisson-binomial prior implied by the logits,
    :math:`\pi_k = e_k(e^\theta) / \prod_d (1 + e^{\theta_d})`, this is independent Bernoulli
    with probabilities ``sigmoid(logits)`` (logistic regression). ``support_point`` puts the
    ones on the :math:`k^*` largest logits for :math:`k^* = \arg\max_k \pi_k` over the feasible
    counts (a point of positive probability, not necessarily the mode).

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> from pm_perm.distributions.cardinality import NChooseK
    >>> y = NChooseK.dist(logits=np.zeros(4), count_probs=np.array([0, 0, 1.0, 0, 0]))
    >>> int(pm.draw(y, random_seed=1).sum())
    2
    """

    rv_type = NChooseKRV
    rv_op = n_choose_k

    def __new__(cls, name, *args, observed=None, **kwargs):
        p = {**dict(zip(("logits", "count_probs"), args, strict=False)), **kwargs}
        if observed is not None:
            _check_observed(observed, "binary", D=static_last_dim(p.get("logits")))
        check_observed_batch("NChooseK", observed, [("logits", p.get("logits"), 1),
                                                    ("count_probs", p.get("count_probs"), 1)])
        return super().__new__(cls, name, *args, observed=observed, **kwargs)

    @classmethod
    def dist(cls, logits, count_probs, **kwargs):
        count_probs = pt.cast(pt.as_tensor_variable(count_probs), "float64")
        logits = _as_logits(logits)
        _check_static_length(count_probs, logits, "count_probs")
        return super().dist([logits, count_probs], **kwargs)

    def support_point(rv, size, logits, count_probs):
        # the most probable FEASIBLE count (at most as many items as finite logits), so that the
        # point has a finite logp whenever the parameters admit any value
        feasible = pt.le(pt.arange(count_probs.shape[-1]), _n_finite_logits(logits)[..., None])
        kstar = pt.argmax(pt.switch(feasible, count_probs, -1.0), axis=-1)
        rank = pt.argsort(pt.argsort(-logits, axis=-1), axis=-1)
        mode = pt.cast(pt.lt(rank, kstar[..., None]), "int64")
        if not rv_size_is_none(size):
            mode = pt.broadcast_to(mode, (*size, logits.shape[-1]))
        else:
            mode = pt.broadcast_to(mode, rv.shape)
        return mode

    def logp(value, logits, count_probs):
        D = logits.shape[-1]
        on = pt.eq(value, 1)
        binary = pt.all(on | pt.eq(value, 0), axis=-1)
        s = pt.sum(pt.cast(on, "int64"), axis=-1)
        pk = _select_last(count_probs, s)
        dot = _on_dot(logits, on)
        lp = pt.log(pk) + dot - log_esp(logits, s)
        lp = _minus_inf_if(pt.eq(dot, -np.inf) | pt.eq(pk, 0.0), lp)
        lp = pt.switch(binary, lp, -np.inf)
        lp = check_parameters(
            lp,
            _logits_ok(logits),
            pt.eq(count_probs.shape[-1], D + 1),
            pt.all(pt.ge(count_probs, 0.0)),
            pt.all(pt.lt(pt.abs(pt.sum(count_probs, axis=-1) - 1.0), _SIMPLEX_TOL)),
            msg=(
                "logits must be -inf or finite with |logits| <= 1e300 (no NaN or +inf); "
                "count_probs must be a simplex of length D + 1"
            ),
        )
        feasible = _mass_up_to(count_probs, _n_finite_logits(logits))
        return check_parameters(lp, pt.gt(feasible, 0.0), msg=_NK_NO_VALUE_MSG)


@numba_core_rv_funcify.register(NChooseKRV)
def _numba_n_choose_k(op, node):
    draw = _draw_numba(DRAW_NCHOOSEK)

    @numba_basic.numba_njit
    def core(rng, logits, count_probs, out=None):
        if count_probs.shape[0] != logits.shape[0] + 1:
            raise ValueError("NChooseK: count_probs must have D + 1 entries")
        return draw(rng, logits, 0, count_probs, out)

    core.handles_out = True
    return core, _VERSION


# ----------------------------------------------------------------------------- OrdinalNChooseK


class OrdinalNChooseKRV(RandomVariable):
    """Ordinal labels drawn level by level from R-1 down to 1 (see ``OrdinalNChooseK``)."""

    name = "ordinal_n_choose_k"
    signature = "(n),(r,m),()->(n)"
    dtype = "int64"
    _print_name = ("OrdinalNChooseK", "\\operatorname{OrdinalNChooseK}")

    @classmethod
    def rng_fn(cls, rng, logits, count_probs, use_prior, size):
        batch = (
            np.broadcast_shapes(logits.shape[:-1], count_probs.shape[:-2], np.shape(use_prior))
            if size is None
            else size
        )
        D = logits.shape[-1]
        R = count_probs.shape[-2]
        n = math.prod(batch)  # not -1: D may be 0
        th = np.broadcast_to(logits, (*batch, D)).reshape(n, D)
        pk = np.broadcast_to(count_probs, (*batch, R, D + 1)).reshape(n, R, D + 1)
        up = np.broadcast_to(use_prior, batch).reshape(n)
        out = np.empty(th.shape, dtype=np.int64)
        for i in range(th.shape[0]):
            if not up[i]:
                raise ValueError(_NO_COUNTS_MSG)
            th_i, pk_i = c_array(th[i]), c_array(pk[i])
            out[i] = sample_ordinal_core(rng, th_i, pk_i)
        return out.reshape(*batch, D)


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
    >>> from pm_perm.distributions.cardinality import OrdinalNChooseK
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
            _check_observed(observed, "ordinal", _static_levels(p),
                            D=static_last_dim(p.get("logits")))
        check_observed_batch("OrdinalNChooseK", observed,
                             [("logits", p.get("logits"), 1), ("counts", p.get("counts"), 1),
                              ("count_probs", p.get("count_probs"), 2)])
        return super().__new__(cls, name, *args, observed=observed, **kwargs)

    @classmethod
    def dist(cls, logits, counts=None, count_probs=None, n_levels=None, **kwargs):
        logits = _as_logits(logits)
        D = logits.shape[-1]
        given = sum(x is not None for x in (counts, count_probs))
        if given > 1:
            raise ValueError("OrdinalNChooseK: pass at most one of counts= and count_probs=")
        if counts is not None:
            counts = _as_count(counts, "counts")
            if counts.type.ndim < 1:
                raise ValueError("counts must have shape (..., R)")
            count_probs = pt.cast(pt.eq(pt.arange(D + 1), counts[..., None]), "float64")
            use_prior = 1
        elif count_probs is not None:
            count_probs = pt.cast(pt.as_tensor_variable(count_probs), "float64")
            if count_probs.type.ndim < 2:
                raise ValueError("count_probs must have shape (..., R, D + 1)")
            _check_static_length(count_probs, logits, "count_probs")
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
        lev_lp = _minus_inf_if(pt.eq(dot, -np.inf), dot - log_esp(theta_lev, k_lev))
        lp = pt.sum(lev_lp, axis=-1)
        in_range = pt.ge(value, 0) & pt.lt(value, R)
        if value.type.dtype in pt.type.float_dtypes:  # a non-integer label is outside the support
            in_range = in_range & pt.eq(value, pt.round(value))
        in_range = pt.all(in_range, axis=-1)
        # count prior with the sum-to-D constraint
        counts = pt.sum(pt.cast(pt.eq(value[..., None, :], pt.arange(R)[:, None]), "int64"), -1)
        pk = _select_last(count_probs, counts)  # (..., R)
        log_scale, joint = _count_table(count_probs, R)
        log_norm = log_scale + pt.log(pt.sum(joint, axis=-1))
        log_prior = pt.sum(pt.log(pk), axis=-1) - log_norm
        lp = pt.switch(pt.eq(use_prior, 1), lp + log_prior, lp)
        lp = pt.switch(in_range, lp, -np.inf)
        simplex = pt.all(pt.lt(pt.abs(pt.sum(count_probs, axis=-1) - 1.0), _SIMPLEX_TOL))
        lp = check_parameters(
            lp,
            _logits_ok(logits),
            pt.eq(count_probs.shape[-1], D + 1),
            pt.all(pt.ge(count_probs, 0.0)),
            pt.eq(use_prior, 0) | (simplex & pt.all(pt.gt(log_norm, -np.inf))),
            msg=(
                "logits must be -inf or finite with |logits| <= 1e300 (no NaN or +inf); "
                "count_probs rows must be simplices of length D + 1; counts (or the count "
                "prior) must allow a total of D"
            ),
        )
        # feasible count vectors: at most the number of finite logits at levels >= 1
        feasible = _mass_up_to(joint, _n_finite_logits(logits))
        return check_parameters(lp, pt.eq(use_prior, 0) | pt.all(pt.gt(feasible, 0.0)),
                                msg=_ON_NO_VALUE_MSG)


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
    draw = _draw_numba(DRAW_ORDINAL)

    @numba_basic.numba_njit
    def core(rng, logits, count_probs, use_prior, out=None):
        if np.int64(use_prior) == 0:
            raise ValueError(
                "OrdinalNChooseK without counts= or count_probs= cannot be drawn from: pass "
                "counts= or count_probs="
            )
        if count_probs.shape[1] != logits.shape[0] + 1:
            raise _DrawError(_COUNT_PROBS_LENGTH)
        return draw(rng, logits, 0, count_probs, out)

    core.handles_out = True
    return core, _VERSION
