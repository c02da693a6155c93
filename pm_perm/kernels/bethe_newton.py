"""Newton's method on the Bethe stationarity equations: a last-mile solver and its certificate.

At a stationary point of the Bethe free energy ``F_B`` on the Birkhoff polytope (see
:mod:`pm_perm.kernels.bethe`), the beliefs satisfy, for potentials ``alpha`` (rows) and ``beta``
(columns),

.. math::

    \\gamma_{ij} (1 - \\gamma_{ij}) = c_{ij} = B_{ij} e^{\\alpha_i + \\beta_j},
    \\qquad \\sum_j \\gamma_{ij} = 1, \\qquad \\sum_i \\gamma_{ij} = 1.

So ``gamma_ij`` is a root of ``s (1 - s) = c_ij``: the small root ``s_ij`` for all entries but at
most one per row and column, whose belief exceeds 1/2 and is ``1 - s_ij``. Given which entries
take the large root (read off a nearly converged belief matrix), the row and column sums are
2M equations in the 2M potentials. Written as log ratios, a row with its large entry at ``p``
reads ``log sum_{j != p} s_ij - log s_ip = 0`` (the off-matching mass equals the matching
entry's complement) and a row without one reads ``log sum_j s_ij = 0``; neither subtracts
nearly equal numbers, so the residual is accurate in relative terms even for beliefs of 1e-100.

Why this exists. At large weight spreads the beliefs saturate and BP (and CCCP) crawl: the
overall size of the off-matching beliefs is a direction along which ``F_B`` is flat to first
order, so the per-sweep change falls below any tolerance long before that size is right, and
the belief-change test cannot tell the two apart. Newton's method on the equations above
converges in 5-20 iterations there. Its residual is also a certificate: ``F_B`` is convex on
the polytope (Vontobel 2013), so beliefs solving the equations (interior, doubly stochastic)
are its global minimiser, whichever entries take the large root.

Cost: O(M^2) per residual, O(M^3) per Newton step (a dense 2M x 2M least-squares solve), so it
is only used for ``M <= NEWTON_MAX_M`` and only after BP has failed. It fails (returns False)
when no step reduces the residual, typically when a belief sits close to 1/2 (the two roots
meet there and the equations are singular); the caller then falls back to other solvers.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = ["NEWTON_MAX_M", "newton_kkt"]

#: Largest M for the Newton stage (a 2M x 2M dense solve per step).
NEWTON_MAX_M = 200

_LOG_QUARTER = math.log(0.25)


@njit(cache=True)
def _system(logB, big, colbig, alpha, beta, R, J, S):
    """Residual ``R`` (2M,), Jacobian ``J`` (2M, 2M) and small roots ``S`` (M, M) at the
    potentials; False when a root is not real (``c > 1/4``) or a needed quantity is not finite.
    """
    M = logB.shape[0]
    Q = np.empty((M, M))  # s / (1 - 2s): d log s / d log c = 1 + Q
    for i in range(M):
        for j in range(M):
            lc = logB[i, j] + alpha[i] + beta[j]
            if lc > _LOG_QUARTER:
                return False
            c = math.exp(lc)
            s = 2.0 * c / (1.0 + math.sqrt(max(1.0 - 4.0 * c, 0.0)))
            S[i, j] = s
            d = 1.0 - 2.0 * s
            if not (d > 0.0):
                return False
            Q[i, j] = s / d
    for k in range(2 * M):
        R[k] = 0.0
        for m in range(2 * M):
            J[k, m] = 0.0
    for i in range(M):  # row equations: unknowns alpha_i (own row) and beta (all columns)
        p = big[i]
        tot = 0.0
        for j in range(M):
            if j != p:
                tot += S[i, j]
        if not (tot > 0.0) or (p >= 0 and not (S[i, p] > 0.0)):
            return False
        wq = 0.0
        for j in range(M):
            if j != p:
                w = S[i, j] / tot
                J[i, M + j] = w * (1.0 + Q[i, j])
                wq += w * Q[i, j]
        if p >= 0:
            R[i] = math.log(tot) - math.log(S[i, p])
            J[i, i] = wq - Q[i, p]  # (1 + sum w q) - (1 + q_p): no cancellation of the 1s
            J[i, M + p] = -(1.0 + Q[i, p])
        else:
            R[i] = math.log(tot)
            J[i, i] = 1.0 + wq
    for j in range(M):  # column equations: unknowns beta_j (own column) and alpha (all rows)
        p = colbig[j]
        tot = 0.0
        for i in range(M):
            if i != p:
                tot += S[i, j]
        if not (tot > 0.0) or (p >= 0 and not (S[p, j] > 0.0)):
            return False
        wq = 0.0
        for i in range(M):
            if i != p:
                w = S[i, j] / tot
                J[M + j, i] = w * (1.0 + Q[i, j])
                wq += w * Q[i, j]
        if p >= 0:
            R[M + j] = math.log(tot) - math.log(S[p, j])
            J[M + j, M + j] = wq - Q[p, j]
            J[M + j, p] = -(1.0 + Q[p, j])
        else:
            R[M + j] = math.log(tot)
            J[M + j, M + j] = 1.0 + wq
    for k in range(2 * M):
        if not (abs(R[k]) < math.inf):
            return False
    return True


@njit(cache=True)
def _max_abs(R):
    m = 0.0
    for k in range(R.shape[0]):
        if abs(R[k]) > m:
            m = abs(R[k])
    return m


@njit(cache=True)
def newton_kkt(logB, G, tol, max_iter):
    """Polish near-converged Bethe beliefs ``G`` (M, M) to the stationary point, in place.

    Parameters
    ----------
    logB : ndarray (M, M)
        Log weights (any row and column shift; ``-inf`` = forbidden edge).
    G : ndarray (M, M)
        Starting beliefs, nearly doubly stochastic; which entries exceed 1/2 fixes the branch.
        Overwritten with the solution only on success.
    tol : float
        Required max absolute log-residual of the row and column equations (relative accuracy
        of every belief and belief complement), e.g. 1e-12.
    max_iter : int
        Newton steps at most.

    Returns
    -------
    (converged, n_iter, residual) : (bool, int, float)
        ``residual`` is the final max absolute log-residual (inf if the start is unusable).

    Notes
    -----
    Cost O(M^3) per step; the start potentials are a least-squares fit of
    ``log(g (1 - g)) - log B`` (O(M^2) per sweep, 50 sweeps).
    """
    M = G.shape[0]
    big = -np.ones(M, dtype=np.int64)
    colbig = -np.ones(M, dtype=np.int64)
    for i in range(M):
        for j in range(M):
            if G[i, j] > 0.5:
                big[i] = j
                colbig[j] = i
    # Start: alpha_i + beta_j ~ log(s (1 - s)) - log B with s the small root read off G.
    L = np.full((M, M), np.nan)
    for i in range(M):
        for j in range(M):
            if logB[i, j] > -math.inf and G[i, j] > 0.0:
                if j == big[i]:
                    s = 0.0
                    for k in range(M):
                        if k != j:
                            s += G[i, k]
                else:
                    s = G[i, j]
                if s > 0.0 and s < 1.0:
                    L[i, j] = math.log(s) + math.log1p(-s) - logB[i, j]
    alpha = np.zeros(M)
    beta = np.zeros(M)
    for _ in range(50):
        for i in range(M):
            t = 0.0
            n = 0
            for j in range(M):
                if L[i, j] == L[i, j]:
                    t += L[i, j] - beta[j]
                    n += 1
            alpha[i] = t / n if n > 0 else 0.0
        for j in range(M):
            t = 0.0
            n = 0
            for i in range(M):
                if L[i, j] == L[i, j]:
                    t += L[i, j] - alpha[i]
                    n += 1
            beta[j] = t / n if n > 0 else 0.0
    mx = -math.inf
    for i in range(M):
        for j in range(M):
            mx = max(mx, logB[i, j] + alpha[i] + beta[j])
    if mx > _LOG_QUARTER - 1e-12:  # keep every root real
        for i in range(M):
            alpha[i] -= mx - (_LOG_QUARTER - 1e-12)
    R = np.empty(2 * M)
    J = np.empty((2 * M, 2 * M))
    S = np.empty((M, M))
    R2 = np.empty(2 * M)
    J2 = np.empty((2 * M, 2 * M))
    S2 = np.empty((M, M))
    a2 = np.empty(M)
    b2 = np.empty(M)
    if not _system(logB, big, colbig, alpha, beta, R, J, S):
        return False, 0, math.inf
    res = _max_abs(R)
    for it in range(max_iter):
        if res <= tol:
            for i in range(M):
                for j in range(M):
                    G[i, j] = 1.0 - S[i, j] if j == big[i] else S[i, j]
            return True, it, res
        d = np.linalg.lstsq(J, -R)[0]
        t = 1.0
        accepted = False
        while t > 1e-10:
            for i in range(M):
                a2[i] = alpha[i] + t * d[i]
                b2[i] = beta[i] + t * d[M + i]
            if _system(logB, big, colbig, a2, b2, R2, J2, S2):
                r2 = _max_abs(R2)
                if r2 < (1.0 - 1e-4 * t) * res:
                    accepted = True
                    break
            t *= 0.5
        if not accepted:
            return False, it + 1, res
        alpha[:] = a2
        beta[:] = b2
        R[:] = R2
        J[:, :] = J2
        S[:, :] = S2
        res = r2
    if res <= tol:
        for i in range(M):
            for j in range(M):
                G[i, j] = 1.0 - S[i, j] if j == big[i] else S[i, j]
        return True, max_iter, res
    return False, max_iter, res
