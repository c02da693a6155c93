import numpy as np
import pytest

from pm_perm.matching.data import (
    HOUSE_GAPS,
    MPEG7_CLASSES,
    house_pairs,
    load_house,
    load_mpeg7_contour,
    make_silhouette_pairs,
    mpeg7_class_index,
)

CIRCLE = np.stack([np.cos(np.linspace(0, 2 * np.pi, 60, endpoint=False)),
                   np.sin(np.linspace(0, 2 * np.pi, 60, endpoint=False))], axis=1)


@pytest.mark.data
def test_load_house(shared_data):
    points, scf = load_house(shared_data)
    assert points.shape == (111, 30, 2) and scf.shape == (111, 30, 60)
    assert np.all(np.isfinite(points))
    # the supplied histograms count the 29 other landmarks (some fall outside the outer ring)
    assert np.all(scf >= 0) and np.all(scf.sum(-1) <= 1 + 1e-9)


@pytest.mark.data
@pytest.mark.parametrize("gap", [10, 90])
def test_house_pairs(shared_data, gap):
    for split in ("train", "validate", "test"):
        pairs = house_pairs(shared_data, gap, split)
        assert pairs.ndim == 2 and pairs.shape[1] == 2 and len(pairs) > 0
        assert np.all(pairs[:, 1] - pairs[:, 0] == gap)
        assert pairs.min() >= 1 and pairs.max() <= 111


def test_house_arguments():
    with pytest.raises(ValueError, match="gap"):
        house_pairs("nowhere", 15, "train")
    with pytest.raises(ValueError, match="split"):
        house_pairs("nowhere", 10, "valid")
    with pytest.raises(ValueError, match="not found"):
        load_house("/nonexistent-folder")
    assert HOUSE_GAPS == (0, 10, 20, 30, 40, 50, 60, 70, 80, 90)


@pytest.mark.data
def test_load_mpeg7_contour(shared_data):
    c = load_mpeg7_contour(shared_data, "horse", 3)
    assert c.shape == (100, 2) and np.all(np.isfinite(c))
    assert len(np.unique(c, axis=0)) == 100  # the closing duplicate is dropped
    assert len(MPEG7_CLASSES) == 65 and mpeg7_class_index("watch", 19) == 1299


def test_silhouette_pairs_shapes_and_truth():
    n_pairs = {"train": 7, "validate": 5, "test": 9}
    copies, splits = make_silhouette_pairs(CIRCLE, n_points=20, n_copies=30, n_pairs=n_pairs,
                                           seed=3)
    assert copies.shape == (30, 20, 2)
    for name, P in n_pairs.items():
        s = splits[name]
        assert s["points_a"].shape == s["points_b"].shape == (P, 20, 2)
        assert s["y"].shape == (P, 20) and s["y"].dtype == np.int64
        assert np.all(np.sort(s["y"], axis=1) == np.arange(20))
        first, second = s["copies"].T
        assert np.all(first != second)
        np.testing.assert_array_equal(s["points_a"], copies[first])
        # ground truth: point i of the first copy's partner is point y[i] of points_b
        matched = np.take_along_axis(s["points_b"], s["y"][..., None], axis=1)
        np.testing.assert_array_equal(matched, copies[second])


def test_silhouette_pairs_seeded():
    a = make_silhouette_pairs(CIRCLE, n_copies=10, n_pairs={"test": 4}, seed=1)
    b = make_silhouette_pairs(CIRCLE, n_copies=10, n_pairs={"test": 4}, seed=1)
    c = make_silhouette_pairs(CIRCLE, n_copies=10, n_pairs={"test": 4}, seed=2)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1]["test"]["y"], b[1]["test"]["y"])
    assert not np.array_equal(a[0], c[0])


def test_silhouette_pairs_are_sheared_copies():
    copies, _ = make_silhouette_pairs(CIRCLE, n_copies=5, n_pairs={}, noise=0.0, seed=0)
    base = copies[0]
    # noise-free copies are linear images of each other (the shear matrices are invertible)
    A, *_ = np.linalg.lstsq(base, copies[1], rcond=None)
    np.testing.assert_allclose(base @ A, copies[1], atol=1e-9)


def test_silhouette_arguments():
    with pytest.raises(ValueError, match="contour"):
        make_silhouette_pairs(CIRCLE[:10], n_points=20)
