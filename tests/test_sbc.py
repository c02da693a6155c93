"""Reduced simulation-based calibration (slow): 30 replications of two models, loose bound.

The full run (200 replications of four models) is ``benchmarks/sbc.py``; results in the docs.
With 30 ranks in 5 bins, a correct model fails the p > 1e-3 bound with probability ~1e-3 per
parameter (5 parameters here: false-failure rate about 0.5 %).
"""

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("nutpie")
_spec = importlib.util.spec_from_file_location(
    "sbc", Path(__file__).resolve().parents[1] / "benchmarks" / "sbc.py"
)
sbc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sbc)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["matching", "ranking"])
def test_reduced_sbc(model):
    ranks = sbc.run_sbc(model, reps=30, draws=300, tune=300, seed=11)
    for param, rk in ranks.items():
        assert len(rk) == 30 and min(rk) >= 0 and max(rk) <= 99
        pval, _ = sbc.uniformity_pvalue(rk, bins=5)
        assert pval > 1e-3, (param, rk)


@pytest.mark.slow
def test_sbc_full_ranking_model_on_top_k_data():
    """200 replications of the full ranking model on top-k ballots (issue 18 acceptance).

    21 parameters, each tested at p > 1e-4 over 10 bins: a correct model fails with
    probability about 21 x 1e-4 = 0.2 %.
    """
    ranks = sbc.run_sbc("rankings_full", reps=200, draws=300, tune=300, seed=5)
    for param, rk in ranks.items():
        assert len(rk) == 200 and min(rk) >= 0 and max(rk) <= 99
        pval, _ = sbc.uniformity_pvalue(rk, bins=10)
        assert pval > 1e-4, (param, rk)
