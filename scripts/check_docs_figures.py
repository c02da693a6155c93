"""Check that a rewrite of a documentation page lost no figure and no command.

Usage: ``python scripts/check_docs_figures.py REV PAGE [PAGE ...] --in FILE [FILE ...]``

For each ``PAGE`` (a path under the repository), reads its text at git revision ``REV`` (the
version before the rewrite) and checks that the current text of the ``--in`` files, taken
together, still holds

* every decimal number of the old page (``0.3826``, ``.4420``, ``1e-4`` and ``6.7``; integers
  are not checked: too many of them are counts, years or line numbers), as a token, so that
  ``0.38`` is not found inside ``0.3826``;
* every command of the old page: each line of a fenced code block, with ``\\`` continuation
  lines joined, and compared with whitespace collapsed (a command may wrap differently, or sit
  in inline code, in its new place). ``.venv/bin/python`` and ``python`` count as the same.
  Inline code that starts like a command (``python``, ``pm-perm``, ``OMP_NUM_THREADS=...``,
  ``bash``) counts as a command too.

Prints what is missing, with the old line number, and exits 1 if anything is; exits 0 and
prints the counts otherwise. Run it once after rewriting a page; it is not a test because a
later, legitimate re-measurement changes figures on purpose.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DECIMAL = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d+|\.\d+|\d+(?:\.\d+)?[eE][-+]?\d+)(?![\w])")

INLINE_COMMAND = re.compile(
    r"(?<!`)`((?:\.venv/bin/python|python|pm-perm|OMP_NUM_THREADS=|NUMBA_NUM_THREADS=|bash )"
    r"[^`]*)`(?!`)")


def decimals(text: str) -> dict[str, int]:
    """Decimal numbers of ``text`` (trailing sentence dot excluded) -> first line number."""
    found: dict[str, int] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        for m in DECIMAL.finditer(line):
            found.setdefault(m.group().lstrip("+"), lineno)
    return found


def _normalise(command: str) -> str:
    command = command.replace(".venv/bin/python", "python").replace("`", "")
    return " ".join(command.split())


def commands(text: str) -> dict[str, int]:
    """Lines of fenced code blocks (continuations joined, whitespace collapsed) -> line number."""
    found: dict[str, int] = {}
    in_block, pending, start = False, "", 0
    for lineno, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            in_block = not in_block
            continue
        if not in_block or not line.strip():
            continue
        if not pending:
            start = lineno
        code = line.split("  #")[0].rstrip()            # a trailing comment may be reworded
        if code.endswith("\\"):
            pending += code[:-1] + " "
            continue
        full = _normalise(pending + code)
        pending = ""
        if full and not full.startswith("#"):
            found.setdefault(full, start)
    for m in INLINE_COMMAND.finditer(text):
        found.setdefault(_normalise(m.group(1)), text.count("\n", 0, m.start()) + 1)
    return found


def flattened(text: str) -> str:
    """``text`` with backslash continuations joined and whitespace collapsed, for ``in`` tests."""
    return _normalise(re.sub(r"\\\n", " ", text))


def missing(old: str, new_texts: list[str]) -> tuple[list[str], list[str], int, int]:
    new = "\n".join(new_texts)
    new_decimals = set(decimals(new))
    new_flat = flattened("\n".join(line.split("  #")[0] for line in new.splitlines()))
    old_decimals, old_commands = decimals(old), commands(old)
    lost_numbers = [f"line {n}: {d}" for d, n in old_decimals.items() if d not in new_decimals]
    lost_commands = [f"line {n}: {c}" for c, n in old_commands.items() if c not in new_flat]
    return lost_numbers, lost_commands, len(old_decimals), len(old_commands)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("rev", help="git revision holding the old version of each page")
    p.add_argument("pages", nargs="+", help="pages to check, as paths in the repository")
    p.add_argument("--in", dest="files", nargs="+", type=Path, required=True,
                   help="current files that must hold the old pages' figures and commands")
    args = p.parse_args(argv)
    new_texts = [f.read_text() for f in args.files]
    status = 0
    for page in args.pages:
        old = subprocess.run(["git", "show", f"{args.rev}:{page}"], cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout
        numbers, cmds, n_numbers, n_commands = missing(old, new_texts)
        for line in numbers:
            print(f"{page} figure lost: {line}")
        for line in cmds:
            print(f"{page} command lost: {line}")
        print(f"{page}@{args.rev}: {n_numbers - len(numbers)} of {n_numbers} decimal figures and "
              f"{n_commands - len(cmds)} of {n_commands} code lines found in "
              + ", ".join(str(f) for f in args.files))
        status |= bool(numbers or cmds)
    return status


if __name__ == "__main__":
    sys.exit(main())
