"""Exact log-permanent and marginals in O(M^2) memory by Glynn's formula, for M past the DP.

The subset dynamic program of :mod:`pm_perm.kernels.permanent` needs a table of 2^M float64
(1 GiB at M = 27, 8 GiB at M = 30). Glynn's formula needs no table:

``perm(A) = 2^-(M-1) sum_{d in {+1,-1}^M, d_0 = +1} (prod_k d_k) prod_j s_j(d)``,
``s_j(d) = sum_i d_i A[i, j]``,

and its gradient ``d perm / d A[i, j] = 2^-(M-1) sum_d (prod_k d_k) d_i prod_{k != j} s_k(d)``;
the marginals are ``P[i, j] = A[i, j] (d perm / d A[i, j]) / perm(A)``, the gradient of
``log perm(exp W)`` with respect to ``W``.

Algorithm:

* scaling: ``W`` is shifted by the max-weight assignment's dual potentials
  (:func:`pm_perm.kernels.assignment.dual_scaled`, which also handles ``-inf`` edges and
  infeasibility), then ``SINKHORN_SWEEPS`` Sinkhorn sweeps bring ``A`` close to doubly stochastic
  (the log scales are added back). Then ``|s_j| <= 1``, every term is at most 1 in magnitude and
  ``perm(A) >= M!/M^M``: the alternating sum cancels, but boundedly (worst for near-uniform
  weights, where the terms' magnitudes sum to about ``10^3 perm 2^(M-1)`` at M = 30; peaked
  weights scale to a near-permutation matrix whose terms all have the same sign);
* Gray-code order: consecutive sign vectors differ in one row, so ``s`` is updated in O(M) and
  each term's product costs O(M); ``s`` is recomputed from ``A`` at the start of every block of
  ``2^BLOCK_BITS`` terms, so rounding does not drift along the 2^(M-1) updates;
* gradient in O(M) per term: with ``u_t[j] = sign_t prod_{k != j} s_k`` (prefix and suffix
  products) and ``R(t) = sum_{t' < t} u_t'``, Abel summation gives
  ``sum_t d_i(t) u_t = d_i(end) R(end) + 2 sum_{flips of row i at t} d_i(before) R(t)``: one
  vector update at each flip, of the single row that flips, instead of an outer product per term;
* compensated summation: ``R``, the flip sums, the value and every accumulator are double-double
  (TwoSum), so the 2^(M-1)-term sums add no rounding beyond the terms' own (a few ulps times M
  relative to each term); the remaining error is that times the cancellation ratio
  ``sum |terms| / |sum|`` (measured in ``benchmarks/bench_glynn.py``);
* parallel: the blocks are split into ``CHUNKS`` chunks run by ``numba.prange`` (the threads of
  ``NUMBA_NUM_THREADS``, or ``numba.set_num_threads``), each with its own accumulators, reduced in
  a fixed order, so the result does not depend on the number of threads.

numba callers: compiled code that calls these kernels and is loaded from numba's cache needs
numba's parallel runtime started first (numba issue #8578: otherwise "Symbol not found:
allocate_sched" or a segfault); call :func:`ensure_parallel_runtime` from Python before. The
public functions here and the Ops of :mod:`pm_perm.ops.permanent` do.

Cost: ``2^(M-1)`` terms of O(M) (value) or a constant times that (value and marginals),
doubling with each M; memory O(CHUNKS M^2) float64 (under 1 MiB at M = 30). Accuracy is that of
the cancelling sum: relative errors of ``perm`` and of the marginals up to about 1e-12 (1e-11 for
marginals below 1e-3) on the matrices of ``docs/guide/large_m.md``, not the DP's few ulps; the
DP stays the default.
"""

from __future__ import annotations

import math

import numpy as np
from numba import carray, prange
from numba.np.ufunc import parallel as _numba_parallel

from pm_perm._numba import njit
from pm_perm.kernels._bitgen import square_draw_kernel
from pm_perm.kernels._checks import (
    as_size,
    as_square_logits,
    c_array,
    finite_or_minus_inf,
    raising_sampler,
    square_draw_errors,
    square_logits_status,
)
from pm_perm.kernels.assignment import dual_scaled

__all__ = [
    "GLYNN_DRAW_ERRORS",
    "GLYNN_MAX_M",
    "check_glynn_size",
    "draw_glynn_into",
    "ensure_parallel_runtime",
    "glynn_log_permanent",
    "glynn_log_permanent_and_marginals",
    "glynn_sample_permutation_core",
    "glynn_sample_permutations",
    "format_seconds",
    "glynn_into",
    "glynn_seconds_estimate",
    "make_glynn_draw_kernel",
    "make_glynn_kernel",
]

#: Largest M accepted by the Glynn kernels: 2^31 terms (minutes of one core for the value and
#: marginals).
GLYNN_MAX_M = 32

#: Sinkhorn sweeps after the dual scaling (any scaling is exact; these only reduce cancellation).
SINKHORN_SWEEPS = 30

#: log2 of the number of terms per Gray-code block (``s`` is recomputed at each block start).
BLOCK_BITS = 10

#: Number of independent accumulators (parallel chunks), fixed so results do not depend on the
#: thread count.
CHUNKS = 64

#: CPU seconds per term and row (value and marginals; value only), from
#: benchmarks/bench_glynn.py; used only for the time estimates in messages.
_SEC_PER_TERM_ROW = (3.6e-9, 0.6e-9)


def glynn_seconds_estimate(M: int, marginals: bool = True) -> float:
    """Expected CPU seconds of one Glynn call at size ``M`` on one core (``M 2^(M-1)`` times
    the measured cost per term and row)."""
    return _SEC_PER_TERM_ROW[0 if marginals else 1] * M * 2.0 ** (M - 1)


def format_seconds(sec: float) -> str:
    """``"40 s"``, ``"4 min"`` or ``"2.5 h"``."""
    if sec < 120:
        return f"{sec:.0f} s" if sec >= 1 else f"{sec:.2g} s"
    return f"{sec / 60:.0f} min" if sec < 7200 else f"{sec / 3600:.1f} h"


def ensure_parallel_runtime() -> None:
    """Start numba's parallel runtime (idempotent; a few milliseconds the first time).

    Cached compiled code that calls the ``prange`` kernel here refers to the runtime's symbols;
    numba registers them only when it starts the runtime, which it does when it compiles or loads
    a ``parallel=True`` function itself, not when it loads a cached caller (numba issue #8578).
    """
    _numba_parallel._launch_threads()


def check_glynn_size(M: int) -> None:
    """Raise ``ValueError`` for ``M > GLYNN_MAX_M``."""
    if M > GLYNN_MAX_M:
        raise ValueError(
            f"M = {M} is beyond GLYNN_MAX_M = {GLYNN_MAX_M} of the exact Glynn method "
            f"(2^(M-1) terms: about {format_seconds(glynn_seconds_estimate(M))} per value and "
            "gradient on one core). Use the Bethe approximation (method='bethe') or the "
            "Huber-Law sampler (pm_perm.kernels.huber_law)."
        )


# ----------------------------------------------------------------------------- numba cores


@njit(cache=True)
def _sinkhorn(B, sweeps):
    """Scale ``B`` (non-negative, with a positive permutation) in place towards doubly stochastic;
    returns ``log perm(B_in) - log perm(B_out)`` (the sum of the log scales)."""
    M = B.shape[0]
    shift = 0.0
    for _ in range(sweeps):
        for i in range(M):
            shift += _normalise(B[i, :])
        for j in range(M):
            shift += _normalise(B[:, j])
    return shift


@njit(cache=True, inline="always")
def _normalise(v):
    """Scale the vector ``v`` (a row or column view) in place to sum 1; returns the log of its
    former sum."""
    r = 0.0
    for k in range(v.shape[0]):
        r += v[k]
    inv = 1.0 / r
    for k in range(v.shape[0]):
        v[k] *= inv
    return math.log(r)


@njit(cache=True, inline="always")
def _two_sum(a, b):
    s = a + b
    bp = s - a
    return s, (a - (s - bp)) + (b - bp)


@njit(cache=True, inline="always")
def _dd_add(hi, lo, x):
    """``(hi, lo) + x`` in double-double."""
    s, e = _two_sum(hi, x)
    return s, lo + e


@njit(cache=True)
def _chunk(A, A2, chunk, blocks_per_chunk, L, marginals, val, G_hi, G_lo):
    """Terms of the blocks ``[chunk * blocks_per_chunk, (chunk + 1) * blocks_per_chunk)``.

    Adds ``sum sign prod_j s_j`` to ``val[chunk, 0:2]`` (double-double) and, with ``marginals``,
    ``sum sign d_i prod_{k != j} s_k`` to ``G_hi[chunk] + G_lo[chunk]`` (M, M).
    """
    M = A.shape[0]
    nb = 1 << L
    s = np.empty(M)
    d = np.empty(M)
    pre = np.empty(M + 1)
    suf = np.empty(M + 1)
    R_hi = np.empty(M)
    R_lo = np.empty(M)
    Y_hi = np.empty((L + 1, M))  # flip sums of the rows 1..L that flip inside a block
    Y_lo = np.empty((L + 1, M))
    v_hi = 0.0
    v_lo = 0.0
    for blk in range(chunk * blocks_per_chunk, (chunk + 1) * blocks_per_chunk):
        T = blk << L
        g = T ^ (T >> 1)  # Gray code of the block's first term; bit b <-> row b + 1 (1: d = -1)
        sign = 1.0
        d[0] = 1.0
        for i in range(1, M):
            if (g >> (i - 1)) & 1:
                d[i] = -1.0
                sign = -sign
            else:
                d[i] = 1.0
        for j in range(M):
            s[j] = 0.0
        for i in range(M):
            di = d[i]
            for j in range(M):
                s[j] += di * A[i, j]
        if marginals:
            for j in range(M):
                R_hi[j] = 0.0
                R_lo[j] = 0.0
            for i in range(L + 1):
                for j in range(M):
                    Y_hi[i, j] = 0.0
                    Y_lo[i, j] = 0.0
        for t in range(nb):
            if t > 0:
                low = t & (-t)
                b = 0
                while (low >> b) != 1:
                    b += 1
                i = b + 1
                if marginals:  # Abel summation: the flip of row i adds 2 d_i(before) R(t)
                    two_d = 2.0 * d[i]
                    for j in range(M):
                        Y_hi[i, j], e = _two_sum(Y_hi[i, j], two_d * R_hi[j])
                        Y_lo[i, j] += e + two_d * R_lo[j]
                d[i] = -d[i]
                sign = -sign
                if d[i] > 0.0:
                    for j in range(M):
                        s[j] += A2[i, j]
                else:
                    for j in range(M):
                        s[j] -= A2[i, j]
            if marginals:
                pre[0] = 1.0
                suf[M] = 1.0
                for j in range(M):  # two independent product chains in one loop
                    pre[j + 1] = pre[j] * s[j]
                    suf[M - 1 - j] = suf[M - j] * s[M - 1 - j]
                v_hi, v_lo = _dd_add(v_hi, v_lo, sign * pre[M])
                for j in range(M):
                    u = sign * pre[j] * suf[j + 1]
                    R_hi[j], e = _two_sum(R_hi[j], u)
                    R_lo[j] += e
            else:
                p0 = 1.0
                p1 = 1.0
                p2 = 1.0
                p3 = 1.0
                j = 0
                while j + 4 <= M:
                    p0 *= s[j]
                    p1 *= s[j + 1]
                    p2 *= s[j + 2]
                    p3 *= s[j + 3]
                    j += 4
                while j < M:
                    p0 *= s[j]
                    j += 1
                v_hi, v_lo = _dd_add(v_hi, v_lo, sign * ((p0 * p1) * (p2 * p3)))
        if marginals:  # sum_t d_i(t) u_t = d_i(end) R(end) + flip sums
            for i in range(M):
                di = d[i]
                for j in range(M):
                    hi = di * R_hi[j]
                    lo = di * R_lo[j]
                    if 1 <= i <= L:
                        hi, e = _two_sum(hi, Y_hi[i, j])
                        lo += e + Y_lo[i, j]
                    G_hi[chunk, i, j], e = _two_sum(G_hi[chunk, i, j], hi)
                    G_lo[chunk, i, j] += e + lo
    val[chunk, 0] = v_hi
    val[chunk, 1] = v_lo


@njit(cache=True, parallel=True)
def _glynn_sums(A, marginals):
    """``(sum of the terms, sum of the gradient terms (M, M))`` of Glynn's formula for ``A``,
    both still to be divided by 2^(M-1) (the gradient all zeros without ``marginals``)."""
    M = A.shape[0]
    L = min(M - 1, BLOCK_BITS)
    blocks = 1 << (M - 1 - L)
    chunks = min(blocks, CHUNKS)
    per = blocks // chunks
    A2 = 2.0 * A
    Gm = M if marginals else 0
    val = np.zeros((chunks, 2))
    G_hi = np.zeros((chunks, Gm, Gm))
    G_lo = np.zeros((chunks, Gm, Gm))
    for c in prange(chunks):
        _chunk(A, A2, c, per, L, marginals, val, G_hi, G_lo)
    v_hi = 0.0
    v_lo = 0.0
    G = np.zeros((Gm, Gm))
    for c in range(chunks):
        v_hi, e = _two_sum(v_hi, val[c, 0])
        v_lo += e + val[c, 1]
    for i in range(Gm):
        for j in range(Gm):
            hi = 0.0
            lo = 0.0
            for c in range(chunks):
                hi, e = _two_sum(hi, G_hi[c, i, j])
                lo += e + G_lo[c, i, j]
            G[i, j] = hi + lo
    return v_hi + v_lo, G


@njit(cache=True)
def _glynn_valid_into(W, out, marginals):
    """``log perm(exp W)`` of a validated (M, M) matrix; with ``marginals`` the marginals are
    written into ``out`` (M, M) (zeros when ``perm = 0``). NaN if rounding left the cancelling
    sum non-positive (not observed on the matrices measured; never a wrong finite value)."""
    M = W.shape[0]
    if marginals:
        for i in range(M):
            for j in range(M):
                out[i, j] = 0.0
    B, shift, feasible = dual_scaled(W)
    if not feasible:
        return -np.inf
    shift += _sinkhorn(B, SINKHORN_SWEEPS)
    total, G = _glynn_sums(B, marginals)
    if not total > 0.0:
        if marginals:
            for i in range(M):
                for j in range(M):
                    out[i, j] = np.nan
        return np.nan
    if marginals:
        inv = 1.0 / total
        for i in range(M):
            for j in range(M):
                out[i, j] = B[i, j] * G[i, j] * inv
    return math.log(total) - (M - 1) * math.log(2.0) + shift


@njit(cache=True)
def glynn_into(W, P, marginals):
    """:func:`pm_perm.kernels.permanent.log_permanent_into` by Glynn's formula: ``log perm(exp W)``
    of a C-contiguous (m, m) float64 matrix, the marginals written to ``P`` (m, m) if
    ``marginals``; NaN (and NaN marginals) for NaN, ``+inf`` or out-of-range logits. The body of
    the C kernel of :func:`make_glynn_kernel`, which cannot raise."""
    if not finite_or_minus_inf(W):
        if marginals:
            P[:, :] = np.nan
        return np.nan
    return _glynn_valid_into(W, P, marginals)


def make_glynn_kernel(version):
    """Body of the C callable the PyTensor Ops call for ``method="glynn"``; the same contract as
    :func:`pm_perm.kernels.permanent.make_log_permanent_kernel`, by :func:`glynn_into`."""

    def op_kernel(w, m, out, marginals):
        if version < 0:  # never true; referencing version puts it into numba's cache key
            return np.nan
        return glynn_into(carray(w, (m, m)), carray(out, (m, m)), marginals != 0)

    return op_kernel


#: Messages of the Glynn sampler's errors, indexed by the status of :func:`draw_glynn_into`.
GLYNN_DRAW_ERRORS = square_draw_errors("M is beyond GLYNN_MAX_M = 32 of the Glynn sampler",
                                       "Glynn sampler: the permanent lost all precision (NaN)")


@njit(cache=True)
def draw_glynn_into(rng, W, out):
    """One exact draw of ``y`` into ``out`` (M,) int64 from ``p(y) ∝ exp(sum_i W[i, y[i]])`` by
    Glynn's formula; returns 0, or the index in ``GLYNN_DRAW_ERRORS`` of the error (``out`` then
    not a draw). The body of the C kernel of :func:`make_glynn_draw_kernel`, which cannot raise.

    Row by row: ``y[r]`` is drawn from the first row of the marginals of the logits left after
    removing rows ``0..r-1`` and the columns already used (``p(y[r] = j | y[:r])``), so a draw
    costs about twice one value-and-marginals call at size M.
    """
    status = square_logits_status(W, GLYNN_MAX_M)
    if status != 0:
        return status
    M = W.shape[0]
    free = np.arange(M)
    for r in range(M):
        n = M - r
        sub = np.empty((n, n))
        for a in range(n):
            for b in range(n):
                sub[a, b] = W[r + a, free[b]]
        P = np.empty((n, n))
        v = _glynn_valid_into(sub, P, n > 1)
        if v == -np.inf:
            return 4
        if not np.isfinite(v):
            return 5
        k = n - 1
        if n > 1:
            target = rng.random()
            acc = 0.0
            for b in range(n):
                if P[0, b] > 0.0:
                    acc += P[0, b]
                    k = b
                    if acc > target:
                        break
        out[r] = free[k]
        for b in range(k, n - 1):
            free[b] = free[b + 1]
    return 0


glynn_sample_permutation_core = raising_sampler(
    draw_glynn_into, GLYNN_DRAW_ERRORS, "glynn_sample_permutation_core",
    """One exact draw of ``y`` (M,) int64 by Glynn's formula (:func:`draw_glynn_into`). Raises
    ``ValueError`` for a non-square matrix, M beyond ``GLYNN_MAX_M``, NaN or ``+inf`` logits, or
    ``perm(exp W) = 0``.""")


def make_glynn_draw_kernel(version):
    """Body of the C callable that PyTensor's draws of ``PermutationExpFamily(method="glynn")``
    call beyond the DP's limit: ``draw_kernel(bitgen, w, m0, m1, out)`` as
    :func:`pm_perm.kernels.permutation_sampler.make_permutation_draw_kernel`, by
    :func:`draw_glynn_into`."""
    return square_draw_kernel(draw_glynn_into, version)


@njit(cache=True)
def _glynn_batch(W, marginals):
    n, M = W.shape[0], W.shape[1]
    v = np.empty(n)
    P = np.empty((n, M, M) if marginals else (n, 0, 0))
    scratch = np.empty((M, M))
    for b in range(n):
        v[b] = _glynn_valid_into(W[b], P[b] if marginals else scratch, marginals)
    return v, P


# ----------------------------------------------------------------------------- public API


def _prepare(W):
    arr = as_square_logits(W)
    check_glynn_size(arr.shape[-1])
    ensure_parallel_runtime()
    return arr, arr.shape[:-2], arr.reshape((-1,) + arr.shape[-2:])


def glynn_log_permanent(W):
    """``log perm(exp W)`` by Glynn's formula, batched over leading dimensions.

    Parameters
    ----------
    W : array_like of float, shape (..., M, M)
        Logits; ``-inf`` marks a forbidden edge. NaN and ``+inf`` are errors. M up to
        ``GLYNN_MAX_M``.

    Returns
    -------
    ndarray of float64, shape (...)
        ``-inf`` if every permutation uses a forbidden edge.

    Notes
    -----
    O(M 2^(M-1)) time, O(M^2) memory; exact up to rounding of a cancelling sum (see the module
    docstring). Use :func:`pm_perm.kernels.permanent.log_permanent` (the DP, more accurate and
    faster) while its 2^M table fits the memory budget.
    """
    arr, batch, flat = _prepare(W)
    return _glynn_batch(flat, False)[0].reshape(batch)


def glynn_log_permanent_and_marginals(W):
    """``(log perm(exp W), P)`` by Glynn's formula; ``P[..., i, j] = p(y[i] = j)`` is the gradient
    of the log-permanent (all zeros if ``perm = 0``). A constant times the value's cost."""
    arr, batch, flat = _prepare(W)
    v, P = _glynn_batch(flat, True)
    return v.reshape(batch), P.reshape(arr.shape)


def glynn_sample_permutations(W, size=None, rng=None):
    """Exact draws from ``p(y) = exp(sum_i W[i, y[i]]) / perm(exp W)`` by Glynn's formula.

    Same arguments and value convention as
    :func:`pm_perm.kernels.permutation_sampler.sample_permutations`
    (``size`` is the full batch shape, ``W``'s batch shape broadcasts to it). Each draw costs
    about twice one :func:`glynn_log_permanent_and_marginals` call (no table is shared between
    draws): use the DP's sampler while its table fits.
    """
    rng = np.random.default_rng(rng)
    arr, wbatch, _ = _prepare(W)
    M = arr.shape[-1]
    size = wbatch if size is None else as_size(size)
    try:
        arr = np.broadcast_to(arr, size + (M, M))
    except ValueError as err:
        raise ValueError(
            f"logits with batch shape {wbatch} do not broadcast to size {size}"
        ) from err
    flat = c_array(arr).reshape(-1, M, M)
    out = np.empty((flat.shape[0], M), dtype=np.int64)
    for b in range(flat.shape[0]):
        out[b] = glynn_sample_permutation_core(rng, flat[b])
    return out.reshape(size + (M,))
