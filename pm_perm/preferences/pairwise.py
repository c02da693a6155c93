"""Pairwise preference tables: ``read_pairwise`` reads a CSV of comparisons (assessor, winner,
loser[, tie]) into per-assessor preference sets (:class:`~pm_perm.PartialOrder`) and pooled
comparisons with counts (:class:`~pm_perm.BradleyTerry`).

The file: a header line naming the columns ``assessor``, ``winner``, ``loser`` and optionally
``tie`` (in any order; other columns are ignored), then one comparison per line. Item ids are
0-based integers; assessors any labels (kept in the order of first appearance). ``tie`` is 0 or
1 (empty: 0); a tie row says the two items tied (``winner`` and ``loser`` are then just the two
items). NumPy and the standard library only.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["PairwiseData", "read_pairwise"]

_REQUIRED = ("assessor", "winner", "loser")


@dataclass(frozen=True)
class PairwiseData:
    """Comparisons read by :func:`read_pairwise`.

    Attributes
    ----------
    n_items : int
        M: item ids are 0..M-1.
    assessors : list of str
        Assessor labels, in order of first appearance.
    prefs : ndarray of int64, shape (n_assessors, P, 2)
        Per assessor, its strict preferences ``(winner, loser)`` (ties left out), rows
        ``(-1, -1)`` padding: the observed value of :class:`~pm_perm.PartialOrder`.
    pairs : ndarray of int64, shape (K, 2) or (K, 3)
        The distinct comparisons over all assessors: ``(winner, loser)``, or with ties in the
        file ``(i, j, tie)`` (a tie with ``i < j``): the observed rows of
        :class:`~pm_perm.BradleyTerry`.
    counts : ndarray of int64, shape (K,)
        How many times each row of ``pairs`` was observed (``weights=counts``).
    """

    n_items: int
    assessors: list
    prefs: np.ndarray
    pairs: np.ndarray
    counts: np.ndarray

    @property
    def has_ties(self) -> bool:
        """Whether ``pairs`` has the tie column."""
        return self.pairs.shape[1] == 3


def _int(text, line, column, path):
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError(f"{path}:{line}: {column} {text!r} is not an integer item id; item ids "
                         "are 0-based integers (map item names to ids first)") from None


def read_pairwise(path, n_items=None) -> PairwiseData:
    """Read a table of pairwise comparisons (CSV with a header: assessor, winner, loser[, tie]).

    Parameters
    ----------
    path : str or Path
    n_items : int, optional
        M; default the largest item id + 1.

    Returns
    -------
    PairwiseData

    Raises
    ------
    ValueError
        Naming the file, the line and the fix: a missing column, a non-integer item id, an item
        id out of range, ``winner == loser``, a tie value other than 0 / 1, an empty table.
        Cyclic preferences are not an error here (they are data); the likelihood of
        :class:`~pm_perm.PartialOrder` names the cycle.

    Examples
    --------
    >>> import tempfile, os
    >>> from pm_perm.preferences import read_pairwise
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = os.path.join(d, "pairs.csv")
    ...     with open(p, "w") as f:
    ...         _ = f.write("assessor,winner,loser\\na,0,1\\na,1,2\\nb,0,2\\nb,0,1\\n")
    ...     data = read_pairwise(p)
    >>> data.prefs.tolist()
    [[[0, 1], [1, 2]], [[0, 2], [0, 1]]]
    >>> data.pairs.tolist(), data.counts.tolist()
    ([[0, 1], [0, 2], [1, 2]], [2, 1, 1])
    """
    path = Path(path)
    rows = []
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None:
            raise ValueError(f"{path}: empty file; expected a header line "
                             "'assessor,winner,loser[,tie]' and one comparison per line")
        names = [h.strip().lower() for h in header]
        missing = [c for c in _REQUIRED if c not in names]
        if missing:
            raise ValueError(f"{path}:1: the header {header} lacks the column(s) {missing}; "
                             "the first line must name assessor, winner, loser (and optionally "
                             "tie)")
        col = {c: names.index(c) for c in (*_REQUIRED, "tie") if c in names}
        for line, rec in enumerate(reader, start=2):
            if not rec or all(not x.strip() for x in rec):
                continue
            if len(rec) <= max(col.values()):
                raise ValueError(f"{path}:{line}: {len(rec)} fields, the header has "
                                 f"{len(header)}; fix the line")
            a = rec[col["assessor"]].strip()
            w = _int(rec[col["winner"]], line, "winner", path)
            lo = _int(rec[col["loser"]], line, "loser", path)
            t = 0
            if "tie" in col and rec[col["tie"]].strip():
                t = _int(rec[col["tie"]], line, "tie", path)
                if t not in (0, 1):
                    raise ValueError(f"{path}:{line}: tie must be 0 or 1 (or empty); got {t}")
            if w == lo:
                raise ValueError(f"{path}:{line}: winner == loser (item {w}); a comparison needs "
                                 "two different items: fix or drop the line")
            rows.append((line, a, w, lo, t))
    if not rows:
        raise ValueError(f"{path}: no comparison after the header")
    ids = np.array([[r[2], r[3]] for r in rows], dtype=np.int64)
    M = int(ids.max()) + 1 if n_items is None else int(n_items)
    for line, _, w, lo, _ in rows:
        for x in (w, lo):
            if not 0 <= x < M:
                raise ValueError(f"{path}:{line}: item id {x} out of range 0..{M - 1} "
                                 f"(M = {M} items); item ids are 0-based: fix the id, or pass "
                                 "n_items")
    assessors: list = []
    index: dict = {}
    per: list = []
    for _, a, w, lo, t in rows:
        if a not in index:
            index[a] = len(assessors)
            assessors.append(a)
            per.append([])
        if not t:
            per[index[a]].append((w, lo))
    P = max(1, max(len(p) for p in per))
    prefs = np.full((len(assessors), P, 2), -1, dtype=np.int64)
    for r, p in enumerate(per):
        if p:
            prefs[r, :len(p)] = p
    ties = any(r[4] for r in rows)
    pooled = np.array([(min(w, lo), max(w, lo), 1) if t else (w, lo, 0)
                       for _, _, w, lo, t in rows], dtype=np.int64)
    if not ties:
        pooled = pooled[:, :2]
    pairs, counts = np.unique(pooled, axis=0, return_counts=True)
    return PairwiseData(M, assessors, prefs, pairs, counts.astype(np.int64))
