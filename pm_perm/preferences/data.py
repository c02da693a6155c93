"""Ranking data: orders aggregated by distinct order, with their numbers of ballots.

Orders are stored in rank form (the convention of ``docs/guide/preferences_data.md``), one row
per DISTINCT order with its number of ballots, so every likelihood costs per distinct order
(Meath 2002: 64,081 ballots in 25,101 distinct orders). PrefLib files are read and written by
:mod:`pm_perm.preferences.preflib`; the PrefLib kinds (:data:`KINDS`) are defined here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pm_perm.kernels.rank_form import validate_orders

__all__ = ["KINDS", "RankingData", "fill_rank_row", "kind_problem"]

#: PrefLib kinds: strict complete, strict incomplete (top-k), weak complete, weak incomplete.
KINDS = ("soc", "soi", "toc", "toi")

_INT64_MAX = int(np.iinfo(np.int64).max)


def _ro(a):
    a = np.array(a, copy=True)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class RankingData:
    """Rankings of ``n_items`` items, aggregated by distinct order.

    Attributes
    ----------
    orders : ndarray of int64, shape (n_distinct, M)
        Rank form: ``orders[r, i]`` is the position of item ``i`` (0 = first), tied items share
        the smallest position of their block, unranked items hold ``-1``. Rows are distinct.
    counts : ndarray of int64, shape (n_distinct,)
        Ballots per distinct order, each ``>= 1``.
    item_names : tuple of str
        Length M, in file order.
    kind : {"soc", "soi", "toc", "toi"}
        PrefLib kind: strict (``so``) or with ties (``to``); complete (``c``) or not (``i``).
    source : str or None
        The file the data were read from (not part of equality); ``write_preflib`` never
        overwrites it.

    Build from arrays with :meth:`from_orders` (rank form) or :meth:`from_item_lists` (lists of
    items, first to last, tuples for ties); both aggregate repeated orders.
    """

    orders: np.ndarray
    counts: np.ndarray
    item_names: tuple[str, ...]
    kind: str
    source: str | None = field(default=None, compare=False)

    def __post_init__(self):
        counts = np.asarray(self.counts)
        if counts.dtype.kind not in "iu" or counts.ndim != 1:
            raise ValueError(f"counts must be a 1-d integer array; got dtype {counts.dtype}, "
                             f"shape {counts.shape}")
        names = tuple(self.item_names)
        if not all(isinstance(s, str) for s in names):
            raise ValueError("item_names must be strings")
        orders = validate_orders(self.orders, len(names), name="orders")
        if orders.shape[0] != counts.shape[0]:
            raise ValueError(f"orders has {orders.shape[0]} rows but counts has {counts.shape[0]}")
        if (counts < 1).any():
            raise ValueError("counts must be >= 1 (one row per distinct order with its ballots); "
                             f"row {int(np.argmax(counts < 1))} has {counts[counts < 1][0]}")
        _check_total(counts)
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}; got {self.kind!r}")
        if _first_repeated_row(orders) is not None:
            raise ValueError("orders contain repeated rows; build with RankingData.from_orders, "
                             "which aggregates them")
        problem = kind_problem(orders, self.kind)
        if problem is not None:
            row, why = problem
            raise ValueError(f"orders[{row}] = {orders[row].tolist()} {why} (kind "
                             f"{self.kind!r}); use the matching kind")
        object.__setattr__(self, "orders", _ro(orders))
        object.__setattr__(self, "counts", _ro(counts.astype(np.int64)))
        object.__setattr__(self, "item_names", names)

    def __eq__(self, other):
        if not isinstance(other, RankingData):
            return NotImplemented
        return (self.kind == other.kind and self.item_names == other.item_names
                and np.array_equal(self.orders, other.orders)
                and np.array_equal(self.counts, other.counts))

    __hash__ = None

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_orders(cls, orders, counts=None, *, item_names=None, kind=None):
        """Aggregate rank-form rows (one per ballot, or with ``counts``) into distinct orders.

        Parameters
        ----------
        orders : array_like of int, shape (n, M)
            Rank form (see the class docstring).
        counts : array_like of int, shape (n,), optional
            Ballots per row (default 1 each); non-negative integers, zero rows are dropped.
        item_names : sequence of str, optional
            Default ``"1" .. "M"``.
        kind : str, optional
            Default: the narrowest kind that holds the data (``soc`` if strict and complete...).
        """
        orders = np.asarray(orders)
        M = orders.shape[-1] if orders.ndim == 2 else None
        orders = validate_orders(orders, M, name="orders")
        counts = _as_counts(counts, orders.shape[0])
        keep = counts > 0
        orders, counts = orders[keep], counts[keep]
        uniq, first, inverse = np.unique(orders, axis=0, return_index=True, return_inverse=True)
        totals = np.zeros(len(uniq), dtype=np.int64)
        np.add.at(totals, inverse.ravel(), counts)  # exact (no float weights); the sum fits
        by_first = np.argsort(first, kind="stable")  # keep first-appearance order
        names = item_names if item_names is not None else [str(i + 1) for i in
                                                           range(orders.shape[1])]
        if len(names) != orders.shape[1]:
            raise ValueError(f"item_names has {len(names)} names for {orders.shape[1]} items")
        return cls(uniq[by_first], totals[by_first].astype(np.int64), tuple(names),
                   kind or _narrowest_kind(uniq))

    @classmethod
    def from_item_lists(cls, lists, counts=None, *, n_items=None, item_names=None, kind=None):
        """Aggregate orders given as lists of 0-based item ids, first to last.

        A tuple, list or set inside a list is a tie block (``[2, (0, 3), 1]``: item 2 first,
        items 0 and 3 tied second, item 1 fourth); items not listed are unranked. ``n_items``
        defaults to ``len(item_names)`` or the largest id + 1.
        """
        if n_items is None:
            n_items = len(item_names) if item_names is not None else 1 + max(
                (i for lst in lists for b in lst for i in _block(b)), default=-1)
        orders = np.full((len(lists), n_items), -1, dtype=np.int64)
        for r, lst in enumerate(lists):
            problem = fill_rank_row(orders[r], [_block(b) for b in lst])
            if problem:
                raise ValueError(f"lists[{r}] = {lst!r}: {problem}")
        return cls.from_orders(orders.reshape(-1, n_items), counts, item_names=item_names,
                               kind=kind)

    # ------------------------------------------------------------------ properties
    @property
    def n_items(self) -> int:
        return self.orders.shape[1]

    @property
    def n_distinct(self) -> int:
        return self.orders.shape[0]

    @property
    def n_rankings(self) -> int:
        return int(self.counts.sum())

    @property
    def has_ties(self) -> bool:
        return bool(_tied_rows(self.orders).any())

    @property
    def max_ranked(self) -> int:
        return int(self.ranked_lengths().max(initial=0))

    def ranked_lengths(self) -> np.ndarray:
        """Number of ranked items per distinct order, int64 (n_distinct,)."""
        return (self.orders >= 0).sum(axis=1).astype(np.int64)

    def item_lists(self, names=False) -> list[list[tuple]]:
        """Each distinct order as a list of blocks (tuples of item ids, or names), first to last;
        unranked items are left out."""
        out = []
        for row in self.orders:
            blocks = [tuple(np.flatnonzero(row == p).tolist()) for p in np.unique(row[row >= 0])]
            if names:
                blocks = [tuple(self.item_names[i] for i in b) for b in blocks]
            out.append(blocks)
        return out

    # ------------------------------------------------------------------ subsets and splits
    def subset(self, rows) -> RankingData:
        """The distinct orders ``rows`` (indices or a boolean mask) with their counts."""
        rows = np.asarray(rows)
        return RankingData(self.orders[rows], self.counts[rows], self.item_names, self.kind)

    def with_counts(self, counts) -> RankingData:
        """The same distinct orders with new counts (rows with count 0 are dropped)."""
        counts = _as_counts(counts, self.n_distinct)
        keep = counts > 0
        return RankingData(self.orders[keep], counts[keep], self.item_names, self.kind)

    def split_ballots(self, fraction, rng=None) -> tuple[RankingData, RankingData]:
        """Random held-out split over BALLOTS: each ballot is held out with probability
        ``fraction`` independently (binomial thinning of each distinct order's count).

        Returns ``(train, heldout)``, each re-aggregated (orders with no ballot left dropped).
        ``rng``: a seed or ``numpy.random.Generator``.
        """
        if not 0.0 <= float(fraction) <= 1.0:
            raise ValueError(f"fraction must be in [0, 1]; got {fraction}")
        held = np.random.default_rng(rng).binomial(self.counts, float(fraction))
        return self.with_counts(self.counts - held), self.with_counts(held)


    def ballot_folds(self, n_folds, rng=None) -> list[tuple[RankingData, RankingData]]:
        """K-fold cross-validation over BALLOTS: each ballot goes to one of ``n_folds`` folds
        uniformly at random (multinomial thinning of every count).

        Returns ``[(train_k, test_k) for k in range(n_folds)]``; the test parts partition the
        ballots, each part re-aggregated. ``rng``: a seed or ``numpy.random.Generator``.
        """
        if isinstance(n_folds, bool) or not isinstance(n_folds, int | np.integer) or n_folds < 2:
            raise ValueError(f"n_folds must be an integer >= 2; got {n_folds!r}")
        parts = np.random.default_rng(rng).multinomial(self.counts, np.full(n_folds, 1 / n_folds))
        return [(self.with_counts(self.counts - parts[:, k]), self.with_counts(parts[:, k]))
                for k in range(n_folds)]


def _block(b):
    return sorted(b) if isinstance(b, tuple | list | set | frozenset) else [b]


def fill_rank_row(row, blocks):
    """Write blocks of 0-based item ids, first to last, into the rank-form ``row`` (in place).

    Parameters
    ----------
    row : ndarray of int64, shape (M,)
        All ``-1`` on entry; on return the position of each listed item.
    blocks : sequence of sequence of int
        Tie blocks of item ids, first to last.

    Returns
    -------
    str or None
        What is wrong with ``blocks`` (an id that is not an integer, out of range, or repeated),
        or None.
    """
    M = row.shape[0]
    pos = 0
    for block in blocks:
        for i in block:
            if isinstance(i, bool) or not isinstance(i, int | np.integer):
                return f"item id {i!r} is not an integer"
            if not 0 <= i < M:
                return f"item id {i} is out of range (there are {M} items)"
            if row[i] >= 0:
                return f"item {i} appears more than once"
            row[i] = pos
        pos += len(block)
    return None


def _as_counts(counts, n):
    if counts is None:
        return np.ones(n, dtype=np.int64)
    c = np.asarray(counts)
    if c.dtype.kind == "f":
        if not np.all(np.isfinite(c)) or not np.all(c == np.round(c)):
            raise ValueError("counts must be non-negative integers; got non-integer values")
    elif c.dtype.kind not in "iu":
        raise ValueError(f"counts must be non-negative integers; got dtype {c.dtype}")
    if c.shape != (n,):
        raise ValueError(f"counts must have shape ({n},); got {c.shape}")
    if (c < 0).any():
        raise ValueError("counts must be non-negative integers; got a negative count")
    _check_total(c)
    return c.astype(np.int64)


#: fixed odd multipliers of the row hash of _first_repeated_row (one per column, cycled)
_ROW_HASH = np.random.default_rng(20261127).integers(1, 2**62, size=64, dtype=np.int64) | 1


def _first_repeated_row(orders):
    """Index of the first row of the int64 array ``orders`` (n, M) equal to an earlier row, or
    None. Each row is hashed to one int64 (a dot product with fixed multipliers, wrapping), and
    only rows with equal hashes are compared: O(n M) time and O(n) extra memory, where
    ``np.unique(axis=0)`` sorted a copy of the whole table."""
    n, M = orders.shape
    if n < 2:
        return None
    weights = np.resize(_ROW_HASH, M)
    h = orders @ weights  # integer products wrap silently, as a hash may
    idx = np.argsort(h, kind="stable")
    hs = h[idx]
    starts = np.flatnonzero(np.r_[True, hs[1:] != hs[:-1]])
    sizes = np.diff(np.r_[starts, n])
    first = None
    for s, size in zip(starts[sizes > 1], sizes[sizes > 1], strict=True):
        group = idx[s:s + size]  # ascending row indices (stable sort)
        for a, j in enumerate(group[1:], start=1):
            if (first is None or j < first) and any(
                    np.array_equal(orders[i], orders[j]) for i in group[:a]):
                first = int(j)
                break
    return first


def _check_total(counts):
    """Refuse non-negative counts whose exact sum does not fit in int64 (it would wrap)."""
    if counts.size == 0 or int(counts.max()) <= _INT64_MAX // counts.size:
        return
    total = sum(map(int, counts.tolist()))
    if total > _INT64_MAX:
        raise ValueError(f"counts add up to {total} ballots, more than the int64 limit "
                         f"{_INT64_MAX}; counts this large cannot be stored")


def _tied_rows(orders, chunk_bytes=1 << 25):
    """Boolean (n,): rows with a tie (two ranked items sharing a position). Rows are sorted in
    chunks of about ``chunk_bytes`` (32 MiB), so the temporaries stay small next to the table."""
    n, M = orders.shape
    step = max(1, chunk_bytes // max(1, 8 * M))
    tied = np.zeros(n, dtype=bool)
    for a in range(0, n, step):
        s = np.sort(orders[a:a + step], axis=1)
        tied[a:a + step] = ((np.diff(s, axis=1) == 0) & (s[:, 1:] >= 0)).any(axis=1)
    return tied


def _narrowest_kind(orders):
    ties = bool(_tied_rows(orders).any())
    complete = bool((orders >= 0).all())
    return ("to" if ties else "so") + ("c" if complete else "i")


def kind_problem(orders, kind):
    """The first order a PrefLib file of ``kind`` cannot hold, or None.

    Parameters
    ----------
    orders : ndarray of int64, shape (n, M)
        Rank form.
    kind : {"soc", "soi", "toc", "toi"}

    Returns
    -------
    tuple of (int, str) or None
        ``(row, reason)``: ties in a strict kind, an incomplete order in a complete kind.
    """
    if kind.startswith("so"):
        tied = _tied_rows(orders)
        if tied.any():
            return int(np.argmax(tied)), "has ties"
    if kind.endswith("c"):
        incomplete = (orders < 0).any(axis=1)
        if incomplete.any():
            return int(np.argmax(incomplete)), "is not a complete order (every item must be ranked)"
    return None
