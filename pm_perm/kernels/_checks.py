"""Input validation shared by the kernels.

Every public kernel turns user input into a C-contiguous float64 array with these helpers
before it reaches numba code, so that compiled code never sees a wrong shape, a NaN, or an
index it does not guard.
"""

from __future__ import annotations

import numpy as np

from pm_perm._numba import njit

#: Largest magnitude of a finite logit. The kernels work in log space, so logits far beyond
#: ``exp``'s range (709) are fine, but sums of M logits must stay finite in float64 (an
#: overflow there would turn into NaN or a division by zero): ``M * 1e300`` is safe for every M
#: the kernels accept. Larger finite values are rejected (kernels: ``ValueError``; Ops: NaN
#: output; distributions: invalid parameter).
LOGIT_ABS_MAX = 1e300


def c_array(x, dtype=np.float64) -> np.ndarray:
    """``x`` as a C-contiguous, WRITABLE array of ``dtype`` (copied only when it is not one).

    numba compiles a separate variant of a kernel for every layout, dtype and read-only flag of
    its array arguments (seconds each on an empty cache). The C kernels and PyTensor's buffers
    give writable C-contiguous arrays; read-only ones come from ``np.broadcast_to`` views,
    constants and frozen data, so the Python API passes every array through this to compile
    one variant only.
    """
    arr = np.ascontiguousarray(x, dtype=dtype)
    return arr if arr.flags.writeable else arr.copy()


def as_float_array(x, name: str, min_ndim: int = 1, max_abs: float = LOGIT_ABS_MAX) -> np.ndarray:
    """Return ``x`` as a C-contiguous, writable float64 array (:func:`c_array`), rejecting NaN
    and too few dimensions.

    ``-inf`` is allowed (it means "forbidden"); ``+inf``, NaN and finite values of magnitude
    above ``max_abs`` are rejected.
    """
    try:
        arr = c_array(x)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{name} must be a real-valued array; got {type(x).__name__}") from err
    if arr.ndim < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} dimension(s); "
                         f"got shape {arr.shape}")
    if np.isnan(arr).any():
        raise ValueError(f"{name} contains NaN; logits must be real numbers or -inf (forbidden)")
    if np.isposinf(arr).any():
        raise ValueError(f"{name} contains +inf; logits must be finite or -inf (forbidden)")
    if arr.size:
        big = np.abs(arr) > max_abs
        if big.any():
            big &= ~np.isneginf(arr)
            if big.any():
                raise ValueError(
                    f"{name} has a finite entry of magnitude {np.abs(arr[big]).max():.3g}, above "
                    f"the limit {max_abs:g}: sums of such values overflow float64. Rescale them, "
                    "or use -inf for entries that must never be chosen"
                )
    return arr


def as_square_logits(W, name: str = "logits") -> np.ndarray:
    """Return ``W`` as a float64 array of shape ``(..., M, M)`` with ``M >= 1``."""
    arr = as_float_array(W, name, min_ndim=2)
    if arr.shape[-1] != arr.shape[-2]:
        raise ValueError(
            f"{name} must be square in its last two dimensions (..., M, M); got shape {arr.shape}"
        )
    if arr.shape[-1] == 0:
        raise ValueError(f"{name} must have M >= 1; got shape {arr.shape}")
    return arr


@njit(cache=True)
def finite_or_minus_inf(W):
    """True when every entry of the matrix ``W`` is finite (magnitude at most
    ``LOGIT_ABS_MAX``) or ``-inf``; the run-time check of the Ops' numba implementations, which
    return NaN instead of raising."""
    for i in range(W.shape[0]):
        for j in range(W.shape[1]):
            w = W[i, j]
            if w != w or w == np.inf or (w != -np.inf and abs(w) > LOGIT_ABS_MAX):
                return False
    return True
