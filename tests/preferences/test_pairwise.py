"""read_pairwise: CSV tables of comparisons (assessor, winner, loser[, tie])."""

from __future__ import annotations

import numpy as np
import pytest

from pm_perm.preferences import PairwiseData, read_pairwise


def _write(tmp_path, text):
    path = tmp_path / "pairs.csv"
    path.write_text(text)
    return path


def test_per_assessor_sets_and_pooled_counts(tmp_path):
    path = _write(tmp_path, "assessor,winner,loser\nA,2,0\nA,0,1\nB,2,0\n\nC,1,2\n")
    data = read_pairwise(path)
    assert isinstance(data, PairwiseData)
    assert data.n_items == 3 and data.assessors == ["A", "B", "C"]
    np.testing.assert_array_equal(data.prefs, [[[2, 0], [0, 1]], [[2, 0], [-1, -1]],
                                               [[1, 2], [-1, -1]]])
    np.testing.assert_array_equal(data.pairs, [[0, 1], [1, 2], [2, 0]])
    np.testing.assert_array_equal(data.counts, [1, 1, 2])
    assert not data.has_ties


def test_ties_column_any_order_and_n_items(tmp_path):
    path = _write(tmp_path, "tie,loser,winner,assessor,note\n0,1,0,x,a\n1,0,3,x,b\n,1,0,y,\n")
    data = read_pairwise(path, n_items=6)
    assert data.n_items == 6 and data.has_ties
    np.testing.assert_array_equal(data.prefs, [[[0, 1]], [[0, 1]]])  # the tie is left out
    np.testing.assert_array_equal(data.pairs, [[0, 1, 0], [0, 3, 1]])
    np.testing.assert_array_equal(data.counts, [2, 1])


@pytest.mark.parametrize(("text", "kwargs", "match"), [
    ("assessor,winner,loser\na,0,1\na,2,2\n", {}, r"pairs.csv:3: winner == loser \(item 2\)"),
    ("assessor,winner,loser\na,0,1\nb,0,5\n", {"n_items": 4},
     r"pairs.csv:3: item id 5 out of range 0\.\.3.*pass n_items"),
    ("assessor,winner,loser\na,0,-1\n", {}, r"pairs.csv:2: item id -1 out of range"),
    ("assessor,winner,loser\na,zero,1\n", {}, r"pairs.csv:2: winner 'zero' is not an integer"),
    ("assessor,first,second\na,0,1\n", {}, r"pairs.csv:1: .*lacks the column\(s\) \['winner'"),
    ("assessor,winner,loser,tie\na,0,1,2\n", {}, r"pairs.csv:2: tie must be 0 or 1"),
    ("assessor,winner,loser\na,0\n", {}, r"pairs.csv:2: 2 fields, the header has 3"),
    ("assessor,winner,loser\n", {}, "no comparison after the header"),
    ("", {}, "empty file"),
])
def test_errors_name_the_line_and_the_fix(tmp_path, text, kwargs, match):
    with pytest.raises(ValueError, match=match):
        read_pairwise(_write(tmp_path, text), **kwargs)


def test_feeds_the_models(tmp_path):
    """The reader's output is the observed value of PartialOrder and of BradleyTerry."""
    import pymc as pm

    from pm_perm import BradleyTerry, PartialOrder

    data = read_pairwise(_write(tmp_path, "assessor,winner,loser\nA,2,0\nA,0,1\nB,1,2\n"))
    with pm.Model() as model:
        u = pm.Normal("u", 0, 1, shape=data.n_items)
        PartialOrder("prefs", utilities=u, observed=data.prefs)
        BradleyTerry("pairs", u, weights=data.counts, observed=data.pairs)
    assert np.isfinite(model.compile_logp()(model.initial_point()))


def test_an_assessor_with_cyclic_preferences(tmp_path):
    """The reader keeps what the file says; PartialOrder refuses a cycle at model build, naming
    the assessor (its row in ``prefs``) and the cycle; BradleyTerry takes the comparisons."""
    import pymc as pm

    from pm_perm import BradleyTerry, PartialOrder

    data = read_pairwise(_write(tmp_path, "assessor,winner,loser\nA,0,1\nB,0,1\nB,1,2\nB,2,0\n"))
    with pytest.raises(ValueError, match=r"assessor 1: cyclic preferences 0 > 1 > 2 > 0"):
        with pm.Model():
            PartialOrder("prefs", utilities=np.zeros(3), observed=data.prefs)
    with pm.Model() as model:
        BradleyTerry("pairs", np.zeros(3), weights=data.counts, observed=data.pairs)
    assert np.isfinite(model.compile_logp()({}))
