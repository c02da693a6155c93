"""Huber-Law exact sampler for p(y) proportional to prod_i exp(W[i, y[i]]) (dense weights).

Accept-reject recursion of Huber & Law (SODA 2008), as described in the appendix of Petterson
et al. (2009). The matrix ``B = exp(W)`` is first rescaled (rows and columns, by a few
log-domain Sinkhorn sweeps towards double stochasticity, then divided by its largest entry) to
``A`` with entries in ``[0, 1]``; rescaling rows and columns multiplies every permutation weight by
the same constant, so ``p(y)`` is unchanged. The upper bound on the permanent of a sub-matrix
``A'`` is the Huber-Law extension of Bregman's bound,

.. math::

    U(A') = \\prod_{i} h(r_i) / e, \\qquad
    h(r) = r + \\tfrac12 \\log r + e - 1 \\ (r \\ge 1), \\quad h(r) = 1 + (e - 1) r \\ (r < 1),

with ``r_i`` the row sums of ``A'``. The recursion expands a COLUMN: for the first remaining
column ``j`` it picks row ``i`` with probability ``A'[i, j] U(A'_{-i,-j}) / U(A')`` and rejects with
the remaining probability. With the bound built from ROW sums, this column expansion is
super-additive (P1) (Huber & Law, Lemma; tested numerically in tests/kernels/test_huber_law.py),
whereas expanding a ROW against the same row-sum bound is NOT (counter-examples are in the
tests): that is the trap the naive version falls into. (P2) holds because the bound of the empty
matrix is 1, so a completed path has weight exactly ``prod A[i, y[i]]``. Each accepted draw is an
exact sample of ``p(y)``; the acceptance probability is ``perm(A) / U(A)``, which gives an unbiased
permanent estimate ``U(A) * accepted / trials`` (then undo the scaling).

Cost: O(M^2) per trial (O(M) per column), expected trials = U(A)/perm(A). For dense matrices
(weights within a bounded ratio) the expected number of trials grows polynomially in M; for
very spread weights it can grow exponentially, so every call has a ``max_trials`` guard that
raises :class:`HuberLawTrialsExceeded` with the observed acceptance rate.
As a runtime guard against silent bias, each step checks that the selection probabilities sum
to at most ``1 + 1e-9`` and raises otherwise.
"""

from __future__ import annotations

import math

import numpy as np
from numba import carray

from pm_perm._numba import njit
from pm_perm.kernels._bitgen import generator_at
from pm_perm.kernels._checks import (
    LOGIT_ABS_MAX,
    as_size,
    as_square_logits,
    c_array,
    check_admits_permutation,
    hall_violator,
)

__all__ = [
    "HL_BAD_LOGITS",
    "HL_NOT_ACCEPTED",
    "HL_NO_PERMUTATION",
    "HL_TOO_LARGE",
    "HUBER_LAW_MAX_M",
    "HuberLawTrialsExceeded",
    "huber_law_log_bound",
    "huber_law_sample_core",
    "huber_law_sample",
    "huber_law_log_permanent_estimate",
    "huber_law_scale",
    "make_huber_law_draw_kernel",
]

#: Largest M accepted (per-trial cost O(M^2); beyond this a trial alone takes seconds).
HUBER_LAW_MAX_M = 2000

_E = math.e


class HuberLawTrialsExceeded(RuntimeError):
    """Raised when the accept-reject loop hits ``max_trials`` without enough accepted draws."""


@njit(cache=True)
def _log_h(r):
    if r >= 1.0:
        return math.log(r + 0.5 * math.log(r) + _E - 1.0)
    if r < 0.0:
        r = 0.0
    return math.log(1.0 + (_E - 1.0) * r)


@njit(cache=True, inline="always")
def _neg_logsumexp(w, offset):
    """``-log sum_j exp(w[j] + offset[j])`` (max-shifted): one row's or column's log scale."""
    mx = -math.inf
    for j in range(w.shape[0]):
        x = w[j] + offset[j]
        if x > mx:
            mx = x
    s = 0.0
    for j in range(w.shape[0]):
        s += math.exp(w[j] + offset[j] - mx)
    return -(mx + math.log(s))


@njit(cache=True)
def _scale_core(W2, n_sweeps):
    """Return (A, log_c): A[i, j] = exp(W + a_i + b_j - m_i) in [0, 1] (row max 1).

    perm(e^W) = perm(A) e^log_c.
    """
    M = W2.shape[0]
    a = np.zeros(M)
    b = np.zeros(M)
    for _ in range(n_sweeps):
        for i in range(M):
            a[i] = _neg_logsumexp(W2[i, :], b)
        for j in range(M):
            b[j] = _neg_logsumexp(W2[:, j], a)
    # Each row is divided by its own maximum (not the global one): every row then has max 1 and
    # sum >= 1, where h(r)/e is tight; a row with sum r << 1 would cost a factor ~1/(e r).
    A = np.empty((M, M))
    log_c = 0.0
    for i in range(M):
        mx = -math.inf
        for j in range(M):
            x = W2[i, j] + a[i] + b[j]
            if x > mx:
                mx = x
        for j in range(M):
            A[i, j] = math.exp(W2[i, j] + a[i] + b[j] - mx)
        log_c += mx - a[i]
    # perm(B) = perm(A) * exp(log_c)
    log_c -= b.sum()
    return A, log_c


@njit(cache=True)
def _log_bound(A):
    M = A.shape[0]
    t = 0.0
    for i in range(M):
        r = 0.0
        for j in range(M):
            r += A[i, j]
        t += _log_h(r) - 1.0
    return t


@njit(cache=True)
def _one_trial(rng, A, r0, lh0, out, alive, r, lh, prob):
    """One accept-reject pass; returns 1 on acceptance, 0 on rejection, -1 if (P1) fails.

    ``lh[k]`` holds ``log h(r[k])`` of the rows still alive (``lh0`` of the full matrix), so each
    column evaluates ``log h`` once per alive row (for ``r[k] - A[k, j]``), not three times; the
    sums run over the same terms in the same order as recomputing them would, so the draws are
    bit for bit the same.
    """
    M = A.shape[0]
    for i in range(M):
        r[i] = r0[i]
        lh[i] = lh0[i]
        alive[i] = True
    for j in range(M):
        lpar = 0.0
        lnew = 0.0
        for k in range(M):
            if alive[k]:
                lpar += lh[k]
                x = r[k] - A[k, j]
                r[k] = x if x > 0.0 else 0.0  # the rows' sums without column j, if k survives
                lh[k] = _log_h(x)
                lnew += lh[k]
        tot = 0.0
        for k in range(M):
            p = 0.0
            if alive[k] and A[k, j] > 0.0:
                p = A[k, j] * math.exp(1.0 + lnew - lh[k] - lpar)
            prob[k] = p
            tot += p
        if tot > 1.0 + 1e-9:
            return -1
        u = rng.random()
        chosen = -1
        c = 0.0
        for k in range(M):
            c += prob[k]
            if u < c:
                chosen = k
                break
        if chosen < 0:
            return 0
        out[chosen] = j
        alive[chosen] = False
    return 1


@njit(cache=True)
def huber_law_sample_core(rng, A, n_samples, max_trials):
    """Draw ``n_samples`` exact samples for a scaled matrix ``A`` (entries in [0, 1]).

    Returns ``(samples (n_samples, M) int64, n_accepted, n_trials, status)``; status 0 = ok,
    1 = max_trials reached (samples[:n_accepted] are valid), 2 = (P1) violated (bug guard).
    """
    M = A.shape[0]
    r0 = np.zeros(M)
    for i in range(M):
        for j in range(M):
            r0[i] += A[i, j]
    out = np.empty((n_samples, M), dtype=np.int64)
    alive = np.empty(M, dtype=np.bool_)
    lh0 = np.empty(M)
    for i in range(M):
        lh0[i] = _log_h(r0[i])
    r = np.empty(M)
    lh = np.empty(M)
    prob = np.empty(M)
    row = np.empty(M, dtype=np.int64)
    acc = 0
    trials = 0
    while acc < n_samples:
        if trials >= max_trials:
            return out, acc, trials, 1
        trials += 1
        s = _one_trial(rng, A, r0, lh0, row, alive, r, lh, prob)
        if s < 0:
            return out, acc, trials, 2
        if s == 1:
            for i in range(M):
                out[acc, i] = row[i]
            acc += 1
    return out, acc, trials, 0


#: Statuses of the C kernel of :func:`make_huber_law_draw_kernel` (0: a draw).
HL_TOO_LARGE, HL_BAD_LOGITS, HL_NOT_ACCEPTED, HL_NO_PERMUTATION = 1, 2, 3, 4


def make_huber_law_draw_kernel(version):
    """Body of the C callable that PyTensor's draws of ``PermutationExpFamily(method="bethe")``
    call (``numba.cfunc``, see :mod:`pm_perm.ops.extern`): ``draw_kernel(bitgen, w, m,
    max_trials, out)`` scales the C-contiguous (m, m) float64 logits at ``w`` (20 sweeps) and
    runs the accept-reject loop with the caller's random stream (numpy's ``bitgen_t`` at
    ``bitgen``, :mod:`pm_perm.kernels._bitgen`) for one draw into the (m,) int64 array at
    ``out``. Returns 0, ``HL_TOO_LARGE`` (m beyond ``HUBER_LAW_MAX_M``), ``HL_BAD_LOGITS`` (NaN,
    ``+inf`` or finite logits beyond 1e300), ``HL_NO_PERMUTATION`` (every permutation uses a
    ``-inf`` entry: no trial could be accepted) or ``HL_NOT_ACCEPTED`` (no draw accepted in
    ``max_trials`` trials, or the (P1) guard). ``version`` keys numba's cache as in
    :func:`pm_perm.kernels.permanent.make_log_permanent_kernel`.
    """

    def draw_kernel(bitgen, w, m, max_trials, out):
        if version < 0:  # never true; referencing version puts it into numba's cache key
            return -1
        if m > HUBER_LAW_MAX_M:
            return HL_TOO_LARGE
        W = carray(w, (m, m))
        for i in range(m):
            for j in range(m):
                if not (abs(W[i, j]) <= LOGIT_ABS_MAX or W[i, j] == -np.inf):
                    return HL_BAD_LOGITS
        if not hall_violator(W)[0]:
            return HL_NO_PERMUTATION
        # np.int64 constants, not literals: numba would compile a separate variant of each
        # callee for the literal 20 and 1 (the Python API passes int64)
        A, _ = _scale_core(W, np.int64(20))
        samples, _, _, status = huber_law_sample_core(generator_at(bitgen), A, np.int64(1),
                                                      max_trials)
        if status != 0:
            return HL_NOT_ACCEPTED
        for i in range(m):
            out[i] = samples[0, i]
        return 0

    return draw_kernel


def huber_law_scale(W, n_sweeps=20):
    """Rescale ONE logit matrix to ``A`` in [0, 1] (same p(y)).

    Returns ``(A, log_c)`` with perm(e^W) = perm(A) e^log_c. Raises ``ValueError`` when the
    logits admit no permutation (every one uses a ``-inf`` entry), for which no trial of the
    sampler could be accepted.
    """
    arr = as_square_logits(W)
    if arr.ndim != 2:
        raise ValueError(f"huber_law_scale takes one (M, M) matrix; got shape {arr.shape}")
    check_admits_permutation(arr)
    return _scale_core(arr, int(n_sweeps))


def huber_law_log_bound(A):
    """log of the Huber-Law upper bound ``prod_i h(r_i)/e`` on perm(A), for A in [0, 1]."""
    A = c_array(A)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"A must be a square matrix; got shape {A.shape}")
    if (A < 0).any() or (A > 1).any() or np.isnan(A).any():
        raise ValueError(
            "the Huber-Law bound needs entries in [0, 1]; rescale with huber_law_scale"
        )
    return float(_log_bound(A))


def _check_m(M):
    if M > HUBER_LAW_MAX_M:
        raise ValueError(
            f"Huber-Law sampler supports M <= {HUBER_LAW_MAX_M} (O(M^2) per trial); got M = {M}. "
            "For larger problems use the swap Metropolis kernel (pm_perm.kernels.swap_mcmc)."
        )


def _draw(W2, n, rng, max_trials):
    A, log_c = huber_law_scale(W2)
    out, acc, trials, status = huber_law_sample_core(rng, A, int(n), int(max_trials))
    if status == 2:
        raise RuntimeError(
            "Huber-Law super-additivity (P1) violated numerically; this is a bug, please report "
            "the logits that triggered it"
        )
    if status == 1:
        raise HuberLawTrialsExceeded(
            f"Huber-Law sampler reached max_trials={max_trials} with {acc} of {n} samples "
            f"accepted (acceptance rate {acc / max(trials, 1):.3g}); the weights are too spread "
            "for exact sampling at this size: raise max_trials, or use the swap Metropolis "
            "kernel (approximate, MCMC)"
        )
    return out, acc, trials, A, log_c


def huber_law_sample(W, size=None, rng=None, max_trials=1_000_000, return_stats=False):
    """Exact samples of ``p(y) = exp(sum_i W[i, y[i]]) / perm(exp W)`` by Huber-Law accept-reject.

    Parameters
    ----------
    W : array_like of float, shape (..., M, M)
        Logits; ``-inf`` marks a forbidden edge.
    size : None, int or tuple of int
        RandomVariable convention: ``None`` -> one sample per matrix (shape ``W.shape[:-1]``);
        a tuple -> the full batch shape (W's batch broadcast to it) + ``(M,)``.
    rng : numpy Generator, int or None
    max_trials : int
        Maximum accept-reject trials per matrix (for all the samples of that matrix together).
    return_stats : bool
        If True also return ``(n_accepted, n_trials)`` summed over matrices.

    Returns
    -------
    samples : int64 ndarray, ``samples[..., i]`` = column matched to row ``i``.

    Raises
    ------
    ValueError
        For invalid logits (NaN, ``+inf``, not square), logits that admit no permutation
        (every one uses a ``-inf`` entry), M beyond ``HUBER_LAW_MAX_M``, or a ``size`` that is
        not a tuple of non-negative integers or does not fit the logits' batch shape.
    HuberLawTrialsExceeded
        When ``max_trials`` trials did not give all the samples.

    Notes
    -----
    Exact (no approximation) for any M; cost O(M^2) per trial and ``U/perm`` expected trials
    per sample, which is small for dense, moderately spread weights and explodes for very
    spread ones (measured in docs/guide/large_m.md). Raises :class:`HuberLawTrialsExceeded`
    (naming the acceptance rate) instead of hanging.

    References
    ----------
    Huber, M. & Law, J. (2008). Fast approximation of the permanent for very dense problems. SODA.
    Petterson, J. et al. (2009). Exponential family graph matching and ranking. NeurIPS, appendix.
    """
    arr = as_square_logits(W)
    M = arr.shape[-1]
    _check_m(M)
    rng = np.random.default_rng(rng)
    batch = arr.shape[:-2]
    size = batch if size is None else as_size(size)
    try:
        full = np.broadcast_shapes(batch, size)
    except ValueError:
        full = None
    if full != tuple(size):
        raise ValueError(f"size {size} is not compatible with the logits batch shape {batch}")
    # Group draws of the same matrix: iterate over the unbroadcast batch of W.
    out = np.empty(full + (M,), dtype=np.int64)
    tot_acc = tot_trials = 0
    flat_W = arr.reshape((-1, M, M))
    idx = np.arange(flat_W.shape[0]).reshape(batch) if batch else np.array(0)
    idx_full = np.broadcast_to(idx, full)
    out_flat = out.reshape((-1, M))
    idx_flat = idx_full.reshape(-1)
    for b in range(flat_W.shape[0]):
        where = np.nonzero(idx_flat == b)[0]
        if where.size == 0:
            continue
        s, acc, trials, _, _ = _draw(np.ascontiguousarray(flat_W[b]), where.size, rng, max_trials)
        out_flat[where] = s
        tot_acc += acc
        tot_trials += trials
    if return_stats:
        return out, (tot_acc, tot_trials)
    return out


def huber_law_log_permanent_estimate(W, n_samples=1000, rng=None, max_trials=10_000_000):
    """Monte Carlo estimate of ``log perm(exp W)`` for ONE matrix, from the acceptance rate.

    ``U(A) * accepted / trials`` is an unbiased estimate of ``perm(A)`` when the number of trials is
    fixed (here: trials run until ``n_samples`` acceptances, a negative-binomial design for which
    ``(accepted - 1) / (trials - 1)`` is the unbiased rate estimator; we use that form).

    Returns ``(log_perm_estimate, acceptance_rate, samples)``.
    """
    arr = as_square_logits(W)
    if arr.ndim != 2:
        raise ValueError(f"one (M, M) matrix expected; got shape {arr.shape}")
    _check_m(arr.shape[0])
    if n_samples < 2:
        raise ValueError("n_samples must be >= 2 for the unbiased rate estimator")
    rng = np.random.default_rng(rng)
    s, acc, trials, A, log_c = _draw(arr, n_samples, rng, max_trials)
    rate_hat = 1.0 if trials == acc else (acc - 1) / (trials - 1)
    return float(_log_bound(A) + np.log(rate_hat) + log_c), acc / trials, s
