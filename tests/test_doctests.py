"""The Examples sections of pm_perm's docstrings run and print what they show (``doctest``).

Every module of the package with a ``>>>`` line is collected; each runs as one test, its examples
in one namespace (``doctest.testmod``), with ``ELLIPSIS`` and ``NORMALIZE_WHITESPACE``. A failing
example prints doctest's report (expected vs got) in the captured output.
"""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "pm_perm"
MODULES = sorted(
    ".".join(("pm_perm", *path.relative_to(PACKAGE).with_suffix("").parts))
    for path in PACKAGE.rglob("*.py") if ">>> " in path.read_text(encoding="utf-8")
)


def test_modules_with_examples_are_found():
    """Every module of every subpackage is searched (no hand-written list)."""
    assert {"pm_perm.learning_to_rank.metrics", "pm_perm.testing.sbc",
            "pm_perm.testing.conformance", "pm_perm.reference.rankings"} <= set(MODULES)
    assert len(MODULES) >= 10
    packages = {p.parent for p in PACKAGE.rglob("__init__.py")}  # every subpackage, any depth
    assert {PACKAGE / "testing", PACKAGE / "backends" / "jax", PACKAGE / "cli"} <= packages
    assert {m.rsplit(".", 1)[0] for m in MODULES} >= {"pm_perm.testing", "pm_perm.reference"}


@pytest.mark.parametrize("module", MODULES)
def test_docstring_examples_run(module):
    result = doctest.testmod(importlib.import_module(module), report=True,
                             optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{module}: no example ran"
    assert result.failed == 0, f"{module}: {result.failed} example(s) failed (report above)"
