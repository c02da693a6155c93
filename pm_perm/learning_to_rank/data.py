"""Learning-to-rank data: LETOR / SVMlight files with ``qid:``, LightGBM files with ``.query``.

A split (train, validation or test) is a :class:`RankingSplit`: a dense feature matrix, integer
relevance labels and query boundaries ``group_ptr``, the layout
:mod:`pm_perm.learning_to_rank.metrics`
works on. Files are parsed by ``sklearn.datasets.load_svmlight_files`` (several files of one
split are read together, so their feature columns agree); this module adds the checks the
parser does not make and turns its terse errors into messages naming the file, the line and
the fix.

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
    :func:`load_mq2008_fold` rebuilds the LETOR 4.0 five-fold rotation of MQ2008 from the five
    ``Fold*/test.txt`` files (``train.txt`` is not needed; see ``../shared/data/README.md``).
"""

from __future__ import annotations

import os
import reprlib
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
from sklearn.datasets import load_svmlight_files

from pm_perm.learning_to_rank.metrics import MAX_LABEL, label_above_cap

__all__ = [
    "MQ2008_N_FEATURES",
    "LetorFold",
    "RankingSplit",
    "default_data_root",
    "load_mq2008_fold",
    "query_level_norm",
    "read_letor",
    "read_lightgbm",
]

#: Number of features of LETOR 4.0's MQ2007 and MQ2008.
MQ2008_N_FEATURES = 46

_SINGLE_DOC = ("raise", "drop", "keep")
_LETOR_LINE = "'<label> qid:<query id> <feature id>:<value> ... [# comment]'"
_LIBSVM_LINE = "'<label> <feature id>:<value> ... [# comment]'"
_INT64 = np.iinfo(np.int64)


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
        Whether feature ids start at 0 (as in ``sklearn.datasets.load_svmlight_file``).
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
    Parsing is ``sklearn.datasets.load_svmlight_files(..., query_id=True)``; the sparse
    result is densified, so memory is 8 n_docs n_features bytes.
    """
    files = _as_paths(paths)
    _check_single_doc(single_doc)
    blocks = _load(files, n_features, zero_based, query_id=True)
    parts = []
    for path, (X, y, q) in zip(files, blocks, strict=True):
        if q.shape[0] != y.shape[0]:
            raise ValueError(_describe_bad_line(path, zero_based, needs_qid=True))
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
    blocks = _load(files, n_features, zero_based, query_id=False)
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


def default_data_root() -> Path:
    """``../shared/data`` next to the repository this module sits in (may not exist)."""
    return Path(__file__).resolve().parents[2].parent / "shared" / "data"


def load_mq2008_fold(fold, data_root=None, *, single_doc="raise", query_norm=False):
    """Train, validation and test splits of MQ2008 fold ``fold``, rebuilt from its test files.

    LETOR 4.0's five folds rotate five disjoint query subsets; ``Fold{k}/test.txt`` is one of
    them and ``vali(Fold k) == test(Fold k-1)`` (cyclically). Hence ``train(Fold k)`` is the
    concatenation of ``test(Fold k+1)``, ``test(Fold k+2)`` and ``test(Fold k+3)`` (indices mod
    5), the order of LETOR's rotation (Fold 1 trains on subsets S1 S2 S3, validates on S4 and
    tests on S5). The validation file is checked against ``test(Fold k-1)``.

    Parameters
    ----------
    fold : int
        1 to 5.
    data_root : str or path-like, optional
        The shared data folder holding ``MQ2008_LETOR4/MQ2008/Fold1..5`` (or that ``MQ2008``
        folder itself). Default: :func:`default_data_root`, ``../shared/data`` next to the
        repository.
    single_doc, query_norm
        As in :func:`read_letor` (MQ2008 has no single-document query).

    Returns
    -------
    LetorFold
        ``(train, valid, test)``; the five subsets hold 784 queries and 15,211 documents with
        46 features and labels 0, 1, 2.

    Raises
    ------
    FileNotFoundError
        The data folder or a fold file is missing.
    ValueError
        A bad ``fold``, or a folder that does not follow the LETOR rotation.

    References
    ----------
    Qin, T. & Liu, T.-Y. (2013). Introducing LETOR 4.0 Datasets. arXiv:1306.2597.
    """
    if isinstance(fold, bool) or not isinstance(fold, int | np.integer) or not 1 <= fold <= 5:
        raise ValueError(f"fold must be an integer from 1 to 5, got {fold!r}")
    base = _mq2008_folder(data_root)

    def test_file(k):
        return base / f"Fold{(k - 1) % 5 + 1}" / "test.txt"

    opts = {"n_features": MQ2008_N_FEATURES, "single_doc": single_doc, "query_norm": query_norm}
    train = read_letor([test_file(fold + i) for i in (1, 2, 3)], **opts)
    valid = read_letor(base / f"Fold{fold}" / "vali.txt", **opts)
    test = read_letor(test_file(fold), **opts)
    previous = read_letor(test_file(fold - 1), **opts)
    if not (
        np.array_equal(valid.qids, previous.qids)
        and np.array_equal(valid.group_ptr, previous.group_ptr)
        and np.array_equal(valid.y, previous.y)
        and np.array_equal(valid.X, previous.X)
    ):
        raise ValueError(
            f"{base / f'Fold{fold}' / 'vali.txt'} differs from {test_file(fold - 1)}: the folder "
            "does not follow the LETOR 4.0 rotation, so the training split cannot be rebuilt"
        )
    seen = np.concatenate([train.qids, valid.qids, test.qids])
    if np.unique(seen).size != seen.size:
        raise ValueError(f"the five test files under {base} share queries; they must be disjoint")
    return LetorFold(train, valid, test)


# ------------------------------------------------------------------------------ helpers


def _mq2008_folder(data_root):
    root = Path(data_root) if data_root is not None else default_data_root()
    for base in (root / "MQ2008_LETOR4" / "MQ2008", root / "MQ2008", root):
        if all((base / f"Fold{k}" / "test.txt").is_file() for k in range(1, 6)):
            return base
    raise FileNotFoundError(
        f"MQ2008 not found under {root}: expected MQ2008_LETOR4/MQ2008/Fold1..5/test.txt "
        "(pass data_root= the folder that holds MQ2008_LETOR4)"
    )


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


#: Largest magnitude of a feature value: products and squares (standardisation) stay finite.
MAX_FEATURE_ABS = 1e100


def _check_extremes(f, X, y):
    """Reject legal-looking but unusable values with the file and line: relevance grades above
    ``MAX_LABEL``, features beyond ``MAX_FEATURE_ABS``, and feature ids so large that the dense
    feature matrix would exceed the memory budget (``PM_PERM_MEMORY_BUDGET``, default 2 GiB)."""
    from pm_perm._memory import format_bytes, memory_budget

    if y.size and y.max() > MAX_LABEL:
        line = _line_number(f, int(np.argmax(y)))
        raise ValueError(f"{f}:{line}: " + label_above_cap(f"{y.max():g}"))
    if X.nnz:
        big = np.abs(X.data) > MAX_FEATURE_ABS
        if big.any():
            row = int(np.searchsorted(X.indptr, np.flatnonzero(big)[0], side="right") - 1)
            raise ValueError(
                f"{f}:{_line_number(f, row)}: a feature value of magnitude "
                f"{np.abs(X.data[big]).max():.3g} is above {MAX_FEATURE_ABS:g}; rescale that "
                "feature (e.g. log-transform it)"
            )
    need = 8 * X.shape[0] * X.shape[1]
    if need > memory_budget():
        col = X.indices.max() if X.nnz else 0
        row = int(np.searchsorted(X.indptr, int(np.argmax(X.indices)), side="right") - 1)
        raise ValueError(
            f"{f}:{_line_number(f, row)}: feature id {col + 1} makes the dense feature matrix "
            f"{X.shape[0]} x {X.shape[1]} ({format_bytes(need)}) exceed the memory budget "
            f"({format_bytes(memory_budget())}, PM_PERM_MEMORY_BUDGET); renumber the "
            "features densely (1..n_features)"
        )


def _line_number(path, row):
    """1-based line of ``path`` holding data row ``row`` (blank and comment lines skipped)."""
    seen = -1
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            if raw.split(b"#", 1)[0].strip():
                seen += 1
                if seen == row:
                    return lineno
    return "?"


def check_data_file(f, what="data file"):
    """Raise a clear error unless ``f`` is a readable regular file (directory, missing, other)."""
    f = Path(f)
    if f.is_dir():
        raise IsADirectoryError(f"{what} {f} is a directory, not a file: pass the file(s) "
                                "inside it (e.g. its train.txt)")
    if not f.exists():
        raise FileNotFoundError(f"{what} not found: {f}")
    if not f.is_file():
        raise ValueError(f"{what} {f} is not a regular file")


def _load(files, n_features, zero_based, query_id):
    """Parse all files of a split together; per file ``(X dense, y int64[, qid])``."""
    if n_features is not None and (
        isinstance(n_features, bool) or not isinstance(n_features, int | np.integer)
        or n_features < 1
    ):
        raise ValueError(
            f"n_features must be a positive integer (the number of feature columns, e.g. "
            f"train.n_features) or None, got {n_features!r}"
        )
    for f in files:
        check_data_file(f)
    try:
        flat = load_svmlight_files(
            [str(f) for f in files],
            n_features=n_features,
            dtype=np.float64,
            zero_based=zero_based,
            query_id=query_id,
        )
    except (ValueError, OverflowError) as err:
        for f in files:
            bad = _first_bad_line(f, zero_based, needs_qid=query_id, n_features=n_features)
            if bad is not None:
                raise ValueError(bad) from err
        raise ValueError(f"could not read {', '.join(map(str, files))}: {err}") from err
    width = 3 if query_id else 2
    blocks = []
    for i, f in enumerate(files):
        X, y, *rest = flat[width * i : width * (i + 1)]
        if y.shape[0] == 0:
            raise ValueError(f"{f} holds no data line")
        _check_extremes(f, X, y)
        X = X.toarray()
        if not (np.all(np.isfinite(X)) and np.all(y >= 0) and np.all(y == np.floor(y))):
            bad = _first_bad_line(f, zero_based, needs_qid=query_id)
            raise ValueError(bad or f"{f}: NaN/infinite features or non-integer labels")
        blocks.append((X, y.astype(np.int64), *rest))
    return blocks


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


def _first_bad_line(path, zero_based, *, needs_qid, n_features=None):
    """Message for the first line of ``path`` that is not a valid data line, or None.

    Only called after the parser failed (or lines lack ``qid:``), to point at the culprit.
    """
    expected = _LETOR_LINE if needs_qid else _LIBSVM_LINE
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            tokens = raw.split(b"#", 1)[0].split()
            if not tokens:
                continue
            reason = _line_problem(tokens, needs_qid, n_features, zero_based)
            if reason is not None:
                shown = raw.decode("utf-8", "replace").rstrip()
                if len(shown) > 80:
                    shown = shown[:77] + "..."
                return f"{path}:{lineno}: {reason}; expected {expected}. The line reads: {shown!r}"
    return None


def _line_problem(tokens, needs_qid, n_features, zero_based):
    label = tokens[0].decode(errors="replace")
    try:
        grade = float(label)
    except ValueError:
        return f"the label {label!r} is not a number"
    if not (np.isfinite(grade) and grade >= 0 and grade == int(grade)):
        return f"the label {label!r} is not a non-negative integer relevance grade"
    rest = tokens[1:]
    if rest and rest[0].startswith(b"qid:"):
        try:
            qid = int(rest[0][4:])
        except ValueError:
            return f"{rest[0].decode(errors='replace')!r} is not qid:<integer>"
        if not _INT64.min <= qid <= _INT64.max:
            return f"the query id {qid} is outside the int64 range {_INT64.min}..{_INT64.max}"
        rest = rest[1:]
    elif needs_qid:
        return (
            "the line has no qid: field (LETOR files need one on every line; for LightGBM-style "
            "files with a .query group file use read_lightgbm)"
        )
    previous = -1
    for tok in rest:
        text = tok.decode(errors="replace")
        key, sep, value = tok.partition(b":")
        if not sep:
            return f"{text!r} is not <feature id>:<value>"
        try:
            fid = int(key)
        except ValueError:
            return f"the feature id in {text!r} is not an integer"
        try:
            finite = np.isfinite(float(value))
        except ValueError:
            return f"the value in {text!r} is not a number"
        if not finite:
            return f"the value in {text!r} is not finite"
        if fid > _INT64.max:
            return f"feature id {fid} is too large (at most {_INT64.max})"
        if fid < 0 or (fid == 0 and zero_based is False):
            hint = " (pass zero_based=True for files with feature 0)" if fid == 0 else ""
            return f"feature id {fid} is not allowed{hint}"
        if fid <= previous:
            return "feature ids must be strictly increasing within a line"
        offset = 1 if zero_based is False else 0
        if n_features is not None and zero_based != "auto" and fid - offset >= n_features:
            return f"feature id {fid} exceeds n_features = {n_features}"
        previous = fid
    return None


def _describe_bad_line(path, zero_based, *, needs_qid):
    bad = _first_bad_line(path, zero_based, needs_qid=needs_qid)
    return bad if bad is not None else f"{path}: some lines have no qid: field"
