import numpy as np
import pytest

from pm_perm.matching.data import make_silhouette_pairs

CIRCLE = np.stack([np.cos(np.linspace(0, 2 * np.pi, 60, endpoint=False)),
                   np.sin(np.linspace(0, 2 * np.pi, 60, endpoint=False))], axis=1)


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
