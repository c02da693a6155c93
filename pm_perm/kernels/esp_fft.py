"""``log e_j(exp theta)`` for all counts j at large D by the FFT product tree (Swersky et al.
2012).

Within one tilt (:mod:`pm_perm.kernels._tilted_dp`) the product tree is only accurate near the
bulk of the tilted distribution (FFT round-off is absolute, about ``eps log^2 D`` of the largest
probability), so it accepts ``q_j`` only where a round-off bound guarantees the requested
relative accuracy, then re-tilts towards the next uncovered k, and computes any k that no window
covers by the exact single-k DP (:func:`pm_perm.kernels.esp.log_esp_core`): it refuses the
inaccurate part of each pass instead of returning it. Cost O(D log^2 D) per pass, about
``D / (9 sd)`` passes for all k (sd = the Poisson-binomial standard deviation).
"""

from __future__ import annotations

import math

import numpy as np
import scipy.fft

from pm_perm._numba import njit
from pm_perm.kernels._tilted_dp import as_logits, check_max_count, pb_step, tilted
from pm_perm.kernels.esp import log_esp_core

__all__ = ["FFT_KAPPA", "FFT_LEAF", "log_esp_all_fft"]


#: Items per leaf of the FFT product tree (leaves use the exact positive DP).
FFT_LEAF = 32
#: Constant of the FFT convolution round-off bound ``kappa eps log2(n)`` per merge level.
FFT_KAPPA = 8.0


@njit(cache=True)
def _leaf_pmfs(p, r, leaf):
    n = p.shape[0]
    nb = max(1, (n + leaf - 1) // leaf)
    out = np.zeros((nb, leaf + 1))
    for b in range(nb):
        q = out[b]
        q[0] = 1.0
        m = 0
        for d in range(b * leaf, min((b + 1) * leaf, n)):
            m += 1
            pb_step(q, m, p[d], r[d])
    return out


def _product_tree_pmf(p, r):
    """Poisson-binomial pmf of all items by exact leaf DPs and pairwise FFT merges.

    Returns ``(q, bound)`` with ``|q_j - P(S = j)| <= bound`` (absolute): each merge of two
    pmfs (2-norm <= 1) by FFT adds at most ``FFT_KAPPA eps log2(nfft)``, and later
    convolutions with pmfs (1-norm 1) do not amplify an absolute error.
    """
    polys = _leaf_pmfs(p, r, FFT_LEAF)
    bound = 0.0
    while polys.shape[0] > 1:
        if polys.shape[0] % 2:
            delta = np.zeros((1, polys.shape[1]))
            delta[0, 0] = 1.0
            polys = np.vstack([polys, delta])
        a, b = polys[0::2], polys[1::2]
        n_out = 2 * polys.shape[1] - 1
        nfft = scipy.fft.next_fast_len(n_out, real=True)
        fa = scipy.fft.rfft(a, nfft, axis=1, workers=1)
        fb = scipy.fft.rfft(b, nfft, axis=1, workers=1)
        polys = scipy.fft.irfft(fa * fb, nfft, axis=1, workers=1)[:, :n_out]
        bound += FFT_KAPPA * np.finfo(float).eps * math.log2(nfft)
    return polys[0, : p.shape[0] + 1], bound


def _log_esp_all_fft_1d(theta, K, rtol):
    fin = np.ascontiguousarray(theta[np.isfinite(theta)])
    n = fin.shape[0]
    out = np.full(K + 1, -np.inf)
    out[0] = 0.0
    top = min(K, n)
    if top == 0:
        return out, 0
    lo, hi = float(fin.min()), float(fin.max())
    done = np.zeros(top + 1, dtype=bool)
    done[0] = True
    if top == n:
        out[n] = math.fsum(fin)
        done[n] = True
    half = 1.0
    passes = 0
    while not done.all():
        j0 = int(np.argmin(done))  # first uncovered count
        target = min(max(j0 + half, 0.5), n - 0.5)
        p, r, const0, c = tilted(fin, target, n, 0, lo, hi)
        q, bound = _product_tree_pmf(p, r)
        passes += 1
        ok = q[: top + 1] >= bound / rtol
        if not ok[j0]:
            if half >= 1.0:
                half /= 4.0  # window missed j0: re-centre closer to it
                continue
            out[j0] = log_esp_core(fin, j0)  # refuse the FFT value: exact DP for this k
            done[j0] = True
            continue
        new = np.flatnonzero(ok & ~done)
        out[new] = const0 + new * c + np.log(q[new])
        done[new] = True
        half = max(1.0, 0.45 * (new.max() - j0))
    return out, passes


def log_esp_all_fft(theta, K=None, rtol=1e-8, return_passes=False):
    """``log e_j(exp theta)`` for j = 0..K by the FFT product tree, for large D.

    Each pass tilts the logits (``E[S]`` = a target count), builds the Poisson-binomial pmf by
    exact leaf DPs of 32 items and FFT merges, and keeps only the ``q_j`` above the round-off
    bound divided by ``rtol`` (so each kept ``e_j`` has relative error <= ``rtol``); the next
    pass re-tilts towards the first count not yet covered. A count no window covers is
    computed by the exact single-k DP. Never returns an unguarded FFT value.

    Parameters
    ----------
    theta : array_like of float, shape (..., D)
    K : int, optional
        Largest count (default D).
    rtol : float
        Relative accuracy required of each ``e_j`` (default 1e-8; ``log e_j`` then has absolute
        error <= 1e-8).
    return_passes : bool
        Also return the number of tilted FFT passes used (per batch element).

    Returns
    -------
    ndarray, shape ``(*batch, K + 1)`` (and the pass counts if asked).
    Cost O(D log^2 D) per pass; the number of passes grows like ``K / sd(S)``.
    """
    theta = as_logits(theta)
    if not (0 < rtol < 1):
        raise ValueError(f"rtol must be in (0, 1); got {rtol}")
    D = theta.shape[-1]
    K = D if K is None else check_max_count(K, D)
    th = theta.reshape(-1, D)
    res = [_log_esp_all_fft_1d(t, K, rtol) for t in th]
    out = np.array([o for o, _ in res]).reshape(*theta.shape[:-1], K + 1)  # empty batch: (0,)
    if return_passes:
        return out, np.array([n for _, n in res], dtype=np.int64).reshape(theta.shape[:-1])
    return out
