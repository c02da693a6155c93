"""SVMlight / LibSVM text parser: ``<label> [qid:<int>] <id>:<value> ... [# comment]`` lines.

The low layer of :func:`pm_perm.learning_to_rank.data.read_letor` and
:func:`~pm_perm.learning_to_rank.data.read_lightgbm`: :func:`read_svmlight_files` parses the
files of one split together (so their feature columns agree) into dense arrays, with NumPy
only. A line it cannot use is reported with its file, its line number, the reason and the
expected layout.

Feature ids are one-based by default (feature ``j`` is column ``j - 1``); ``zero_based=True``
reads them as column numbers, ``zero_based="auto"`` reads one-based unless a file uses
feature 0 (the conventions of ``sklearn.datasets.load_svmlight_files``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pm_perm._text import check_text_file
from pm_perm.learning_to_rank.metrics import MAX_LABEL, label_above_cap

__all__ = ["MAX_FEATURE_ABS", "check_data_file", "read_svmlight_files"]

#: Largest magnitude of a feature value: products and squares (standardisation) stay finite.
MAX_FEATURE_ABS = 1e100

_LETOR_LINE = "'<label> qid:<query id> <feature id>:<value> ... [# comment]'"
_LIBSVM_LINE = "'<label> <feature id>:<value> ... [# comment]'"
_INT64 = np.iinfo(np.int64)


class _Unreadable(Exception):
    """A line the fast parser cannot use; the message comes from :func:`_first_bad_line`."""


def check_data_file(f, what="data file"):
    """Raise a clear error unless ``f`` is a readable regular file (directory, missing, other).

    Raises
    ------
    IsADirectoryError, FileNotFoundError, ValueError
        ``f`` is a folder, does not exist, or is not a regular file.
    """
    f = Path(f)
    if f.is_dir():
        raise IsADirectoryError(f"{what} {f} is a directory, not a file: pass the file(s) "
                                "inside it (e.g. its train.txt)")
    if not f.exists():
        raise FileNotFoundError(f"{what} not found: {f}")
    if not f.is_file():
        raise ValueError(f"{what} {f} is not a regular file")


def read_svmlight_files(files, *, n_features=None, zero_based=False, query_id=False):
    """Parse the files of one split together into dense arrays.

    Parameters
    ----------
    files : sequence of path-like
        The files, read in order.
    n_features : int, optional
        Number of feature columns; by default the largest feature column over all files + 1.
    zero_based : bool or "auto", default False
        Whether feature ids start at 0 (see the module docstring).
    query_id : bool, default False
        Require a ``qid:`` on every line and return the query ids (without it a ``qid:`` field
        is accepted and ignored).

    Returns
    -------
    list of tuple
        Per file ``(X, y)`` or, with ``query_id``, ``(X, y, qid)``: ``X`` float64
        (n_lines, n_features), ``y`` int64 relevance labels, ``qid`` int64.

    Raises
    ------
    ValueError
        A malformed line (file and line number in the message), labels that are not
        non-negative integers or are above ``MAX_LABEL``, NaN, infinite or huge
        (``> MAX_FEATURE_ABS``) features, a feature id beyond ``n_features``, a file without
        data line, or a dense matrix beyond the memory budget (``PM_PERM_MEMORY_BUDGET``); a
        NUL byte (not a text file) or a file larger than the memory budget, found before the
        file is loaded (:func:`pm_perm._text.check_text_file`: file, line and byte offset).
    FileNotFoundError, IsADirectoryError
        A file is missing or is a folder.

    Notes
    -----
    One pass over each file in Python (a split per line), the numbers converted by NumPy in
    bulk: about a second for MQ2008's 15,211 lines of 46 features. Memory is 8 n_lines
    n_features bytes for ``X``, plus the parsed tokens while a file is read.
    """
    if n_features is not None and (
        isinstance(n_features, bool) or not isinstance(n_features, int | np.integer)
        or n_features < 1
    ):
        raise ValueError(
            f"n_features must be a positive integer (the number of feature columns, e.g. "
            f"train.n_features) or None, got {n_features!r}"
        )
    files = [Path(f) for f in files]
    for f in files:
        check_data_file(f)
        check_text_file(f, what="LETOR/svmlight", utf8=False,
                        hint="LETOR/svmlight files are text lines "
                             "'<label> qid:<q> <id>:<value> ...'")
    parsed = [_parse_file(f, zero_based, query_id) for f in files]
    one_based = zero_based is False or (
        zero_based == "auto" and all(p[3].size and p[3].min() > 0 for p in parsed))
    cols = [p[3] - 1 if one_based else p[3] for p in parsed]
    widest = max((int(c.max()) for c in cols if c.size), default=0) + 1
    if n_features is None:
        n_features = widest
    elif widest > n_features:
        for f in files:
            bad = _first_bad_line(f, zero_based, needs_qid=query_id, n_features=n_features)
            if bad is not None:
                raise ValueError(bad)
        raise ValueError(f"could not read {', '.join(map(str, files))}: n_features is "
                         f"{n_features} but the files hold {widest} features")
    blocks = []
    for f, (y, qid, rows, _, values), col in zip(files, parsed, cols, strict=True):
        if y.shape[0] == 0:
            raise ValueError(f"{f} holds no data line")
        _check_extremes(f, y, rows, col, values, (y.shape[0], n_features))
        X = np.zeros((y.shape[0], n_features))
        X[rows, col] = values
        if not (np.all(np.isfinite(X)) and np.all(y >= 0) and np.all(y == np.floor(y))):
            bad = _first_bad_line(f, zero_based, needs_qid=query_id)
            raise ValueError(bad or f"{f}: NaN/infinite features or non-integer labels")
        blocks.append((X, y.astype(np.int64), qid) if query_id else (X, y.astype(np.int64)))
    return blocks


# ------------------------------------------------------------------------------ helpers


def _parse_file(path, zero_based, needs_qid):
    """``(labels float64, qids int64 or None, rows, feature ids int64, values)`` of one file."""
    try:
        return _parse_tokens(path, zero_based, needs_qid)
    except (_Unreadable, ValueError, OverflowError) as err:
        bad = _first_bad_line(path, zero_based, needs_qid=needs_qid)
        raise ValueError(bad or f"could not read {path}: {err}") from None


def _parse_tokens(path, zero_based, needs_qid):
    labels, qids, lengths, feats = [], [], [], []
    with open(path, "rb") as fh:
        text = fh.read()
    for raw in text.split(b"\n"):
        tokens = raw.split(b"#", 1)[0].split()
        if not tokens:
            continue
        labels.append(tokens[0])
        rest = tokens[1:]
        if rest and rest[0].startswith(b"qid:"):
            qids.append(rest[0][4:])
            rest = rest[1:]
        elif needs_qid:
            raise _Unreadable("a line has no qid: field")
        lengths.append(len(rest))
        feats.extend(rest)
    joined = b" ".join(feats)
    chars = np.frombuffer(joined, dtype=np.uint8)
    token_of_colon = np.searchsorted(np.flatnonzero(chars == ord(" ")),
                                     np.flatnonzero(chars == ord(":")))
    if not np.array_equal(token_of_colon, np.arange(len(feats))):  # one colon per token
        raise _Unreadable("a feature is not <id>:<value>")
    pairs = joined.replace(b":", b" ").split()
    if len(pairs) != 2 * len(feats):
        raise _Unreadable("a feature id or value is empty")
    ids = np.array(pairs[0::2], dtype=bytes).astype(np.int64)
    values = np.array(pairs[1::2], dtype=bytes).astype(np.float64)
    y = np.array(labels, dtype=bytes).astype(np.float64)
    qid = np.array(qids, dtype=bytes).astype(np.int64)
    rows = np.repeat(np.arange(len(lengths)), lengths)
    if np.any(ids < (1 if zero_based is False else 0)):
        raise _Unreadable("a feature id is out of range")
    if np.any((np.diff(ids) <= 0) & (rows[1:] == rows[:-1])):
        raise _Unreadable("feature ids are not strictly increasing")
    return y, qid if needs_qid else None, rows, ids, values


def _check_extremes(f, y, rows, cols, values, shape):
    """Reject legal-looking but unusable values with the file and line: relevance grades above
    ``MAX_LABEL``, features beyond ``MAX_FEATURE_ABS``, and feature ids so large that the dense
    feature matrix would exceed the memory budget (``PM_PERM_MEMORY_BUDGET``, default 2 GiB)."""
    from pm_perm._memory import format_bytes, memory_budget

    if y.size and y.max() > MAX_LABEL:
        line = _line_number(f, int(np.argmax(y)))
        raise ValueError(f"{f}:{line}: " + label_above_cap(f"{y.max():g}"))
    big = np.abs(values) > MAX_FEATURE_ABS
    if big.any():
        row = int(rows[np.flatnonzero(big)[0]])
        raise ValueError(
            f"{f}:{_line_number(f, row)}: a feature value of magnitude "
            f"{np.abs(values[big]).max():.3g} is above {MAX_FEATURE_ABS:g}; rescale that "
            "feature (e.g. log-transform it)"
        )
    need = 8 * shape[0] * shape[1]
    if need > memory_budget():
        col = int(cols.max()) if cols.size else 0
        row = int(rows[np.argmax(cols)]) if cols.size else 0
        raise ValueError(
            f"{f}:{_line_number(f, row)}: feature id {col + 1} makes the dense feature matrix "
            f"{shape[0]} x {shape[1]} ({format_bytes(need)}) exceed the memory budget "
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
