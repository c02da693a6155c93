"""Input validation shared by the kernels.

Every public kernel turns user input into a C-contiguous float64 array with these helpers
before it reaches numba code, so that compiled code never sees a wrong shape, a NaN, or an
index it does not guard.
"""

from __future__ import annotations

import numbers

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

    ``-inf`` is allowed (it means "forbidden"); ``+inf``, NaN, finite values of magnitude
    above ``max_abs`` and complex input (NumPy would keep only the real part) are rejected.
    """
    if np.iscomplexobj(x):
        raise TypeError(f"{name} must be real numbers; got complex values (pass np.real({name}) "
                        "if the real part is what you mean)")
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


def square_draw_errors(limit_message, *more):
    """The messages of an exact permutation sampler's statuses: ``""`` (0), those of
    :func:`square_logits_status` (1 and 3; ``limit_message`` names the sampler's limit, 2),
    no permutation avoiding the ``-inf`` logits (4), then the sampler's own (``more``)."""
    return ("", "logits must be a square (M, M) matrix with M >= 1", limit_message,
            "logits contain NaN, +inf or a finite value beyond 1e300",
            "cannot sample: no permutation avoids the -inf logits", *more)


def raising_sampler(draw_into, messages, name, doc):
    """The numba function ``name(rng, W) -> y`` (M,) int64 (docstring ``doc``): one draw by
    ``draw_into(rng, W, out) -> status`` into a new array, raising ``ValueError`` with
    ``messages[status]`` for a nonzero status."""

    def sampler(rng, W):
        out = np.empty(W.shape[0], dtype=np.int64)
        status = draw_into(rng, W, out)
        if status != 0:
            raise ValueError(messages[status])
        return out

    sampler.__name__ = sampler.__qualname__ = name
    sampler.__doc__ = doc
    return njit(cache=True)(sampler)


@njit(cache=True)
def square_logits_status(W, max_m):
    """The input check of the exact permutation samplers, which return a status instead of
    raising: 0 if ``W`` is a square (M, M) matrix with ``1 <= M <= max_m`` whose entries pass
    :func:`finite_or_minus_inf`; else 1 (not square, or empty), 2 (M beyond ``max_m``) or 3
    (NaN, ``+inf`` or out-of-range logits)."""
    M = W.shape[0]
    if W.shape[1] != M or M == 0:
        return 1
    if M > max_m:
        return 2
    if not finite_or_minus_inf(W):
        return 3
    return 0


@njit(cache=True)
def hall_violator(W):
    """Whether the finite entries of the (M, M) matrix ``W`` hold a perfect matching, that is
    whether some permutation avoids every ``-inf`` entry (``perm(exp W) > 0``).

    Returns ``(ok, rows, cols)``: when ``ok`` is False, the boolean masks ``rows`` and ``cols``
    are a Hall violator: the rows of ``rows`` have finite entries only in the columns of
    ``cols``, and there are fewer of those (both all False when ``ok``). Augmenting paths
    (Kuhn 1955) from a greedy matching, by breadth-first search: O(M^2) per augmentation, so
    O(M^2) for dense patterns and O(M^3) at worst; the weights themselves play no part (the
    Hungarian algorithm, which also decides this, slows down badly on ties).
    """
    M = W.shape[0]
    row_of_col = np.full(M, -1, dtype=np.int64)
    col_of_row = np.full(M, -1, dtype=np.int64)
    for i in range(M):
        for j in range(M):
            if W[i, j] != -np.inf and row_of_col[j] < 0:
                row_of_col[j] = i
                col_of_row[i] = j
                break
    parent = np.empty(M, dtype=np.int64)  # the row from which the search reached a column
    queue = np.empty(M, dtype=np.int64)
    rows = np.zeros(M, dtype=np.bool_)
    cols = np.zeros(M, dtype=np.bool_)
    for i in range(M):
        if col_of_row[i] >= 0:
            continue
        rows[:] = False
        cols[:] = False
        rows[i] = True
        queue[0] = i
        head, tail, free = 0, 1, -1
        while head < tail and free < 0:
            r = queue[head]
            head += 1
            for j in range(M):
                if W[r, j] != -np.inf and not cols[j]:
                    cols[j] = True
                    parent[j] = r
                    if row_of_col[j] < 0:
                        free = j
                        break
                    rows[row_of_col[j]] = True
                    queue[tail] = row_of_col[j]
                    tail += 1
        if free < 0:  # every column the rows reach is matched to one of them: Hall violator
            return False, rows, cols
        j = free  # augment along the path back to row i
        while j >= 0:
            r = parent[j]
            nxt = col_of_row[r]
            col_of_row[r] = j
            row_of_col[j] = r
            j = nxt
    rows[:] = False
    cols[:] = False
    return True, rows, cols


def _listed(mask, limit=8):
    idx = np.flatnonzero(mask)
    return ", ".join(map(str, idx[:limit])) + (", ..." if idx.size > limit else "")


def check_admits_permutation(W, name: str = "logits") -> None:
    """Raise ``ValueError`` unless every (M, M) matrix of the validated logits ``W`` (..., M, M)
    admits a permutation avoiding its ``-inf`` entries (:func:`hall_violator`); the message
    names the matrix and an all ``-inf`` row or column, or rows that share too few columns."""
    M = W.shape[-1]
    flat = W.reshape(-1, M, M)
    for b in range(flat.shape[0]):
        ok, rows, cols = hall_violator(np.ascontiguousarray(flat[b]))
        if ok:
            continue
        where = (f"[{', '.join(map(str, np.unravel_index(b, W.shape[:-2])))}]"
                 if W.ndim > 2 else "")
        dead_rows = np.isneginf(flat[b]).all(axis=1)
        dead_cols = np.isneginf(flat[b]).all(axis=0)
        if dead_rows.any():
            detail = f"row {_listed(dead_rows, 1)} is all -inf"
        elif dead_cols.any():
            detail = f"column {_listed(dead_cols, 1)} is all -inf"
        else:
            detail = (f"rows {_listed(rows)} have finite entries only in column"
                      f"{'s' if cols.sum() > 1 else ''} {_listed(cols)}, fewer than the rows")
        raise ValueError(f"{name}{where} admit no permutation (every one uses a -inf entry): "
                         f"{detail}; make more of those entries finite")


def check_weights(weights, n: int, name: str = "weights") -> np.ndarray:
    """``weights`` as a C-contiguous float64 array of shape ``(n,)`` (one per order), refusing
    another shape, complex numbers and NaN or infinite entries (naming the first)."""
    if np.iscomplexobj(weights):
        raise TypeError(f"{name} must be real numbers; got complex values")
    try:
        g = c_array(weights)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{name} must be real numbers; got {type(weights).__name__}") from err
    if g.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},), one per order; got shape {g.shape}")
    bad = ~np.isfinite(g)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"{name}[{i}] = {g[i]} is not finite; {name} must be finite numbers "
                         "(e.g. the count of each order)")
    return g


def as_size(size, name: str = "size") -> tuple[int, ...]:
    """``size`` (an int or a sequence of ints) as a tuple of non-negative ints, refusing
    fractions (``2.5`` would otherwise become 2), NaN and negative numbers."""
    arr = np.atleast_1d(np.asarray(size))
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu") or (arr < 0).any():
        raise ValueError(f"{name} must be a non-negative integer or a tuple of them; "
                         f"got {size!r}")
    return tuple(int(s) for s in arr)


def as_count(x, name: str, minimum: int = 0) -> int:
    """``x`` as an int of at least ``minimum``, refusing NaN, infinities, fractions and
    non-numbers with a message naming ``name`` (integral floats such as ``1e3`` are accepted)."""
    try:
        ok = isinstance(x, numbers.Real) and not isinstance(x, bool | np.bool_) \
            and float(x) == int(x)
    except (ValueError, OverflowError):  # NaN, infinities
        ok = False
    if not ok or int(x) < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {x!r}")
    return int(x)


def non_permutation_rows(values) -> np.ndarray:
    """Boolean array over the leading axes of ``values``: True where the row (last axis) is not
    a permutation of ``0..M-1``. ``values`` must have at least one dimension; any dtype (a float
    row of integral values counts as a permutation: callers check the dtype they need).
    O(n M log M)."""
    values = np.asarray(values)
    return (np.sort(values, axis=-1) != np.arange(values.shape[-1])).any(axis=-1)


def first_non_permutation(values) -> tuple[int, ...] | None:
    """Index over the leading axes of the first row (last axis) of ``values`` that is not a
    permutation of ``0..M-1`` (``()`` for a single row), or ``None`` when every row is one
    (:func:`non_permutation_rows`)."""
    bad = non_permutation_rows(values)
    if not bad.any():
        return None
    return tuple(int(i) for i in np.argwhere(bad)[0])
