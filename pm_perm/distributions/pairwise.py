"""``BradleyTerry``: paired comparisons (Bradley-Terry, Plackett-Luce on pairs), optionally with
Davidson's tie parameter. Pure PyTensor log-probability; counts as one row per comparison
(:mod:`pm_perm.distributions._ballots`).
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.distributions.dist_math import check_parameters
from pytensor.link.numba.dispatch import basic as numba_basic
from pytensor.link.numba.dispatch.random import numba_core_rv_funcify

from pm_perm.distributions._ballots import ballot_arguments, ballot_logp
from pm_perm.distributions._values import IntegerRV
from pm_perm.distributions.partial_order import _constant
from pm_perm.kernels._version import code_version

_VERSION = code_version(__file__)  # numba cache version (see pm_perm.kernels._version)

__all__ = ["BradleyTerry", "BradleyTerryRV", "check_comparisons"]

_WEIGHTS_MSG = "weights must be non-negative integers (comparisons per distinct row)"
_NO_PAIRS = ("BradleyTerry: draws need the compared pairs: give pairs= (..., 2) or (..., 3) "
             "(the items each comparison compares), or observe the variable (its observed "
             "pairs are used)")


def check_comparisons(rows, M, *, ties=False, name="observed"):
    """Validate comparison rows (..., 2) ``(winner, loser)`` or (..., 3) ``(i, j, tie)`` over
    ``M`` items; raise ``ValueError`` naming the first bad row and the fix. Returns int64 rows."""
    arr = np.asarray(rows)
    if arr.ndim < 1 or arr.shape[-1] not in (2, 3):
        raise ValueError(f"{name}: comparisons must have shape (..., 2) (winner, loser) or "
                         f"(..., 3) (i, j, tie); got shape {arr.shape}")
    if arr.dtype.kind == "f" and not np.all(arr == np.round(arr)):
        raise ValueError(f"{name}: comparisons must be integer item ids")
    flat = arr.reshape(-1, arr.shape[-1]).astype(np.int64)
    for r, row in enumerate(flat):
        i, j = int(row[0]), int(row[1])
        for x in (i, j):
            if not 0 <= x < M:
                raise ValueError(f"{name}: row {r}: item id {x} out of range 0..{M - 1} (M = {M} "
                                 "utilities); item ids are 0-based (fix the id, or give "
                                 "utilities for every item)")
        if i == j:
            raise ValueError(f"{name}: row {r}: item {i} compared with itself; drop the row (a "
                             "comparison needs two different items)")
        if flat.shape[1] == 3:
            if row[2] not in (0, 1):
                raise ValueError(f"{name}: row {r}: the tie column must be 0 (i beat j) or 1 "
                                 f"(a tie); got {row[2]}")
            if row[2] == 1 and not ties:
                raise ValueError(f"{name}: row {r} is a tie but the model has no tie parameter; "
                                 "give nu= (Davidson's tie model) or drop the ties")
    return flat.reshape(arr.shape)


class BradleyTerryRV(IntegerRV):
    """Draws: utilities (..., M), weights (...), nu (...), pairs (..., K) -> (..., K) int64: the
    comparison of the pair's two items: ``(winner, loser)`` (K = 2) or ``(i, j, tie)`` (K = 3;
    a tie keeps the pair's order, a win puts the winner first)."""

    name = "bradley_terry"
    signature = "(m),(),(),(k)->(k)"
    dist_name = "BradleyTerry"

    @classmethod
    def rng_fn(cls, rng, utilities, weights, nu, pairs, size):
        pairs = np.asarray(pairs, dtype=np.int64)
        if pairs.shape[-1] not in (2, 3):
            raise ValueError(_NO_PAIRS)
        u = np.asarray(utilities, dtype=np.float64)
        nu = np.asarray(nu, dtype=np.float64)
        if not np.all(np.isfinite(u)):
            raise ValueError("BradleyTerry: utilities must be finite")
        if np.any(nu < 0) or not np.all(np.isfinite(nu)):
            raise ValueError("BradleyTerry: nu must be finite and >= 0")
        M = u.shape[-1]
        if size is None:
            size = np.broadcast_shapes(u.shape[:-1], np.shape(weights), nu.shape,
                                       pairs.shape[:-1])
        size = tuple(size)
        u = np.broadcast_to(u, size + (M,))
        nu = np.broadcast_to(nu, size)
        pairs = np.broadcast_to(pairs, size + pairs.shape[-1:])
        i, j = pairs[..., 0], pairs[..., 1]
        if np.any((i < 0) | (i >= M) | (j < 0) | (j >= M) | (i == j)):
            raise ValueError("BradleyTerry: pairs must name two different items in 0..M-1")
        ui = np.take_along_axis(u, i[..., None], -1)[..., 0]
        uj = np.take_along_axis(u, j[..., None], -1)[..., 0]
        with np.errstate(divide="ignore"):
            logits = np.stack([ui, uj, np.log(nu) + 0.5 * (ui + uj)], -1)
        p = np.exp(logits - logits.max(-1, keepdims=True))
        cdf = np.cumsum(p, -1)
        draw = rng.random(size) * cdf[..., -1]
        outcome = (draw >= cdf[..., 0]).astype(np.int64) + (draw >= cdf[..., 1])
        out = np.empty(size + (pairs.shape[-1],), dtype=np.int64)
        out[..., 0] = np.where(outcome == 1, j, i)
        out[..., 1] = np.where(outcome == 1, i, j)
        if pairs.shape[-1] == 3:
            out[..., 2] = outcome == 2
        elif np.any(outcome == 2):  # pragma: no cover - nu > 0 needs a tie column (dist checks)
            raise ValueError("BradleyTerry: a tie drawn for a pair without a tie column")
        return out


bradley_terry = BradleyTerryRV()


@numba_core_rv_funcify.register(BradleyTerryRV)
def _numba_bradley_terry(op, node):
    @numba_basic.numba_njit
    def core_draw(rng, utilities, weights, nu, pairs):
        K = pairs.shape[0]
        M = utilities.shape[0]
        if K != 2 and K != 3:
            raise ValueError(_NO_PAIRS)
        i, j = pairs[0], pairs[1]
        if i < 0 or i >= M or j < 0 or j >= M or i == j:
            raise ValueError("BradleyTerry: pairs must name two different items in 0..M-1")
        v = np.float64(nu)
        if not (v >= 0.0 and v < np.inf):
            raise ValueError("BradleyTerry: nu must be finite and >= 0")
        ui, uj = utilities[i], utilities[j]
        if not (np.isfinite(ui) and np.isfinite(uj)):
            raise ValueError("BradleyTerry: utilities must be finite")
        m = max(ui, uj)
        pi, pj = np.exp(ui - m), np.exp(uj - m)
        pt_ = v * np.exp(0.5 * (ui + uj) - m)
        draw = rng.random() * (pi + pj + pt_)
        out = np.empty(K, dtype=np.int64)
        if draw < pi:
            out[0], out[1] = i, j
        elif draw < pi + pj:
            out[0], out[1] = j, i
        else:
            if K != 3:
                raise ValueError("BradleyTerry: a tie drawn for a pair without a tie column")
            out[0], out[1] = i, j
        if K == 3:
            out[2] = 1 if draw >= pi + pj else 0
        return out

    return core_draw, _VERSION


class BradleyTerry(pm.Discrete):
    r"""Paired comparisons: Bradley-Terry, with Davidson's tie model when ``nu`` is given.

    .. math::

        p(i \succ j) = \frac{e^{u_i}}{e^{u_i} + e^{u_j} + \nu \sqrt{e^{u_i} e^{u_j}}}, \qquad
        p(i \sim j) = \frac{\nu \sqrt{e^{u_i} e^{u_j}}}{e^{u_i} + e^{u_j} +
        \nu \sqrt{e^{u_i} e^{u_j}}}

    (``nu = 0``: Bradley-Terry, Plackett-Luce on two items).

    ========  ==========================================================
    Value     (..., 2) int ``(winner, loser)``, or (..., 3) ``(i, j, tie)``: ``tie = 0``
              means ``i`` beat ``j``, ``tie = 1`` a tie (needs ``nu``). 0-based item ids.
    Draws     the outcome of each of the compared ``pairs`` (``pairs=``, or the observed rows
              at the model level): ``(winner, loser[, 0])`` or ``(i, j, 1)``
    ========  ==========================================================

    Parameters
    ----------
    utilities : tensor_like of float, shape (M,)
        Finite; one vector for all comparisons. Shift-invariant: fix the shift by the prior
        (``pm.ZeroSumNormal``, or a Normal prior as an L2 penalty).
    weights : tensor_like of int, shape (n,), optional
        Counts, with the semantics of :class:`~pm_perm.PlackettLuce`'s: in a model with
        ``observed`` distinct rows (n, K) and counts (n,), one row per COMPARISON (the rows
        repeated by their counts; pointwise log-likelihoods per comparison for ``az.loo``; the
        summed log-probability costs per distinct row); with ``.dist`` and ``pm.logp``,
        ``weights * log p(row)``.
    nu : tensor_like of float, optional
        Davidson's tie parameter, ``nu >= 0``. Without it ties have probability 0 (a tie row
        is refused at build, or gets ``-inf``).
    pairs : tensor_like of int, shape (..., 2) or (..., 3), optional
        Draws only: the compared pairs (their outcome columns are ignored).

    Notes
    -----
    O(1) per row in pure PyTensor (numba, JAX and C backends alike). Constant observed rows are
    checked at build: an item id out of range, a row ``(i, i)``, a tie without ``nu`` raise
    ``ValueError`` naming the row and the fix; symbolic values with such rows get ``-inf``.
    The model of which pairs are compared is not part of the likelihood (as in Bradley-Terry).

    References
    ----------
    R. A. Bradley and M. E. Terry, "Rank analysis of incomplete block designs: I. The method of
    paired comparisons", Biometrika 39, 1952. R. R. Davidson, "On extending the Bradley-Terry
    model to accommodate ties in paired comparison experiments", JASA 65, 1970.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pm_perm
    >>> y = pm_perm.BradleyTerry.dist(utilities=[1.0, 0.0], pairs=[0, 1])
    >>> round(float(np.exp(pm.logp(y, [0, 1]).eval())), 6), round(float(1 / (1 + np.exp(-1))), 6)
    (0.731059, 0.731059)
    """

    rv_type = BradleyTerryRV

    @classmethod
    def rv_op(cls, utilities, weights, nu, pairs, *, size=None, rng=None,
              return_next_rng=False):
        if rng is None:
            rng = pt.random.shared_rng(seed=None)
        next_rng, rv = bradley_terry(utilities, weights, nu, pairs, size=size, rng=rng,
                                     return_next_rng=True)
        return (next_rng, rv) if return_next_rng else rv

    def __new__(cls, name, *args, observed=None, **kwargs):
        if observed is not None:
            known, u = _constant(observed), _constant(kwargs.get("utilities",
                                                                 args[0] if args else None))
            if known is not None and u is not None:
                check_comparisons(known, np.shape(u)[-1], ties=kwargs.get("nu") is not None)
        args, kwargs, observed = ballot_arguments("BradleyTerry", name, args, kwargs, observed)
        if observed is not None and kwargs.get("pairs") is None and len(args) < 4:
            kwargs["pairs"] = observed
        return super().__new__(cls, name, *args, observed=observed, **kwargs)

    @classmethod
    def dist(cls, utilities, weights=None, nu=None, pairs=None, **kwargs):
        utilities = pt.cast(pt.as_tensor_variable(utilities), "float64")
        if utilities.type.ndim != 1:
            raise ValueError("BradleyTerry: utilities must have shape (M,), one vector for all "
                             f"comparisons; got ndim {utilities.type.ndim}")
        M = utilities.type.shape[0]
        if M is not None and M < 2:
            raise ValueError(f"BradleyTerry: at least two items are needed; got M = {M}")
        if weights is None:
            weights = pt.constant(1.0, dtype="float64")
        else:
            w = _constant(weights)
            if w is not None and (not np.all(np.isfinite(w)) or np.any(w < 0)
                                  or not np.all(w == np.round(w))):
                raise ValueError(f"BradleyTerry: {_WEIGHTS_MSG}")
            weights = pt.cast(pt.as_tensor_variable(weights), "float64")
        ties = nu is not None
        if nu is None:
            nu = pt.constant(0.0, dtype="float64")
        else:
            v = _constant(nu)
            if v is not None and (not np.all(np.isfinite(v)) or np.any(v < 0)):
                raise ValueError(f"BradleyTerry: nu must be finite and >= 0; got {v}")
            nu = pt.cast(pt.as_tensor_variable(nu), "float64")
        if pairs is None:
            pairs = np.zeros(0, dtype=np.int64)
        else:
            known = _constant(pairs)
            if known is not None and M is not None:
                check_comparisons(known, M, ties=True, name="pairs")
            if known is not None and known.shape[-1] == 2 and ties:
                raise ValueError("BradleyTerry: with nu (ties) the pairs must have a tie column "
                                 "(..., 3): (i, j, tie)")
        pairs = pt.cast(pt.as_tensor_variable(pairs), "int64")
        return super().dist([utilities, weights, nu, pairs], **kwargs)

    def support_point(rv, size, utilities, weights, nu, pairs):
        return pt.zeros_like(rv) + pairs

    def logp(value, utilities, weights, nu, pairs):
        shared = all(utilities.type.broadcastable[:-1])
        return ballot_logp(value, lambda rows: _logp_rows(rows, utilities, weights, nu), shared)


def _logp_rows(value, utilities, weights, nu):
    u = utilities
    extra = u.type.ndim - 1
    if extra:
        if not all(u.type.broadcastable[:extra]):
            raise NotImplementedError("BradleyTerry: one utilities vector for all comparisons")
        u = u[(0,) * extra]
    M = u.shape[0]
    v = pt.cast(value, "int64")
    i, j = v[..., 0], v[..., 1]
    ok = pt.ge(i, 0) & pt.lt(i, M) & pt.ge(j, 0) & pt.lt(j, M) & pt.neq(i, j)
    i, j = pt.switch(ok, i, 0), pt.switch(ok, j, 0)
    ui, uj = u[i], u[j]
    log_nu = pt.log(nu)
    if value.type.shape[-1] == 2:
        tie = pt.zeros_like(i)
    elif value.type.shape[-1] == 3:
        tie = v[..., 2]
    else:  # known at run time only: (winner, loser) or (i, j, tie)
        tie = pt.switch(pt.eq(v.shape[-1], 3), v[..., -1], 0)
    ok = ok & (pt.eq(tie, 0) | pt.eq(tie, 1))
    lt = log_nu + 0.5 * (ui + uj)
    den = pt.logsumexp(pt.stack([ui, uj, lt], axis=-1), axis=-1)
    ll = pt.switch(pt.eq(tie, 1), lt, ui) - den
    ll = pt.switch(ok, ll, -np.inf)
    lp = pt.switch(pt.eq(weights, 0), 0.0, weights * ll)
    return check_parameters(
        lp, pt.all(pt.isfinite(u)), pt.ge(nu, 0) & pt.lt(nu, np.inf),
        pt.all(pt.isfinite(weights) & pt.ge(weights, 0) & pt.eq(weights, pt.round(weights))),
        msg=f"utilities finite, nu >= 0, {_WEIGHTS_MSG}")
