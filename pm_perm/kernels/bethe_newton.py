"""Newton's method on the Bethe stationarity equations: a last-mile solver and its certificate.

At a stationary point of the Bethe free energy ``F_B`` on the Birkhoff polytope (see
:mod:`pm_perm.kernels.bethe`), the beliefs satisfy, for potentials ``alpha`` (rows) and ``beta``
(columns),

.. math::

    \\gamma_{ij} (1 - \\gamma_{ij}) = c_{ij} = B_{ij} e^{\\alpha_i + \\beta_j},
    \\qquad \\sum_j \\gamma_{ij} = 1, \\qquad \\sum_i \\gamma_{ij} = 1.

So ``gamma_ij`` is a root of ``s (1 - s) = c_ij``: the small root ``s_ij`` for all entries but at
most one per row and column, whose belief exceeds 1/2 and is ``1 - s_ij``. The roots meet at
``g = 1/2`` (``c = 1/4``), where they are infinitely sensitive to ``c``, so beliefs in
``[MID_LO, MID_HI]`` = [1/4, 3/4] are unknowns of their own, with their own equation
``log g + log(1 - g) = log B_ij + alpha_i + beta_j``. Which entries are large (above 3/4),
middle or small is read off a nearly converged belief matrix. The row and column sums are then
2M equations, and with the middle entries' equations the system is square in the unknowns
``(alpha, beta, g_mid)``. Written as log ratios, a row with its large entry at ``p`` reads
``log sum_{j != p} g_ij - log s_ip = 0`` (the off-matching mass equals the matching entry's
complement), and a row without one reads ``log sum_j g_ij = 0``. Neither subtracts nearly
equal numbers, so the residual is accurate in relative terms even for beliefs of 1e-100. The
equations fix only ``alpha_i + beta_j``; an extra row ``sum(alpha) = sum(beta)`` in the
least-squares step pins that gauge (left free, the solver can drift by 1e8 along it and lose
``alpha_i + beta_j`` to rounding).

Why this exists. At large weight spreads the beliefs saturate and BP (and CCCP) crawl: the
overall size of the off-matching beliefs is a direction along which ``F_B`` is flat to first
order, so the per-sweep change falls below any tolerance long before that size is right, and
the belief-change test cannot tell the two apart. Newton's method on the equations above
converges in 5-20 iterations there. Its residual is also a certificate: ``F_B`` is convex on
the polytope (Vontobel 2013), so beliefs solving the equations (interior, doubly stochastic)
are its global minimiser, whichever entries take the large root.

Cost: O(M^2) per residual, O((2M + K)^3) per Newton step (a dense least-squares solve, K the
number of middle beliefs: at most 4M, since a row holds at most four beliefs of 1/4 or more,
and usually a handful), so it is only used for
``M <= NEWTON_MAX_M`` and only after BP has failed. It fails (returns False) when no step
reduces the residual. That happens when the start is too far off, or when the problem is
nearly singular: at logits whose max-weight matching is just short of being the Bethe
minimiser (``rho(K)`` slightly above 1 in :mod:`pm_perm.kernels.bethe_vertex`), ``F_B`` is
nearly flat in some direction. The caller then falls back to other solvers.
"""

from __future__ import annotations

import math

import numpy as np

from pm_perm._numba import njit

__all__ = ["NEWTON_MAX_M", "newton_kkt"]

#: Largest M for the Newton stage (a dense solve of size at most 6M per step).
NEWTON_MAX_M = 200

#: Beliefs in [MID_LO, MID_HI] are unknowns of their own; the others are the small (or, above
#: MID_HI, large) root of g (1 - g) = c, which is ill-conditioned near g = 1/2.
MID_LO = 0.25
MID_HI = 0.75

_LOG_QUARTER = math.log(0.25)


@njit(cache=True)
def _system(logB, big, colbig, midk, mid_i, mid_j, x, R, J, S):
    """Residual ``R`` (N,), Jacobian ``J`` (N, N) and beliefs-or-small-roots ``S`` (M, M) at the
    unknowns ``x = [alpha (M), beta (M), g_mid (K)]``, N = 2M + K; False when a root is not real
    (``c > 1/4``), a middle belief leaves (0, 1), or a needed quantity is not finite.

    ``S`` holds the small root ``s_ij`` of every entry that is not a middle one (the belief, or
    for a large entry its complement) and the belief itself for the middle entries.
    """
    M = logB.shape[0]
    K = mid_i.shape[0]
    N = 2 * M + K
    Q = np.zeros((M, M))  # s / (1 - 2s): d log s / d log c = 1 + Q
    for k in range(K):
        g = x[2 * M + k]
        if not (g > 0.0 and g < 1.0):
            return False
        S[mid_i[k], mid_j[k]] = g
    for i in range(M):
        for j in range(M):
            if midk[i, j] >= 0:
                continue
            lc = logB[i, j] + x[i] + x[M + j]
            if lc > _LOG_QUARTER:
                return False
            c = math.exp(lc)
            s = 2.0 * c / (1.0 + math.sqrt(max(1.0 - 4.0 * c, 0.0)))
            S[i, j] = s
            d = 1.0 - 2.0 * s
            if not (d > 0.0):
                return False
            Q[i, j] = s / d
    for k in range(N):
        R[k] = 0.0
        for m in range(N):
            J[k, m] = 0.0
    for i in range(M):  # row equations: alpha_i (own row), beta (columns), middle beliefs
        p = big[i]
        tot = 0.0
        for j in range(M):
            if j != p:
                tot += S[i, j]
        if not (tot > 0.0) or (p >= 0 and not (S[i, p] > 0.0)):
            return False
        wq = 0.0
        wmid = 0.0
        for j in range(M):
            if j != p:
                w = S[i, j] / tot
                if midk[i, j] >= 0:
                    J[i, 2 * M + midk[i, j]] = 1.0 / tot
                    wmid += w
                else:
                    J[i, M + j] = w * (1.0 + Q[i, j])
                    wq += w * Q[i, j]
        if p >= 0:
            R[i] = math.log(tot) - math.log(S[i, p])
            J[i, i] = wq - wmid - Q[i, p]  # (1 - wmid + sum w q) - (1 + q_p), 1s cancelled
            J[i, M + p] = -(1.0 + Q[i, p])
        else:
            R[i] = math.log(tot)
            J[i, i] = (1.0 - wmid) + wq
    for j in range(M):  # column equations: beta_j (own column), alpha (rows), middle beliefs
        p = colbig[j]
        tot = 0.0
        for i in range(M):
            if i != p:
                tot += S[i, j]
        if not (tot > 0.0) or (p >= 0 and not (S[p, j] > 0.0)):
            return False
        wq = 0.0
        wmid = 0.0
        for i in range(M):
            if i != p:
                w = S[i, j] / tot
                if midk[i, j] >= 0:
                    J[M + j, 2 * M + midk[i, j]] = 1.0 / tot
                    wmid += w
                else:
                    J[M + j, i] = w * (1.0 + Q[i, j])
                    wq += w * Q[i, j]
        if p >= 0:
            R[M + j] = math.log(tot) - math.log(S[p, j])
            J[M + j, M + j] = wq - wmid - Q[p, j]
            J[M + j, p] = -(1.0 + Q[p, j])
        else:
            R[M + j] = math.log(tot)
            J[M + j, M + j] = (1.0 - wmid) + wq
    for k in range(K):  # middle entries: log g + log(1 - g) = log B + alpha_i + beta_j
        i = mid_i[k]
        j = mid_j[k]
        g = x[2 * M + k]
        R[2 * M + k] = math.log(g) + math.log1p(-g) - logB[i, j] - x[i] - x[M + j]
        J[2 * M + k, 2 * M + k] = 1.0 / g - 1.0 / (1.0 - g)
        J[2 * M + k, i] = -1.0
        J[2 * M + k, M + j] = -1.0
    for k in range(N):
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
def newton_kkt(logB, G, tol, max_iter, stall_tol=0.0):
    """Polish near-converged Bethe beliefs ``G`` (M, M) to the stationary point, in place.

    Parameters
    ----------
    logB : ndarray (M, M)
        Log weights (any row and column shift; ``-inf`` = forbidden edge).
    G : ndarray (M, M)
        Starting beliefs, nearly doubly stochastic. Which entries exceed ``MID_HI`` (large
        root) or lie in ``[MID_LO, MID_HI]`` (unknowns of their own) is read off it once.
        Overwritten with the solution only on success.
    tol : float
        Required max absolute log-residual of the row, column and middle-entry equations
        (relative accuracy of every belief and belief complement), e.g. 1e-12.
    max_iter : int
        Newton steps at most.
    stall_tol : float, optional
        When no step reduces the residual any more (the rounding floor, which can lie above
        ``tol`` when the equations are ill-conditioned), the point is still accepted if its
        residual is at most ``stall_tol``. Default 0: never.

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
    midk = -np.ones((M, M), dtype=np.int64)
    K = 0
    for i in range(M):
        for j in range(M):
            if G[i, j] > MID_HI:
                big[i] = j
                colbig[j] = i
            elif G[i, j] >= MID_LO and logB[i, j] > -math.inf:
                midk[i, j] = K
                K += 1
    mid_i = np.empty(K, dtype=np.int64)
    mid_j = np.empty(K, dtype=np.int64)
    for i in range(M):
        for j in range(M):
            if midk[i, j] >= 0:
                mid_i[midk[i, j]] = i
                mid_j[midk[i, j]] = j
    # Start: alpha_i + beta_j ~ log(g (1 - g)) - log B, the complement of a large entry taken
    # from the rest of its row; the middle beliefs start at G.
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
    N = 2 * M + K
    x = np.zeros(N)
    for _ in range(50):
        for i in range(M):
            t = 0.0
            n = 0
            for j in range(M):
                if L[i, j] == L[i, j]:
                    t += L[i, j] - x[M + j]
                    n += 1
            x[i] = t / n if n > 0 else 0.0
        for j in range(M):
            t = 0.0
            n = 0
            for i in range(M):
                if L[i, j] == L[i, j]:
                    t += L[i, j] - x[i]
                    n += 1
            x[M + j] = t / n if n > 0 else 0.0
    mx = -math.inf
    for i in range(M):
        for j in range(M):
            if midk[i, j] < 0:
                mx = max(mx, logB[i, j] + x[i] + x[M + j])
    if mx > _LOG_QUARTER - 1e-12:  # keep every root real
        for i in range(M):
            x[i] -= mx - (_LOG_QUARTER - 1e-12)
    for k in range(K):
        x[2 * M + k] = G[mid_i[k], mid_j[k]]
    R = np.empty(N)
    J = np.empty((N, N))
    S = np.empty((M, M))
    R2 = np.empty(N)
    J2 = np.empty((N, N))
    S2 = np.empty((M, M))
    x2 = np.empty(N)
    Jg = np.empty((N + 1, N))
    Rg = np.empty(N + 1)
    if not _system(logB, big, colbig, midk, mid_i, mid_j, x, R, J, S):
        return False, 0, math.inf
    res = _max_abs(R)
    for it in range(max_iter):
        if res <= tol:
            _write_beliefs(S, big, midk, G)
            return True, it, res
        # The equations fix alpha + beta only: (alpha + c, beta - c) is an exact null direction.
        # An extra row sum(alpha) = sum(beta) removes it, so the least-squares step never
        # drifts along it (an unpinned solve can step by 1e8 there, leaving alpha_i + beta_j
        # with absolute errors of 1e-8).
        for k in range(N):
            Rg[k] = -R[k]
            for m in range(N):
                Jg[k, m] = J[k, m]
        gauge = 0.0
        for i in range(M):
            Jg[N, i] = 1.0
            Jg[N, M + i] = -1.0
            gauge += x[i] - x[M + i]
        for m in range(2 * M, N):
            Jg[N, m] = 0.0
        Rg[N] = -gauge
        d = np.linalg.lstsq(Jg, Rg)[0]
        t = 1.0
        accepted = False
        while t > 1e-10:
            for k in range(N):
                x2[k] = x[k] + t * d[k]
            if _system(logB, big, colbig, midk, mid_i, mid_j, x2, R2, J2, S2):
                r2 = _max_abs(R2)
                if r2 < (1.0 - 1e-4 * t) * res:
                    accepted = True
                    break
            t *= 0.5
        if not accepted:
            if res <= stall_tol:
                _write_beliefs(S, big, midk, G)
                return True, it + 1, res
            return False, it + 1, res
        x[:] = x2
        R[:] = R2
        J[:, :] = J2
        S[:, :] = S2
        res = r2
    if res <= tol:
        _write_beliefs(S, big, midk, G)
        return True, max_iter, res
    return False, max_iter, res


@njit(cache=True)
def _write_beliefs(S, big, midk, G):
    M = S.shape[0]
    for i in range(M):
        for j in range(M):
            G[i, j] = 1.0 - S[i, j] if (j == big[i] and midk[i, j] < 0) else S[i, j]
