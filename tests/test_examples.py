"""The example and benchmark scripts write their outputs as the package does: atomically,
through pm_perm._io.

A figure or JSON file written in place is left half written by an interrupt or a full disk, after
runs of minutes to hours; ``pm_perm._io.save_figure``, ``write_json``, ``write_text`` and
``atomic_path`` leave the old file or the complete new one.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
BENCHMARKS = sorted((ROOT / "benchmarks").glob("*.py"))
SCRIPTS = EXAMPLES + BENCHMARKS

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


def test_there_are_benchmarks():
    """The benchmark scripts are the ones the results page cites: each script is named there with
    the command that reproduces its figures, and each script named there exists."""
    scripts = {p.name for p in BENCHMARKS if not p.name.startswith("_")}
    assert len(scripts) >= 15
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    cited = set(re.findall(r"benchmarks/(\w+\.py)", page))
    assert sorted(scripts - cited) == [], "scripts the results page does not cite"
    assert sorted(cited - {p.name for p in BENCHMARKS}) == [], "cited scripts that do not exist"


def test_benchmark_helpers_exist():
    """Every ``from _name import ...`` of a benchmark script names a module of benchmarks/."""
    for path in BENCHMARKS:
        for module in re.findall(r"^from (_[a-z]\w*) import", path.read_text(), flags=re.M):
            assert (path.parent / f"{module}.py").is_file(), (path.name, module)


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_outputs_are_written_atomically(path):
    problems = [f"{path.parent.name}/{path.name}:{n}: {line.strip()}  ({fix})"
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


def test_benchmark_outputs_are_checked_before_work(tmp_path, capsys):
    """pm_perm._io.check_output_option (what benchmarks/_harness.py and the docs generators
    use): missing folders are created, an older result may be replaced, an input file or a folder
    never (exit status 2 with one line naming the option)."""
    import argparse

    from pm_perm._io import check_output_option, write_json

    parser = argparse.ArgumentParser(prog="bench")
    target = tmp_path / "a" / "b" / "result.json"
    check_output_option(parser, "--json", target)
    assert target.parent.is_dir() and not target.exists()
    assert write_json(target, {"x": [1.0, float("nan")]})  # a warning about the NaN
    assert "null" in target.read_text()
    check_output_option(parser, "--json", target)  # an older result: may be replaced
    data = tmp_path / "data.txt"
    data.write_text("input\n")
    for bad, inputs in ((data, [data]), (tmp_path, [])):
        with pytest.raises(SystemExit) as stop:
            check_output_option(parser, "--json", bad, inputs)
        assert stop.value.code == 2 and "--json" in capsys.readouterr().err
    assert data.read_text() == "input\n"
