"""``PlackettLuce``: the Plackett-Luce distribution over complete, top-k and tied rankings.

Values are rank-form orders; the convention (positions, ``-1`` = unranked, ties sharing the
smallest position of their block) is stated once, in ``docs/guide/preferences_data.md``.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from numba import types
from pymc.distributions.shape_utils import rv_size_is_none
from pytensor.link.numba.dispatch import basic as numba_basic
from pytensor.link.numba.dispatch.random import numba_core_rv_funcify

from pm_perm.distributions._ballots import ballot_arguments, ballot_logp
from pm_perm.distributions._params import (
    ballot_weights_inputs,
    count_weights_np,
    weighted_ballot_logp,
)
from pm_perm.distributions._patterns import (
    coarsen_draws,
    coarsen_numba,
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
from pm_perm.kernels.plackett_luce import (
    PL_DRAW_ERRORS,
    check_length_probs,
    make_plackett_luce_draw_kernel,
    sample_plackett_luce,
)
from pm_perm.ops import extern
from pm_perm.ops.plackett_luce import plackett_luce_loglik

_VERSION = code_version(__file__)  # numba cache version (see pm_perm.kernels._version)

__all__ = ["PlackettLuce", "PlackettLuceRV"]

_WEIGHTS_MSG = "weights must be non-negative integers (ballots per distinct order)"
_NO_ITEM_MSG = PL_DRAW_ERRORS[5]  # the sampler's (status 5): logp's for M = 0 at run time
_LENGTH_MSG = ("length_probs must have M + 1 non-negative entries summing to 1 (probabilities of "
               "ranking k = 0..M items)")


def _check_weights_np(weights):
    return count_weights_np(weights, _WEIGHTS_MSG)


class PlackettLuceRV(IntegerRV):
    """Exact PL draws: utilities (..., M), weights (...), length_probs (..., L), pattern (..., P)
    -> (..., M) int64.

    ``length_probs`` of length 0 means complete rankings; weights do not affect draws (they
    multiply the log-probability) but are checked like in ``logp``. A ``pattern`` of length M
    (P = M; P = 0: none) coarsens each complete draw to it (:mod:`pm_perm.kernels.patterns`)
    and takes precedence over ``length_probs`` (still checked).
    """

    name = "plackett_luce"
    signature = "(m),(),(l),(p)->(m)"
    dist_name = "PlackettLuce"

    @classmethod
    def rng_fn(cls, rng, utilities, weights, length_probs, pattern, size):
        u = np.asarray(utilities, dtype=np.float64)
        w = _check_weights_np(weights)
        lp = np.asarray(length_probs, dtype=np.float64)
        pattern = np.asarray(pattern)
        if size is None:
            size = np.broadcast_shapes(u.shape[:-1], w.shape, lp.shape[:-1], pattern.shape[:-1])
        if pattern.shape[-1] == 0:
            return sample_plackett_luce(u, size=size, rng=rng,
                                        length_probs=lp if lp.shape[-1] else None)
        if lp.shape[-1]:
            check_length_probs(lp, u.shape[-1])
        return coarsen_draws(sample_plackett_luce(u, size=size, rng=rng), pattern, cls.dist_name)


plackett_luce = PlackettLuceRV()


# PyTensor's compiled draws call the sampler through a C symbol (see pm_perm.ops.extern),
# drawing from the graph's own Generator (pm_perm.kernels._bitgen).
_DRAW = extern.extern_kernel(
    "pm_perm_plackett_luce_draw_kernel",
    types.int64(types.CPointer(types.uint64), types.CPointer(types.float64), types.intp,
                types.CPointer(types.float64), types.intp, types.intp,
                types.CPointer(types.int64)),
    make_plackett_luce_draw_kernel(_VERSION),
)


class _DrawError(extern.StatusError):
    """Input errors of the draws (see :class:`StatusError`): the sampler's, then the weights'."""

    messages = extern.value_errors(
        [*PL_DRAW_ERRORS, "weights must be non-negative integers (ballots per distinct order)"])


_BAD_WEIGHTS = len(PL_DRAW_ERRORS)


@numba_core_rv_funcify.register(PlackettLuceRV)
def _numba_plackett_luce(op, node):
    kernel = _DRAW().external
    coarsen = coarsen_numba()

    @numba_basic.numba_njit
    def core_draw(rng, utilities, weights, length_probs, pattern, out=None):
        w = np.float64(weights)
        if not (np.isfinite(w) and w >= 0.0 and w == np.round(w)):
            raise _DrawError(_BAD_WEIGHTS)
        u, lp = np.ascontiguousarray(utilities), np.ascontiguousarray(length_probs)
        cut = 1 if pattern.shape[0] == 0 else 0  # the pattern wins: coarsen a complete draw
        if out is None:
            out = np.empty(u.shape[0], dtype=np.int64)
        y = extern.c_contiguous_out(out)
        bitgen = extern.bitgen_of(rng)
        status = kernel(bitgen.ctypes, u.ctypes, u.shape[0], lp.ctypes, lp.shape[0], cut,
                        y.ctypes)
        if status != 0:
            raise _DrawError(status)
        coarsen(y, pattern)
        return extern.copy_back(out, y)

    core_draw.handles_out = True
    return core_draw, _VERSION


def _check_observed(observed, M):
    """Reject malformed observed orders at model build, naming the first bad row."""
    observed_utility_rows(observed, M)


class PlackettLuce(pm.Discrete):
    r"""Plackett-Luce distribution over rankings, with top-k and tied observations.

    .. math::

        p(\pi \mid u) = \prod_{t=0}^{M-1} \frac{e^{u_{\pi_t}}}{\sum_{s \ge t} e^{u_{\pi_s}}}

    (``pi_t`` = the item at position ``t``). A top-k order has the probability of its first
    ``k`` factors; a tie block the exact probability that its items fill its positions in any
    internal order (the sum over those orders).

    ========  ==========================================================
    Support   rank-form orders (``docs/guide/preferences_data.md``); draws are complete rankings,
              top-k ballots when ``length_probs`` is given, or of the ``pattern``
    Mode      items sorted by decreasing utility (with ``length_probs``: the top ``argmax k``;
              with ``pattern``: coarsened to it)
    ========  ==========================================================

    Parameters
    ----------
    utilities : tensor_like of float, shape (..., M)
        Finite. Shift-invariant: adding a constant to every utility leaves the distribution
        unchanged, so give them a prior that fixes the shift (``pm.ZeroSumNormal``) or fix
        one of them.
    weights : tensor_like of int, shape (...), optional
        Non-negative integer counts (``weights=data.counts``). Two meanings:

        * in a model, with ``observed`` distinct orders (n, M) and counts (n,): the variable has
          one row per BALLOT, the orders expanded by their counts (N = sum of the counts rows;
          rows of count 0 vanish), each of logp ``log p(order)``. So
          ``pm.compute_log_likelihood``, ``az.loo`` and ``az.compare`` are per ballot and
          ``pm.sample_posterior_predictive`` draws N ballots, while the summed logp
          (``pm.find_MAP``, NUTS) costs per distinct order. ``pm.Data`` orders and counts can be
          changed with ``pm.set_data`` without recompiling. Given ``dims``, the first must be a
          ballot dim (a new name such as ``("ballot", "item")``), not the distinct orders';
        * with ``PlackettLuce.dist(..., weights=w)`` and ``pm.logp(d, value)``: per row,
          ``logp = w * log p(row)``.

        Invalid counts (NaN, infinite, negative or fractional) are refused: at build when known,
        else by the parameter check of ``logp`` and by the draws (which otherwise ignore them).
    length_probs : tensor_like of float, shape (..., M + 1), optional
        Probabilities of ranking ``k = 0..M`` items. Given, draws are top-k ballots (draw a
        complete ranking, keep the first ``k ~ length_probs``) and ``logp`` adds
        ``log length_probs[k]`` with ``k`` the number of ranked items (a pmf over ballots).
    pattern : tensor_like of int, shape (..., M), optional
        Draws only (``logp`` ignores it): per row, the rank-form order whose length and tie
        blocks each draw keeps, as :class:`~pm_perm.distributions.PartialRanking`'s
        ``pattern`` (documented there once).
    keep_pattern : bool, default True
        Model level only: the observed value is the pattern of the posterior predictive draws,
        as :class:`~pm_perm.distributions.PartialRanking`'s ``keep_pattern``.

    Notes
    -----
    Cost O(M) per order (a tie block of ``s`` items, unless it is the last, O(s 2^s); at most
    ``TIE_BLOCK_MAX = 20``); the gradient by one reverse pass. Observed orders that are not valid
    rank form raise ``ValueError`` at model build; values that are invalid at run time get
    ``-inf``. With counts (``weights`` and ``observed``), the log-probabilities are computed on
    the distinct orders and repeated per ballot (:mod:`pm_perm.distributions._ballots`).

    References
    ----------
    R. L. Plackett, "The analysis of permutations", Applied Statistics 24, 1975.
    J. I. Yellott, "The relationship between Luce's choice axiom, Thurstone's theory of
    comparative judgment, and the double exponential distribution", J. Math. Psych. 15, 1977.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pm_perm
    >>> y = pm_perm.PlackettLuce.dist(utilities=[2.0, 0.0, -2.0])
    >>> pm.draw(y, random_seed=1).shape
    (3,)
    >>> p = float(np.exp(pm.logp(y, [0, -1, -1]).eval()))   # item 0 first
    >>> round(p, 6), round(float(np.exp(2) / (np.exp(2) + 1 + np.exp(-2))), 6)
    (0.866813, 0.866813)
    """

    rv_type = PlackettLuceRV

    @classmethod
    def rv_op(cls, utilities, weights, length_probs, pattern, *, size=None, rng=None,
              return_next_rng=False):
        if rng is None:
            rng = pt.random.shared_rng(seed=None)
        next_rng, rv = plackett_luce(utilities, weights, length_probs, pattern, size=size,
                                     rng=rng, return_next_rng=True)
        return (next_rng, rv) if return_next_rng else rv

    def __new__(cls, name, *args, observed=None, keep_pattern=True, **kwargs):
        check_observed_orders("PlackettLuce", observed, _check_observed, "utilities", 1, args,
                              kwargs)
        args, kwargs, observed = ballot_arguments("PlackettLuce", name, args, kwargs, observed)
        kwargs = observed_pattern(observed, keep_pattern, kwargs, len(args))
        return super().__new__(cls, name, *args, observed=observed, **kwargs)

    @classmethod
    def dist(cls, utilities, weights=None, length_probs=None, pattern=None, **kwargs):
        utilities = pt.as_tensor_variable(utilities)
        if utilities.type.ndim < 1:
            raise ValueError("utilities must have shape (..., M)")
        refuse_empty("PlackettLuce", "utilities", utilities, 1)
        utilities = pt.cast(utilities, "float64")
        weights, length_probs = ballot_weights_inputs(weights, length_probs,
                                                      utilities.type.shape[-1], _check_weights_np)
        pattern = pattern_input(pattern, utilities.type.shape[-1], "PlackettLuce")
        return super().dist([utilities, weights, length_probs, pattern], **kwargs)

    def support_point(rv, size, utilities, weights, length_probs, pattern):
        y = pt.argsort(pt.argsort(-utilities, axis=-1), axis=-1)
        if pattern.type.shape[-1] != 0:  # the pattern wins, as in the draws
            y = pattern_support_point(y, pattern)
        elif length_probs.type.shape[-1] != 0:
            k = pt.argmax(length_probs, axis=-1)
            y = pt.switch(pt.ge(y, k[..., None]), -1, y)
        if not rv_size_is_none(size):
            y = pt.broadcast_to(y, (*size, utilities.shape[-1]))
        return pt.cast(y, "int64")

    def logp(value, utilities, weights, length_probs, pattern):
        # one row per ballot (weights=counts in a model): computed on the distinct orders
        shared = all(utilities.type.broadcastable[:-1] + length_probs.type.broadcastable[:-1])
        return ballot_logp(value, lambda rows: PlackettLuce._logp_rows(
            rows, utilities, weights, length_probs), shared)

    @staticmethod
    def _logp_rows(value, utilities, weights, length_probs):
        M = utilities.shape[-1]
        value, is_int = integer_rows(value)
        u = utilities
        if all(utilities.type.broadcastable[:-1]):  # one utilities vector (PyMC may expand dims)
            u = utilities[(0,) * (utilities.type.ndim - 1)]
            # rows (n, M) as they are: a reshape would give the Op a copy of the orders (a
            # second int64 cast of a pm.Data of millions of distinct orders per evaluation)
            rows = value if value.type.ndim == 2 else value_rows(value, M)
            ll = plackett_luce_loglik(u, rows).reshape(value.shape[:-1])
        else:  # one order per utilities row
            ll = plackett_luce_loglik(utilities, value[..., None, :])[..., 0]
        # M = 0 known only at run time: refused as the draws refuse it (``dist`` refuses a
        # static one)
        conditions = [pt.ge(M, 1), pt.all(pt.isfinite(utilities)),
                      pt.all(pt.isfinite(weights) & pt.ge(weights, 0)
                             & pt.eq(weights, pt.round(weights)))]
        msgs = [_NO_ITEM_MSG, "utilities must be finite (no NaN or inf)", _WEIGHTS_MSG]
        return weighted_ballot_logp(ll, value, is_int, weights, length_probs, M, conditions,
                                    msgs, _LENGTH_MSG)
