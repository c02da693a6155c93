"""``PartialOrder``: an assessor's set of pairwise preferences (an arbitrary partial order) with
its EXACT likelihood, the sum over its linear extensions, under Plackett-Luce or the permutation
exponential family (kernel: :mod:`pm_perm.kernels.linear_extensions`).
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.distributions.dist_math import check_parameters
from pymc.logprob.abstract import _logprob
from pytensor.link.numba.dispatch import basic as numba_basic
from pytensor.link.numba.dispatch.random import numba_core_rv_funcify

from pm_perm.distributions._ballots import _known
from pm_perm.distributions._values import IntegerRV
from pm_perm.distributions.permutation import permutation_draw_numba
from pm_perm.kernels._version import code_version
from pm_perm.kernels.linear_extensions import (
    EXP_FAMILY,
    PLACKETT_LUCE,
    check_preferences,
)
from pm_perm.kernels.permanent import EXACT_MAX_M, check_exact_size
from pm_perm.kernels.permutation_sampler import sample_permutations
from pm_perm.kernels.plackett_luce import sample_plackett_luce
from pm_perm.ops.linear_extensions import linear_extension_loglik
from pm_perm.ops.permanent import log_permanent

_VERSION = code_version(__file__)  # numba cache version (see pm_perm.kernels._version)

__all__ = ["PartialOrder", "PartialOrderExpFamilyRV", "PartialOrderRV", "orient_pairs"]

_NO_PAIRS = ("PartialOrder: draws need the compared pairs: give pairs= (P, 2) (which items "
             "each assessor compares), or observe the variable (its observed pairs are used)")


def orient_pairs(positions, pairs):
    """The pairs (..., P, 2) oriented by complete rankings ``positions`` (..., M) (rank form):
    ``(a, b)`` becomes ``(a, b)`` if ``a`` comes first, else ``(b, a)``; ``(-1, -1)`` stays."""
    pairs = np.asarray(pairs, dtype=np.int64)
    positions = np.asarray(positions)
    batch = np.broadcast_shapes(positions.shape[:-1], pairs.shape[:-2])
    pos = np.broadcast_to(positions, batch + positions.shape[-1:])
    prs = np.broadcast_to(pairs, batch + pairs.shape[-2:])
    a, b = prs[..., 0], prs[..., 1]
    pad = a < 0
    pa = np.take_along_axis(pos, np.where(pad, 0, a), axis=-1)
    pb = np.take_along_axis(pos, np.where(pad, 0, b), axis=-1)
    first = np.where(pa < pb, a, b)
    second = np.where(pa < pb, b, a)
    return np.stack([np.where(pad, -1, first), np.where(pad, -1, second)], axis=-1)


class PartialOrderRV(IntegerRV):
    """Plackett-Luce draws: utilities (..., M), pairs (..., P, 2) -> (..., P, 2) int64: a
    complete ranking from the model, the pairs oriented by it."""

    name = "partial_order"
    signature = "(m),(p,t)->(p,t)"
    dist_name = "PartialOrder"

    @classmethod
    def _complete(cls, rng, params, size):
        return sample_plackett_luce(params, size=size, rng=rng)

    @classmethod
    def rng_fn(cls, rng, params, pairs, size):
        pairs = np.asarray(pairs)
        if pairs.shape[-2] == 0 and pairs.shape[-1] == 0:
            raise ValueError(_NO_PAIRS)
        core = 1 if cls is PartialOrderRV else 2
        if size is None:
            size = np.broadcast_shapes(np.shape(params)[:np.ndim(params) - core],
                                       pairs.shape[:-2])
        return orient_pairs(cls._complete(rng, params, size), pairs)


class PartialOrderExpFamilyRV(PartialOrderRV):
    """Permutation exponential-family draws: logits (..., M, M), pairs (..., P, 2) ->
    (..., P, 2) int64 (an exact complete draw, the pairs oriented by it)."""

    name = "partial_order_exp_family"
    signature = "(m,m),(p,t)->(p,t)"
    dist_name = "PartialOrder"

    @classmethod
    def _complete(cls, rng, params, size):
        return sample_permutations(params, size=size, rng=rng)


partial_order = PartialOrderRV()
partial_order_exp_family = PartialOrderExpFamilyRV()


@numba_basic.numba_njit
def _orient_numba(pos, pairs, out):
    for r in range(pairs.shape[0]):
        a, b = pairs[r, 0], pairs[r, 1]
        if a < 0 or b < 0:
            out[r, 0] = -1
            out[r, 1] = -1
        elif pos[a] < pos[b]:
            out[r, 0], out[r, 1] = a, b
        else:
            out[r, 0], out[r, 1] = b, a
    return out


@numba_core_rv_funcify.register(PartialOrderRV)
def _numba_partial_order(op, node):
    @numba_basic.numba_njit
    def core_draw(rng, utilities, pairs):
        M = utilities.shape[0]
        if pairs.shape[1] != 2:
            raise ValueError(_NO_PAIRS)
        keys = np.empty(M)
        for i in range(M):
            if not np.isfinite(utilities[i]):
                raise ValueError("PartialOrder: utilities must be finite")
            keys[i] = -(utilities[i] - np.log(-np.log(rng.random())))
        pos = np.empty(M, dtype=np.int64)
        order = np.argsort(keys)
        for t in range(M):
            pos[order[t]] = t
        for r in range(pairs.shape[0]):
            for c in range(2):
                if pairs[r, c] >= M:
                    raise ValueError("PartialOrder: a pair's item id is out of range")
        return _orient_numba(pos, pairs, np.empty((pairs.shape[0], 2), dtype=np.int64))

    return core_draw, _VERSION


@numba_core_rv_funcify.register(PartialOrderExpFamilyRV)
def _numba_partial_order_exp_family(op, node):
    draw = permutation_draw_numba()

    @numba_basic.numba_njit
    def core_draw(rng, logits, pairs):
        M = logits.shape[0]
        if pairs.shape[1] != 2:
            raise ValueError(_NO_PAIRS)
        for r in range(pairs.shape[0]):
            for c in range(2):
                if pairs[r, c] >= M:
                    raise ValueError("PartialOrder: a pair's item id is out of range")
        pos = draw(rng, logits, np.empty(M, dtype=np.int64))
        return _orient_numba(pos, pairs, np.empty((pairs.shape[0], 2), dtype=np.int64))

    return core_draw, _VERSION


def _constant(x):
    """NumPy value of ``x`` when known at build, else None."""
    value = None if x is None else _known(x)
    return None if value is None or value.dtype == object else value


def _check_pairs(pairs, M):
    """The compared pairs of the draws (unoriented, so cycles are allowed): shape, ids, i != j."""
    arr = np.asarray(pairs)
    if arr.ndim < 2 or arr.shape[-1] != 2:
        raise ValueError(f"PartialOrder: pairs must have shape (..., P, 2); got {arr.shape}")
    flat = arr.reshape(-1, 2)
    live = flat[(flat != -1).any(axis=1)]
    bad = live[(live < 0).any(axis=1) | (live >= M).any(axis=1)]
    if len(bad):
        raise ValueError(f"PartialOrder: pairs: item id out of range 0..{M - 1} in the pair "
                         f"{tuple(int(x) for x in bad[0])}; fix the ids (0-based), -1 only as "
                         "(-1, -1) padding")
    same = live[live[:, 0] == live[:, 1]]
    if len(same):
        raise ValueError(f"PartialOrder: pairs: ({same[0, 0]}, {same[0, 1]}) compares an item "
                         "with itself; drop it")


class PartialOrder(pm.Discrete):
    r"""An assessor's pairwise preferences (a partial order), with the exact likelihood.

    .. math::

        p(\text{prefs}) = \sum_{\pi \,\text{agreeing with every pair}} p(\pi)

    under Plackett-Luce (``utilities``) or the permutation exponential family (``logits``,
    ``p(\pi) \propto \exp \sum_i W[i, \pi_i]``; a separable Mallows model is such a ``W``).

    ========  ==========================================================
    Value     (..., P, 2) int: per assessor, ``(preferred, other)`` item pairs (0-based item
              ids); rows ``(-1, -1)`` are padding (assessors with fewer pairs). The pairs must
              be acyclic; repeated or implied pairs are allowed (they change nothing).
    Draws     a complete ranking from the model, each of the ``pairs`` oriented by it (the
              compared pairs: ``pairs=``, or the observed value at the model level)
    ========  ==========================================================

    Top-k and tied rank-form orders are special partial orders (the ranked items before the
    unranked ones; across tie blocks): their likelihood equals :class:`~pm_perm.PlackettLuce`'s
    and :class:`~pm_perm.PartialRanking`'s.

    Parameters
    ----------
    utilities : tensor_like of float, shape (M,), optional
        Plackett-Luce utilities (finite; shift-invariant, fix the shift by the prior).
    logits : tensor_like of float, shape (M, M), optional
        Permutation exponential-family logits (rows = items, columns = positions), M up to
        ``EXACT_MAX_M`` (its normaliser is the exact permanent). Exactly one of ``utilities``
        and ``logits``; one vector / matrix for all assessors (no batch dimensions).
    pairs : tensor_like of int, shape (..., P, 2), optional
        Draws only: the compared pairs whose orientation a draw reports. At the model level
        with ``observed`` and without ``pairs``, the observed pairs.

    Notes
    -----
    Dynamic program over the down-sets (order ideals) of each assessor's partial order
    (:mod:`pm_perm.kernels.linear_extensions`): O(#ideals x m) time and memory per assessor,
    m = the items in its pairs (Plackett-Luce, which is consistent under marginalisation) or all
    M items (exp family, plus one permanent O(M 2^M) for the normaliser). A total order of m
    items has m + 1 ideals; m items with no preference 2^m. Beyond the budget ``MAX_CELLS``
    (2^24 cells per assessor; ``pm_perm.ops.linear_extensions.linear_extension_loglik`` takes
    another), or a cycle, or
    an item id out of range or a pair ``(i, i)``: ``ValueError`` naming the assessor and the
    fix (at model build for constant observed pairs, else when the logp runs). Gradients by an
    adjoint sweep. No JAX implementation of the likelihood yet (numba and Python only).

    Examples
    --------
    >>> import numpy as np, pymc as pm, pm_perm
    >>> u = np.array([1.0, 0.0, -1.0])
    >>> y = pm_perm.PartialOrder.dist(utilities=u, pairs=[[0, 2]])
    >>> lp = pm.logp(y, [[0, 2]]).eval()     # item 0 before item 2: e^1 / (e^1 + e^-1)
    >>> round(float(np.exp(lp)), 6), round(float(np.exp(1) / (np.exp(1) + np.exp(-1))), 6)
    (0.880797, 0.880797)
    """

    rv_type = PartialOrderRV

    @classmethod
    def rv_op(cls, params, pairs, *, size=None, rng=None, return_next_rng=False):
        op = partial_order if params.type.ndim == 1 else partial_order_exp_family
        if rng is None:
            rng = pt.random.shared_rng(seed=None)
        next_rng, rv = op(params, pairs, size=size, rng=rng, return_next_rng=True)
        return (next_rng, rv) if return_next_rng else rv

    def __new__(cls, name, *args, observed=None, **kwargs):
        if observed is not None:
            params = kwargs.get("utilities", kwargs.get("logits"))
            use_all = kwargs.get("logits") is not None
            known = _constant(observed)
            M = _constant(params)
            if known is not None and M is not None:
                check_preferences(known.reshape(-1, *known.shape[-2:]), M.shape[0],
                                  use_all=use_all)
            if kwargs.get("pairs") is None:
                kwargs["pairs"] = observed
        return super().__new__(cls, name, *args, observed=observed, **kwargs)

    @classmethod
    def dist(cls, utilities=None, logits=None, pairs=None, **kwargs):
        if (utilities is None) == (logits is None):
            raise ValueError("PartialOrder: give exactly one of utilities= (Plackett-Luce, "
                             "shape (M,)) and logits= (permutation exponential family, (M, M))")
        family = PLACKETT_LUCE if utilities is not None else EXP_FAMILY
        params = pt.cast(pt.as_tensor_variable(utilities if family == PLACKETT_LUCE
                                               else logits), "float64")
        want = 1 if family == PLACKETT_LUCE else 2
        if params.type.ndim != want:
            raise ValueError("PartialOrder: utilities must have shape (M,) and logits (M, M), "
                             f"one for all assessors; got ndim {params.type.ndim}")
        M = params.type.shape[0]
        if M == 0:
            raise ValueError("PartialOrder: at least one item is needed (M >= 1)")
        if family == EXP_FAMILY and M is not None:
            _check_exp_family_size(M)
        if pairs is None:
            pairs = np.zeros((0, 0), dtype=np.int64)
        else:
            known = _constant(pairs)
            if known is not None and M is not None:
                _check_pairs(known, M)
        pairs = pt.cast(pt.as_tensor_variable(pairs), "int64")
        if pairs.type.ndim < 2:
            raise ValueError("PartialOrder: pairs must have shape (..., P, 2)")
        return super().dist([params, pairs], **kwargs)

    def support_point(rv, size, params, pairs):
        return pt.zeros_like(rv) + pt.cast(pairs, "int64")

    def logp(value, params, pairs):
        return _logp(value, params, PLACKETT_LUCE)


@_logprob.register(PartialOrderExpFamilyRV)
def _partial_order_exp_family_logp(op, values, rng, size, params, pairs, **kwargs):
    (value,) = values
    return _logp(value, params, EXP_FAMILY)


def _check_exp_family_size(M):
    """The exp family's normaliser is the exact permanent, to ``EXACT_MAX_M`` items; beyond,
    ``ValueError`` with the alternatives that ``PartialOrder`` has (it takes no ``method=``)."""
    if M > EXACT_MAX_M:
        raise ValueError(
            f"PartialOrder(logits=...): M = {M} items is beyond the exact limit EXACT_MAX_M = "
            f"{EXACT_MAX_M} of the permutation exponential family's normaliser (the exact "
            "permanent, O(M 2^M)). Alternatives: utilities= (Plackett-Luce: exact at any M, its "
            "cost set by the down-sets of each assessor's pairs), pm_perm.BradleyTerry on the "
            "pairs (independent comparisons), or fewer items")
    check_exact_size(M)  # the memory budget of the permanent's table


def _logp(value, params, family):
    core = 1 if family == PLACKETT_LUCE else 2
    extra = params.type.ndim - core
    if extra:  # PyMC may add broadcastable leading dimensions: one parameter for all rows
        if not all(params.type.broadcastable[:extra]):
            raise NotImplementedError("PartialOrder: one utilities vector / logits matrix for "
                                      "all assessors (no batch dimensions)")
        params = params[(0,) * extra]
    v = pt.cast(value, "int64")
    flat = v.reshape((pt.prod(v.shape[:-2], dtype="int64"), v.shape[-2], 2))
    ll = linear_extension_loglik(params, flat, family)
    if family == EXP_FAMILY:
        ll = ll - log_permanent(params)
    ll = ll.reshape(v.shape[:-2])
    ok = pt.all(pt.isfinite(params)) if family == PLACKETT_LUCE else pt.all(pt.lt(params, np.inf))
    return check_parameters(ll, ok, msg="utilities must be finite; logits finite or -inf")
