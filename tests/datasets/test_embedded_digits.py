"""Embedded digits generator: shapes, counts 1..4, distinct classes, disjoint cells, seeds."""

import numpy as np
import pytest

from pm_perm.datasets.embedded_digits import (
    CANVAS,
    GRID,
    MAX_COUNT,
    grid_cells,
    make_embedded_digits,
    single_label,
)

pytest.importorskip("sklearn")


@pytest.fixture(scope="module")
def splits():
    return make_embedded_digits(400, 100, 100, seed=3)


def test_shapes_and_ranges(splits):
    for split, n in zip(splits, (400, 100, 100), strict=True):
        assert split.images.shape == (n, CANVAS, CANVAS)
        assert split.labels.shape == (n, 10)
        assert split.labels.dtype == np.int64
        assert split.X.shape == (n, CANVAS * CANVAS)
        assert split.images.min() >= 0.0 and split.images.max() <= 1.0


def test_counts_between_one_and_four_and_all_occur(splits):
    counts = splits[0].counts
    assert counts.min() == 1 and counts.max() == MAX_COUNT
    # uniform on 1..4: with 400 images each count has probability < 1e-20 of being absent
    assert set(np.unique(counts)) == {1, 2, 3, 4}


def test_classes_distinct_and_one_digit_per_occupied_cell(splits):
    for split in splits:
        assert set(np.unique(split.labels)) <= {0, 1}  # a class is on at most once
        occupied = (grid_cells(split.images).max(axis=2) > 0).sum(axis=1)
        # each digit fills its own cell (every sklearn digit has ink), so cells = count
        np.testing.assert_array_equal(occupied, split.counts)


def test_seed_reproducibility():
    a = make_embedded_digits(50, 10, 10, seed=7)
    b = make_embedded_digits(50, 10, 10, seed=7)
    c = make_embedded_digits(50, 10, 10, seed=8)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x.images, y.images)
        np.testing.assert_array_equal(x.labels, y.labels)
    assert not np.array_equal(a[0].labels, c[0].labels)


def test_splits_use_disjoint_digit_instances():
    train, _, test = make_embedded_digits(300, 0, 300, seed=0)
    cells_tr = grid_cells(train.images).reshape(-1, 100)
    cells_te = grid_cells(test.images).reshape(-1, 100)
    # normalise the jitter away: crop each non-empty cell to its ink bounding box
    def digits(cells):
        out = set()
        for c in cells[cells.max(axis=1) > 0]:
            img = c.reshape(10, 10)
            rows, cols = np.flatnonzero(img.any(1)), np.flatnonzero(img.any(0))
            out.add(img[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1].tobytes())
        return out
    assert not digits(cells_tr) & digits(cells_te)


def test_single_label_keeps_a_present_class():
    train = make_embedded_digits(200, 0, 0, seed=1)[0]
    t = single_label(train.labels, seed=0)
    assert t.shape == (200,)
    assert np.all(train.labels[np.arange(200), t] == 1)
    with pytest.raises(ValueError, match="at least one 1 per row"):
        single_label(np.zeros((2, 3), dtype=int))


def test_bad_sizes_raise():
    with pytest.raises(ValueError, match="n_train must be a non-negative integer"):
        make_embedded_digits(-1, 1, 1)
    with pytest.raises(ValueError, match="images must have shape"):
        grid_cells(np.zeros((2, GRID, GRID)))
