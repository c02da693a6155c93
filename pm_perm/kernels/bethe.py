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

Algorithm: loopy sum-product BP on the matching factor graph with scalar ratio messages
(Huang & Jebara 2009; see ``_bp``), which at M = 1000 converges in ~5-15 sweeps for weight spreads
0.1-3. BP is not guaranteed to converge. At large weight spreads (logit ranges of tens to hundreds
of nats) it can oscillate, or crawl with a contraction factor close to 1, for 10^4-10^5 sweeps.
So if it has not converged after min(max_iter, 500) sweeps, BP restarts with damping
0.5 (geometric mixing of the messages, up to ``DAMPED_BP_SWEEPS``), which removes the
oscillation. If that fails too, or a message becomes non-finite (edges forced by ``-inf``
patterns), we fall back to an always-convergent scheme. Vontobel showed ``F_B`` is convex on
the Birkhoff polytope, and the concave-convex procedure (CCCP) that linearises the concave part
``-(1-g) log(1-g)`` and minimises the convex rest by Sinkhorn scaling,
``gamma <- Sinkhorn(B / (1 - gamma))``, decreases ``F_B`` monotonically (one Sinkhorn sweep per
linearisation, warm-started scalings; slower, up to thousands of sweeps for spread 3). Before
any of these, when plain BP has failed, the vertex test of :mod:`pm_perm.kernels.bethe_vertex`
runs: with well-separated weights the minimiser can be the permutation matrix of the max-weight
matching itself, a vertex of the polytope, and then no interior fixed point exists and every
iterative scheme crawls towards it forever. The test is exact (a spectral-radius certificate),
and a certified vertex is returned as is, with beliefs 0/1 and value the matching weight. For
M <= ``NEWTON_MAX_M`` each slow stage is followed by Newton's method on the stationarity
equations (:mod:`pm_perm.kernels.bethe_newton`), started from that stage's beliefs. It settles
the saturated and near-1/2 cases on which the fixed-point schemes crawl, and its log-residual
certifies the result. All stop when ``gamma`` is doubly stochastic and stationary to ``tol``,
and all reach the same fixed point (tested). Cost: O(M^2) per sweep, O(M^3) for the vertex
test and per Newton step, memory O(M^2). The value ``-F_B(gamma)`` and its gradient (the belief
matrix, by the envelope theorem at the stationary point) come from the same run.
"""

from __future__ import annotations

import math

import numpy as np
from numba import carray

from pm_perm._numba import njit
from pm_perm.kernels._checks import (
    as_square_logits,
    check_admits_permutation,
    finite_or_minus_inf,
    hall_violator,
)
from pm_perm.kernels.assignment import dual_scaled
from pm_perm.kernels.bethe_newton import NEWTON_MAX_M, newton_kkt
from pm_perm.kernels.bethe_vertex import vertex_certificate

__all__ = [
    "BETHE_MAX_M",
    "BETHE_NOT_CONVERGED",
    "BETHE_NO_PERMUTATION",
    "BETHE_OK",
    "BetheConvergenceError",
    "bethe_solve",
    "bethe_into",
    "bethe_core",
    "bethe_log_permanent",
    "bethe_log_permanent_and_marginals",
    "bethe_marginals",
    "make_bethe_kernel",
]

#: Sweeps of damped BP (damping 0.5) tried when undamped BP has not converged in 500 sweeps,
#: before the slower CCCP fallback.
DAMPED_BP_SWEEPS = 20_000

#: Newton stage (bethe_newton): required max log-residual (also at most ``tol``), and steps.
NEWTON_TOL = 1e-12
NEWTON_STEPS = 50

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


@njit(cache=True, inline="always")
def _row_products(B, rho, X, i):
    """``X[i, j] = B[i, j] rho[i, j]`` for row ``i``; returns the row's sum."""
    t = 0.0
    for j in range(B.shape[1]):
        X[i, j] = B[i, j] * rho[i, j]
        t += X[i, j]
    return t


@njit(cache=True)
def _bp(B, tol, max_iter, G, damping=1.0):
    """Sum-product loopy BP on the matching factor graph (ratio messages), writing beliefs to G.

    Row-to-column ratio lam[i, j] = B[i, j] / sum_{s != j} B[i, s] rho[i, s], column-to-row
    ratio rho[i, j] = 1 / sum_{l != i} lam[l, j]; beliefs G[i, j] proportional to
    B[i, j] rho[i, j] (rows normalised). With ``damping`` a < 1 the new column-to-row message is
    the geometric mix ``rho_old^(1 - a) rho_new^a`` (same fixed points; it stops the period-2
    oscillation that undamped BP falls into when two matchings differing by a transposition
    nearly tie at large weight spreads). Returns (converged, n_iter, err); not converged also
    when a message becomes non-finite (forced edges), in which case the caller falls back to
    the always-convergent CCCP.
    """
    M = B.shape[0]
    rho = np.ones((M, M))
    lam = np.empty((M, M))
    X = np.empty((M, M))
    colsum = np.empty(M)
    err = math.inf
    for it in range(max_iter):
        # lam from rho (row exclusion sums, exact recomputation when the own term dominates)
        for i in range(M):
            t = _row_products(B, rho, X, i)
            for j in range(M):
                r = t - X[i, j]
                if r < 1e-6 * t:
                    r = 0.0
                    for k in range(M):
                        if k != j:
                            r += X[i, k]
                if r <= 0.0:
                    return False, it + 1, math.inf
                lam[i, j] = B[i, j] / r
        # rho from lam (column exclusion sums)
        for j in range(M):
            colsum[j] = 0.0
        for i in range(M):
            for j in range(M):
                colsum[j] += lam[i, j]
        for i in range(M):
            for j in range(M):
                r = colsum[j] - lam[i, j]
                if r < 1e-6 * colsum[j]:
                    r = 0.0
                    for k in range(M):
                        if k != i:
                            r += lam[k, j]
                if r <= 0.0 or not (r < math.inf):
                    return False, it + 1, math.inf
                if damping < 1.0:
                    rho[i, j] = rho[i, j] ** (1.0 - damping) * (1.0 / r) ** damping
                else:
                    rho[i, j] = 1.0 / r
        # beliefs and convergence (row sums are 1 by construction; check columns + change)
        err = 0.0
        for j in range(M):
            colsum[j] = 0.0
        for i in range(M):
            t = _row_products(B, rho, X, i)
            for j in range(M):
                g = X[i, j] / t
                d = abs(g - G[i, j])
                if d > err:
                    err = d
                G[i, j] = g
                colsum[j] += g
        for j in range(M):
            d = abs(colsum[j] - 1.0)
            if d > err:
                err = d
        if not (err < math.inf):
            return False, it + 1, math.inf
        if err <= tol:
            return True, it + 1, err
    return False, max_iter, err


@njit(cache=True)
def bethe_core(W2, tol, max_iter):
    """Bethe fixed point of ONE validated C-contiguous float64 (M, M) logit matrix.

    Returns ``(log_perm_B, gamma, n_iter, err)``. ``err`` is the final max violation of double
    stochasticity / stationarity; the caller decides whether it is small enough (``err <= tol``
    means converged). If no permutation avoids the ``-inf`` entries (:func:`hall_violator`:
    checked first, as every iterative stage would otherwise run to ``max_iter`` on a problem
    with no fixed point), returns ``-inf``, zeros, 0, 0.0.
    """
    M = W2.shape[0]
    G = np.zeros((M, M))
    # K = B shifted by row maxima then column maxima (exact rescaling; perm changes by a known
    # factor that we add back in the value).
    shift = 0.0
    B = np.empty((M, M))
    forbidden = False
    for i in range(M):
        mx = -math.inf
        for j in range(M):
            if W2[i, j] > mx:
                mx = W2[i, j]
            elif W2[i, j] == -math.inf:
                forbidden = True
        if mx == -math.inf:
            return -math.inf, G, 0, 0.0
        shift += mx
        for j in range(M):
            B[i, j] = math.exp(W2[i, j] - mx)
    if forbidden and not hall_violator(W2)[0]:
        return -math.inf, G, 0, 0.0
    underflow = False
    for j in range(M):
        mx = 0.0
        for i in range(M):
            if B[i, j] > mx:
                mx = B[i, j]
        if mx == 0.0:
            finite = False
            for i in range(M):
                if W2[i, j] > -math.inf:
                    finite = True
            if not finite:
                return -math.inf, G, 0, 0.0
            underflow = True
            break
        shift += math.log(mx)
        for i in range(M):
            B[i, j] /= mx
    for i in range(M):
        for j in range(M):
            if B[i, j] == 0.0 and W2[i, j] > -math.inf:
                underflow = True
    if underflow:
        # Logit spreads beyond ~700 nats: exp underflowed to 0 on finite edges, and the zero
        # pattern left may admit no perfect matching at all (BP and CCCP would then iterate on
        # an infeasible problem). Scale by the dual potentials of the max-weight matching
        # instead: W + u_i + v_j <= 0 with equality on the matching, so the matching keeps
        # weight exp(0) = 1 in every row and column.
        B, shift, feasible = dual_scaled(np.ascontiguousarray(W2))
        if not feasible:
            return -math.inf, G, 0, 0.0
    # Loopy BP first (fast: ~10-30 sweeps even for large spreads); if it fails to converge in
    # min(max_iter, 500) sweeps or hits a forced edge, damped BP, then the monotone CCCP.
    bp_iter = min(max_iter, 500)
    ok, n_bp, err = _bp(B, tol, bp_iter, G, 1.0)  # damping given: one compiled variant of _bp
    if ok:
        return _bethe_value(B, G, M) + shift, G, n_bp, err
    # Each slower stage is followed by Newton's method on the stationarity equations
    # (bethe_newton), started from that stage's beliefs; it settles the saturated cases on
    # which BP and CCCP crawl. If every stage fails, the result with the smallest residual is
    # returned (the caller raises with that residual); on forced edges BP's residual is inf
    # and CCCP's result wins.
    # Well-separated weights: the minimiser may be the vertex of the max-weight matching, where
    # no interior fixed point exists and every iterative stage crawls (bethe_vertex). Exact.
    is_vertex, col, vertex_value, _ = vertex_certificate(W2)
    if is_vertex:
        for i in range(M):
            for j in range(M):
                G[i, j] = 0.0
            G[i, col[i]] = 1.0
        return vertex_value, G, n_bp, 0.0
    use_newton = M <= NEWTON_MAX_M
    logB = np.log(B) if use_newton else B
    n_newton, err_newton = _newton_stage(logB, G, tol, use_newton)
    n_total = n_bp + n_newton
    if err_newton <= tol:
        return _bethe_value(B, G, M) + shift, G, n_total, err_newton
    best_err = err
    best_G = G.copy()
    if max_iter > bp_iter:
        # BP oscillates (near-tied transpositions) or overflowed on the way: damped BP,
        # restarted from uniform messages (it stops at once on forced edges).
        for i in range(M):
            for j in range(M):
                G[i, j] = 0.0
        ok, n_damped, err = _bp(B, tol, min(max(max_iter - n_total, 1), DAMPED_BP_SWEEPS), G,
                                0.5)
        n_total += n_damped
        if ok:
            return _bethe_value(B, G, M) + shift, G, n_total, err
        if err < best_err:
            best_err = err
            best_G[:, :] = G
        n_newton, err_newton = _newton_stage(logB, G, tol, use_newton)
        n_total += n_newton
        if err_newton <= tol:
            return _bethe_value(B, G, M) + shift, G, n_total, err_newton
    n_iter, err = _cccp(B, tol, max_iter, G)
    n_total += n_iter
    if not (err <= tol):
        n_newton, err_newton = _newton_stage(logB, G, tol, use_newton)
        n_total += n_newton
        if err_newton <= tol:
            return _bethe_value(B, G, M) + shift, G, n_total, err_newton
    if not (err <= best_err) and best_err < math.inf:
        G[:, :] = best_G
        err = best_err
    return _bethe_value(B, G, M) + shift, G, n_total, err


#: Status codes of :func:`bethe_into`.
BETHE_OK, BETHE_NO_PERMUTATION, BETHE_NOT_CONVERGED = 0, 1, 2


@njit(cache=True)
def bethe_into(W, tol, max_iter, out):
    """``(status, log perm_B)`` of one C-contiguous (M, M) float64 matrix, beliefs into ``out``
    (M, M): the body of the C kernels (:func:`make_bethe_kernel`, the JAX backend's XLA FFI
    handler), which cannot raise, so the caller decides from ``status``.

    NaN, ``+inf`` or finite logits beyond ``LOGIT_ABS_MAX``: ``BETHE_OK`` with NaN value and
    beliefs. No permutation of finite weight: ``BETHE_NO_PERMUTATION``, ``-inf`` and zero beliefs.
    Fixed point not reached within ``max_iter`` sweeps to ``tol``: ``BETHE_NOT_CONVERGED`` with
    the best value and beliefs found.
    """
    if not finite_or_minus_inf(W):
        out[:, :] = np.nan
        return BETHE_OK, np.nan
    v, g, _, err = bethe_core(W, tol, max_iter)
    out[:, :] = g
    if v == -math.inf:
        return BETHE_NO_PERMUTATION, v
    if not (err <= tol):
        return BETHE_NOT_CONVERGED, v
    return BETHE_OK, v


def make_bethe_kernel(version):
    """Body of the C callable that the Bethe Ops call (``numba.cfunc``, see
    :mod:`pm_perm.ops.extern`): ``op_kernel(w, m, tol, max_iter, value, beliefs)`` runs
    :func:`bethe_into` on the C-contiguous (m, m) float64 matrix at ``w``, writes
    ``log perm_B`` to ``value[0]`` and the beliefs to the (m, m) matrix at ``beliefs``, and
    returns the status. ``version`` keys numba's cache as in
    :func:`pm_perm.kernels.permanent.make_log_permanent_kernel`.
    """

    def op_kernel(w, m, tol, max_iter, value, beliefs):
        if version < 0:  # never true; referencing version puts it into numba's cache key
            return -1
        status, v = bethe_into(carray(w, (m, m)), tol, max_iter,
                                       carray(beliefs, (m, m)))
        value[0] = v
        return status

    return op_kernel


@njit(cache=True)
def _newton_stage(logB, G, tol, use_newton):
    """Newton polish of ``G`` (see :func:`newton_kkt`); overwrites ``G`` only on success.

    Returns ``(n_steps, err)`` with ``err`` the larger of the log-residual and the violation of
    double stochasticity (``inf`` when not converged or not tried).
    """
    if not use_newton:
        return 0, math.inf
    M = G.shape[0]
    for i in range(M):
        for j in range(M):
            if not (G[i, j] == G[i, j]):
                return 0, math.inf
    Gn = G.copy()
    # np.int64: a bare global int would be typed Literal[int](50) and compile newton_kkt a second
    # time beside the int64 version that direct callers (tests, scripts) use
    ok, n, res = newton_kkt(logB, Gn, min(tol, NEWTON_TOL), np.int64(NEWTON_STEPS), tol)
    if not ok:
        return n, math.inf
    err = res
    for i in range(M):
        r = 0.0
        c = 0.0
        for j in range(M):
            r += Gn[i, j]
            c += Gn[j, i]
        err = max(err, abs(r - 1.0), abs(c - 1.0))
    if not (err <= tol):
        return n, math.inf
    G[:, :] = Gn
    return n, err


@njit(cache=True)
def _cccp(B, tol, max_iter, G):
    """Concave-convex procedure for the Bethe free energy, writing beliefs to G.

    ``gamma <- Sinkhorn(B / (1 - gamma))``, one Sinkhorn sweep per linearisation with
    warm-started scalings; decreases ``F_B`` monotonically. Returns (n_iter, err).
    """
    M = B.shape[0]
    for i in range(M):
        for j in range(M):
            G[i, j] = 0.0
    u = np.ones(M)
    v = np.ones(M)
    K = B.copy()
    Gold = np.empty((M, M))
    n_iter = 0
    err = math.inf
    for it in range(max_iter):
        n_iter = it + 1
        # Row scaling of K then column scaling: one Sinkhorn sweep.
        # A scaling sum of 0 or inf (scalings diverging: no doubly-stochastic matrix on this
        # support) ends the run unconverged; 1 / 0 would raise ZeroDivisionError in numba.
        for i in range(M):
            s = 0.0
            for j in range(M):
                s += K[i, j] * v[j]
            if not (0.0 < s < math.inf):
                return n_iter, math.inf
            u[i] = 1.0 / s
        for j in range(M):
            v[j] = 0.0
        for i in range(M):
            ui = u[i]
            for j in range(M):
                v[j] += K[i, j] * ui
        for j in range(M):
            if not (0.0 < v[j] < math.inf):
                return n_iter, math.inf
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
                if not (d <= err):  # also NaN: an invalid state is never converged
                    err = d if d == d else math.inf
            if not (abs(s - 1.0) <= err):
                err = abs(s - 1.0) if s == s else math.inf
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
    return n_iter, err


@njit(cache=True)
def _bethe_value(B, G, M):
    """-F_B(G) for the (shifted) weights B."""
    val = 0.0
    for i in range(M):
        for j in range(M):
            g = G[i, j]
            if g > 0.0:
                val += g * (math.log(B[i, j]) - math.log(g))
                lm = _log1m_excl(G, i, j, M)
                if lm > -math.inf:
                    val += (1.0 - g) * lm
    return val


def bethe_solve(W, tol, max_iter, strict=True):
    """Values and beliefs of the logits ``W`` (..., M, M), validated. A matrix that admits no
    permutation raises ``ValueError`` (:func:`check_admits_permutation`) when ``strict``, else
    gets ``-inf`` and zero beliefs (the Ops, as the exact ones)."""
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
        if v == -math.inf and strict:
            check_admits_permutation(arr)  # raises, naming the matrix and the -inf pattern
        if not (err <= tol):
            raise BetheConvergenceError(
                f"Bethe fixed point did not converge in {n_iter} sweeps (max_iter={max_iter}): "
                f"residual {err:.3g} > tol {tol:.3g}: the weights are very spread out; "
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

    Raises
    ------
    ValueError
        For NaN, ``+inf`` or non-square logits, M beyond ``BETHE_MAX_M``, and logits that
        admit no permutation (every one uses a ``-inf`` entry; the message names the rows
        concerned). The Ops of :mod:`pm_perm.ops.bethe` return ``-inf`` for those instead, as
        the exact ones do.
    BetheConvergenceError
        If the fixed point is not reached within ``max_iter`` sweeps.

    Notes
    -----
    Cost O(M^2) per sweep; the number of sweeps grows with the spread of the weights (BP at
    M = 1000: ~5 sweeps for spread 0.1, ~15 for spread 3). Exact for M = 1 and for matrices
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
    return bethe_solve(W, tol, max_iter)


def bethe_log_permanent(W, tol=1e-9, max_iter=100_000):
    """Bethe approximation (lower bound) of ``log perm(exp W)``; see
    :func:`bethe_log_permanent_and_marginals`."""
    return bethe_solve(W, tol, max_iter)[0]


def bethe_marginals(W, tol=1e-9, max_iter=100_000):
    """Bethe beliefs approximating ``P(y[i] = j)``.

    See :func:`bethe_log_permanent_and_marginals`.
    """
    return bethe_solve(W, tol, max_iter)[1]
