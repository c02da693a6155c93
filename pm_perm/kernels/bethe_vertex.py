"""When the Bethe minimiser is a vertex: the max-weight matching, with a certificate.

The Bethe free energy ``F_B`` (see :mod:`pm_perm.kernels.bethe`) is convex on the Birkhoff
polytope, but its minimiser need not be interior. Along the segment from a permutation matrix
``P`` to another permutation matrix ``Q`` the entropy terms cancel exactly (the entries are
``eps`` and ``1 - eps`` in pairs, and ``h(eps) + h(1 - eps) = 0`` for
``h(g) = g log g - (1 - g) log(1 - g)``), so ``F_B`` is linear along every edge of the polytope.
For M = 2 it is linear everywhere, and ``perm_B`` is the larger of the two matching weights
(Vontobel 2013). For larger M and well separated weights the minimiser can be the vertex ``P``
of the max-weight matching itself. Then the beliefs saturate towards 0/1 as BP runs, and BP or
CCCP approach ``P`` ever more slowly: no interior fixed point exists, and a convergence test on
the beliefs never passes.

The vertex test. Write ``p = col_of_row`` for the max-weight matching, and let ``X`` be any
doubly stochastic matrix. The one-sided derivative of ``F_B`` at ``P`` towards ``X`` is

.. math::

    F_B'(P; X - P) = \\sum_i \\Big[ \\sum_{j \\ne p(i)} X_{ij} \\big(W_{i p(i)} - W_{ij}
    + \\log X_{ij}\\big) - u_i \\log u_i \\Big], \\qquad u_i = \\sum_{j \\ne p(i)} X_{ij}.

The ``eps log eps`` terms cancel because the off-matching mass equals the mass taken from the
matching entries. The off-matching part of ``X`` is a circulation: row ``i`` sends ``u_i`` and
column ``p(i)`` receives ``u_i``. So the bracket is the average of a cost minus an entropy
over a Markov chain with stationary measure ``u``. By the Donsker-Varadhan variational formula,
its minimum over chains with ``sum(u) = 1`` is ``-log rho(K)``, where

.. math::

    K_{ij} = \\exp(W_{i p(j)} - W_{i p(i)}) \\ (j \\ne i), \\qquad K_{ii} = 0,

and ``rho`` is the spectral radius. So ``P`` minimises ``F_B`` (by convexity, globally) if and
only if ``rho(K) <= 1``. Then ``log perm_B = sum_i W[i, p(i)]`` and the beliefs (the gradient
of ``log perm_B``, by the envelope theorem) are ``P``. ``rho(K) < 1`` is an open condition, so
nearby logits have the same vertex.

For M = 2 this gives ``rho = sqrt(B12 B21 / (B11 B22)) <= 1``, true for the max-weight matching
and so the vertex always. For all-equal logits and M >= 3, ``rho = M - 1 > 1``, so the minimiser
is interior, as expected.

Certificate. ``rho(K) < 1`` is checked by Collatz-Wielandt: ``x = (I - K)^{-1} 1`` (equal to
``sum_n K^n 1 >= 1`` when ``rho < 1``), then ``max_i (K x)_i / x_i < 1`` with all ``x_i > 0``
bounds ``rho(K)`` from above. ``K`` is formed from the assignment duals, ``K_ij = exp(W[i, p(j)]
+ u_i + v_p(j))``. That matrix is similar to the one above, so it has the same spectrum, and
its entries are at most 1, so nothing overflows. Cost O(M^3): the Hungarian algorithm and one
dense solve.
"""

from __future__ import annotations

import math

import numpy as np

from pm_perm._numba import njit
from pm_perm.kernels.assignment import max_weight_assignment_core

__all__ = ["VERTEX_MARGIN", "vertex_certificate"]

#: The Collatz-Wielandt bound must be at most ``1 - VERTEX_MARGIN``; far above rounding (about
#: M * 1e-16 relative), so a certified vertex is the minimiser also allowing for rounding.
VERTEX_MARGIN = 1e-9


@njit(cache=True)
def vertex_certificate(W):
    """Test whether the max-weight matching's vertex minimises the Bethe free energy of ``W``.

    Parameters
    ----------
    W : ndarray of float64, shape (M, M)
        Logits, finite or ``-inf`` (forbidden edge); no NaN or ``+inf`` (the caller validates).

    Returns
    -------
    (certified, col_of_row, value, bound) : (bool, ndarray of int64, float, float)
        ``certified`` is True when ``rho(K) <= bound <= 1 - VERTEX_MARGIN``. Then the Bethe
        minimiser is the permutation matrix of ``col_of_row`` and ``value`` is
        ``log perm_B(exp W) = sum_i W[i, col_of_row[i]]``. ``bound`` is the Collatz-Wielandt
        upper bound on ``rho(K)``. It is ``inf`` when the test is inconclusive: ``(I - K)``
        is singular or its solution is not positive, as happens when ``rho(K) >= 1``. When no
        perfect matching has finite weight, the result is ``(False, all -1, -inf, inf)``.

    Notes
    -----
    Cost O(M^3) time, O(M^2) memory. A False result says only that the vertex is not
    certified. Up to the margin, the minimiser is then interior or on a face.
    """
    M = W.shape[0]
    col, u, v, feasible = max_weight_assignment_core(W)
    if not feasible:
        return False, col, -math.inf, math.inf
    value = 0.0
    for i in range(M):
        value += W[i, col[i]]
    # K[i, j] = exp(W[i, p(j)] + u_i + v_p(j)) <= 1 off the diagonal, 0 on it.
    K = np.zeros((M, M))
    A = np.eye(M)
    for i in range(M):
        for j in range(M):
            if j != i:
                w = W[i, col[j]]
                if w > -math.inf:
                    K[i, j] = math.exp(min(w + u[i] + v[col[j]], 0.0))
                    A[i, j] = -K[i, j]
    # (I - K) is an M-matrix when rho(K) < 1; otherwise it may be singular (numba raises).
    try:
        x = np.linalg.solve(A, np.ones(M))
    except Exception:  # noqa: BLE001 - numba raises a generic error on a singular matrix
        return False, col, value, math.inf
    bound = 0.0
    for i in range(M):
        if not (x[i] > 0.0 and x[i] < math.inf):
            return False, col, value, math.inf
    for i in range(M):
        y = 0.0
        for j in range(M):
            y += K[i, j] * x[j]
        bound = max(bound, y / x[i])
    return bound <= 1.0 - VERTEX_MARGIN, col, value, bound
