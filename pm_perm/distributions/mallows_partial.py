"""``MallowsPartial``: top-k and tied rankings under the Mallows model, with their EXACT marginal
likelihood where the distance allows it.

Value convention: that of :class:`~pm_perm.PartialRanking` (rank form, ``-1`` = unranked, tied
items share their block's smallest position). A ballot is a sequence of blocks, each a set of
items that fill a run of positions in any order (the unranked items are the last block), and its
probability is the sum of the Mallows probabilities of its consistent complete rankings:

* footrule, spearman, hamming (separable): ``exp(-(alpha / n) d(R, rho)) = exp(sum_i W[i, R_i])``
  with ``W[i, j] = -(alpha / n) f(j, rho_i)``, so the ballot's probability is the partial-order
  likelihood of the permutation exponential family with these logits
  (:func:`pm_perm.ops.partial_orders.partial_order_loglik`, one suffix subset table per
  ``(rho, alpha)``, whose full set ``perm(exp W)`` is ``Z_n(alpha)``).
* kendall: closed form, O(n^2) per ballot. The number of discordant pairs splits into the pairs
  of items in different blocks (fixed by the ballot) and the inversions inside each block; the
  sum over the orders of a block of ``s`` items of ``q^inversions`` is the q-factorial
  ``[s]_q! = prod_{m=1..s} (1 - q^m) / (1 - q)``, ``q = exp(-alpha / n)``, whatever the items
  (Fligner and Verducci 1986 for top-k; the same argument for every block). So
  ``log p = -(alpha / n) D_between + sum_blocks log [s_b]_q! - log Z_n(alpha)``.
* cayley, ulam: no exact partial likelihood here (``ValueError`` naming the alternatives, among
  them data augmentation: :func:`pm_perm.preferences.mallows_augmented.augmented_mallows`).
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.distributions.dist_math import check_parameters
from pymc.logprob.abstract import _logprob
from pytensor.link.numba.dispatch import basic as numba_basic
from pytensor.link.numba.dispatch.random import numba_core_rv_funcify

from pm_perm.distributions._ballots import ballot_arguments, ballot_logp
from pm_perm.distributions._params import count_weights_np
from pm_perm.distributions._patterns import (
    coarsen_draws,
    coarsen_numba,
    observed_pattern,
    pattern_input,
    pattern_support_point,
)
from pm_perm.distributions._shapes import check_observed_orders, refuse_empty
from pm_perm.distributions._values import IntegerRV, integer_rows, value_rows
from pm_perm.distributions.mallows import (
    ALPHA_MSG,
    RHO_MSG,
    MallowsRV,
    _is_permutation,
    _numba_mallows,
    _static_n,
    mallows_log_normaliser,
)
from pm_perm.kernels._version import code_version
from pm_perm.kernels.mallows import check_distance, check_table_size
from pm_perm.kernels.rank_form import validate_orders
from pm_perm.ops.partial_orders import partial_order_loglik, partial_order_max_m

_VERSION = code_version(__file__)  # numba cache version (see pm_perm.kernels._version)

__all__ = ["MallowsPartial", "MallowsPartialRV", "check_partial_mallows", "mallows_logits"]

#: The distances whose partial likelihood goes through the partial-order DP.
SEPARABLE_DISTANCES = ("footrule", "spearman", "hamming")

WEIGHTS_MSG = "weights must be non-negative integers (the count of each distinct order)"


def check_partial_mallows(distance, n):
    """Raise ``ValueError`` unless the exact partial likelihood of ``distance`` is available for
    ``n`` items, naming the alternatives.

    footrule, spearman, hamming: ``n`` up to the partial-order DP's limit
    (:func:`pm_perm.ops.partial_orders.partial_order_max_m`, 26 and the memory budget: O(n 2^n)
    time, two tables of 2^n float64, whatever the ballots); kendall: the normaliser's limit
    (:data:`pm_perm.kernels.mallows.MAX_N`); cayley, ulam: never.
    """
    check_distance(distance)
    if distance in ("cayley", "ulam"):
        raise ValueError(
            f"MallowsPartial(distance={distance!r}): pm_perm has no exact likelihood of top-k or "
            f"tied rankings under the {distance} distance (no closed form and no separable "
            "structure for the partial-order DP). Use distance='kendall' (closed form) or "
            "'footrule' / 'spearman' / 'hamming' (exact DP) for partial data, observe only "
            f"complete rankings with pm_perm.Mallows(distance={distance!r}), or keep "
            f"{distance} by data augmentation: pm_perm.preferences.mallows_augmented."
            f"augmented_mallows(name, rho, alpha, {distance!r}, ballots) (one latent complete "
            "ranking per ballot, exact posterior, slower mixing)")
    check_table_size(distance, n)
    if distance in SEPARABLE_DISTANCES:
        limit = partial_order_max_m()
        if n > limit:
            raise ValueError(
                f"MallowsPartial(distance={distance!r}): n = {n} items is beyond the exact limit "
                f"{limit} of the partial-order DP (O(n 2^n) time, two tables of 2^n float64, "
                "EXACT_MAX_M and PM_PERM_MEMORY_BUDGET). Use distance='kendall' (closed form, "
                "any n up to 170), pm_perm.Mallows on complete rankings, or the Plackett-Luce "
                "model (pm_perm.PlackettLuce, any number of items)")


def mallows_logits(rho, alpha, distance):
    """The logits ``W[i, j] = -(alpha / n) f(j, rho_i)`` (..., n, n) of a separable Mallows
    model, rows = items, columns = positions: ``exp(sum_i W[i, R_i]) = exp(-(alpha / n)
    d(R, rho))``, so the permutation exponential family with these logits IS the Mallows model
    (its normaliser ``perm(exp W)`` is ``Z_n(alpha)``).

    Parameters
    ----------
    rho : tensor_like of int, shape (..., n)
        The consensus (rank form), ``n`` known when the graph is built.
    alpha : tensor_like of float, shape (...)
        Dispersion.
    distance : {"footrule", "spearman", "hamming"}
        ``f(j, r)``: ``|j - r|``, ``(j - r)^2``, ``[j != r]``.

    Returns
    -------
    TensorVariable of float64, shape (..., n, n)

    Notes
    -----
    The exact likelihood of an assessor's pairwise preferences (an arbitrary partial order)
    under a separable Mallows model: ``pm_perm.PartialOrder("prefs", logits=mallows_logits(rho,
    alpha, "footrule"), observed=pairs)`` (the linear-extension DP over the down-sets, and the
    exact permanent for ``Z_n(alpha)``, n up to ``EXACT_MAX_M``). Kendall, Cayley and Ulam are
    not separable: pm_perm has no exact likelihood of arbitrary partial orders under them.

    Examples
    --------
    >>> import numpy as np
    >>> from pm_perm.distributions.mallows_partial import mallows_logits
    >>> mallows_logits(np.array([1, 0, 2]), 3.0, "footrule").eval().tolist()
    [[-1.0, -0.0, -1.0], [-0.0, -1.0, -2.0], [-2.0, -1.0, -0.0]]
    """
    if distance not in SEPARABLE_DISTANCES:
        raise ValueError(f"mallows_logits: distance must be one of {SEPARABLE_DISTANCES} (the "
                         f"separable ones); got {distance!r}")
    rho = pt.as_tensor_variable(rho)
    n = _static_n(rho)
    alpha = pt.cast(pt.as_tensor_variable(alpha), "float64")
    return -(alpha[..., None, None] / n) * separable_cost(rho, n, distance)


def separable_cost(rho, n, distance):
    """``f(j, rho_i)`` (..., n, n) of a separable distance: ``|j - rho_i|`` (footrule),
    ``(j - rho_i)^2`` (spearman), ``[j != rho_i]`` (hamming), rows = items, columns =
    positions."""
    diff = pt.arange(n)[None, :] - rho[..., :, None]
    if distance == "footrule":
        return pt.abs(diff)
    if distance == "spearman":
        return pt.sqr(diff)
    return pt.cast(pt.neq(diff, 0), "float64")


def _log_q_integers(theta, n):
    """``log [m]_q = log sum_{v < m} q^v`` for m = 1..n, ``q = exp(-theta)`` (..., n), by a
    cumulative sum: every term is at most 1 and the first is 1, so the sum is >= 1 (no
    overflow or underflow); exact at theta = 0 (``log m``) and differentiable everywhere."""
    return pt.log(pt.cumsum(pt.exp(-theta[..., None] * pt.arange(n)), axis=-1))


def kendall_partial_loglik(value, rho, alpha, n):
    """Closed-form ``log p(ballot)`` under the Kendall Mallows model (module docstring), for
    valid rank-form ballots ``value`` (..., n) and a permutation ``rho``."""
    theta = alpha / n
    key = pt.switch(pt.lt(value, 0), n, value)  # unranked items: one last block
    before = pt.lt(key[..., :, None], key[..., None, :])
    swapped = pt.gt(rho[..., :, None], rho[..., None, :])
    between = pt.sum(before & swapped, axis=(-2, -1))
    # m_i: the index of item i inside its block (1..s); sum_i log [m_i]_q = sum_b log [s_b]_q!
    same = pt.eq(key[..., :, None], key[..., None, :])
    lower = pt.le(pt.arange(n)[None, :], pt.arange(n)[:, None])  # [i, l]: l <= i
    m = pt.sum(same & lower, axis=-1)
    counts = pt.sum(pt.eq(m[..., :, None], pt.arange(1, n + 1)), axis=-2)  # (..., n): #{m_i = m}
    within = pt.sum(counts * _log_q_integers(theta, n), axis=-1)
    return -theta * between + within - mallows_log_normaliser(alpha, n, "kendall")


def valid_rank_form(value, n):
    """True (...) for rows (..., n) of valid rank form: entries in ``-1..n-1``, every ranked
    item's value the number of ranked items with a smaller value (the "min" rank of its tie
    block)."""
    ranked = pt.ge(value, 0)
    ahead = pt.sum(ranked[..., None, :] & pt.lt(value[..., None, :], value[..., :, None]),
                   axis=-1)
    ok = pt.switch(ranked, pt.eq(value, ahead), pt.eq(value, -1))
    return pt.all(ok & pt.lt(value, n), axis=-1)


class MallowsPartialRV(IntegerRV):
    """Draws of a Mallows model cut to a pattern: ``rho`` (..., n), ``alpha`` (...),
    ``weights`` (...) (logp only), ``pattern`` (..., n) or an empty vector -> (..., n) int64: a
    complete Mallows draw (:class:`~pm_perm.distributions.mallows.MallowsRV`) coarsened to the
    pattern (:mod:`pm_perm.kernels.patterns`)."""

    name = "mallows_partial"
    signature = "(n),(),(),(p)->(n)"
    dist_name = "MallowsPartial"
    __props__ = (*IntegerRV.__props__, "distance")

    def __init__(self, *args, distance="footrule", **kwargs):
        self.distance = check_distance(distance)
        super().__init__(*args, **kwargs)

    def rng_fn(self, rng, rho, alpha, weights, pattern, size):
        count_weights_np(weights, f"MallowsPartial: {WEIGHTS_MSG}")
        rho, pattern = np.asarray(rho), np.asarray(pattern)
        if size is None:
            size = np.broadcast_shapes(rho.shape[:-1], np.shape(alpha), np.shape(weights),
                                       pattern.shape[:-1])
        y = MallowsRV(distance=self.distance).rng_fn(rng, rho, alpha, tuple(size))
        return coarsen_draws(y, pattern, self.dist_name)


@numba_core_rv_funcify.register(MallowsPartialRV)
def _numba_mallows_partial(op, node):
    # the complete draw of Mallows (node.inputs[2] is rho, as in MallowsRV's node)
    mallows_draw, key = _numba_mallows(MallowsRV(distance=op.distance), node)
    coarsen = coarsen_numba()

    @numba_basic.numba_njit
    def core_draw(rng, rho, alpha, weights, pattern, out=None):
        w = weights.item()
        if not (np.isfinite(w) and w >= 0 and w == np.floor(w)):
            raise ValueError("MallowsPartial: weights must be non-negative integers (counts)")
        y = mallows_draw(rng, rho, alpha, np.empty(rho.shape[0], dtype=np.int64)
                         if out is None else out)
        return coarsen(y, pattern)

    core_draw.handles_out = True
    return core_draw, (key * 31 + _VERSION) % (1 << 62)


class MallowsPartial(pm.Discrete):
    r"""Top-k and tied rankings under the Mallows model, with their exact marginal likelihood.

    .. math::

        p(y \mid \rho, \alpha) = \frac{1}{Z_n(\alpha)}
            \sum_{R \text{ consistent with } y} \exp\left(-\frac{\alpha}{n}\, d(R, \rho)\right)

    Values: the rank form of :class:`PartialRanking` (top-k rows with ``-1`` for unranked
    items, ties as equal "min" ranks, complete rankings); the model, its parameters and its
    scaling are those of :class:`Mallows`.

    Parameters
    ----------
    rho : tensor_like of int, shape (..., n)
        The consensus ranking (rank form), data or a latent permutation (as for
        :class:`Mallows`); ``n`` known when the model is built.
    alpha : tensor_like of float, shape (...)
        Dispersion, ``alpha >= 0``.
    distance : {"footrule", "spearman", "hamming", "kendall"}
        ``cayley`` and ``ulam`` raise ``ValueError`` (below).
    weights : tensor_like of int, shape (...), optional
        Count of each distinct observed order, exactly as :class:`PartialRanking`'s: in a model
        with ``observed`` distinct orders (N, n) and counts (N,), the variable has one row per
        BALLOT (pointwise log-likelihood per ballot, ``az.loo``, posterior predictive), and the
        summed logp costs per distinct order; with ``MallowsPartial.dist(weights=w)`` and
        ``pm.logp``, ``w * log p(row)`` per row.
    pattern : tensor_like of int, shape (..., n), optional
        Draws only: a complete Mallows draw is coarsened to this rank-form pattern (its top-k
        length and tie blocks). Default at model level: the observed rows
        (``keep_pattern=True``), so ``pm.sample_posterior_predictive`` replicates each ballot
        with its own pattern. Without a pattern, draws are complete rankings.
    keep_pattern : bool, default True
        Model level only: ``False`` draws complete rankings.

    Notes
    -----
    What is exact, per distance:

    * footrule, spearman, hamming: exact, by the partial-order DP of :class:`PartialRanking`
      with the logits ``W[i, j] = -(alpha / n) f(j, rho_i)`` (its normaliser
      ``perm(exp W)`` is ``Z_n(alpha)``). Cost O(n 2^n) per ``(rho, alpha)`` (one suffix table,
      each new ``rho`` proposal of a latent consensus recomputes it) plus O(n) per distinct
      ballot and O(s 2^s) per middle tie block of size s; exact up to n = 26 and the memory
      budget (``partial_order_max_m()``). Beyond it, ``ValueError`` names the alternatives.
    * kendall: exact closed form, O(n^2) per ballot, any n up to the Kendall normaliser's limit
      (170): the discordant pairs between blocks (fixed by the ballot) times the q-factorial
      ``[s]_q!`` of every block of size s, ``q = exp(-alpha / n)`` (Fligner and Verducci 1986
      for top-k lists; ties and the unranked block by the same argument).
    * cayley, ulam: refused (``ValueError``): no exact partial likelihood; use one of the
      distances above for partial data, or :class:`Mallows` on complete rankings.

    The gradient in ``alpha`` is exact (the DP's pullback; the closed form is PyTensor).
    ``rho`` that is not a permutation and ``alpha < 0`` fail the parameter check; rows that are
    not valid rank form get ``-inf``; observed rows that are not valid rank form raise
    ``ValueError`` naming the row when the model is built.

    References
    ----------
    M. A. Fligner, J. S. Verducci, "Distance based ranking models", JRSS B 48 (1986).

    Examples
    --------
    >>> import numpy as np, pymc as pm, pm_perm
    >>> ballots = np.array([[0, 1, -1, -1], [1, 0, 2, -1], [0, 0, 2, 2]])   # top-2, top-3, ties
    >>> d = pm_perm.MallowsPartial.dist(rho=np.arange(4), alpha=4.0, distance="kendall")
    >>> np.exp(pm.logp(d, ballots).eval()).round(3).tolist()
    [0.428, 0.115, 0.586]
    """

    rv_type = MallowsPartialRV

    @classmethod
    def rv_op(cls, rho, alpha, weights, pattern, *, distance="footrule", size=None, rng=None,
              return_next_rng=False):
        op = MallowsPartialRV(distance=distance)
        if rng is None:
            rng = pt.random.shared_rng(seed=None)
        next_rng, rv = op(rho, alpha, weights, pattern, size=size, rng=rng,
                          return_next_rng=True)
        return (next_rng, rv) if return_next_rng else rv

    def __new__(cls, name, *args, observed=None, keep_pattern=True, **kwargs):
        check_observed_orders("MallowsPartial", observed, _check_observed, "rho", 1, args,
                              kwargs)
        args, kwargs, observed = ballot_arguments("MallowsPartial", name, args, kwargs, observed)
        kwargs = observed_pattern(observed, keep_pattern, kwargs, len(args))
        return super().__new__(cls, name, *args, observed=observed, **kwargs)

    @classmethod
    def dist(cls, rho, alpha, weights=None, pattern=None, distance="footrule", **kwargs):
        rho = pt.as_tensor_variable(rho)
        if rho.type.ndim < 1:
            raise ValueError(f"MallowsPartial: rho must have shape (..., n); got ndim="
                             f"{rho.type.ndim}")
        if rho.type.dtype not in pt.type.integer_dtypes:
            raise ValueError(f"MallowsPartial: rho must hold integer ranks (rank form); got "
                             f"dtype {rho.type.dtype}")
        refuse_empty("MallowsPartial", "rho", rho, 1)
        n = _static_n(rho)
        check_partial_mallows(distance, n)
        alpha = pt.as_tensor_variable(alpha)
        if alpha.type.dtype not in pt.type.float_dtypes:
            alpha = pt.cast(alpha, "float64")
        if weights is None:
            weights = np.float64(1.0)
        w = _known_value(weights)
        if w is not None:
            count_weights_np(w, f"MallowsPartial: {WEIGHTS_MSG}")
        weights = pt.cast(pt.as_tensor_variable(weights), "float64")
        pattern = pattern_input(pattern, n, "MallowsPartial")
        return super().dist([rho, alpha, weights, pattern], distance=distance, **kwargs)

    def support_point(rv, size, rho, alpha, weights, pattern):
        return pt.broadcast_to(pattern_support_point(rho, pattern), rv.shape)

def _known_value(x):
    """NumPy value of ``x`` when it is not a symbolic variable, else None."""
    if isinstance(x, pt.Variable):
        return None
    return np.asarray(x)


@_logprob.register(MallowsPartialRV)
def _mallows_partial_logp(op, values, rng, size, rho, alpha, weights, pattern, **kwargs):
    (value,) = values
    # one row per ballot (weights=counts in a model): computed on the distinct orders
    shared = all(rho.type.broadcastable[:-1] + alpha.type.broadcastable)
    return ballot_logp(value, lambda rows: _logp_rows(rows, rho, alpha, weights, op.distance),
                       shared)


def _logp_rows(value, rho, alpha, weights, distance):
    n = _static_n(rho, value)
    value, is_int = integer_rows(value)
    rho_ok = _is_permutation(rho, n)
    rho_safe = pt.switch(rho_ok[..., None], rho, pt.arange(n))  # the checks below refuse it
    if distance == "kendall":
        ok = valid_rank_form(value, n)
        safe = pt.switch(ok[..., None], value, -1)
        lp = pt.switch(ok, kendall_partial_loglik(safe, rho_safe, alpha, n), -np.inf)
    else:
        W = mallows_logits(rho_safe, alpha, distance)
        if all(s == 1 for s in W.type.shape[:-2]):  # one W for every row: one suffix table
            W = pt.squeeze(W, axis=tuple(range(W.type.ndim - 2))) if W.type.ndim > 2 else W
            lp = partial_order_loglik(W, value_rows(value, n)).reshape(value.shape[:-1])
        else:  # a W per row (batched rho or alpha): one table per row
            lp = partial_order_loglik(W, value[..., None, :])[..., 0]
    if is_int is not None:  # a non-integer value is outside the support
        lp = pt.switch(is_int, lp, -np.inf)
    lp = pt.switch(pt.eq(weights, 0.0), 0.0, weights * lp)
    lp = check_parameters(lp, pt.all(pt.isfinite(weights) & pt.ge(weights, 0.0)
                                     & pt.eq(weights, pt.round(weights))),
                          msg=f"MallowsPartial: {WEIGHTS_MSG}")
    lp = check_parameters(lp, pt.all(pt.isfinite(alpha) & pt.ge(alpha, 0)),
                          msg=f"MallowsPartial: {ALPHA_MSG}")
    return check_parameters(lp, pt.all(rho_ok), msg=f"MallowsPartial: {RHO_MSG}")


def _check_observed(observed, n):
    """Observed rows that are not valid rank form are refused at build, naming the row."""
    if observed is None or isinstance(observed, pt.Variable):
        return
    arr = np.asarray(observed)
    if arr.dtype == object:
        return
    if arr.ndim == 0:
        raise ValueError("MallowsPartial: observed rankings must have shape (..., n); got a "
                         "scalar")
    if n is not None and arr.shape[-1] != n:
        raise ValueError(f"MallowsPartial: observed rankings have length {arr.shape[-1]} but "
                         f"rho has n = {n} items")
    if arr.dtype.kind == "f" and np.isnan(arr).any():
        raise ValueError("MallowsPartial: observed rankings contain NaN; mark unranked items "
                         "with -1 (rank form), not NaN")
    validate_orders(arr.reshape(-1, arr.shape[-1]), arr.shape[-1],
                    name="MallowsPartial: observed")
