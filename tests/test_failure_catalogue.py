"""Every case of the bad-input catalogue (docs/guide/failures.md) gives its documented outcome,
and the docs page is up to date with the code."""

import importlib.util
from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "failure_catalogue", _ROOT / "scripts" / "failure_catalogue.py"
)
catalogue = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(catalogue)
CASES = catalogue._cases()


@pytest.mark.numba  # docs/guide/failures.md records what the default backend raises
@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}: {c[1]}" for c in CASES])
def test_case_outcome(case):
    area, what, call, expect = case
    kind, msg = catalogue.run_case(call)
    assert kind == expect, (area, what, kind, msg)
    assert msg  # errors carry a message


@pytest.mark.numba  # the page records what the default backend raises
def test_docs_page_is_current():
    page = (_ROOT / "docs" / "guide" / "failures.md").read_text()
    assert page == catalogue.render(), (
        "docs/guide/failures.md is out of date: "
        "run .venv/bin/python scripts/failure_catalogue.py --out docs/guide/failures.md"
    )
