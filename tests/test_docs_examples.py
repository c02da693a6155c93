"""Every code block of every page of the documentation site (mkdocs.yml's nav: Getting started,
the how-to guides, the Explanation pages, ...) runs, and prints what the page shows.

Each page's fenced blocks run top to bottom in one namespace (``python`` blocks in this process,
``bash`` blocks in a shell), in a temporary working folder, with ``pm-perm`` and ``python`` on the
PATH running this checkout's CLI and this interpreter. A ``text`` block that directly follows a
``python`` or ``bash`` block is that block's expected standard output: the words must match
exactly and every number within a tolerance (``rtol=0.05``, ``atol=0.02``: the pages print
rounded figures of seeded fits, and the last digit of a sampler's summary may move with the
platform). A block that prints Monte Carlo estimates whose error is larger says so in a comment
the reader sees, ``# printed numbers vary by up to 0.05 ...`` (any line of the block), and its
numbers are compared with that absolute tolerance: a seeded sampler's draws change with the
versions of PyMC, nutpie and NumPy, so such numbers match only within their Monte Carlo error.
Blocks in other languages, or with none (``` ``` ```: commands shown with their output, benchmark
commands), are not run.

**Not run, visibly.** A block whose first line is a comment ``# not run by the docs test: REASON``
(for example, it needs data that is not in the repository, takes minutes, installs packages, or
is a template in which ``x`` stands for your data) is not run; the reader sees the reason in the
code, and the test reports it. The older form, the line ``<!-- docs-test: skip (REASON) -->``
just before the block, is still understood but the reader cannot see it, so a page of the nav
that uses it fails ``test_not_run_reasons_are_visible`` with the line to change.

**Slow pages.** A page whose blocks take more than about 20 s in all is in ``SLOW_PAGES`` (with
its cost) and runs only with ``--runslow``; the default run stays fast.

After a deliberate change of an example,
``PM_PERM_DOCS_UPDATE=1 pytest tests/test_docs_examples.py`` writes the new outputs into the
pages (then read the diff before committing it).
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import re
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.numba  # the pages' code runs as a user runs it (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def nav_pages() -> list[str]:
    """Every page of mkdocs.yml's nav, in nav order."""
    def walk(entries):
        for entry in entries:
            if isinstance(entry, str):
                yield entry
            elif isinstance(entry, dict):
                for value in entry.values():
                    yield from ([value] if isinstance(value, str) else walk(value))
    return list(walk(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]))


# page -> why it is slow (measured on the shared 2-core machine, one thread, warm caches)
# (the pages run in parallel, one xdist unit each; these were the costliest units of a run
# on empty compile caches, 2026-11-29: 720, 409 and 209 s of wall time at load 10, 88 CPU s for
# checking.md; their subjects are tested in tests/cli/ and tests/distributions/test_mixture.py)
SLOW_PAGES: dict[str, str] = {
    "guide/preferences.md": "the CLI's MAP, NUTS and mixture fits in a dozen processes",
    "guide/checking.md": "NUTS on four ranking models, LOO and posterior predictive draws",
    "howto/beyond_exact_limit.md": "Bethe and sampled approximations at M = 30-60 on numba",
    "guide/count_labels.md": "NUTS on three count-label models (163 s at load 10)",
    "guide/mallows.md": "the latent-consensus sampler, Mallows mixtures and partial data (123 s)",
    "howto/count_prior.md": "NUTS with and without a count prior (85 s)",
}
RUN_LANGS = {"python", "bash"}
FENCE = re.compile(r"^```\s*([\w+-]*)\s*$")
SKIP = re.compile(r"^<!--\s*docs-test:\s*skip\s*\((.+)\)\s*-->\s*$")
NOT_RUN = re.compile(r"^#\s*not run by the docs test:\s*(.+?)\s*$", re.IGNORECASE)
VARIES = re.compile(r"^\s*#\s*printed numbers vary by up to ([0-9]*\.?[0-9]+)",
                    re.IGNORECASE | re.MULTILINE)
NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|nan|inf")
ATOL = 0.02  # absolute tolerance of printed numbers, unless a block's VARIES comment says more


@dataclass
class Block:
    lang: str
    code: str
    line: int
    skip: str | None = None
    expected: str | None = None
    expected_lines: tuple[int, int] | None = None   # 0-based [start, end) of its body

    @property
    def atol(self) -> float:
        """Absolute tolerance of its printed numbers: ``ATOL``, or the larger one its ``VARIES``
        comment states."""
        stated = VARIES.search(self.code)
        return max(ATOL, float(stated.group(1))) if stated else ATOL


def parse_blocks(text: str) -> list[Block]:
    """Fenced blocks of a Markdown page, with skip markers and expected outputs attached."""
    blocks: list[Block] = []
    lines = text.splitlines()
    i, pending_skip, last_nonblank = 0, None, None
    while i < len(lines):
        m_skip = SKIP.match(lines[i].strip())
        m_fence = FENCE.match(lines[i]) if lines[i].startswith("```") else None
        if m_skip:
            pending_skip = m_skip.group(1)
        elif m_fence:
            start, body = i + 1, []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            lang = m_fence.group(1)
            code = "\n".join(body) + "\n"
            follows = (last_nonblank == "block" and blocks and blocks[-1].lang in RUN_LANGS
                       and blocks[-1].expected is None)
            if lang == "text" and follows:
                blocks[-1].expected = code
                blocks[-1].expected_lines = (start, i)
            else:
                visible = NOT_RUN.match(body[0].strip()) if body else None
                blocks.append(Block(lang, code, start,
                                    visible.group(1) if visible else pending_skip))
            pending_skip = None
            last_nonblank = "block"
        elif lines[i].strip():
            last_nonblank = "text"
            pending_skip = None if not lines[i].strip().startswith("<!--") else pending_skip
        i += 1
    return blocks


def runnable_pages() -> list[str]:
    """The pages of the nav that hold a ``python`` or ``bash`` block (run or marked not run)."""
    return [page for page in nav_pages()
            if any(b.lang in RUN_LANGS for b in parse_blocks((DOCS / page).read_text()))]


PAGES = [pytest.param(page, marks=pytest.mark.slow) if page in SLOW_PAGES else page
         for page in runnable_pages()]


def outputs_match(got: str, expected: str, rtol=0.05, atol=ATOL) -> str | None:
    """None when ``got`` matches ``expected`` (words exactly, numbers within tolerance)."""
    g_words = "".join(NUMBER.sub("#", got).split())
    e_words = "".join(NUMBER.sub("#", expected).split())
    if g_words != e_words:
        return f"text differs:\n--- expected\n{expected}--- got\n{got}"
    for g, e in zip(NUMBER.findall(got), NUMBER.findall(expected), strict=True):
        gv, ev = float(g), float(e)
        both_nan = math.isnan(gv) and math.isnan(ev)
        if not (math.isclose(gv, ev, rel_tol=rtol, abs_tol=atol) or both_nan):
            return f"number {g} where the page shows {e}:\n--- expected\n{expected}--- got\n{got}"
    return None


def _cli_wrapper(folder: Path) -> Path:
    """``pm-perm`` (this checkout's CLI) and ``python`` commands that run this interpreter."""
    bin_dir = folder / "_bin"
    bin_dir.mkdir()
    for name, args in (("pm-perm", " -m pm_perm.cli"), ("python", "")):
        exe = bin_dir / name
        exe.write_text(f'#!/bin/sh\nexec "{sys.executable}"{args} "$@"\n')
        exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return bin_dir


def test_parser_attaches_outputs_and_skips():
    page = ("x\n\n```python\nprint(1)\n```\n\n```text\n1\n```\n\n"
            "<!-- docs-test: skip (needs data) -->\n```python\nload()\n```\n\n"
            "Some text.\n\n```text\nnot an output\n```\n\n"
            "```bash\n# Not run by the docs test: takes hours\nrun_it\n```\n")
    blocks = parse_blocks(page)
    assert [(b.lang, b.skip, b.expected) for b in blocks] == [
        ("python", None, "1\n"), ("python", "needs data", None), ("text", None, None),
        ("bash", "takes hours", None)]
    assert outputs_match("a 1.00 b\n", "a 1.01 b\n") is None
    assert outputs_match("a 1.5 b\n", "a 1.0 b\n") is not None
    assert outputs_match("a 1 c\n", "a 1 b\n") is not None
    mc = parse_blocks("```python\n# printed numbers vary by up to 0.05 (Monte Carlo)\nf()\n```\n")
    assert [b.atol for b in blocks[:1] + mc] == [0.02, 0.05]
    assert outputs_match("p 0.16\n", "p 0.13\n", atol=mc[0].atol) is None
    assert outputs_match("p 0.19\n", "p 0.13\n", atol=mc[0].atol) is not None


@pytest.mark.parametrize("page", PAGES)
def test_page_code_blocks_run(page, tmp_path, monkeypatch, capsys):
    blocks = [b for b in parse_blocks((DOCS / page).read_text()) if b.lang in RUN_LANGS]
    assert blocks, f"{page} has no python or bash block"
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               PATH=str(_cli_wrapper(tmp_path)) + os.pathsep + os.environ["PATH"])
    namespace: dict = {"__name__": "__docs__"}
    skipped, updates = [], []
    update = os.environ.get("PM_PERM_DOCS_UPDATE") == "1"
    for b in blocks:
        where = f"{page}:{b.line}"
        if b.skip:
            skipped.append(f"{where} ({b.skip})")
            continue
        if b.lang == "bash":
            run = subprocess.run(["bash", "-euo", "pipefail", "-c", b.code], cwd=tmp_path, env=env,
                                 capture_output=True, text=True, timeout=600)
            assert run.returncode == 0, (
                f"{where}: bash block failed\n{b.code}\n{run.stdout}{run.stderr}")
            got = run.stdout
        else:
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                exec(compile(b.code, where, "exec"), namespace)  # noqa: S102
            got = buf.getvalue()
        if b.expected is not None:
            problem = outputs_match(got, b.expected, atol=b.atol)
            if update and got.rstrip() != b.expected.rstrip():
                updates.append((b.expected_lines, got))
                continue
            assert problem is None, f"{where}: the page's printed output is out of date: {problem}"
    if updates:
        lines = (DOCS / page).read_text().splitlines()
        for (start, end), got in sorted(updates, reverse=True):
            lines[start:end] = got.rstrip("\n").splitlines()
        (DOCS / page).write_text("\n".join(lines) + "\n")
    if skipped and len(skipped) == len(blocks):
        pytest.skip(f"{page}: no block runs here: " + "; ".join(skipped))
    if skipped:
        with capsys.disabled():
            print(f"\n{page}: not run: " + "; ".join(skipped))


def test_every_nav_page_with_code_is_run():
    """The pages above are all pages of the site with code, Getting started and Explanation
    included, and each slow page is a page of the nav."""
    pages = runnable_pages()
    assert {"getting_started.md", "guide/count_labels.md",
            "guide/learning_to_rank.md"} <= set(pages)
    assert set(SLOW_PAGES) <= set(pages), "SLOW_PAGES names a page without code or not in the nav"
    missing = [page for page in nav_pages() if not (DOCS / page).is_file()]
    assert not missing, f"pages of mkdocs.yml's nav not in docs/: {missing}"


def test_not_run_reasons_are_visible():
    """Every block that is not run says why in its code, where the reader of the site sees it."""
    hidden = [f"docs/{page}:{i}" for page in nav_pages()
              for i, line in enumerate((DOCS / page).read_text().splitlines(), 1)
              if SKIP.match(line.strip())]
    assert not hidden, ("blocks skipped by an HTML comment the reader cannot see; make the "
                        "block's first line '# not run by the docs test: REASON' instead: "
                        + ", ".join(hidden))


def test_readme_shows_the_outputs_of_getting_started():
    """The README's printed results are those of Getting started, which the test above runs."""
    readme = parse_blocks((ROOT / "README.md").read_text())
    page = " ".join((DOCS / "getting_started.md").read_text().split())
    outputs = [b.expected for b in readme if b.expected is not None]
    assert len(outputs) >= 3, "the README shows one printed result per kind of model"
    for out in outputs:
        assert " ".join(out.split()) in page, f"README output not in getting_started.md:\n{out}"
