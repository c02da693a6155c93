"""The example scripts write their outputs as the package does: atomically, through pm_perm._io.

A figure or JSON file written in place is left half written by an interrupt or a full disk, after
runs of minutes to hours; ``pm_perm._io.save_figure``, ``write_json`` and ``atomic_path`` leave
the old file or the complete new one.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))

IN_PLACE = {
    r"(?<!def )\bsavefig\(": "fig.savefig(path) -> save_figure(fig, path)",
    r"\bjson\.dump\(": "json.dump(obj, fh) -> write_json(path, obj)",
    r"\.write_text\(": "path.write_text(text) -> write_text(path, text) or write_json",
    r"\bopen\([^)]*,\s*[\"'][wa]": "open(path, 'w') -> with atomic_path(path) as tmp",
    r"\.to_netcdf\((?!tmp\))": "idata.to_netcdf(path) -> with atomic_path(path) as tmp: "
                               "idata.to_netcdf(tmp)",
}


def test_there_are_examples():
    assert len(EXAMPLES) >= 10


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_outputs_are_written_atomically(path):
    problems = [f"{path.name}:{n}: {line.strip()}  ({fix})"
                for n, line in enumerate(path.read_text().splitlines(), 1)
                for pattern, fix in IN_PLACE.items() if re.search(pattern, line)]
    assert not problems, "outputs written in place:\n" + "\n".join(problems)


def test_the_check_sees_writes_in_place():
    lines = ['fig.savefig(out / "a.png", dpi=100)', 'json.dump(rows, fh)',
             '(out / "r.json").write_text(text)', 'with open(args.json, "w") as fh:',
             "idata.to_netcdf(args.save)"]
    for line in lines:
        assert any(re.search(p, line) for p in IN_PLACE), line
    for line in ['save_figure(fig, out / "a.png", dpi=100)', "write_json(path, rows)",
                 "idata.to_netcdf(tmp)", "with open(args.replot) as fh:"]:
        assert not any(re.search(p, line) for p in IN_PLACE), line
