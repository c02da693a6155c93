"""The ranking demo (examples/demo_ranking.py) keeps running and learning."""

import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_demo_ranking_learns_and_reports_top5(capsys):
    sys.path.insert(0, str(EXAMPLES))
    try:
        from demo_ranking import run_demo
    finally:
        sys.path.remove(str(EXAMPLES))
    out = run_demo(nuts=False, seed=0, verbose=True)
    printed = capsys.readouterr().out
    assert "P(top 5)" in printed and "true theta" in printed
    ndcg = out["ndcg"]
    assert out["cosine"] > 0.95
    for k in (1, 3, 5, 10):
        fitted = ndcg["RankMatch (MAP)"][f"ndcg@{k}"]
        assert fitted > ndcg["no learning (random order)"][f"ndcg@{k}"] + 0.2
        assert fitted > ndcg["true theta"][f"ndcg@{k}"] - 0.1
    assert all(0.0 <= p <= 1.0 for p in out["top5"])
    assert abs(sum(out["top5"]) - min(5, len(out["top5"]))) < 1e-9  # 5 places in the top 5
