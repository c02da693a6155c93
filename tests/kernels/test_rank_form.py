"""Rank-form parsing and validation (pm_perm.kernels.rank_form)."""

from __future__ import annotations

import numpy as np
import pytest

from pm_perm.kernels.rank_form import order_blocks, validate_orders


@pytest.mark.parametrize(
    ("y", "seq", "starts"),
    [
        ([2, 0, 3, 1], [1, 3, 0, 2], [0, 1, 2, 3, 4]),
        ([-1, 0, -1, 1], [1, 3, 0, 2], [0, 1, 2, 4]),          # unranked items: last block
        ([1, 3, 0, 1], [2, 0, 3, 1], [0, 1, 3, 4]),           # items 0 and 3 tied at 1-2
        ([0, 0, -1, 0], [0, 1, 3, 2], [0, 3, 4]),
        ([-1, -1, -1], [0, 1, 2], [0, 3]),
    ],
)
def test_order_blocks(y, seq, starts):
    M = len(y)
    s, st = np.empty(M, dtype=np.int64), np.empty(M + 1, dtype=np.int64)
    nb = order_blocks(np.array(y, dtype=np.int64), s, st)
    assert nb == len(starts) - 1
    assert s.tolist() == seq and st[:nb + 1].tolist() == starts


@pytest.mark.parametrize("y", [[0, 2, -1], [1, 1, 2], [0, 1, 3], [0, -2, 1], [1, -1, -1],
                               [0, 0, 1]])
def test_invalid_orders(y):
    s, st = np.empty(3, dtype=np.int64), np.empty(4, dtype=np.int64)
    assert order_blocks(np.array(y, dtype=np.int64), s, st) == -1
    with pytest.raises(ValueError, match=r"orders\[0\] = .* is not a valid rank-form order"):
        validate_orders([y], 3)


def test_validate_orders_types():
    assert validate_orders(np.array([[0.0, 1.0]]), 2).dtype == np.int64
    with pytest.raises(ValueError, match="non-integer"):
        validate_orders([[0.5, 1.0]], 2)
    with pytest.raises(ValueError, match="must be integers"):
        validate_orders([["a", "b"]], 2)
    with pytest.raises(ValueError, match=r"shape \(n, 3\)"):
        validate_orders([0, 1, 2], 3)
