"""``PermutationExpFamily``: the exponential family over permutations (Petterson et al. 2009).

Value convention: ``y[..., i]`` is the column matched to row ``i`` (for a ranking built with
:func:`rank_logits`-style weights, row = item and column = rank position).
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from numba import types
from pymc.distributions.dist_math import check_parameters
from pymc.distributions.shape_utils import maybe_resize, rv_size_is_none
from pymc.logprob.abstract import _logprob
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.link.numba.dispatch import basic as numba_basic
from pytensor.link.numba.dispatch.random import numba_core_rv_funcify
from pytensor.tensor.random.op import RandomVariable

from pm_perm.distributions._params import LOGITS_MSG, logits_ok
from pm_perm.distributions._shapes import check_observed_orders, refuse_empty
from pm_perm.distributions._values import IntegerRV
from pm_perm.kernels._checks import non_permutation_rows
from pm_perm.kernels._version import code_version
from pm_perm.kernels.glynn import (
    GLYNN_DRAW_ERRORS,
    check_glynn_size,
    ensure_parallel_runtime,
    glynn_sample_permutations,
    make_glynn_draw_kernel,
)
from pm_perm.kernels.huber_law import (
    HL_BAD_LOGITS,
    HL_NO_PERMUTATION,
    HL_NOT_ACCEPTED,
    HL_TOO_LARGE,
    HuberLawTrialsExceeded,
    huber_law_sample,
    make_huber_law_draw_kernel,
)
from pm_perm.kernels.permanent import check_exact_size
from pm_perm.kernels.permutation_sampler import DRAW_ERRORS, sample_permutations
from pm_perm.kernels.permutation_sampler import make_permutation_draw_kernel as make_draw_kernel
from pm_perm.ops import extern
from pm_perm.ops.bethe import bethe_log_permanent
from pm_perm.ops.matching import max_weight_matching
from pm_perm.ops.permanent import exact_max_m, log_permanent

# logp's message for M = 0 known only at run time: the exact sampler's (status 1)
NO_ITEM_MSG = DRAW_ERRORS[1]

_VERSION = code_version(__file__)  # numba cache version (see pm_perm.kernels._version)

__all__ = [
    "PermutationExpFamily",
    "PermutationExpFamilyBetheRV",
    "PermutationExpFamilyGlynnRV",
    "PermutationExpFamilyRV",
    "edge_logits",
]

#: Trials the Huber-Law sampler may spend per logits matrix in one draw call (method="bethe").
HUBER_LAW_MAX_TRIALS = 1_000_000

#: Default work budget of one Huber-Law draw (method="bethe"): trials x M^2 elementary steps, a
#: few seconds on one core rather than minutes. At M = 200 that is 2,500 trials.
HUBER_LAW_MAX_WORK = 100_000_000


def huber_law_trial_budget(M, max_work=HUBER_LAW_MAX_WORK):
    """Trials allowed for one draw at size ``M``: ``min(HUBER_LAW_MAX_TRIALS, max_work // M^2)``
    (at least 1)."""
    return int(max(1, min(HUBER_LAW_MAX_TRIALS, int(max_work) // max(1, M * M))))


_BUDGET_MSG = (
    "PermutationExpFamily(method='bethe'): the exact Huber-Law sampler used its work budget "
    "(max_work = trials x M^2) without accepting a draw: the weights are too spread for exact "
    "sampling at this size. Use swap MCMC instead (pm.sample picks the swap step of "
    "pm_perm.inference.step_methods for an unobserved PermutationExpFamily; "
    "pm_perm.kernels.swap_mcmc for "
    "draws outside a model), or pass a larger max_work= to PermutationExpFamily.dist"
)


class PermutationExpFamilyRV(IntegerRV):
    """Exact draws of permutations: ``logits`` (..., M, M) -> ``y`` (..., M) int64."""

    name = "permutation_exp_family"
    signature = "(m,m)->(m)"
    dist_name = "PermutationExpFamily"
    # : tells :mod:`pm_perm.inference.step_methods` that values are permutations (swap-move step
    # method)
    support_is_permutation = True

    @classmethod
    def rng_fn(cls, rng, logits, size):
        return sample_permutations(logits, size=size, rng=rng)


permutation_exp_family = PermutationExpFamilyRV()


# ----------------------------------------------------------------------------- numba draws
# PyTensor's compiled draws call the samplers through C symbols (see pm_perm.ops.extern): their
# code (sampler table, Hungarian check, Glynn, Huber-Law) is compiled once per numba cache, not
# again inside every PyTensor function that draws. The kernels draw from the graph's own
# Generator (pm_perm.kernels._bitgen), so seeded draws are those of the Python samplers.

_U64_PTR = types.CPointer(types.uint64)
_F64_PTR = types.CPointer(types.float64)
_I64_PTR = types.CPointer(types.int64)
_DRAW_SIGNATURE = types.int64(_U64_PTR, _F64_PTR, types.intp, types.intp, _I64_PTR)
_DRAW = {
    "dp": extern.extern_kernel("pm_perm_permutation_draw_kernel", _DRAW_SIGNATURE,
                        make_draw_kernel(_VERSION)),
    "glynn": extern.extern_kernel("pm_perm_glynn_draw_kernel", _DRAW_SIGNATURE,
                           make_glynn_draw_kernel(_VERSION)),
}


class _DrawError(extern.StatusError):
    """Input errors of the exact sampler (see :class:`StatusError`)."""

    messages = extern.value_errors(DRAW_ERRORS)


class _GlynnDrawError(extern.StatusError):
    """Errors of the Glynn sampler (see :class:`StatusError`)."""

    messages = extern.value_errors(GLYNN_DRAW_ERRORS)


def _draw_numba(method, error):
    kernel = _DRAW[method]().external

    @numba_basic.numba_njit
    def draw(rng, W, out):
        Wc = np.ascontiguousarray(W)
        y = extern.c_contiguous_out(out)
        bitgen = extern.bitgen_of(rng)
        status = kernel(bitgen.ctypes, Wc.ctypes, Wc.shape[0], Wc.shape[1], y.ctypes)
        if status != 0:
            raise error(status)
        return extern.copy_back(out, y)

    return draw


def permutation_draw_numba():
    """``draw(rng, W, out) -> out`` in compiled code: one exact draw by the subset DP's sampler
    into ``out`` (M,) int64; raises ``ValueError`` (``pm_perm.kernels.permanent.DRAW_ERRORS``)
    for a non-square matrix, M beyond ``EXACT_MAX_M``, NaN or ``+inf`` logits, or
    ``perm(exp W) = 0``."""
    return _draw_numba("dp", _DrawError)


def _glynn_draw_numba():
    """``draw(rng, W, out) -> out`` by Glynn's formula (errors: ``GLYNN_DRAW_ERRORS``)."""
    ensure_parallel_runtime()  # before numba loads the cached callable (see kernels.glynn)
    return _draw_numba("glynn", _GlynnDrawError)


@numba_core_rv_funcify.register(PermutationExpFamilyRV)
def _numba_permutation_exp_family(op, node):
    draw = permutation_draw_numba()

    @numba_basic.numba_njit
    def core_draw(rng, logits, out=None):
        if out is None:
            out = np.empty(logits.shape[0], dtype=np.int64)
        return draw(rng, logits, out)

    core_draw.handles_out = True
    return core_draw, _VERSION


class PermutationExpFamilyBetheRV(PermutationExpFamilyRV):
    """Draws for ``method="bethe"``: exact Huber-Law accept-reject samples, any M.

    The draws are exact; only the log-probability of this method is approximate (Bethe).
    """

    name = "permutation_exp_family_bethe"
    _print_name = ("PermutationExpFamily[bethe]", "\\operatorname{PermutationExpFamily_B}")
    __props__ = (*RandomVariable.__props__, "max_work")

    def __init__(self, *args, max_work=HUBER_LAW_MAX_WORK, **kwargs):
        if not (np.isfinite(max_work) and max_work >= 1):
            raise ValueError(f"max_work must be a number >= 1, got {max_work!r}")
        self.max_work = int(max_work)
        super().__init__(*args, **kwargs)

    def rng_fn(self, rng, logits, size):
        M = np.shape(logits)[-1]
        try:
            return huber_law_sample(logits, size=size, rng=rng,
                                    max_trials=huber_law_trial_budget(M, self.max_work))
        except HuberLawTrialsExceeded as err:
            raise HuberLawTrialsExceeded(f"{_BUDGET_MSG} ({err})") from None


permutation_exp_family_bethe = PermutationExpFamilyBetheRV()


_HUBER_LAW_DRAW = extern.extern_kernel(
    "pm_perm_huber_law_draw_kernel",
    types.int64(_U64_PTR, _F64_PTR, types.intp, types.int64, _I64_PTR),
    make_huber_law_draw_kernel(_VERSION),
)


class _HuberLawDrawError(extern.StatusError):
    """Errors of the Huber-Law draws (see :class:`StatusError`); statuses of
    :func:`pm_perm.kernels.huber_law.make_huber_law_draw_kernel`, then the square check."""

    messages = (
        (ValueError, ""),
        (ValueError, "M is beyond the Huber-Law sampler's limit HUBER_LAW_MAX_M"),
        (ValueError, "logits contain NaN, +inf or a finite value beyond 1e300"),
        (RuntimeError, _BUDGET_MSG.replace("{", "{{").replace("}", "}}")),
        (ValueError, "cannot sample: the logits admit no permutation (every one uses a -inf "
                     "entry)"),
        (ValueError, "logits must be a square (M, M) matrix"),
    )


_NOT_SQUARE = 5
assert (HL_TOO_LARGE, HL_BAD_LOGITS, HL_NOT_ACCEPTED, HL_NO_PERMUTATION) == (1, 2, 3, 4)


@numba_core_rv_funcify.register(PermutationExpFamilyBetheRV)
def _numba_permutation_exp_family_bethe(op, node):
    max_work = op.max_work
    max_trials_cap = HUBER_LAW_MAX_TRIALS
    kernel = _HUBER_LAW_DRAW().external

    @numba_basic.numba_njit
    def core_draw(rng, logits, out=None):
        M = logits.shape[0]
        if logits.shape[1] != M:
            raise _HuberLawDrawError(_NOT_SQUARE)
        if out is None:
            out = np.empty(M, dtype=np.int64)
        W = np.ascontiguousarray(logits)
        max_trials = max(1, min(max_trials_cap, max_work // max(1, M * M)))
        y = extern.c_contiguous_out(out)
        bitgen = extern.bitgen_of(rng)
        status = kernel(bitgen.ctypes, W.ctypes, M, max_trials, y.ctypes)
        if status != 0:
            raise _HuberLawDrawError(status)
        return extern.copy_back(out, y)

    core_draw.handles_out = True
    return core_draw, (_VERSION * 1_000_003 + max_work) % (1 << 62)  # cache key per budget


class PermutationExpFamilyGlynnRV(PermutationExpFamilyRV):
    """Draws for ``method="glynn"``: exact, by the subset DP's sampler while its table fits the
    memory budget (:func:`pm_perm.ops.permanent.exact_max_m`), beyond that row by row from the
    conditional marginals of Glynn's formula (about twice one value-and-gradient call per draw).
    """

    name = "permutation_exp_family_glynn"
    _print_name = ("PermutationExpFamily[glynn]", "\\operatorname{PermutationExpFamily_G}")

    @classmethod
    def rng_fn(cls, rng, logits, size):
        if np.shape(logits)[-1] <= exact_max_m():
            return sample_permutations(logits, size=size, rng=rng)
        return glynn_sample_permutations(logits, size=size, rng=rng)


permutation_exp_family_glynn = PermutationExpFamilyGlynnRV()


@numba_core_rv_funcify.register(PermutationExpFamilyGlynnRV)
def _numba_permutation_exp_family_glynn(op, node):
    max_dp = exact_max_m()
    dp_draw = permutation_draw_numba()
    glynn_draw = _glynn_draw_numba()

    @numba_basic.numba_njit
    def core_draw(rng, logits, out=None):
        if out is None:
            out = np.empty(logits.shape[0], dtype=np.int64)
        if logits.shape[0] <= max_dp:
            return dp_draw(rng, logits, out)
        return glynn_draw(rng, logits, out)

    core_draw.handles_out = True
    return core_draw, (_VERSION * 1_000_003 + max_dp) % (1 << 62)  # cache key per DP limit


def check_observed_permutations(observed, M):
    """Reject obviously malformed observed permutations at model build, with the reason
    (``M``: the number of items when known, else ``None``; also used by
    :mod:`pm_perm.matching`).

    A ``pm.Data`` container is checked by the value it holds at build; values set later with
    ``pm.set_data`` are not (an invalid one has log-probability -inf).
    """
    if isinstance(observed, SharedVariable):
        observed = observed.get_value(borrow=True)
    if observed is None or isinstance(observed, pt.Variable):
        return
    try:
        arr = np.asarray(observed)
    except Exception:  # e.g. a pm.Data container: checked at run time by logp (-inf)
        return
    if arr.dtype == object:
        return
    if arr.dtype.kind == "f":
        if np.isnan(arr).any():
            raise ValueError(
                "observed permutations contain NaN; PermutationExpFamily does not impute "
                "missing permutations. Drop those rows or model them as latent variables."
            )
        if not np.all(arr == np.round(arr)):
            raise ValueError(
                "observed permutations must be integers (y[i] = column matched to row i); "
                "got non-integer floats"
            )
    elif arr.dtype.kind not in "iu":
        raise ValueError(f"observed permutations must be integers; got dtype {arr.dtype}")
    if arr.ndim == 0:
        raise ValueError("observed permutations must have shape (..., M); got a scalar")
    if M is not None and arr.shape[-1] != M:
        raise ValueError(
            f"observed permutations have length {arr.shape[-1]} but the logits are {M} x {M}"
        )
    m = arr.shape[-1]
    bad = non_permutation_rows(arr)
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(
            f"observed[{', '.join(map(str, first))}] = {arr[first]} is not "
            f"a permutation of 0..{m - 1} ({int(bad.sum())} invalid row(s) in all)"
        )


class PermutationExpFamily(pm.Discrete):
    r"""Exponential family over permutations with edge logits.

    .. math::

        p(y \mid W) = \frac{\exp\left(\sum_{i=0}^{M-1} W_{i, y_i}\right)}
                           {\operatorname{perm}(\exp W)}

    ========  ==========================================================
    Support   permutations ``y`` of ``0..M-1``; ``y[i]`` is the column matched to row ``i``
    Mode      the max-weight perfect matching of ``W`` (:mod:`pm_perm.kernels.matching`)
    ========  ==========================================================

    Parameters
    ----------
    logits : tensor_like of float, shape (..., M, M)
        Edge logits ``W``; ``-inf`` forbids an edge. NaN / ``+inf`` fail the parameter check;
        logits under which no permutation has positive probability fail it too.
    method : {"exact", "glynn", "bethe"}
        ``"exact"`` (default): the normaliser by the subset dynamic program, O(M 2^M) time and
        2^M float64 of memory per distinct logits matrix (with gradient); exact draws from the
        same table. M is limited to ``EXACT_MAX_M = 26`` and the memory budget
        (``PM_PERM_MEMORY_BUDGET``); larger M raises ``ValueError`` naming the alternatives.
        ``"glynn"``: the same exact normaliser and gradient by Glynn's formula
        (:mod:`pm_perm.kernels.glynn`): O(M^2) memory, O(M 2^(M-1)) time, M up to
        ``GLYNN_MAX_M = 32``, for the sizes whose DP table does not fit (its time doubles with
        each M and its rounding errors are larger than the DP's: see the large-M guide). Draws
        are exact (the DP's sampler while its table fits, else row by row from Glynn marginals,
        about twice one logp-and-gradient evaluation per draw).
        ``"bethe"``: APPROXIMATE log-probability with the Bethe log-permanent (a lower bound of
        ``log perm``, so ``logp`` is over-estimated by at most ``M/2 log 2``, in practice by
        about ``0.5 log(2 pi M / e)``; see the large-M guide), O(M^2) per fixed-point sweep, M up
        to 5,000, differentiable, for find_MAP / NUTS on large problems. Its draws are EXACT
        (Huber-Law accept-reject, M <= ``HUBER_LAW_MAX_M``), and raise ``RuntimeError`` when the
        weights are too spread for the sampler's work budget ``max_work``. With every method,
        logits that admit no permutation fail the parameter check of ``logp``
        (``ParameterValueError``; ``-inf`` inside a model) and draws raise ``ValueError``.
        ``dist`` refuses ``M = 0`` (no item) when the shape is known; an ``M = 0`` known only
        at run time fails logp's parameter check and the draws, as above.
    max_work : int, default 1e8 (``HUBER_LAW_MAX_WORK``)
        ``method="bethe"`` only: the work budget of one exact Huber-Law draw, in trials x M^2
        elementary steps (seconds on one core; 2,500 trials at M = 200, capped at
        ``HUBER_LAW_MAX_TRIALS`` = 1e6). A draw that needs more raises ``RuntimeError``
        naming the alternative, swap MCMC (:mod:`pm_perm.inference.step_methods`,
        :mod:`pm_perm.kernels.swap_mcmc`), instead of running for minutes.

    Notes
    -----
    ``logp(y) = sum_i W[i, y[i]] - log perm(exp W)``; values that are not permutations get
    ``-inf``. The gradient with respect to ``W`` is ``onehot(y) - P`` with ``P[i, j] = p(y[i] =
    j)`` (the marginals), computed in the same forward-backward pass as the normaliser. The
    normaliser is invariant to adding a constant to a row or column of ``W``, so parameters that
    only shift rows or columns are not identified by the likelihood: give them proper priors.
    Observed data that are obviously malformed (floats, wrong length, rows that are not
    permutations) raise ``ValueError`` when the model is built.

    References
    ----------
    J. Petterson, T. Caetano, J. McAuley, J. Yu, "Exponential family graph matching and
    ranking", NIPS 2009.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pm_perm
    >>> y = pm_perm.PermutationExpFamily.dist(logits=np.eye(4) * 3.0)
    >>> pm.draw(y, random_seed=1).shape
    (4,)
    >>> float(np.exp(pm.logp(y, np.arange(4)).eval())) > 0.5   # the identity is the mode
    True
    """

    rv_type = PermutationExpFamilyRV

    @classmethod
    def rv_op(cls, logits, *, method="exact", max_work=HUBER_LAW_MAX_WORK, size=None, rng=None,
              return_next_rng=False):
        if method == "exact":
            op = permutation_exp_family
        elif method == "glynn":
            op = permutation_exp_family_glynn
        elif max_work == HUBER_LAW_MAX_WORK:
            op = permutation_exp_family_bethe
        else:
            op = PermutationExpFamilyBetheRV(max_work=max_work)
        if rng is None:
            rng = pt.random.shared_rng(seed=None)
        next_rng, rv = op(logits, size=size, rng=rng, return_next_rng=True)
        return (next_rng, rv) if return_next_rng else rv

    def __new__(cls, name, *args, observed=None, **kwargs):
        # before PyMC casts observed to int64 or imputes NaNs
        check_observed_orders("PermutationExpFamily", observed, check_observed_permutations,
                              "logits", 2, args, kwargs)
        return super().__new__(cls, name, *args, observed=observed, **kwargs)

    @classmethod
    def dist(cls, logits, method="exact", max_work=HUBER_LAW_MAX_WORK, **kwargs):
        if method not in ("exact", "glynn", "bethe"):
            raise ValueError(
                f"method={method!r} is not available; use method='exact' (M <= EXACT_MAX_M), "
                "method='glynn' (exact, O(M^2) memory, M <= GLYNN_MAX_M = 32, slow) or "
                "method='bethe' (approximate normaliser, any M)"
            )
        logits = pt.as_tensor_variable(logits)
        if logits.type.ndim < 2:
            raise ValueError(f"logits must have shape (..., M, M); got ndim={logits.type.ndim}")
        if logits.type.dtype not in pt.type.float_dtypes:
            logits = pt.cast(logits, "float64")
        m0, m1 = logits.type.shape[-2:]
        if m0 is not None and m1 is not None and m0 != m1:
            raise ValueError(f"logits must be square in the last two dims; got {logits.type.shape}")
        refuse_empty("PermutationExpFamily", "logits", logits, 2)
        if m0 is not None and method == "exact":
            check_exact_size(m0)  # refuse at once, before any graph is compiled
        if m0 is not None and method == "glynn":
            check_glynn_size(m0)
        if method == "bethe":
            kwargs["max_work"] = max_work
        return super().dist([logits], method=method, **kwargs)

    def support_point(rv, size, logits):
        mode = max_weight_matching(logits)
        if not rv_size_is_none(size):
            mode = pt.broadcast_to(mode, (*size, logits.shape[-1]))
        return mode

    def logp(value, logits):
        return _logp(value, logits, log_permanent(logits))


def _logp(value, logits, log_z):
    M = logits.shape[-1]
    cols = pt.arange(M)
    onehot = pt.eq(value[..., :, None], cols)
    score = pt.sum(pt.switch(onehot, logits, 0.0), axis=(-2, -1))
    # a permutation: every row names one column and every column is named once (counted on the
    # one-hot table the score uses; where the value is a graph input, e.g. observed pm.Data, a
    # sort here makes the graph's first numba compilation much slower)
    is_perm = (pt.all(pt.eq(pt.sum(onehot, axis=-2), 1), axis=-1)
               & pt.all(pt.eq(pt.sum(onehot, axis=-1), 1), axis=-1))
    lp = pt.switch(is_perm, score - log_z, -np.inf)
    # M = 0 known only at run time: refused as the draws refuse it (``dist`` refuses a static one)
    lp = check_parameters(lp, pt.ge(M, 1), msg=NO_ITEM_MSG)
    lp = check_parameters(lp, logits_ok(logits), msg=LOGITS_MSG)
    return check_parameters(
        lp,
        pt.all(pt.gt(log_z, -np.inf)),
        msg="the logits admit no permutation (every one uses a -inf entry)",
    )


@_logprob.register(PermutationExpFamilyGlynnRV)
def _glynn_logp(op, values, rng, size, logits, **kwargs):
    """logp of ``method="glynn"``: the exact normaliser by Glynn's formula."""
    (value,) = values
    return maybe_resize(_logp(value, logits, log_permanent(logits, method="glynn")), size)


@_logprob.register(PermutationExpFamilyBetheRV)
def _bethe_logp(op, values, rng, size, logits, **kwargs):
    """logp of ``method="bethe"``: the Bethe log-permanent replaces the exact normaliser."""
    (value,) = values
    return maybe_resize(_logp(value, logits, bethe_log_permanent(logits)), size)


def edge_logits(x, theta, forbidden=None):
    """Edge logits ``W[..., i, j] = <x[..., i, j, :], theta>`` for learned matching.

    Parameters
    ----------
    x : tensor_like of float, shape (..., M, M, d)
        Edge features (e.g. squared differences of point descriptors, Petterson et al. eq. 19).
    theta : tensor_like of float, shape (d,)
        Weights (typically a random variable).
    forbidden : array_like of bool, shape (..., M, M), optional
        Edges to forbid (their logit becomes ``-inf``).

    Returns
    -------
    TensorVariable, shape (..., M, M)
    """
    W = pt.dot(pt.as_tensor_variable(x), pt.as_tensor_variable(theta))
    if forbidden is not None:
        W = pt.switch(pt.as_tensor_variable(forbidden), -np.inf, W)
    return W
