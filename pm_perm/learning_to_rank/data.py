"""Learning-to-rank data: LETOR / SVMlight files with ``qid:``, LightGBM files with ``.query``.

A split (train, validation or test) is a :class:`RankingSplit`: a dense feature matrix, integer
relevance labels and query boundaries ``group_ptr``, the layout
:mod:`pm_perm.learning_to_rank.metrics` works on. Lines are parsed by
:func:`pm_perm.learning_to_rank.svmlight.read_svmlight_files` (several files of one split are
read together, so their feature columns agree); this module checks the queries and builds the
splits. Errors name the file, the line and the fix.

Formats
    LETOR (:func:`read_letor`): ``<label> qid:<int> <id>:<value> ... [# comment]`` with the
    documents of a query on consecutive lines (Qin & Liu 2013, "Introducing LETOR 4.0
    Datasets", arXiv:1306.2597). LightGBM (:func:`read_lightgbm`): the same lines without
    ``qid:``, and a ``<data file>.query`` file holding the number of documents of each query,
    one per line, in file order.
Feature ids
    One-based by default (feature ``j`` is column ``j - 1``), the SVMlight/LETOR convention;
    ``zero_based=True`` for files that use feature 0. Read a test split with
    ``n_features=train.n_features`` so its columns line up with the training split's.
MQ2008 folds
    :func:`pm_perm.datasets.mq2008.load_mq2008_fold` reads them with :func:`read_letor`.
"""

from __future__ import annotations

import os
import reprlib
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from pm_perm.learning_to_rank.metrics import MAX_LABEL, label_above_cap
from pm_perm.learning_to_rank.svmlight import check_data_file, read_svmlight_files

__all__ = [
    "LetorFold",
    "RankingSplit",
    "query_level_norm",
    "read_letor",
    "read_lightgbm",
]

_SINGLE_DOC = ("raise", "drop", "keep")


@dataclass(frozen=True, eq=False)
class RankingSplit:
    """Documents of several queries: features, relevance labels and query boundaries.

    Query ``q`` (identifier ``qids[q]``) owns rows ``group_ptr[q]:group_ptr[q + 1]`` of ``X``
    and ``y``, in file order.

    Parameters
    ----------
    X : ndarray of float64, shape (n_docs, n_features)
        Dense, finite features.
    y : ndarray of int64, shape (n_docs,)
        Relevance labels, integers from 0 to ``MAX_LABEL`` (100).
    group_ptr : ndarray of int64, shape (n_queries + 1,)
        Strictly increasing query boundaries from 0 to ``n_docs``.
    qids : ndarray of int64, shape (n_queries,)
        Distinct query identifiers (``qid:`` of LETOR files; ``0, 1, ...`` in file order for
        LightGBM files).
    n_dropped_queries : int, default 0
        Queries the reader dropped (single-document queries with ``single_doc="drop"``).

    Raises
    ------
    ValueError
        Arrays of the wrong shape or type, NaN or infinite features, labels outside
        ``0..MAX_LABEL``, bad ``group_ptr``, repeated ``qids`` or a negative
        ``n_dropped_queries``.
    """

    X: np.ndarray
    y: np.ndarray
    group_ptr: np.ndarray
    qids: np.ndarray
    n_dropped_queries: int = 0

    def __post_init__(self):
        X = np.ascontiguousarray(self.X, dtype=np.float64)
        y = np.asarray(self.y)
        ptr = np.asarray(self.group_ptr)
        qids = np.asarray(self.qids)
        if X.ndim != 2:
            raise ValueError(f"X must be a 2-D (n_docs, n_features) array, got shape {X.shape}")
        if not np.all(np.isfinite(X)):
            row = int(np.flatnonzero(~np.all(np.isfinite(X), axis=1))[0])
            raise ValueError(f"X has NaN or infinite features (first in row {row})")
        if y.shape != (X.shape[0],) or y.dtype.kind not in "iu" or np.any(y < 0):
            raise ValueError(
                f"y must be {X.shape[0]} non-negative integer labels, one per row of X; "
                f"got shape {y.shape}, dtype {y.dtype}"
            )
        if y.size and y.max() > MAX_LABEL:
            raise ValueError("y: " + label_above_cap(y.max(), f" (row {int(np.argmax(y))})"))
        n_dropped = self.n_dropped_queries
        if isinstance(n_dropped, bool) or not isinstance(n_dropped, int | np.integer) or (
            n_dropped < 0
        ):
            raise ValueError(
                f"n_dropped_queries must be a non-negative integer (queries the reader dropped), "
                f"got {n_dropped!r}"
            )
        if (
            ptr.ndim != 1
            or ptr.size < 2
            or ptr.dtype.kind not in "iu"
            or ptr[0] != 0
            or ptr[-1] != X.shape[0]
            or np.any(np.diff(ptr) <= 0)
        ):
            raise ValueError(
                "group_ptr must be strictly increasing integers from 0 to n_docs = "
                f"{X.shape[0]} with at least one query"
            )
        if qids.shape != (ptr.size - 1,) or qids.dtype.kind not in "iu":
            raise ValueError(f"qids must be {ptr.size - 1} integers, one per query")
        if np.unique(qids).size != qids.size:
            raise ValueError("qids must be distinct: each query appears once in a split")
        object.__setattr__(self, "X", X)
        object.__setattr__(self, "y", y.astype(np.int64))
        object.__setattr__(self, "group_ptr", ptr.astype(np.int64))
        object.__setattr__(self, "qids", qids.astype(np.int64))
        object.__setattr__(self, "n_dropped_queries", int(n_dropped))

    @property
    def n_docs(self) -> int:
        """Number of documents (rows)."""
        return self.X.shape[0]

    @property
    def n_features(self) -> int:
        """Number of feature columns."""
        return self.X.shape[1]

    @property
    def n_queries(self) -> int:
        """Number of queries."""
        return self.qids.size

    @property
    def group_sizes(self) -> np.ndarray:
        """Number of documents of each query, shape (n_queries,)."""
        return np.diff(self.group_ptr)

    @property
    def query_index(self) -> np.ndarray:
        """Query position (0..n_queries-1) of each document, shape (n_docs,)."""
        return np.repeat(np.arange(self.n_queries), self.group_sizes)

    def take_queries(self, indices) -> RankingSplit:
        """The split restricted to the queries at positions ``indices``, in that order.

        Parameters
        ----------
        indices : array_like of int
            Distinct query positions in ``0..n_queries-1`` (not qids).

        Returns
        -------
        RankingSplit

        Raises
        ------
        ValueError
            ``indices`` empty, not integers, or out of range.
        """
        idx = np.asarray(indices).reshape(-1)
        if (
            idx.size == 0
            or idx.dtype.kind not in "iu"
            or np.any((idx < 0) | (idx >= self.n_queries))
        ):
            raise ValueError(
                f"indices must be a non-empty list of integer query positions in "
                f"0..{self.n_queries - 1}, got {reprlib.repr(indices)}"
            )
        idx = idx.astype(np.int64)
        sizes = self.group_sizes[idx]
        rows = np.concatenate([np.arange(self.group_ptr[q], self.group_ptr[q + 1]) for q in idx])
        return RankingSplit(
            X=self.X[rows],
            y=self.y[rows],
            group_ptr=np.concatenate([[0], np.cumsum(sizes)]),
            qids=self.qids[idx],
            n_dropped_queries=self.n_dropped_queries,
        )

    def concat(self, other) -> RankingSplit:
        """The queries of this split followed by those of ``other`` (same features), as one
        split; e.g. training and validation queries refitted together. Cost O(n_docs)."""
        if other.n_features != self.n_features:
            raise ValueError(f"cannot join splits with {self.n_features} and "
                             f"{other.n_features} features")
        return RankingSplit(
            X=np.vstack([self.X, other.X]),
            y=np.concatenate([self.y, other.y]),
            group_ptr=np.concatenate([self.group_ptr, other.group_ptr[1:] + self.group_ptr[-1]]),
            qids=np.concatenate([self.qids, other.qids]),
        )


class LetorFold(NamedTuple):
    """Train, validation and test splits of one LETOR fold."""

    train: RankingSplit
    valid: RankingSplit
    test: RankingSplit


def query_level_norm(X, group_ptr):
    """Min-max scale every feature within every query (LETOR's ``QueryLevelNorm``).

    ``x -> (x - min_q) / (max_q - min_q)`` with the minimum and maximum over the documents of
    the query; a feature that is constant within a query becomes 0 there. O(n_docs n_features).

    Parameters
    ----------
    X : array_like of float, shape (n_docs, n_features)
    group_ptr : array_like of int, shape (n_queries + 1,)
        Query boundaries, as :attr:`RankingSplit.group_ptr`.

    Returns
    -------
    ndarray of float64, shape (n_docs, n_features)
        Values in [0, 1].

    Examples
    --------
    >>> from pm_perm.learning_to_rank.data import query_level_norm
    >>> query_level_norm([[1.0, 5.0], [3.0, 5.0], [2.0, 7.0]], [0, 2, 3])
    array([[0., 0.],
           [1., 0.],
           [0., 0.]])
    """
    X = np.asarray(X, dtype=np.float64)
    ptr = np.asarray(group_ptr, dtype=np.int64)
    if X.ndim != 2 or ptr.ndim != 1 or ptr.size < 2 or ptr[0] != 0 or ptr[-1] != X.shape[0]:
        raise ValueError(
            "query_level_norm needs X of shape (n_docs, n_features) and group_ptr running "
            f"from 0 to n_docs; got X {X.shape} and group_ptr {ptr[:1]}...{ptr[-1:]}"
        )
    if np.any(np.diff(ptr) <= 0):
        raise ValueError("group_ptr must be strictly increasing: every query needs a document")
    sizes = np.diff(ptr)
    low = np.repeat(np.minimum.reduceat(X, ptr[:-1], axis=0), sizes, axis=0)
    span = np.repeat(np.maximum.reduceat(X, ptr[:-1], axis=0), sizes, axis=0) - low
    return np.divide(X - low, span, out=np.zeros_like(X), where=span > 0)


def read_letor(paths, *, n_features=None, zero_based=False, single_doc="raise", query_norm=False):
    """Read one split from LETOR / SVMlight files with ``qid:`` on every line.

    Parameters
    ----------
    paths : str or path-like, or a sequence of them
        Files forming the split, concatenated in the given order (MQ2008's training split is
        three files). A query may not appear in two files.
    n_features : int, optional
        Number of feature columns; by default the largest feature id in the files. Pass the
        training split's ``n_features`` when reading a validation or test split.
    zero_based : bool or "auto", default False
        Whether feature ids start at 0; ``"auto"``: one-based unless a file uses feature 0.
    single_doc : {"raise", "drop", "keep"}, default "raise"
        What to do with queries that have a single document (they carry no ranking
        information): raise a ``ValueError`` giving their number, drop them (counted in
        ``n_dropped_queries``), or keep them (e.g. to evaluate on every query of a test file).
    query_norm : bool, default False
        Apply :func:`query_level_norm` to the features (after dropping queries). LETOR 4.0's
        MQ2007/MQ2008 files are already normalised this way.

    Returns
    -------
    RankingSplit

    Raises
    ------
    ValueError
        A malformed line (file and line number in the message), a line without ``qid:``, a
        query whose documents are not on consecutive lines or that appears in two files,
        labels that are not non-negative integers, NaN or infinite features, an empty file,
        or single-document queries under ``single_doc="raise"``.
    FileNotFoundError
        A file does not exist.

    Notes
    -----
    Parsing is :func:`~pm_perm.learning_to_rank.svmlight.read_svmlight_files`; memory is 8
    n_docs n_features bytes.
    """
    files = _as_paths(paths)
    _check_single_doc(single_doc)
    blocks = read_svmlight_files(files, n_features=n_features, zero_based=zero_based,
                                 query_id=True)
    parts = []
    for path, (X, y, q) in zip(files, blocks, strict=True):
        ptr, qids = _groups_from_qids(q, path)
        parts.append((X, y, ptr, qids, path))
    return _finish(parts, single_doc, query_norm)


def read_lightgbm(
    paths,
    *,
    group_paths=None,
    n_features=None,
    zero_based=False,
    single_doc="raise",
    query_norm=False,
):
    """Read one split from LightGBM-style LibSVM files with ``.query`` group-size files.

    Parameters
    ----------
    paths : str or path-like, or a sequence of them
        Data files (``<label> <feature id>:<value> ...``), concatenated in order.
    group_paths : str or path-like, or a sequence of them, optional
        One group file per data file: the number of documents of each query, one positive
        integer per line, in file order. Default: ``<data file>.query``, as LightGBM does.
    n_features, zero_based, single_doc, query_norm
        As in :func:`read_letor`.

    Returns
    -------
    RankingSplit
        ``qids`` are ``0, 1, ...`` in file order over the whole split (the files have none).

    Raises
    ------
    ValueError
        A missing or malformed group file, group sizes that do not add up to the number of
        data lines, and every error of :func:`read_letor` that applies.
    """
    files = _as_paths(paths)
    _check_single_doc(single_doc)
    if group_paths is None:
        groups = [Path(f"{f}.query") for f in files]
    else:
        groups = _as_paths(group_paths)
        if len(groups) != len(files):
            raise ValueError(
                f"group_paths must give one group file per data file: got {len(groups)} "
                f"group files for {len(files)} data files"
            )
    blocks = read_svmlight_files(files, n_features=n_features, zero_based=zero_based)
    parts = []
    for path, gpath, (X, y) in zip(files, groups, blocks, strict=True):
        sizes = _read_group_sizes(gpath, path, y.shape[0])
        if sizes.sum() != y.shape[0]:
            raise ValueError(
                f"group sizes in {gpath} add up to {sizes.sum()} documents but {path} has "
                f"{y.shape[0]} lines; the group file must list the number of documents of each "
                "query, in file order"
            )
        parts.append((X, y, np.concatenate([[0], np.cumsum(sizes)]), None, path))
    return _finish(parts, single_doc, query_norm)


# ------------------------------------------------------------------------------ helpers


def _as_paths(paths):
    if isinstance(paths, str | os.PathLike):
        return [Path(paths)]
    files = [Path(p) for p in paths]
    if not files:
        raise ValueError("no file given: pass a path or a non-empty list of paths")
    return files


def _check_single_doc(single_doc):
    if single_doc not in _SINGLE_DOC:
        raise ValueError(f"single_doc must be one of {_SINGLE_DOC}, got {single_doc!r}")


def _groups_from_qids(q, path):
    """Query boundaries of one file; the documents of a query must be consecutive."""
    starts = np.concatenate([[0], np.flatnonzero(q[1:] != q[:-1]) + 1])
    qids = q[starts].astype(np.int64)
    uniq, counts = np.unique(qids, return_counts=True)
    if np.any(counts > 1):
        dup = uniq[counts > 1][0]
        rows = starts[qids == dup][:2]
        raise ValueError(
            f"{path}: query qid:{dup} is split into separate blocks (documents {rows[0]} and "
            f"{rows[1]}, 0-based); the documents of a query must be on consecutive lines"
        )
    return np.concatenate([starts, [q.shape[0]]]).astype(np.int64), qids


def _read_group_sizes(gpath, data_path, n_docs):
    if gpath.is_dir():
        check_data_file(gpath, "group file")
    if not gpath.is_file():
        raise ValueError(
            f"group file {gpath} not found: LightGBM-style data {data_path} needs the number of "
            "documents of each query, one per line, in '<data file>.query' (or pass group_paths=)"
        )
    sizes, total = [], 0
    with open(gpath, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            text = line.strip()
            if not text:
                continue
            try:
                size = int(text)
            except ValueError:
                size = 0
            if size <= 0:
                raise ValueError(
                    f"{gpath}:{lineno}: group sizes must be positive integers, one per line; "
                    f"got {text!r}"
                )
            total += size
            if total > n_docs:
                raise ValueError(
                    f"{gpath}:{lineno}: group sizes up to this line add up to "
                    f"{total} documents but {data_path} has {n_docs} lines; the "
                    "group file must list the number of documents of each query, in file order"
                )
            sizes.append(size)
    if not sizes:
        raise ValueError(f"group file {gpath} is empty")
    return np.array(sizes, dtype=np.int64)


def _finish(parts, single_doc, query_norm):
    """Concatenate per-file parts, assign qids, handle single-document queries, normalise."""
    X = np.concatenate([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts])
    sizes = np.concatenate([np.diff(p[2]) for p in parts])
    if all(p[3] is not None for p in parts):
        qids = np.concatenate([p[3] for p in parts])
        uniq, counts = np.unique(qids, return_counts=True)
        if np.any(counts > 1):
            dup = uniq[counts > 1][0]
            where = [str(p[4]) for p in parts if np.any(p[3] == dup)]
            raise ValueError(
                f"query qid:{dup} appears in more than one file ({', '.join(where)}); the files "
                "of a split must hold disjoint queries"
            )
    else:
        qids = np.arange(sizes.size, dtype=np.int64)
    single = sizes == 1
    n_dropped = 0
    if np.any(single):
        if single_doc == "raise":
            examples = ", ".join(str(q) for q in qids[single][:5])
            raise ValueError(
                f"{int(single.sum())} of {sizes.size} queries have a single document (qids "
                f"{examples}{', ...' if single.sum() > 5 else ''}); they carry no ranking "
                "information: pass single_doc='drop' to drop them (they are counted in "
                "n_dropped_queries) or single_doc='keep' to keep them"
            )
        if single_doc == "drop":
            if np.all(single):
                raise ValueError("every query has a single document; nothing is left to rank")
            keep_rows = np.repeat(~single, sizes)
            X, y, qids, sizes = X[keep_rows], y[keep_rows], qids[~single], sizes[~single]
            n_dropped = int(single.sum())
    ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    if query_norm:
        X = query_level_norm(X, ptr)
    return RankingSplit(X=X, y=y, group_ptr=ptr, qids=qids, n_dropped_queries=n_dropped)
