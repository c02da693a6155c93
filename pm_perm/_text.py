"""Refusing an input that is not text, or too large to read, before a reader loads it (private).

The PrefLib and LETOR/svmlight readers load a whole file and split it into lines; given a disk
image or a sparse file of NUL bytes they would copy gigabytes before noticing anything.
:func:`check_text_file` reads the file once in 256 KiB chunks (memory bounded by the chunk) and
stops at the first byte a text file cannot hold, so such an input fails within a second.
No numba, no PyMC: the readers import it.
"""

from __future__ import annotations

import codecs
import os

from pm_perm._memory import format_bytes, memory_budget

__all__ = ["check_text_file"]

_CHUNK = 2**18


def _line_of(lines_before, chunk, end):
    """1-based line number of byte ``end`` of ``chunk`` (``\\n``, ``\\r\\n`` or ``\\r`` end a
    line, as universal newlines), given the lines ended before the chunk."""
    head = chunk[:end]
    return lines_before + head.count(b"\n") + head.count(b"\r") - head.count(b"\r\n") + 1


def check_text_file(path, *, what="text", utf8=True, hint=""):
    """Raise ``ValueError`` unless ``path`` holds text a reader may load: no NUL byte, valid
    UTF-8 (when ``utf8``; a leading byte-order mark is accepted), at most the memory budget
    (``PM_PERM_MEMORY_BUDGET``, default 2 GiB) in size.

    The message names the file, the line and the byte offset of the first bad byte, followed by
    ``hint`` (what the file should be); ``what`` names the kind of file (``"PrefLib"``). Cost:
    one sequential read of the file, 256 KiB at a time; it stops at the first bad byte.

    Returns
    -------
    int
        The file's size in bytes.
    """
    budget = memory_budget()
    size = os.stat(path).st_size
    too_large = (f"{path}: the file is {{}}, more than the memory budget of "
                 f"{format_bytes(budget)} a reader may use (PM_PERM_MEMORY_BUDGET): check that "
                 f"it is a {what} file, and raise the budget if the machine has the memory")
    if size > budget:
        raise ValueError(too_large.format(format_bytes(size)))
    decoder = codecs.getincrementaldecoder("utf-8")() if utf8 else None
    offset = lines = 0
    tail = f"; {hint}" if hint else ""
    with open(path, "rb") as fh:
        while True:
            chunk = fh.read(_CHUNK)
            if not chunk:
                break
            nul = chunk.find(b"\0")
            if nul >= 0:
                raise ValueError(f"{path}, line {_line_of(lines, chunk, nul)}: a NUL byte (0x00) "
                                 f"at byte offset {offset + nul}: this is not a text file (binary "
                                 f"data, or a file of zeros){tail}")
            if decoder is not None:
                pending = len(decoder.getstate()[0])
                skip = len(codecs.BOM_UTF8) if offset == 0 and chunk.startswith(
                    codecs.BOM_UTF8) else 0  # a byte-order mark (Windows editors)
                try:
                    decoder.decode(chunk[skip:] if skip else chunk)
                except UnicodeDecodeError as err:
                    at = max(err.start - pending, 0) + skip
                    raise ValueError(f"{path}, line {_line_of(lines, chunk, at)}: byte "
                                     f"0x{chunk[at]:02x} is not UTF-8 (byte offset {offset + at})"
                                     f"{tail}") from None
            lines += chunk.count(b"\n") + chunk.count(b"\r") - chunk.count(b"\r\n")
            offset += len(chunk)
            if offset > budget:  # a file that grew, or a device without a size
                raise ValueError(too_large.format(f"more than {format_bytes(offset)}"))
    if decoder is not None:
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            raise ValueError(f"{path}: the file ends inside a UTF-8 character (a truncated file?)"
                             f"{tail}") from None
    return size
