"""The console command after a plain ``pip install`` of this checkout into an EMPTY virtual
environment (no system site packages, no extras): every ``pm-perm`` subcommand (``learn-to-rank``
with each model, ``preferences``) must run with the dependencies the package declares (it once
failed with ``No module named 'sklearn'``).

Marked ``packaging`` (run with ``--packaging``; ``.ci/run`` runs it beside the test suite): alone
it takes 30-50 s, with pip's download cache, and the compile caches full or empty.
"""

from __future__ import annotations

import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.packaging

ROOT = Path(__file__).resolve().parents[1]


def _write_letor(path, n_queries, rng):
    lines = []
    for q in range(n_queries):
        for _ in range(6):
            x = rng.normal(size=3)
            label = int(np.clip(np.round(x[0] + rng.normal(scale=0.5)), 0, 2))
            feats = " ".join(f"{k + 1}:{v:.4f}" for k, v in enumerate(x))
            lines.append(f"{label} qid:{q + 1} {feats}")
    path.write_text("\n".join(lines) + "\n")


def test_console_command_in_empty_venv(tmp_path):
    # the empty environment and pip's plain install into it: scripts/empty_venv.sh, which .ci/run
    # runs beforehand, while it sets up .venv (PM_PERM_EMPTY_VENV); run alone, the test runs it
    prebuilt = os.environ.get("PM_PERM_EMPTY_VENV")
    env_dir = Path(prebuilt) if prebuilt else tmp_path / "venv"
    python = env_dir / "bin" / "python"
    # The compile caches are this machine's, as for a user's second environment: PyTensor's
    # (keyed by the graph) and pm_perm's numba cache (keyed by the package's content, not by where
    # it is installed) serve the installed copy what the test suite beside it compiled.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    # Python's bytecode cache as on a user's machine: pip's --no-compile (empty_venv.sh) leaves it
    # to the first command, which writes what it imports for the later ones (where
    # PYTHONDONTWRITEBYTECODE is set, each command compiled pymc's, pytensor's and numba's sources
    # again: 3 s each)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(tmp_path / "pycache")
    if not prebuilt:
        subprocess.run(["bash", ROOT / "scripts" / "empty_venv.sh", env_dir], check=True, env=env,
                       cwd=tmp_path)
    if not (env_dir / ".pm_perm-installed").is_file():
        pytest.fail(f"{env_dir}: no environment made by scripts/empty_venv.sh (see its output "
                    "above)")
    # only the declared dependencies: no test or bench extras leaked in
    # (scikit-learn is an extra: the LETOR reader and the ridge baseline need NumPy only)
    code = ("import importlib.util as u; "
            "print(*(u.find_spec(m) is None for m in ('pytest', 'thewalrus', 'sklearn')))")
    probe = subprocess.run([python, "-c", code], check=True, env=env, capture_output=True,
                           text=True)
    assert probe.stdout.split() == ["True", "True", "True"]

    exe = env_dir / "bin" / "pm-perm"

    def run(*args):
        return subprocess.run([exe, *args], env=env, cwd=tmp_path, capture_output=True,
                              text=True, check=False)

    def rankings_and_help():
        # the ranking-data command with its default model (full) on a PrefLib file of partial
        # ballots (about 20 s of CPU on empty caches), then the help texts (4 s each: imports)
        from pm_perm.preferences.preflib import write_preflib
        from pm_perm.preferences.synthetic import rank_one_logits, simulate_rankings

        ballots = simulate_rankings(300, logits=rank_one_logits([2.0, 1.0, 0.0, -1.0]),
                                    length_probs=[0, 0.4, 0.3, 0, 0.3], rng=0, item_names="ABCD")
        write_preflib(ballots, tmp_path / "ballots.soi")
        return [run("preferences", "ballots.soi", "--fit", "map", "--json", "rankings.json"),
                run("--help"), run("learn-to-rank", "--help")]

    # Two streams (10-30 s of CPU each, on full or empty caches), so that .ci/run's last part
    # (this check may end after the suite) uses both cores.
    with ThreadPoolExecutor(1) as pool:
        other = pool.submit(rankings_and_help)
        rng = np.random.default_rng(0)
        _write_letor(tmp_path / "train.txt", 8, rng)
        _write_letor(tmp_path / "test.txt", 4, rng)
        for model in ("ridge", "rankmatch", "ordinal"):
            proc = run("learn-to-rank", "--train", "train.txt", "--test", "test.txt", "--model",
                       model,
                       "--fit", "map", "--prior-sigma", "1", "--json", f"{model}.json")
            assert proc.returncode == 0, (f"pm-perm learn-to-rank --model {model} failed:\n"
                                          f"{proc.stderr[-3000:]}")
            test_metrics = json.loads((tmp_path / f"{model}.json").read_text())["test"]
            assert test_metrics and all(0.0 <= v <= 1.0 for v in test_metrics.values()), (
                test_metrics)
        rankings, *helps = other.result(timeout=600)
    assert rankings.returncode == 0, f"pm-perm preferences failed:\n{rankings.stderr[-3000:]}"
    result = json.loads((tmp_path / "rankings.json").read_text())
    assert result["n_rankings"] == 300 and sorted(result["consensus"]) == list("ABCD")
    for proc in helps:
        assert proc.returncode == 0 and "usage: pm-perm" in proc.stdout, proc.stderr[-3000:]
