"""Exact log-permanent and permutation marginals (the subset dynamic program), and its limits.

For logits ``W`` (M, M), ``B = exp(W)`` and the permutation model
``p(y) = prod_i B[i, y[i]] / perm(B)`` (``y[i]`` is the column matched to row ``i``):
``log perm(exp W)`` and the marginals ``P[i, j] = p(y[i] = j)``, the gradient
``d log perm(exp W) / dW``, by the forward and backward tables of
:mod:`pm_perm.kernels.subset_dp` on dual-scaled weights (relative error a few ulps times M
whatever the spread of the logits). ``-inf`` logits (forbidden edges) become exact zeros; if no
permutation avoids them, ``log perm = -inf`` and the marginals are all zero. Exact draws:
:mod:`pm_perm.kernels.permutation_sampler`.

Cost: value O(M 2^M) time and one table of 2^M float64 (512 MiB at M = 26); value with
marginals a small constant times that in the same table. The exact limit is
``EXACT_MAX_M = 26`` and a memory budget (``PM_PERM_MEMORY_BUDGET`` bytes, default 2 GiB); beyond
either a ``ValueError`` names the exact O(M^2)-memory method of :mod:`pm_perm.kernels.glynn`
(``method='glynn'``, with its expected time) and the approximate methods of
:mod:`pm_perm.kernels.bethe`, :mod:`pm_perm.kernels.huber_law` and
:mod:`pm_perm.kernels.swap_mcmc`.
"""

from __future__ import annotations

import numpy as np
from numba import carray

from pm_perm._memory import format_bytes, memory_budget
from pm_perm._numba import njit
from pm_perm.kernels._checks import as_square_logits, finite_or_minus_inf
from pm_perm.kernels.glynn import GLYNN_MAX_M, format_seconds, glynn_seconds_estimate
from pm_perm.kernels.subset_dp import dp_value, dp_value_and_marginals, workspace

__all__ = [
    "EXACT_LIMIT_ADVICE",
    "EXACT_MAX_M",
    "check_exact_size",
    "log_permanent",
    "log_permanent_and_marginals",
    "log_permanent_and_marginals_core",
    "log_permanent_into",
    "make_log_permanent_kernel",
    "memory_budget",
    "permutation_marginals",
]

#: Largest M the exact engine accepts (2^26 float64 = 512 MiB of table).
EXACT_MAX_M = 26


#: The part of the "beyond the exact limit" message after the numbers (shared by the static
#: check and the Ops' run-time checks, which see M only when the shape is symbolic).
_DP_COST = " of the subset dynamic program (O(M 2^M) time, 2^M memory)."
_APPROX = (
    " Otherwise use an approximation: the Bethe approximation (pm_perm.kernels.bethe, "
    "method='bethe'), the Huber-Law exact sampler (pm_perm.kernels.huber_law) or swap MCMC "
    "(pm_perm.kernels.swap_mcmc)."
)
EXACT_LIMIT_ADVICE = (
    _DP_COST + f" Up to M = {GLYNN_MAX_M}, method='glynn' (Glynn's formula, pm_perm.kernels."
    "glynn) is exact in O(M^2) memory: about "
    f"{format_seconds(glynn_seconds_estimate(27))} at M = 27 and "
    f"{format_seconds(glynn_seconds_estimate(30))} at M = 30 per value and gradient on one core "
    "(doubling with each M; numba threads share the work)." + _APPROX
)


def _glynn_advice(M):
    """The "use method='glynn'" sentence of the size errors, with the expected time at ``M``."""
    if M > GLYNN_MAX_M:
        return f" M is also beyond GLYNN_MAX_M = {GLYNN_MAX_M} of the exact Glynn method."
    when = format_seconds(glynn_seconds_estimate(M))
    return (f" method='glynn' (Glynn's formula, pm_perm.kernels.glynn) is exact in O(M^2) "
            f"memory and takes about {when} per value and gradient at M = {M} on one core "
            "(numba threads share the work).")


def check_exact_size(M: int) -> None:
    """Raise ``ValueError`` if an exact computation of size ``M`` is beyond the exact limit.

    Parameters
    ----------
    M : int
        Number of rows (= columns) of the logits.
    """
    if M > EXACT_MAX_M:
        raise ValueError(f"M = {M} is beyond the exact limit EXACT_MAX_M = {EXACT_MAX_M}"
                         + _DP_COST + _glynn_advice(M) + _APPROX)
    need = 8 * (1 << M)  # every exact kernel works in one table of 2^M float64
    budget = memory_budget()
    if need > budget:
        raise ValueError(
            f"the exact permanent at M = {M} needs {format_bytes(need)} for its table, more than "
            f"the memory budget of {format_bytes(budget)}. Raise PM_PERM_MEMORY_BUDGET (bytes) "
            "if the machine has the memory." + _glynn_advice(M) + _APPROX
        )


@njit(cache=True)
def log_permanent_and_marginals_core(W):
    """``(log perm(exp W), P)`` for one validated (M, M) float64 matrix (M >= 1), for other
    numba kernels (the tie blocks of :mod:`pm_perm.kernels.partial_orders`); the PyTensor Ops call
    the C kernel of :func:`make_log_permanent_kernel` instead."""
    out = np.empty(W.shape)
    v = dp_value_and_marginals(W, workspace(W.shape[0]), out)
    return v, out


@njit(cache=True, inline="always")
def log_permanent_into(W, P, marginals):
    """``log perm(exp W)`` of a C-contiguous (m, m) float64 matrix; if ``marginals``, ``P`` is
    written to the (m, m) array ``P`` (otherwise it is not touched). NaN or ``+inf`` logits, or
    finite ones beyond ``LOGIT_ABS_MAX``, give NaN (and NaN marginals): the body of the C kernels
    (:func:`make_log_permanent_kernel`, and the JAX backend's XLA FFI handler), which cannot
    raise."""
    m = W.shape[0]
    if not finite_or_minus_inf(W):
        if marginals:
            P[:, :] = np.nan
        return np.nan
    if marginals:
        return dp_value_and_marginals(W, workspace(m), P)
    return dp_value(W, workspace(m))


def make_log_permanent_kernel(version):
    """Body of the C callable that the PyTensor Ops call (``numba.cfunc``, see
    :mod:`pm_perm.ops.extern`): ``op_kernel(w, m, out, marginals)`` returns
    ``log perm(exp W)`` of the C-contiguous (m, m) float64 matrix at ``w``; if ``marginals`` is
    non-zero, ``P`` is written to the (m, m) matrix at ``out`` (otherwise ``out`` is not
    touched). NaN or ``+inf`` logits, or finite ones beyond ``LOGIT_ABS_MAX``, give NaN (and NaN
    marginals): a C callable cannot raise.

    ``version`` (an int identifying the kernel sources, :func:`pm_perm.kernels._version.
    code_version`) is a closure variable of the returned function, so numba's on-disk cache key
    of the compiled callable changes with ANY kernel source file (numba itself only checks the
    file of the function it caches, not of the functions it calls).
    """

    def op_kernel(w, m, out, marginals):
        if version < 0:  # never true; referencing version puts it into numba's cache key
            return np.nan
        W = carray(w, (m, m))
        return log_permanent_into(W, carray(out, (m, m)) if marginals else W, marginals)

    return op_kernel


@njit(cache=True)
def _log_permanent_batch(W):
    n = W.shape[0]
    out = np.empty(n)
    work = workspace(W.shape[1])
    for b in range(n):
        out[b] = dp_value(W[b], work)
    return out


@njit(cache=True)
def _log_permanent_and_marginals_batch(W):
    n, M = W.shape[0], W.shape[1]
    out = np.empty(n)
    P = np.empty((n, M, M))
    work = workspace(M)
    for b in range(n):
        out[b] = dp_value_and_marginals(W[b], work, P[b])
    return out, P


def _prepare(W):
    arr = as_square_logits(W)
    check_exact_size(arr.shape[-1])
    return arr, arr.shape[:-2], arr.reshape((-1,) + arr.shape[-2:])


def log_permanent(W):
    """Exact ``log perm(exp W)``, batched over leading dimensions.

    Parameters
    ----------
    W : array_like of float, shape (..., M, M)
        Logits; ``-inf`` marks a forbidden edge. NaN and ``+inf`` are errors.

    Returns
    -------
    ndarray of float64, shape (...)
        ``log sum_y prod_i exp(W[i, y[i]])``; ``-inf`` if every permutation uses a forbidden
        edge.

    Notes
    -----
    Subset dynamic program on dual-scaled weights: O(M 2^M) time and 2^M float64 per matrix.
    Raises ``ValueError`` for M > ``EXACT_MAX_M`` or beyond the memory budget.

    Examples
    --------
    >>> import numpy as np
    >>> float(np.exp(log_permanent(np.zeros((4, 4)))))  # perm of the all-ones matrix = 4!
    24.000000000000004
    """
    arr, batch, flat = _prepare(W)
    return _log_permanent_batch(flat).reshape(batch)


def log_permanent_and_marginals(W):
    """``(log_permanent(W), permutation_marginals(W))`` from one forward-backward pass.

    Returns
    -------
    logperm : ndarray of float64, shape (...)
    P : ndarray of float64, shape (..., M, M)
        ``P[..., i, j] = p(y[i] = j)``, doubly stochastic (all zeros if ``perm = 0``).

    Notes
    -----
    A small constant times the time of the value alone, the same 2^M float64 of memory.
    """
    arr, batch, flat = _prepare(W)
    lp, P = _log_permanent_and_marginals_batch(flat)
    return lp.reshape(batch), P.reshape(arr.shape)


def permutation_marginals(W):
    """Marginals ``P[..., i, j] = p(y[i] = j)`` of ``p(y) ∝ exp(sum_i W[i, y[i]])``.

    This is the gradient of :func:`log_permanent` with respect to ``W``. Same arguments and cost
    as :func:`log_permanent_and_marginals`.
    """
    return log_permanent_and_marginals(W)[1]
