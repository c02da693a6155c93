"""read_rank_matrix: BayesMallows-style rank matrices (1-based ranks, NA = unranked)."""

import numpy as np
import pytest

from pm_perm.preferences import read_rank_matrix


def _write(tmp_path, text):
    p = tmp_path / "ranks.csv"
    p.write_text(text)
    return p


def test_potato_visual(shared_data):
    path = shared_data / "bayesmallows" / "potato_visual.csv"
    if not path.exists():
        pytest.skip(f"{path} not found (BayesMallows' potato data; see its PROVENANCE.txt)")
    data = read_rank_matrix(path)
    assert data.kind == "soc" and data.counts.sum() == 12
    assert data.item_names == tuple(f"P{k}" for k in range(1, 21))
    # assessor A1: 10,18,19,15,6,... (1-based) -> rank form 9,17,18,14,5,...
    first = np.array([10, 18, 19, 15, 6, 16, 4, 20, 3, 5, 12, 1, 2, 9, 17, 8, 7, 14, 13, 11]) - 1
    assert any(np.array_equal(row, first) for row in data.orders)


def test_top_k_rows_and_labels(tmp_path):
    p = _write(tmp_path, "assessor,a,b,c,d\nx,2,1,NA,\ny,1,2,3,4\nz,2,1,NA,NA\n")
    data = read_rank_matrix(p)
    assert data.kind == "soi" and data.item_names == ("a", "b", "c", "d")
    rows = {tuple(r): int(c) for r, c in zip(data.orders, data.counts, strict=True)}
    assert rows == {(1, 0, -1, -1): 2, (0, 1, 2, 3): 1}


def test_no_header_and_no_labels(tmp_path):
    data = read_rank_matrix(_write(tmp_path, "3,1,2\n1,2,3\n"))
    assert data.item_names == ("1", "2", "3")
    assert sorted(map(tuple, data.orders.tolist())) == [(0, 1, 2), (2, 0, 1)]


@pytest.mark.parametrize("body, match", [
    ("a,b,c\n1,1,2\n", r"line 2 \(assessor 1\): the ranks \[1, 1, 2\] are not 1..3 each once"),
    ("a,b,c\n1,3,NA\n", r"the ranks \[1, 3\] are not 1..2 each once.*mark unranked items NA"),
    ("a,b,c\n1,2,4\n", r"item 3 has rank '4'; ranks are integers 1..3"),
    ("a,b,c\n1,2.5,3\n", r"item 2 has rank '2.5'"),
    ("id,a,b\nr1,NA,NA\n", r"line 2 \(assessor r1\): no item is ranked; drop the row"),
    ("a,b,c\n1,2,3\n1,2\n", r"line 3: 2 cells where line 2 has 3"),
    ("", "holds no rows"),
])
def test_rows_that_are_not_rankings(tmp_path, body, match):
    with pytest.raises(ValueError, match=match):
        read_rank_matrix(_write(tmp_path, body))
