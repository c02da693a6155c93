"""PrefLib files (.soc, .soi, .toc, .toi): the reader and the writer of :class:`RankingData`.

Both PrefLib layouts are read:

* current: ``# NUMBER ALTERNATIVES: n``, ``# ALTERNATIVE NAME i: name`` header lines (ids
  1-based), optional ``# NUMBER VOTERS`` / ``# NUMBER UNIQUE ORDERS`` (checked when present),
  then ``count: a,b,{c,d},e``;
* old (PrefLib before 2022; the APA files): ``n`` on line 1, ``n`` lines ``id,name`` (the ids as
  declared there, 0- or 1-based), a line ``voters,sum of counts,distinct orders``, then
  ``count,a,b,{c,d},e``.

``write_preflib`` writes the current layout.
"""

from __future__ import annotations

import codecs
import io
import os
import re
import tempfile
from itertools import islice
from pathlib import Path

import numpy as np

from pm_perm._memory import format_bytes, memory_budget
from pm_perm._text import check_text_file
from pm_perm.preferences.data import KINDS, RankingData, fill_rank_row, kind_problem

__all__ = ["read_preflib", "write_preflib"]

_INT64_MAX = int(np.iinfo(np.int64).max)


# ---------------------------------------------------------------------------------- reading

_CURRENT_LINE = re.compile(r"^\s*([^:]*):(.*)$")
_HEADER_COUNTS = ("NUMBER ALTERNATIVES", "NUMBER VOTERS", "NUMBER UNIQUE ORDERS")


class _Source:
    """Lines of a file with their 1-based numbers, and errors naming them."""

    def __init__(self, path):
        self.path = path
        check_text_file(path, what="PrefLib", hint="PrefLib files must be UTF-8 text: convert "
                        "the file (e.g. iconv -f latin1 -t utf-8)")  # before loading it
        text = Path(path).read_bytes().removeprefix(codecs.BOM_UTF8).decode("utf-8")
        lines = io.StringIO(text, newline=None)  # universal newlines, as open() in text mode
        self.lines = [(k + 1, s.rstrip("\r\n")) for k, s in enumerate(lines) if s.strip()]

    def error(self, lineno, msg):
        return ValueError(f"{self.path}, line {lineno}: {msg}")


def _check_path(path):
    path = Path(path)
    if path.is_dir():
        found = sorted(p.name for p in path.iterdir() if p.suffix.lstrip(".") in KINDS)
        hint = f" (it holds {', '.join(found[:5])})" if found else ""
        raise IsADirectoryError(f"{path} is a directory; pass one PrefLib file (.soc, .soi, .toc "
                                f"or .toi) inside it{hint}")
    if not path.exists():
        raise FileNotFoundError(f"PrefLib file not found: {path}")
    kind = path.suffix.lstrip(".").lower()
    if kind not in KINDS:
        raise ValueError(f"{path}: unknown PrefLib extension {path.suffix!r}; expected one of "
                         f"{', '.join('.' + k for k in KINDS)}")
    return path, kind


def _parse_int(src, lineno, token, what):
    t = token.strip()
    if not re.fullmatch(r"[+-]?[0-9]+", t):  # ASCII digits only (\d takes any script's)
        raise src.error(lineno, f"{what} {t!r} is not an integer (ASCII digits 0-9)")
    try:
        return int(t)
    except ValueError:  # more digits than Python converts (sys.get_int_max_str_digits)
        raise src.error(lineno, f"{what} {t[:20]}... ({len(t)} digits) is too large") from None


def _parse_blocks(src, lineno, text, to_index):
    """``a,b,{c,d},e`` -> list of blocks of 0-based indices (``to_index`` maps file ids)."""
    # fast path: a strict order of ASCII ids (int() would also take other scripts' digits and _)
    if text.isascii() and "{" not in text and "}" not in text and "_" not in text:
        try:
            return [[to_index(int(t))] for t in text.split(",")] if text.strip() else []
        except ValueError as err:
            if "out of range" in str(err):
                raise
    blocks = []
    rest = text.strip()
    while rest:
        if rest[0] == "{":
            end = rest.find("}")
            if end < 0 or "{" in rest[1:end]:
                raise src.error(lineno, f"unparseable order {text.strip()!r}: unbalanced braces")
            inner, rest = rest[1:end], rest[end + 1:].lstrip()
            if not inner.strip():
                raise src.error(lineno, f"unparseable order {text.strip()!r}: empty tie block "
                                        "'{}'; remove it")
            tokens = inner.split(",")
        else:
            end = rest.find(",")
            end = len(rest) if end < 0 else end
            tokens, rest = [rest[:end]], rest[end:]
            if "}" in tokens[0]:
                raise src.error(lineno, f"unparseable order {text.strip()!r}: unbalanced braces")
        blocks.append([to_index(_parse_int(src, lineno, t, "item id")) for t in tokens])
        rest = rest.strip()
        if rest:
            if rest[0] != ",":
                raise src.error(lineno, f"unparseable order {text.strip()!r}: expected ',' "
                                        f"before {rest!r}")
            rest = rest[1:].strip()
            if not rest:
                raise src.error(lineno, f"unparseable order {text.strip()!r}: trailing ','")
    return blocks


def _id_mapper(src, lineno, ids):
    def to_index(i):
        if i not in ids:
            lo, hi = min(ids), max(ids)
            raise src.error(lineno, f"item id {i} is out of range (the header declares ids "
                                    f"{lo}..{hi})")
        return ids[i]
    return to_index


def read_preflib(path) -> RankingData:
    """Read a PrefLib ``.soc``, ``.soi``, ``.toc`` or ``.toi`` file (current or old layout).

    Returns
    -------
    RankingData
        Aggregated by distinct order (rows in order of first appearance), kind from the file's
        extension, names from its header (surrounding spaces stripped).

    Raises
    ------
    FileNotFoundError, IsADirectoryError
        The path is missing or is a folder.
    ValueError
        Naming the file and line: a file that is not UTF-8 (a leading byte-order mark is
        accepted) or holds a NUL byte (also naming the byte offset; found by a scan in 256 KiB
        chunks before the file is loaded), a file larger than the memory budget, an
        unparseable line, an empty tie block ``{}``, an item id out of range, an item repeated
        in an order, ties in a strict-order (``.soc``/``.soi``) file, an incomplete
        order in a ``.soc``/``.toc`` file, a count that is not a positive integer or is beyond
        the int64 limit (alone or summed), counts or orders that do not add up to the header's
        totals, a header whose ``NUMBER ALTERNATIVES`` differs from its ``ALTERNATIVE NAME``
        lines, an alternative named twice or a header count given twice; distinct orders
        whose dense table (16 bytes per alternative and order while it is built) would exceed
        the memory budget (``PM_PERM_MEMORY_BUDGET``, default 2 GiB).
    """
    path, kind = _check_path(path)
    src = _Source(path)
    if not src.lines:
        raise ValueError(f"{path}: the file is empty")
    if src.lines[0][1].lstrip().startswith("#"):
        names, ids, totals, body = _current_header(src)
        split = _CURRENT_LINE
    else:
        names, ids, totals, body = _old_header(src)
        split = re.compile(r"^\s*([^,]*),(.*)$")
    M = len(names)
    budget = memory_budget()
    to_lines = {}  # each distinct order's bytes -> its row (dicts keep insertion order)
    counts = []
    n_ballots = 0
    for lineno, line in body:
        m = split.match(line)
        if m is None:
            raise src.error(lineno, f"unparseable line {line.strip()!r}: expected "
                                    "'count: a,b,{c,d}' (or 'count,a,b' in the old layout)")
        count = _parse_int(src, lineno, m.group(1), "count")
        if count < 1:
            raise src.error(lineno, f"count {count} must be a positive integer")
        if count > _INT64_MAX:
            raise src.error(lineno, f"count {count} is too large (at most {_INT64_MAX})")
        n_ballots += count
        if n_ballots > _INT64_MAX:
            raise src.error(lineno, f"the counts up to this line add up to {n_ballots} ballots, "
                                    f"more than the int64 limit {_INT64_MAX}")
        blocks = _parse_blocks(src, lineno, m.group(2), _id_mapper(src, lineno, ids))
        row = np.full(M, -1, dtype=np.int64)
        problem = fill_rank_row(row, blocks)
        if problem:
            raise src.error(lineno, _as_in_file(problem, blocks, ids, names))
        if kind.startswith("so") and any(len(b) > 1 for b in blocks):
            raise src.error(lineno, f"ties ({{...}}) in a strict-order .{kind} file; use .to"
                                    f"{kind[2]} for weak orders")
        if kind.endswith("c") and (row < 0).any():
            raise src.error(lineno, f"incomplete order in a .{kind} file (ranks "
                                    f"{int((row >= 0).sum())} of {M} items); use .{kind[:2]}i")
        key = row.tobytes()
        index = to_lines.get(key)
        if index is None:
            _check_table_size(src, lineno, len(counts) + 1, M, budget)
            to_lines[key] = len(counts)
            counts.append(count)
        else:
            counts[index] += count
    _check_totals(src, totals, n_ballots, len(body))
    orders = np.empty((len(counts), M), dtype=np.int64)
    for i, key in enumerate(to_lines):  # in order of first appearance
        orders[i] = np.frombuffer(key, dtype=np.int64)
    del to_lines  # before RankingData's checks, which sort a copy of the table
    return RankingData(orders, np.array(counts, dtype=np.int64), tuple(names), kind,
                       source=str(path))


def _as_in_file(problem, blocks, ids, names):
    """``fill_rank_row``'s ``problem`` with a repeated item named as the file names it (its id
    in the file and its name), not by its 0-based index."""
    seen = set()
    for i in (i for block in blocks for i in block):
        if i in seen:
            file_id = next(k for k, v in ids.items() if v == i)
            return f"item {file_id} ({names[i]!r}) appears more than once in this order"
        seen.add(i)
    return problem


def _check_table_size(src, lineno, n_distinct, M, budget):
    """Refuse, before allocating it, a dense table of orders beyond the memory budget: the
    reader holds each distinct order once as bytes and once in the (n_distinct, M) int64 array
    it builds from them, and RankingData's copy of that array replaces the bytes: 16 bytes per
    item and order at the peak, plus RankingData's checks' temporaries (at most 64 MiB; the
    peak measured 2.1x the array for a 64 MB one)."""
    need = 16 * n_distinct * M
    if need > budget:
        raise src.error(
            lineno, f"{n_distinct} distinct orders of {M} alternatives up to this line need "
                    f"{format_bytes(need)} as a dense table (16 bytes per alternative and "
                    f"order), beyond the memory budget ({format_bytes(budget)}, "
                    "PM_PERM_MEMORY_BUDGET); raise the budget if the machine has the memory, or "
                    "keep only the alternatives the orders rank")


def _current_header(src):
    header = {}
    names = {}
    k = 0
    for k, (lineno, line) in enumerate(src.lines):  # noqa: B007 (k: first line after the header)
        if not line.lstrip().startswith("#"):
            break
        key, sep, value = line.lstrip()[1:].partition(":")
        key = key.strip().upper()
        m = re.fullmatch(r"ALTERNATIVE NAME\s+(\S+)", key)
        if m:
            i = _parse_int(src, lineno, m.group(1), "alternative id")
            if i in names:
                raise src.error(lineno, f"alternative id {i} is named twice (also on line "
                                        f"{names[i][1]}); keep one '# ALTERNATIVE NAME {i}:' line")
            names[i] = (value.strip(), lineno)
        elif sep:
            if key in header and key in _HEADER_COUNTS:
                raise src.error(lineno, f"'# {key}' appears twice (also on line "
                                        f"{header[key][1]}); keep one")
            header[key] = (value.strip(), lineno)
    else:
        k = len(src.lines)
    if "NUMBER ALTERNATIVES" not in header:
        raise ValueError(f"{src.path}: header has no '# NUMBER ALTERNATIVES: n' line")
    value, lineno = header["NUMBER ALTERNATIVES"]
    M = _parse_int(src, lineno, value, "NUMBER ALTERNATIVES")
    if M < 1:
        raise src.error(lineno, f"NUMBER ALTERNATIVES must be >= 1; got {M}")
    extra = sorted(i for i in names if not 1 <= i <= M)
    if extra:
        raise src.error(lineno, f"header declares NUMBER ALTERNATIVES: {M} but alternative names "
                                f"are out of range for ids {extra[:10]}")
    if len(names) < M:  # ids 1..M, each named once: compare the counts, never build range(M)
        missing = list(islice((i for i in range(1, M + 1) if i not in names), 10))
        raise src.error(lineno, f"header declares NUMBER ALTERNATIVES: {M} but names "
                                f"{len(names)}; names are missing for ids {missing}"
                                f"{' ...' if M - len(names) > 10 else ''} (fix the number or "
                                "add '# ALTERNATIVE NAME i: name' lines)")
    totals = {}
    for key, what in (("NUMBER VOTERS", "voters"), ("NUMBER UNIQUE ORDERS", "orders")):
        if key in header:
            value, lineno = header[key]
            totals[what] = (_parse_int(src, lineno, value, key), lineno, f"# {key}")
    return ([names[i][0] for i in range(1, M + 1)], {i: i - 1 for i in range(1, M + 1)}, totals,
            src.lines[k:])


def _old_header(src):
    lineno, line = src.lines[0]
    M = _parse_int(src, lineno, line, "number of alternatives (old PrefLib layout, line 1)")
    if M < 1 or len(src.lines) < M + 2:
        raise src.error(lineno, f"old PrefLib layout declares {M} alternatives but the file is "
                                "too short for its header")
    names, ids = [], {}
    for lineno, line in src.lines[1:M + 1]:
        i, sep, name = line.partition(",")
        if not sep:
            raise src.error(lineno, f"expected 'id,name' for an alternative; got {line.strip()!r}")
        i = _parse_int(src, lineno, i, "alternative id")
        if i in ids:
            raise src.error(lineno, f"alternative id {i} declared twice")
        ids[i] = len(names)
        names.append(name.strip())
    lineno, line = src.lines[M + 1]
    parts = line.split(",")
    if len(parts) != 3:
        raise src.error(lineno, f"expected 'voters,sum of counts,distinct orders'; got "
                                f"{line.strip()!r}")
    voters, total, distinct = (_parse_int(src, lineno, p, "header total") for p in parts)
    totals = {"voters": (voters, lineno, "voters in the header"),
              "sum": (total, lineno, "sum of counts in the header"),
              "orders": (distinct, lineno, "distinct orders in the header")}
    return names, ids, totals, src.lines[M + 2:]


def _check_totals(src, totals, n_ballots, n_lines):
    for what, (value, lineno, label) in totals.items():
        got = n_lines if what == "orders" else n_ballots
        if value != got:
            noun = "order lines" if what == "orders" else "ballots (sum of counts)"
            raise src.error(lineno, f"{label} says {value} but the file has {got} {noun}")


# ---------------------------------------------------------------------------------- writing


def write_preflib(data: RankingData, path, *, overwrite=False, title=None) -> Path:
    """Write ``data`` as a PrefLib file in the current layout (1-based ids), atomically.

    The kind is the extension of ``path`` (``.soc``, ``.soi``, ``.toc``, ``.toi``); data the kind
    cannot hold (ties in a strict kind, incomplete orders in a complete kind) raise
    ``ValueError``. The file is written to a temporary file in the same folder, then moved into
    place with ``os.replace``, so a reader never sees half a file. Refuses to overwrite an
    existing file unless ``overwrite=True``, and never overwrites the file ``data`` was read
    from. Rows are written in ``data``'s order; reading the file back gives equal data.

    Raises
    ------
    ValueError
        An unknown extension, data the kind cannot hold, an item name with surrounding spaces
        or a line break, a ``title`` (or file name) with a line break, or ``path`` is the file
        the data were read from.
    FileNotFoundError
        The folder of ``path`` does not exist (nothing is created).
    FileExistsError, IsADirectoryError
        ``path`` exists (without ``overwrite=True``) or is a folder.
    OSError
        The folder refuses new files (read-only, ``/proc``); the message names the folder.
    """
    path = Path(path)
    kind = path.suffix.lstrip(".").lower()
    if kind not in KINDS:
        raise ValueError(f"{path}: the extension must be one of "
                         f"{', '.join('.' + k for k in KINDS)} (it sets the kind)")
    if not path.parent.is_dir():
        why = "is not a folder;" if path.parent.exists() else "does not exist; create it or"
        raise FileNotFoundError(f"cannot write {path}: its folder {path.parent} {why} choose "
                                "another path")
    title = str(title or path.stem)
    for what, text in (("file name", path.name), ("title", title)):
        if "\n" in text or "\r" in text:
            raise ValueError(f"{what} {text!r} has a line break, which a PrefLib header cannot "
                             f"hold; give a {what} on one line")
    problem = kind_problem(data.orders, kind)
    if problem is not None:
        row, why = problem
        raise ValueError(f"cannot write a .{kind} file: orders[{row}] {why}")
    for name in data.item_names:
        if name != name.strip() or "\n" in name or "\r" in name:
            raise ValueError(f"item name {name!r} has surrounding spaces or a line break, which a "
                             "PrefLib header cannot hold; rename it")
    if path.exists():
        if data.source is not None and Path(data.source).exists() and \
                os.path.samefile(path, data.source):
            raise ValueError(f"refusing to overwrite {path}: the data were read from it; write "
                             "to a new file")
        if path.is_dir():
            raise IsADirectoryError(f"{path} is a directory; pass a file name")
        if not overwrite:
            raise FileExistsError(f"{path} exists; pass overwrite=True to replace it")
    lines = [f"# FILE NAME: {path.name}", f"# TITLE: {title}",
             f"# DATA TYPE: {kind}", f"# NUMBER ALTERNATIVES: {data.n_items}",
             f"# NUMBER VOTERS: {data.n_rankings}",
             f"# NUMBER UNIQUE ORDERS: {data.n_distinct}"]
    lines += [f"# ALTERNATIVE NAME {i + 1}: {name}" for i, name in enumerate(data.item_names)]
    for count, blocks in zip(data.counts, data.item_lists(), strict=True):
        parts = [str(b[0] + 1) if len(b) == 1 else "{" + ",".join(str(i + 1) for i in b) + "}"
                 for b in blocks]
        lines.append(f"{int(count)}: {','.join(parts)}")
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as err:  # a read-only folder, /proc: name the folder, not the temp file
        raise type(err)(err.errno, f"cannot write {path}: its folder {path.parent} refuses new "
                                   f"files ({err.strerror}); choose another path") from err
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return path
