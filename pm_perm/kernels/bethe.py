"""Bethe approximation of the log-permanent and of the permutation marginals.

For logits ``W`` (M, M) with ``B = exp(W)``, the Bethe free energy of the perfect-matching model
is (Vontobel 2013, eq. for ``F_B``)

.. math::

    F_B(\\gamma) = -\\sum_{ij} \\gamma_{ij} W_{ij} + \\sum_{ij} \\gamma_{ij}\\log\\gamma_{ij}
                   - \\sum_{ij} (1 - \\gamma_{ij}) \\log (1 - \\gamma_{ij}),

minimised over doubly-stochastic ``gamma``; ``log perm_B(B) = -min F_B``. The minimiser
``gamma*`` is the fixed point of loopy belief propagation (Huang & Jebara 2009; Yedidia et al.)
and its value is the Bethe approximation of the permutation marginals ``P(y[i] = j)``.

Direction of the error: ``perm_B(B) <= perm(B) <= 2**(M/2) * perm_B(B)`` (Gurvits 2011 for the
lower bound, Anari & Rezaei 2018 for the upper), so the Bethe log-permanent is a LOWER bound of
the exact one, with a gap of at most ``M/2 * log 2``.

Algorithm: Vontobel showed ``F_B`` is convex on the Birkhoff polytope, so the minimiser is unique.
We minimise it by the concave-convex procedure (CCCP): the concave part
``-(1-g) log(1-g)`` is linearised at the current ``gamma``, and the convex remainder is minimised
exactly by Sinkhorn scaling of ``B / (1 - gamma)``, i.e. the iteration

    gamma <- Sinkhorn(B / (1 - gamma)),

which decreases ``F_B`` monotonically. We interleave one Sinkhorn sweep per linearisation (warm
started scalings), and stop when ``gamma`` is doubly stochastic to ``tol`` and stationary to
``tol``. Cost: O(M^2) per sweep, memory O(M^2); the number of sweeps grows with the weight
spread (see docs/guide/large_m.md for measured figures). The value and its gradient
(the belief matrix, by the envelope theorem at the stationary point) come from the same run.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from pm_perm.kernels._checks import as_square_logits

__all__ = [
    "BETHE_MAX_M",
    "BetheConvergenceError",
    "bethe_core",
    "bethe_log_permanent",
    "bethe_log_permanent_and_marginals",
    "bethe_marginals",
]

#: Largest M accepted: memory is a few (M, M) float64 arrays (5,000 -> ~1 GB); beyond this the
#: O(M^2)-per-sweep cost makes the approximation impractical on one core.
BETHE_MAX_M = 5000


class BetheConvergenceError(RuntimeError):
    """Raised when the Bethe fixed-point iteration does not reach the requested tolerance."""


@njit(cache=True)
def _log1m_excl(G, i, j, M):
    """log(1 - G[i, j]) computed accurately also for G[i, j] close to 1.

    For a doubly-stochastic G, 1 - G[i, j] = sum_{k != j} G[i, k]; we use that sum when
    G[i, j] > 0.5 (no cancellation) and log1p(-G[i, j]) otherwise.
    """
    g = G[i, j]
    if g <= 0.5:
        return math.log1p(-g)
    s = 0.0
    for k in range(M):
        if k != j:
            s += G[i, k]
    t = 0.0
    for k in range(M):
        if k != i:
            t += G[k, j]
    # Average of the row and column complements (both equal 1 - g at the fixed point).
    s = 0.5 * (s + t)
    if s <= 0.0:
        return -math.inf
    return math.log(s)


@njit(cache=True)
def bethe_core(W2, tol, max_iter):
    """Bethe fixed point of ONE validated C-contiguous float64 (M, M) logit matrix.

    Returns ``(log_perm_B, gamma, n_iter, err)``. ``err`` is the final max violation of double
    stochasticity / stationarity; the caller decides whether it is small enough (``err <= tol``
    means converged). If some row or column has no finite entry, returns ``-inf``, zeros, 0,
    0.0 (no permutation has finite weight).
    """
    M = W2.shape[0]
    G = np.zeros((M, M))
    # K = B shifted by row maxima then column maxima (exact rescaling; perm changes by a known
    # factor that we add back in the value).
    shift = 0.0
    B = np.empty((M, M))
    for i in range(M):
        mx = -math.inf
        for j in range(M):
            if W2[i, j] > mx:
                mx = W2[i, j]
        if mx == -math.inf:
            return -math.inf, G, 0, 0.0
        shift += mx
        for j in range(M):
            B[i, j] = math.exp(W2[i, j] - mx)
    for j in range(M):
        mx = 0.0
        for i in range(M):
            if B[i, j] > mx:
                mx = B[i, j]
        if mx == 0.0:
            return -math.inf, G, 0, 0.0
        shift += math.log(mx)
        for i in range(M):
            B[i, j] /= mx
    u = np.ones(M)
    v = np.ones(M)
    K = B.copy()
    Gold = np.empty((M, M))
    n_iter = 0
    err = math.inf
    for it in range(max_iter):
        n_iter = it + 1
        # Row scaling of K then column scaling: one Sinkhorn sweep.
        for i in range(M):
            s = 0.0
            for j in range(M):
                s += K[i, j] * v[j]
            u[i] = 1.0 / s
        for j in range(M):
            v[j] = 0.0
        for i in range(M):
            ui = u[i]
            for j in range(M):
                v[j] += K[i, j] * ui
        for j in range(M):
            v[j] = 1.0 / v[j]
        for i in range(M):
            for j in range(M):
                Gold[i, j] = G[i, j]
                G[i, j] = u[i] * K[i, j] * v[j]
        # Convergence: row sums (columns are exact after the column step) and stationarity.
        err = 0.0
        for i in range(M):
            s = 0.0
            for j in range(M):
                s += G[i, j]
                d = abs(G[i, j] - Gold[i, j])
                if d > err:
                    err = d
            if abs(s - 1.0) > err:
                err = abs(s - 1.0)
        if not (err < math.inf):
            break
        if err <= tol:
            break
        # Re-linearise the concave part: K = B / (1 - G); keep the scalings (warm start).
        for i in range(M):
            for j in range(M):
                if B[i, j] > 0.0:
                    lm = _log1m_excl(G, i, j, M)
                    if lm > -math.inf:  # else the edge is forced: its belief is 1 anyway
                        K[i, j] = B[i, j] * math.exp(-lm)
    # Value: -F_B(G) on the shifted matrix, plus the shift.
    val = 0.0
    for i in range(M):
        for j in range(M):
            g = G[i, j]
            if g > 0.0:
                val += g * (math.log(B[i, j]) - math.log(g))
                lm = _log1m_excl(G, i, j, M)
                if lm > -math.inf:
                    val += (1.0 - g) * lm
    return val + shift, G, n_iter, err


def _run(W, tol, max_iter):
    arr = as_square_logits(W)
    M = arr.shape[-1]
    if M > BETHE_MAX_M:
        raise ValueError(
            f"Bethe approximation supports M <= {BETHE_MAX_M} (memory and O(M^2)-per-sweep time); "
            f"got M = {M}"
        )
    if not (tol > 0):
        raise ValueError(f"tol must be positive; got {tol}")
    max_iter = int(max_iter)
    if max_iter < 1:
        raise ValueError(f"max_iter must be >= 1; got {max_iter}")
    batch = arr.shape[:-2]
    flat = arr.reshape((-1, M, M))
    vals = np.empty(flat.shape[0])
    margs = np.empty_like(flat)
    for b in range(flat.shape[0]):
        v, g, n_iter, err = bethe_core(np.ascontiguousarray(flat[b]), float(tol), max_iter)
        if v == -math.inf:
            raise ValueError(
                "no permutation has finite weight: some row or column of the logits is all -inf"
            )
        if not (err <= tol):
            raise BetheConvergenceError(
                f"Bethe fixed point did not converge in {n_iter} sweeps (max_iter={max_iter}): "
                f"residual {err:.3g} > tol {tol:.3g}. Either no perfect matching with finite "
                "weight exists (check the -inf pattern), or the weights are very spread out: "
                "increase max_iter or loosen tol."
            )
        vals[b] = v
        margs[b] = g
    return vals.reshape(batch), margs.reshape(batch + (M, M))


def bethe_log_permanent_and_marginals(W, tol=1e-9, max_iter=100_000):
    """Bethe approximation of ``log perm(exp W)`` and of the permutation marginals.

    Parameters
    ----------
    W : array_like of float, shape (..., M, M)
        Logits; ``-inf`` marks a forbidden edge.
    tol : float
        Convergence tolerance on the max violation of double stochasticity and on the max
        change of the beliefs per sweep.
    max_iter : int
        Maximum number of sweeps; reaching it raises :class:`BetheConvergenceError`.

    Returns
    -------
    log_perm_b : ndarray, shape (...)
        Bethe log-permanent, a lower bound: ``log perm_B <= log perm <= log perm_B + M/2 log 2``.
    beliefs : ndarray, shape (..., M, M)
        Doubly-stochastic Bethe beliefs, the approximation of ``P(y[i] = j)``; also the gradient
        of ``log_perm_b`` with respect to ``W``.

    Notes
    -----
    Cost O(M^2) per sweep; the number of sweeps grows with the spread of the weights (at
    M = 1000: ~5 sweeps for spread 0.1, ~200 for spread 3). Exact for M = 1 and for matrices
    with a single feasible permutation. Known failure cases: for M = 2 it equals the larger of
    the two permutation weights (the Bethe free energy is linear there), so it is
    non-differentiable at ties; the gap is largest for near-uniform weights (about
    ``0.5 log(2 pi M / e)`` for the all-ones matrix) and is bounded by ``M/2 log 2``; with very
    large spreads (tens of nats) convergence slows down.

    References
    ----------
    Huang, B. & Jebara, T. (2009). Approximating the permanent with belief propagation.
    Vontobel, P. O. (2013). The Bethe permanent of a nonnegative matrix. IEEE Trans. IT 59(3).
    Gurvits, L. (2011). Unleashing the power of Schrijver's permanental inequality.
    """
    return _run(W, tol, max_iter)


def bethe_log_permanent(W, tol=1e-9, max_iter=100_000):
    """Bethe approximation (lower bound) of ``log perm(exp W)``; see
    :func:`bethe_log_permanent_and_marginals`."""
    return _run(W, tol, max_iter)[0]


def bethe_marginals(W, tol=1e-9, max_iter=100_000):
    """Bethe beliefs approximating ``P(y[i] = j)``; see :func:`bethe_log_permanent_and_marginals`."""
    return _run(W, tol, max_iter)[1]
