"""Reader for BayesMallows-style rank matrices (CSV): one row per assessor, one column per item,
the cell = the 1-based rank the assessor gave the item, empty or ``NA`` = not ranked (top-k).

The file's optional header row names the items; an optional first column labels the assessors
(it is recognised by its header cell, empty or ``assessor``/``assessors``/``id``, or, without
a header, by values that are not ranks). The result is :class:`~pm_perm.preferences.data.
RankingData` in its value convention (rank form, 0-based, ``-1`` = unranked).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from pm_perm.preferences.data import RankingData

__all__ = ["read_rank_matrix"]

_MISSING = {"", "na", "nan", "<na>"}
_LABEL_HEADERS = {"", "assessor", "assessors", "id"}


def _is_rank_cell(cell: str) -> bool:
    cell = cell.strip()
    if cell.lower() in _MISSING:
        return True
    try:
        float(cell)
    except ValueError:
        return False
    return True


def read_rank_matrix(path) -> RankingData:
    """Read a rank matrix (rows = assessors, columns = items, 1-based ranks, NA = unranked).

    Parameters
    ----------
    path : str or Path
        A comma-separated file, e.g. BayesMallows' ``potato_visual`` as CSV.

    Returns
    -------
    RankingData
        One ballot per assessor (repeated rankings aggregated), items named by the header
        (default ``"1" .. "n"``); kind ``"soc"`` when every row ranks every item, else
        ``"soi"`` (top-k rows: the ranked items hold ranks ``1..k``).

    Raises
    ------
    ValueError
        For an empty file, rows of different lengths, and a row that is not a (partial) ranking:
        a rank that is not an integer in ``1..n``, a rank given twice, ranks that are not
        ``1..k`` for its ``k`` ranked items, or no ranked item. The message names the row (file
        line and assessor) and the fix.
    """
    path = Path(path)
    with path.open(newline="") as f:
        rows = [r for r in csv.reader(f) if any(c.strip() for c in r)]
    if not rows:
        raise ValueError(f"{path}: the file holds no rows; expected one row per assessor with "
                         "the rank of each item")
    lines = list(range(1, len(rows) + 1))
    header = None
    if not all(_is_rank_cell(c) for c in rows[0]):
        header, rows, lines = rows[0], rows[1:], lines[1:]
    if not rows:
        raise ValueError(f"{path}: a header but no assessor rows")
    widths = {len(r) for r in rows} | ({len(header)} if header is not None else set())
    if len(widths) != 1:
        k = next(i for i, r in enumerate(rows) if len(r) != len(rows[0]))
        raise ValueError(f"{path}, line {lines[k]}: {len(rows[k])} cells where line "
                         f"{lines[0]} has {len(rows[0])}; every row needs one cell per item")
    labelled = (header is not None and header[0].strip().lower() in _LABEL_HEADERS) or not all(
        _is_rank_cell(r[0]) for r in rows)
    labels = [r[0].strip() for r in rows] if labelled else [str(i + 1) for i in range(len(rows))]
    cells = [r[1:] for r in rows] if labelled else rows
    n = len(cells[0])
    names = ([c.strip() for c in header[1:]] if labelled else [c.strip() for c in header]) \
        if header is not None else [str(i + 1) for i in range(n)]
    if n == 0:
        raise ValueError(f"{path}: no item columns")
    orders = np.array([_rank_row(c, n, path, line, label)
                       for c, line, label in zip(cells, lines, labels, strict=True)])
    return RankingData.from_orders(orders, item_names=names,
                                   kind="soc" if (orders >= 0).all() else "soi")


def _rank_row(cells, n, path, line, label):
    """One row's rank form (0-based, -1 = unranked), or ``ValueError`` naming the row."""
    where = f"{path}, line {line} (assessor {label})"
    ranks = np.full(n, -1, dtype=np.int64)
    for i, cell in enumerate(cells):
        cell = cell.strip()
        if cell.lower() in _MISSING:
            continue
        try:
            value = float(cell)
        except ValueError:
            value = np.nan
        if not (value == int(value) if np.isfinite(value) else False) or not 1 <= value <= n:
            raise ValueError(f"{where}: item {i + 1} has rank {cell!r}; ranks are integers 1..{n} "
                             "(1 = first), empty or NA for an unranked item")
        ranks[i] = int(value) - 1
    given = np.sort(ranks[ranks >= 0])
    if given.size == 0:
        raise ValueError(f"{where}: no item is ranked; drop the row")
    if not np.array_equal(given, np.arange(given.size)):
        raise ValueError(f"{where}: the ranks {(given + 1).tolist()} are not 1..{given.size} each "
                         f"once, as a (top-{given.size}) ranking needs; ties and gaps are not "
                         "rankings: fix the row (or mark unranked items NA)")
    return ranks
