"""``import pm_perm``: the public names and subpackages load on first use (pm_perm/__init__.py,
pm_perm/preferences/__init__.py), so ``import pm_perm`` and the command line's help start without
numba, and the ranking-data readers without PyMC; the distributions register the
latent-permutation step method with PyMC. ``pm_perm.__all__`` is the symbolic API."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import pm_perm


def _python(code):
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout.split()


def test_import_help_and_preflib_reader_do_not_import_pymc(tmp_path):
    """``import pm_perm``, ``pm-perm --help`` / ``learn-to-rank --help`` / ``preferences --help``
    and
    reading a PrefLib file import neither PyMC nor PyTensor; ``import pm_perm`` and the help
    texts do not import numba either (0.3 s)."""
    soi = tmp_path / "ballots.soi"
    soi.write_text("# DATA TYPE: soi\n# NUMBER ALTERNATIVES: 3\n# ALTERNATIVE NAME 1: A\n"
                   "# ALTERNATIVE NAME 2: B\n# ALTERNATIVE NAME 3: C\n"
                   "# NUMBER VOTERS: 3\n# NUMBER UNIQUE ORDERS: 2\n2: 1,2\n1: 3,1,2\n")
    code = f"""
import contextlib, io, sys
import pm_perm
print("numba" in sys.modules)
from pm_perm.cli import main
for argv in (["--help"], ["learn-to-rank", "--help"], ["preferences", "--help"]):
    with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.suppress(SystemExit):
        main(argv)
    assert "usage: pm-perm" in out.getvalue(), argv
print("numba" in sys.modules)
data = pm_perm.preferences.read_preflib({str(soi)!r})
print(data.n_rankings, "pymc" in sys.modules, "pytensor" in sys.modules)
"""
    assert _python(code) == ["False", "False", "3", "False", "False"]


SYMBOLIC_API = {
    "ConditionalBernoulli", "Mallows", "NChooseK", "OrdinalNChooseK", "PartialRanking",
    "PermutationExpFamily", "PlackettLuce", "TopKRanking", "MallowsPartial",  # distributions
    "BradleyTerry", "PartialOrder",  # distributions of pairwise preferences
    "edge_logits", "expected_topk_gain", "log_expected_topk_gain",  # model helpers (PyTensor)
    "check_find_map", "check_draws", "sampler_warnings", "MapFitError", "SamplingError",  # checks
}
NUMPY_HELPERS = {  # importable from their modules only
    "max_weight_matching": "pm_perm.kernels.matching",
    "nchoosek_marginals": "pm_perm.distributions.n_choose_k",
    "optimal_ranking": "pm_perm.distributions.ordinal_n_choose_k",
    "EXACT_MAX_M": "pm_perm.kernels.permanent",
}


def test_all_is_the_symbolic_api():
    """``pm_perm.__all__``: distributions, model helpers and checks; the NumPy helpers are
    importable from their modules, not from ``pm_perm``."""
    assert set(pm_perm.__all__) == SYMBOLIC_API and len(pm_perm.__all__) == len(SYMBOLIC_API)
    for name, module in NUMPY_HELPERS.items():
        assert hasattr(importlib.import_module(module), name)
        assert name not in dir(pm_perm)
        with pytest.raises(AttributeError):
            getattr(pm_perm, name)


def test_testing_package_imports_neither_pymc_nor_nutpie():
    """``import pm_perm.testing`` stays light: its functions import PyMC or nutpie when run."""
    code = """
import sys
import pm_perm.testing
print("pymc" in sys.modules, "nutpie" in sys.modules, "pytensor" in sys.modules)
"""
    assert _python(code) == ["False", "False", "False"]


@pytest.mark.parametrize("name", pm_perm.__all__)
def test_every_public_name_resolves(name):
    value = getattr(pm_perm, name)
    assert value is not None and name in dir(pm_perm)
    assert getattr(pm_perm, name) is value  # cached: the second access is the same object


def test_subpackages_resolve_and_unknown_names_fail():
    assert pm_perm.preferences.read_preflib is not None
    assert pm_perm.kernels.__name__ == "pm_perm.kernels"
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        pm_perm.no_such_name  # noqa: B018


def test_a_distribution_registers_the_step_method():
    """The first pm_perm distribution a program touches registers PermutationSwapMetropolis."""
    code = """
import pm_perm
from pymc.step_methods import STEP_METHODS
before = any(s.__name__ == "PermutationSwapMetropolis" for s in STEP_METHODS)
pm_perm.PermutationExpFamily
print(before, any(s.__name__ == "PermutationSwapMetropolis" for s in STEP_METHODS))
"""
    assert _python(code) == ["False", "True"]


def test_importing_pm_perm_patches_nothing_in_pymc():
    """``pymc.logp`` (in every module that exports it) is PyMC's own function after pm_perm and
    every distribution are imported: pm_perm checks values inside its logps, not by wrapping
    PyMC's API."""
    code = """
import pymc, pymc.logprob, pymc.logprob.basic as basic
before = {m.__name__: m.logp for m in (pymc, pymc.logprob, basic)}
import pm_perm, pm_perm.distributions, pm_perm.preferences.models
print(all(m.logp is before[m.__name__] for m in (pymc, pymc.logprob, basic)),
      pymc.logp.__module__, hasattr(pymc.logp, "__wrapped__"))
"""
    assert _python(code) == ["True", "pymc.logprob.basic", "False"]


def test_no_test_imports_from_benchmarks():
    """The tests use the package (pm_perm.testing, pm_perm.reference), never the benchmark
    scripts: no ``import benchmarks`` and no benchmark file loaded by path."""
    import re
    from pathlib import Path

    tests = Path(__file__).resolve().parent
    loads = re.compile(r"^\s*(from|import)\s+benchmarks\b|sys\.path.*benchmarks|"
                       r"spec_from_file_location\((?:[^()]|\([^()]*\))*benchmarks", re.MULTILINE)
    offenders = [str(p.relative_to(tests)) for p in tests.rglob("*.py")
                 if p.name != "test_package.py" and loads.search(p.read_text(encoding="utf-8"))]
    assert offenders == []
    assert loads.search('spec_from_file_location(\n    "sbc", Path(__file__).resolve().parents[1]'
                        ' / "benchmarks" / "sbc.py"\n)')  # what tests/test_sbc.py did
    assert loads.search("from benchmarks._outputs import write_result")
