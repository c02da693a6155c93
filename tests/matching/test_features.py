import numpy as np
import pytest

from pm_perm.matching.features import (
    N_ANGLE_BINS,
    N_RADIAL_BINS,
    edge_features,
    normalized_coordinates,
    shape_context,
)

RNG = np.random.default_rng(0)
POINTS = RNG.normal(size=(3, 12, 2))


def test_shape_and_rows_are_fractions():
    h = shape_context(POINTS)
    assert h.shape == (3, 12, N_RADIAL_BINS * N_ANGLE_BINS)
    assert np.all(h >= 0) and np.all(h.sum(-1) <= 1 + 1e-12)


def test_translation_and_scale_invariance():
    moved = 3.7 * POINTS + np.array([10.0, -4.0])
    np.testing.assert_array_equal(shape_context(moved), shape_context(POINTS))
    np.testing.assert_allclose(normalized_coordinates(moved), normalized_coordinates(POINTS))


def test_batched_equals_one_by_one():
    h = shape_context(POINTS)
    for b in range(3):
        np.testing.assert_array_equal(h[b], shape_context(POINTS[b]))


def test_log_polar_binning_hand_case():
    # Four points: the origin and three others. Mean pairwise distance m is computed by hand;
    # the radial edges are geomspace(0.125, 2, 6) * m = m * (0.125, 0.218, 0.379, 0.660,
    # 1.149, 2.0).
    pts = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0], [-3.0, -3.0]])
    d = np.linalg.norm(pts[:, None] - pts[None], axis=-1)
    m = d.sum() / 12
    edges = np.geomspace(0.125, 2.0, 6)
    h = shape_context(pts, n_radial=5, n_angle=4) * 3  # counts
    row = h[0].reshape(5, 4)  # [ring, quadrant] seen from the origin
    expected = np.zeros((5, 4))
    for p, quadrant in ((pts[1], 0), (pts[2], 1), (pts[3], 2)):  # angles 0, pi/2, 5pi/4
        r = np.linalg.norm(p) / m
        if r < 2.0:
            expected[max(np.searchsorted(edges, r, side="right") - 1, 0), quadrant] += 1
    np.testing.assert_array_equal(row, expected)
    # and the hand values themselves: m = 3.275, distances 1, 2, 4.243 -> r = .305, .611, 1.296
    assert row[1, 0] == 1 and row[2, 1] == 1 and row[4, 2] == 1 and row.sum() == 3


def test_far_points_are_not_counted():
    # nine points in a unit square and one far away: the mean pairwise distance is about
    # 2 * 9 * 1000 / 90 = 200, so the far point is at r ~ 5 > r_outer = 2 from the others
    pts = np.vstack([RNG.random((9, 2)), [[1000.0, 0.0]]])
    h = shape_context(pts) * 9
    np.testing.assert_array_equal(h[:9].sum(-1), 8)


def test_edge_features():
    a, b = shape_context(POINTS[0]), shape_context(POINTS[1])
    x = edge_features(a, b)
    assert x.shape == (12, 12, 60)
    np.testing.assert_allclose(x[2, 5], (a[2] - b[5]) ** 2)
    xp = edge_features(a, b, POINTS[0], POINTS[1])
    za, zb = normalized_coordinates(POINTS[0]), normalized_coordinates(POINTS[1])
    np.testing.assert_allclose(xp[2, 5, -1], np.sum((za[2] - zb[5]) ** 2))
    np.testing.assert_array_equal(xp[..., :60], x)


@pytest.mark.parametrize("bad", [np.zeros((5, 3)), np.zeros((1, 2)), [[0, np.nan], [1, 1]]])
def test_bad_points(bad):
    with pytest.raises(ValueError, match="points"):
        shape_context(bad)


def test_coincident_points():
    with pytest.raises(ValueError, match="zero scale"):
        shape_context(np.ones((4, 2)))


@pytest.mark.parametrize("kwargs, match", [
    ({"n_angle": 0}, "n_angle must be a positive integer"),
    ({"n_radial": 0}, "n_radial must be a positive integer"),
    ({"n_radial": 2.5}, "n_radial must be a positive integer"),
    ({"r_inner": 3.0, "r_outer": 1.0}, "need 0 < r_inner < r_outer"),
    ({"r_inner": -1.0}, "need 0 < r_inner < r_outer"),
])
def test_shape_context_bad_bins(kwargs, match):
    with pytest.raises(ValueError, match=match):
        shape_context(POINTS[0], **kwargs)


def test_edge_features_points_must_match_descriptors():
    a, b = shape_context(POINTS[0]), shape_context(POINTS[1])
    with pytest.raises(ValueError, match=r"points_b must have shape \(12, 2\)"):
        edge_features(a, b, POINTS[0], POINTS[1, :6])
    with pytest.raises(ValueError, match=r"points_a must have shape \(12, 2\)"):
        edge_features(a, b, POINTS[:2], POINTS[1])
