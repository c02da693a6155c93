"""scripts/check_docs_figures.py finds the figures and commands a rewrite of a page lost."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("check_docs_figures",
                                               ROOT / "scripts" / "check_docs_figures.py")
check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check)

OLD = """# Results (2026-11-24)

RankMatch 0.3699 and ordinal .4420 in 17 s; error 1e-4.

```
OMP_NUM_THREADS=1 python benchmarks/bench.py --folds 1 2 \\
    --json out.json     # 236 s
pm-perm learn-to-rank --fold 1
```
"""


def test_nothing_lost_when_figures_and_commands_move():
    new_guide = "The ordinal ranker: .4420; RankMatch: 0.3699.\n"
    new_bench = ("`OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench.py --folds 1\n2 --json "
                 "out.json` (error 1e-4)\n\n```bash\npm-perm  learn-to-rank --fold 1\n```\n")
    numbers, commands, n_numbers, n_commands = check.missing(OLD, [new_guide, new_bench])
    assert (numbers, commands) == ([], [])
    assert (n_numbers, n_commands) == (3, 2)      # integers (17, 2026) are not checked


def test_lost_figures_and_commands_are_reported():
    new = "RankMatch 0.36990 and ordinal 4420; 1e-4.\n```\npm-perm learn-to-rank --fold 2\n```\n"
    numbers, commands, _, _ = check.missing(OLD, [new])
    assert [line.split(": ", 1)[1] for line in numbers] == ["0.3699", ".4420"]
    assert len(commands) == 2 and "benchmarks/bench.py --folds 1 2 --json out.json" in commands[0]
