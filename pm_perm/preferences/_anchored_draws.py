"""What a PL-anchored model ``p(pi) ∝ PL(pi; u) exp(sum_i D[i, pi(i)])`` says, for
:mod:`pm_perm.preferences.analysis` and :mod:`pm_perm.preferences.posterior` (private): exact
ballots, exact item x position marginals, the exact mode. ``params`` are packed as in
:func:`pm_perm.preferences._families.anchored_params` (..., M, M + 1): ``D`` then ``u``.
"""

from __future__ import annotations

import numpy as np

from pm_perm.preferences._families import anchored_parts


def draw(params, n, length_probs=None, rng=None):
    """``n`` exact complete rankings (n, M) of one model (``params`` (M, M + 1)), each cut after
    ``k ~ length_probs`` (M + 1 entries) ranked items when ``length_probs`` is given."""
    from pm_perm.kernels.pl_tilted_sampler import sample_pl_tilted

    rng = np.random.default_rng(rng)
    u, D = anchored_parts(np.asarray(params, dtype=np.float64))
    orders = sample_pl_tilted(u, D, size=(n,), rng=rng)
    if length_probs is not None:
        p = np.asarray(length_probs, dtype=np.float64)
        lengths = rng.choice(p.size, size=n, p=p / p.sum())
        orders[orders >= lengths[:, None]] = -1
    return orders


def marginals(params):
    """``P[..., i, j] = p(item i at position j)`` (..., M, M), exact: ``d log Z / d D``.

    For a complete order ``y``, ``log p(y) = sum_i D[i, y_i] + (terms free of D) - log Z``, so
    the kernel's gradient of ``log p(y)`` with respect to ``D`` is ``onehot(y) - P``."""
    from pm_perm.kernels.pl_tilted import pl_tilted_loglik_and_grad

    u, D = anchored_parts(np.asarray(params, dtype=np.float64))
    M = u.shape[-1]
    y = np.arange(M)[None]
    _, _, gD = pl_tilted_loglik_and_grad(u, D, y, np.ones(1))
    return np.eye(M) - gD


def mode(params):
    """The most probable complete ranking (rank form, (M,)) of one model (``params``
    (M, M + 1)), exact by the subset DP with max in place of sum (O(M 2^M)).

    ``log p(pi) + log Z = sum_j (u_(j) + D[(j), j] - log sigma(S_j))`` with ``S_j`` the items
    not placed before position ``j``: the best order of a set ``S`` on the last ``|S|``
    positions is ``V(S) = max_{i in S} (u_i + D[i, M - |S|] + V(S - {i})) - log sigma(S)``."""
    u, D = anchored_parts(np.asarray(params, dtype=np.float64))
    M = u.size
    masks = np.arange(1 << M, dtype=np.int64)
    sizes = np.zeros(masks.size, dtype=np.int64)
    sigma = np.zeros(masks.size)
    eu = np.exp(u - u.max())
    for i in range(M):
        has = (masks >> i) & 1
        sizes += has
        sigma += has * eu[i]
    log_sigma = np.log(np.where(masks > 0, sigma, 1.0))
    V = np.zeros(masks.size)
    best = np.zeros(masks.size, dtype=np.int64)
    for k in range(1, M + 1):
        S = masks[sizes == k]
        cand = np.full((S.size, M), -np.inf)
        for i in range(M):
            has = ((S >> i) & 1).astype(bool)
            cand[has, i] = u[i] + D[i, M - k] + V[S[has] ^ (1 << i)]
        best[S] = cand.argmax(axis=1)
        V[S] = cand.max(axis=1) - log_sigma[S]
    y = np.empty(M, dtype=np.int64)
    S = (1 << M) - 1
    for j in range(M):
        i = best[S]
        y[i] = j
        S ^= 1 << i
    return y
