"""``Mallows``: the Mallows model over rankings with the distances of BayesMallows.

Value convention: rank form, ``R[..., i]`` is the 0-based rank of item ``i``; ``rho`` likewise.
The distances (pure PyTensor) and the normaliser, from the exact distribution of the distance
over all permutations (:mod:`pm_perm.kernels.mallows`), are in this module; the exact draws are
in :mod:`pm_perm.kernels.mallows_sampling`.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.distributions.dist_math import check_parameters
from pymc.logprob.abstract import _logprob
from pytensor.link.numba.dispatch import basic as numba_basic
from pytensor.link.numba.dispatch.random import numba_core_rv_funcify
from pytensor.tensor.random.op import RandomVariable

from pm_perm.distributions._latent import guard_latent_values
from pm_perm.distributions._shapes import check_observed_orders, refuse_empty
from pm_perm.distributions._values import IntegerRV
from pm_perm.distributions.permutation import check_observed_permutations, permutation_draw_numba
from pm_perm.kernels._checks import non_permutation_rows
from pm_perm.kernels._version import code_version
from pm_perm.kernels.mallows import (
    SPEARMAN_TABLE_MAX_N,
    check_distance,
    check_table_size,
    log_distance_counts,
)
from pm_perm.kernels.mallows_sampling import (
    SEPARABLE,
    cayley_draw_into,
    kendall_draw_into,
    separable_logits,
    ulam_draw_into,
)
from pm_perm.kernels.permutation_sampler import sample_permutations
from pm_perm.ops import extern
from pm_perm.ops.permanent import log_permanent

_VERSION = code_version(__file__)

__all__ = ["Mallows", "MallowsRV", "mallows_distance", "mallows_log_normaliser"]

RHO_MSG = "rho must be a permutation of 0..n-1 (rank form: rho[i] = the rank of item i)"
ALPHA_MSG = "alpha must be finite and >= 0"
_DRAW_MESSAGES = (
    (ValueError, ""),
    (ValueError, "Mallows draws: " + RHO_MSG),
    (ValueError, "Mallows draws: " + ALPHA_MSG),
)


class _MallowsDrawError(extern.StatusError):
    """Input errors of the compiled Mallows draws (see :class:`StatusError`)."""

    messages = _DRAW_MESSAGES


# ----------------------------------------------------------------------------- distances


def _consensus_view(R, rho, n):
    """``sigma`` with ``sigma[..., rho[..., i]] = R[..., i]`` (the ranking seen from the
    consensus order), by a one-hot table (O(n^2), no scatter)."""
    onehot = pt.eq(rho[..., :, None], pt.arange(n))
    return pt.sum(pt.switch(onehot, R[..., :, None], 0), axis=-2)


def _gather(x, index, n):
    """``x[..., index[..., i]]`` by a one-hot table (O(n^2)); unlike ``take_along_axis``, it
    needs no ``arange`` of a symbolic batch shape, which the JAX backend cannot compile."""
    return pt.sum(pt.switch(pt.eq(index[..., :, None], pt.arange(n)), x[..., None, :], 0),
                  axis=-1)


def _cycles(sigma, n):
    """Number of cycles of each permutation ``sigma`` (..., n): the elements that are the
    smallest of their cycle, found by pointer jumping (ceil(log2 n) steps of O(n^2))."""
    idx = pt.arange(n)
    low = pt.minimum(sigma, idx)
    jump = sigma
    span = 1
    while span < n:
        low = pt.minimum(low, _gather(low, jump, n))
        jump = _gather(jump, jump, n)
        span *= 2
    return pt.sum(pt.eq(low, idx), axis=-1)


def _lis(sigma, n):
    """Length of the longest increasing subsequence of each row of ``sigma`` (..., n): the
    longest path in the DAG ``i -> j`` (``i < j``, ``sigma_i < sigma_j``), by n - 1 rounds of
    ``L_j = 1 + max_{i -> j} L_i`` (each O(n^2); the same Op graph every round)."""
    idx = pt.arange(n)
    edge = pt.lt(sigma[..., :, None], sigma[..., None, :]) & pt.lt(idx[:, None], idx[None, :])
    L = pt.ones_like(sigma)
    for _ in range(n - 1):
        L = 1 + pt.max(pt.switch(edge, L[..., :, None], 0), axis=-2)
    return pt.max(L, axis=-1)


def mallows_distance(R, rho, distance):
    """``d(R, rho)`` for rank-form permutations (..., n), broadcast over leading dimensions.

    Parameters
    ----------
    R, rho : tensor_like of int, shape (..., n)
        Rankings in rank form (``R[i]`` = the 0-based rank of item ``i``); ``n`` must be known
        when the graph is built for ``"cayley"`` and ``"ulam"``.
    distance : {"footrule", "spearman", "hamming", "kendall", "cayley", "ulam"}
        footrule ``sum |R - rho|``, spearman ``sum (R - rho)^2``, hamming ``#{R_i != rho_i}``,
        kendall the number of discordant item pairs, cayley ``n - #cycles(R rho^-1)``, ulam
        ``n - LIS(R rho^-1)``.

    Returns
    -------
    TensorVariable of int64, shape (...)
        Meaningful only where ``R`` and ``rho`` are permutations.
    """
    check_distance(distance)
    R = pt.as_tensor_variable(R)
    rho = pt.as_tensor_variable(rho)
    if distance == "footrule":
        return pt.sum(pt.abs(R - rho), axis=-1)
    if distance == "spearman":
        return pt.sum(pt.sqr(R - rho), axis=-1)
    if distance == "hamming":
        return pt.sum(pt.neq(R, rho), axis=-1)
    if distance == "kendall":
        dr = R[..., :, None] - R[..., None, :]
        drho = rho[..., :, None] - rho[..., None, :]
        return pt.sum(pt.lt(dr * drho, 0), axis=(-2, -1)) // 2
    n = _static_n(R, rho)
    sigma = _consensus_view(R, rho, n)
    if distance == "cayley":
        return n - _cycles(sigma, n)
    return n - _lis(sigma, n)


def _static_n(*tensors):
    for x in tensors:
        n = x.type.shape[-1]
        if n is not None:
            return int(n)
    raise ValueError("Mallows: the number of items n (the last dimension of rho) must be known "
                     "when the model is built: pass rho as a NumPy array or a random variable "
                     "of fixed shape")


def mallows_log_normaliser(alpha, n, distance):
    """``log Z_n(alpha) = log sum_sigma exp(-(alpha / n) d(sigma, id))`` in PyTensor.

    From the exact distribution of the distance (:func:`pm_perm.kernels.mallows.
    log_distance_counts`, a constant computed once per ``(distance, n)``):
    ``logsumexp_d(log N_d - alpha d / n)``, O(D) per ``alpha`` with its gradient. Spearman
    beyond ``SPEARMAN_TABLE_MAX_N`` (n = 15..26): ``log perm(exp(-(alpha / n)(i - j)^2))`` by
    the exact permanent, O(n 2^n) at EVERY evaluation (also at each swap proposal of a latent
    rho).
    """
    check_table_size(distance, n)
    alpha = pt.as_tensor_variable(alpha)
    if distance == "spearman" and n > SPEARMAN_TABLE_MAX_N:
        cost = np.subtract.outer(np.arange(n), np.arange(n)).astype(np.float64) ** 2
        return log_permanent(-(alpha[..., None, None] / n) * cost)
    d, log_counts = log_distance_counts(distance, n)
    terms = pt.constant(log_counts) - alpha[..., None] * pt.constant(d / n)
    return pt.logsumexp(terms, axis=-1)


# ----------------------------------------------------------------------------- draws


def _check_draw_parameters(rho, alpha):
    if rho.shape[-1] < 1:
        raise ValueError("Mallows: rho must have shape (..., n) with n >= 1")
    if non_permutation_rows(rho).any():
        raise ValueError("Mallows draws: " + RHO_MSG)
    if not np.all(np.isfinite(alpha) & (alpha >= 0)):
        raise ValueError("Mallows draws: " + ALPHA_MSG)


class MallowsRV(IntegerRV):
    """Exact Mallows draws: ``rho`` (..., n) int, ``alpha`` (...) -> ``R`` (..., n) int64."""

    name = "mallows"
    signature = "(n),()->(n)"
    dist_name = "Mallows"
    # : values are permutations (the swap step of pm_perm.inference.step_methods)
    support_is_permutation = True
    __props__ = (*RandomVariable.__props__, "distance")

    def __init__(self, *args, distance="footrule", **kwargs):
        self.distance = check_distance(distance)
        super().__init__(*args, **kwargs)

    def rng_fn(self, rng, rho, alpha, size):
        rho = np.asarray(rho, dtype=np.int64)
        alpha = np.asarray(alpha, dtype=np.float64)
        n = rho.shape[-1]
        _check_draw_parameters(rho, alpha)
        batch = np.broadcast_shapes(rho.shape[:-1], alpha.shape)
        if self.distance in SEPARABLE:
            rho_b = np.broadcast_to(rho, batch + (n,)).reshape(-1, n)
            theta = np.broadcast_to(alpha, batch).ravel() / n
            W = np.stack([separable_logits(r, t, SEPARABLE[self.distance])
                          for r, t in zip(rho_b, theta, strict=True)]).reshape(batch + (n, n))
            return sample_permutations(W, size=batch if size is None else size, rng=rng)
        size = batch if size is None else tuple(size)
        rho_b = np.broadcast_to(rho, size + (n,)).reshape(-1, n)
        theta = np.broadcast_to(alpha, size).ravel() / n
        out = np.empty((rho_b.shape[0], n), dtype=np.int64)
        if self.distance == "ulam":
            d, log_counts = log_distance_counts("ulam", n)
            for k in range(out.shape[0]):
                ulam_draw_into(rng, rho_b[k], theta[k], d, log_counts, out[k])
        else:
            draw = kendall_draw_into if self.distance == "kendall" else cayley_draw_into
            for k in range(out.shape[0]):
                draw(rng, rho_b[k], theta[k], out[k])
        return out.reshape(size + (n,))


@numba_core_rv_funcify.register(MallowsRV)
def _numba_mallows(op, node):
    distance = op.distance
    code = SEPARABLE.get(distance, -1)
    n = node.inputs[2].type.shape[-1]
    if distance == "ulam":
        if n is None:
            raise NotImplementedError("Mallows(distance='ulam') draws need n known at compile "
                                      "time")
        d_values, log_counts = (np.array(a) for a in log_distance_counts("ulam", n))
    else:
        d_values = log_counts = np.zeros(1)
    kind = {"kendall": 1, "cayley": 2, "ulam": 3}.get(distance, 0)
    perm_draw = permutation_draw_numba()

    @numba_basic.numba_njit
    def core_draw(rng, rho, alpha, out=None):
        m = rho.shape[0]
        if out is None:
            out = np.empty(m, dtype=np.int64)
        seen = np.zeros(m, dtype=np.bool_)
        for i in range(m):
            r = rho[i]
            if r < 0 or r >= m or seen[r]:
                raise _MallowsDrawError(1)
            seen[r] = True
        a = np.float64(alpha)
        if not (np.isfinite(a) and a >= 0.0):
            raise _MallowsDrawError(2)
        theta = a / m
        if kind == 0:
            return perm_draw(rng, separable_logits(rho, theta, code), out)
        y = extern.c_contiguous_out(out)
        if kind == 1:
            kendall_draw_into(rng, rho, theta, y)
        elif kind == 2:
            cayley_draw_into(rng, rho, theta, y)
        else:
            ulam_draw_into(rng, rho, theta, d_values, log_counts, y)
        return extern.copy_back(out, y)

    core_draw.handles_out = True
    key = (_VERSION * 1_000_003 + 7 * (n or 0) + kind) % (1 << 62)  # cache key per kind and n
    return core_draw, key


# ----------------------------------------------------------------------------- distribution


class Mallows(pm.Discrete):
    r"""The Mallows model over rankings, with BayesMallows' scaling of the dispersion.

    .. math::

        p(R \mid \rho, \alpha) = \frac{\exp\left(-\frac{\alpha}{n}\, d(R, \rho)\right)}
                                      {Z_n(\alpha)}

    ========  ==========================================================
    Support   permutations ``R`` of ``0..n-1`` in rank form: ``R[i]`` is the rank of item ``i``
    Mode      ``rho``
    ========  ==========================================================

    Parameters
    ----------
    rho : tensor_like of int, shape (..., n)
        The consensus ranking, rank form (``rho[i]`` = the 0-based rank of item ``i``): data, or
        a latent permutation such as ``PermutationExpFamily("rho", logits=np.zeros((n, n)))``
        (``pm.sample`` assigns it, with a scalar ``alpha``, the compiled
        :class:`~pm_perm.inference.mallows_consensus.MallowsConsensusGibbs` when the model has
        that step's form, else the leap-and-shift step of :mod:`pm_perm.inference.step_methods`).
        ``n`` must be known when the model is built.
    alpha : tensor_like of float, shape (...)
        Dispersion, ``alpha >= 0`` (0: uniform over the ``n!`` rankings).
    distance : {"footrule", "spearman", "hamming", "kendall", "cayley", "ulam"}
        ``d(R, rho)``: footrule ``sum_i |R_i - rho_i|`` (BayesMallows' default), spearman
        ``sum_i (R_i - rho_i)^2``, hamming ``#{i : R_i != rho_i}``, kendall the number of
        discordant item pairs, cayley the least number of transpositions from ``R`` to ``rho``,
        ulam ``n`` minus the longest common subsequence of the two orderings.

    Notes
    -----
    Normaliser: ``log Z_n(alpha) = logsumexp_d(log N_d - alpha d / n)`` from the EXACT
    distribution ``N_d`` of the distance over all ``n!`` permutations, computed once per
    ``(distance, n)`` (:mod:`pm_perm.kernels.mallows`) and independent of ``rho``: each
    evaluation costs a log-sum-exp over the D distance values (plus the distance, O(n) for
    footrule, spearman and hamming, O(n^2) for kendall, O(n^2 log n) for cayley, O(n^3) for
    ulam), and the gradient in ``alpha`` is exact. Exact limits (``MAX_N``): footrule 200 (table
    O(n^4 / 8)), kendall 170, hamming and cayley 10,000, ulam 60 (all partitions of n);
    spearman's table to n = 14 (``SPEARMAN_TABLE_MAX_N``), then to n = 26 the exact permanent
    ``log perm(exp(-(alpha / n)(i - j)^2))``, O(n 2^n) at every evaluation. Beyond a limit,
    ``ValueError`` names the alternatives.

    Draws are exact: footrule, spearman, hamming through the permutation exponential family's
    sampler (``W[i, j] = -(alpha / n) f(j, rho_i)``, n <= 26); kendall by repeated insertion;
    cayley by its cycle construction; ulam by the distance's distribution, then a uniform
    permutation with that longest increasing subsequence (Robinson-Schensted with hook-walk
    tableaux).

    ``rho`` that is not a permutation and ``alpha < 0`` (or not finite) fail the parameter
    check (``ParameterValueError``; ``-inf`` inside a model); values that are not permutations
    get ``-inf``; malformed observed data raise ``ValueError`` when the model is built.

    Partial data (:class:`~pm_perm.distributions.mallows_partial.MallowsPartial`: top-k and
    tied rankings, rank form with ``-1`` = unranked), what is exact per distance: footrule,
    spearman, hamming exactly by the partial-order DP (O(n 2^n) per ``(rho, alpha)``, n <= 26);
    kendall exactly by a closed form (O(n^2) per ballot); cayley and ulam refused (no exact
    partial likelihood). Arbitrary pairwise preferences, footrule / spearman / hamming only:
    ``PartialOrder(logits=mallows_logits(rho, alpha, distance))``.

    References
    ----------
    V. Vitelli, O. Sørensen, M. Crispino, A. Frigessi, E. Arjas, "Probabilistic preference
    learning with the Mallows rank model", JMLR 18 (2018).
    P. Diaconis, "Group representations in probability and statistics", IMS (1988), ch. 6.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pm_perm
    >>> R = pm_perm.Mallows.dist(rho=np.arange(4), alpha=8.0, distance="kendall")
    >>> pm.draw(R, random_seed=1).shape
    (4,)
    >>> float(pm.logp(R, np.arange(4)).eval()) > float(pm.logp(R, np.arange(4)[::-1]).eval())
    True
    """

    rv_type = MallowsRV

    @classmethod
    def rv_op(cls, rho, alpha, *, distance="footrule", size=None, rng=None,
              return_next_rng=False):
        op = MallowsRV(distance=distance)
        if rng is None:
            rng = pt.random.shared_rng(seed=None)
        next_rng, rv = op(rho, alpha, size=size, rng=rng, return_next_rng=True)
        return (next_rng, rv) if return_next_rng else rv

    def __new__(cls, name, *args, observed=None, **kwargs):
        check_observed_orders("Mallows", observed, check_observed_permutations, "rho", 1,
                              args, kwargs)
        return super().__new__(cls, name, *args, observed=observed, **kwargs)

    @classmethod
    def dist(cls, rho, alpha, distance="footrule", **kwargs):
        check_distance(distance)
        rho = pt.as_tensor_variable(rho)
        if rho.type.ndim < 1:
            raise ValueError(f"Mallows: rho must have shape (..., n); got ndim={rho.type.ndim}")
        if rho.type.dtype not in pt.type.integer_dtypes:
            raise ValueError(f"Mallows: rho must hold integer ranks (rank form); got dtype "
                             f"{rho.type.dtype}")
        refuse_empty("Mallows", "rho", rho, 1)
        check_table_size(distance, _static_n(rho))
        alpha = pt.as_tensor_variable(alpha)
        if alpha.type.dtype not in pt.type.float_dtypes:
            alpha = pt.cast(alpha, "float64")
        return super().dist([rho, alpha], distance=distance, **kwargs)

    def support_point(rv, size, rho, alpha):
        return pt.broadcast_to(rho, rv.shape)


@_logprob.register(MallowsRV)
def _mallows_logp(op, values, rng, size, rho, alpha, **kwargs):
    (value,) = values
    n = _static_n(rho, value)
    if value.type.dtype in pt.type.float_dtypes:  # a float value: only integer rows count
        ok = pt.all(pt.eq(value, pt.round(value)), axis=-1)
        value = pt.cast(pt.switch(ok[..., None], value, -1), "int64")
    # rows that are not permutations are replaced by the identity before the distance (whose
    # index arithmetic needs permutations), then get -inf (values) or fail the check (rho)
    value_ok = _is_permutation(value, n)
    rho_ok = _is_permutation(rho, n)
    identity = pt.arange(n)
    d = mallows_distance(pt.switch(value_ok[..., None], value, identity),
                         pt.switch(rho_ok[..., None], rho, identity), op.distance)
    lp = -(alpha / n) * d - mallows_log_normaliser(alpha, n, op.distance)
    lp = pt.switch(value_ok, lp, -np.inf)
    lp = check_parameters(lp, pt.all(pt.isfinite(alpha) & pt.ge(alpha, 0)),
                          msg=f"Mallows: {ALPHA_MSG}")
    lp = check_parameters(lp, pt.all(rho_ok), msg=f"Mallows: {RHO_MSG}")
    return lp


def _is_permutation(x, n):
    onehot = pt.eq(x[..., :, None], pt.arange(n))
    return (pt.all(pt.eq(pt.sum(onehot, axis=-2), 1), axis=-1)
            & pt.all(pt.eq(pt.sum(onehot, axis=-1), 1), axis=-1))


guard_latent_values(MallowsRV)
