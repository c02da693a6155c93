"""Point descriptors and edge features for learned graph matching.

Shape contexts (Belongie, Malik & Puzicha 2002) describe each point of a 2-D point set by a
log-polar histogram of where the other points lie; the edge features of a pair of point sets
are the elementwise squared differences of the descriptors (Petterson et al. 2009, eq. 19), so
that the edge logits are ``W[i, j] = <x[i, j], theta>`` with one weight per histogram bin.

Value convention: point sets are arrays ``(..., n, 2)`` of ``(x, y)`` coordinates; edge
features ``x[..., i, j, :]`` compare point ``i`` of the first set with point ``j`` of the
second, so ``W = x . theta`` has rows = first set, columns = second set, and a matching
``y[i]`` is the point of the second set matched to point ``i`` of the first.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "N_ANGLE_BINS",
    "N_RADIAL_BINS",
    "edge_features",
    "normalized_coordinates",
    "shape_context",
]

N_RADIAL_BINS = 5
N_ANGLE_BINS = 12
R_INNER, R_OUTER = 0.125, 2.0


def _check_points(points):
    pts = np.asarray(points, dtype=np.float64)
    if pts.ndim < 2 or pts.shape[-1] != 2 or pts.shape[-2] < 2:
        raise ValueError(
            f"points must have shape (..., n, 2) with n >= 2 (x, y coordinates); got {pts.shape}"
        )
    if not np.all(np.isfinite(pts)):
        raise ValueError("points contain NaN or inf; drop or impute those points first")
    return pts


def _mean_pairwise_distance(pts):
    n = pts.shape[-2]
    d = np.linalg.norm(pts[..., :, None, :] - pts[..., None, :, :], axis=-1)
    mean = d.sum(axis=(-2, -1)) / (n * (n - 1))
    if np.any(mean <= 0):
        raise ValueError("a point set has all its points at one location (zero scale)")
    return d, mean


def shape_context(points, n_radial=N_RADIAL_BINS, n_angle=N_ANGLE_BINS, r_inner=R_INNER,
                  r_outer=R_OUTER):
    """Log-polar shape-context histogram of every point of each point set, batched.

    Parameters
    ----------
    points : array_like of float, shape (..., n, 2)
        Point sets (``n >= 2``).
    n_radial, n_angle : int
        Number of radial (log-spaced) and angular (uniform) bins; default 5 x 12 = 60 bins as
        in Belongie et al. (2002).
    r_inner, r_outer : float
        Radial range in units of the mean pairwise distance of the point set. Radial bin edges
        are ``geomspace(r_inner, r_outer, n_radial + 1)``; points closer than ``r_inner`` count
        in the innermost ring, points farther than ``r_outer`` are not counted.

    Returns
    -------
    ndarray of float64, shape (..., n, n_radial * n_angle)
        ``h[..., i, r * n_angle + a]`` = fraction of the other ``n - 1`` points whose offset
        from point ``i`` falls in ring ``r`` and sector ``a``; sector ``a`` covers angles
        ``[2 pi a / n_angle, 2 pi (a + 1) / n_angle)`` measured counter-clockwise from the
        ``+x`` axis (``atan2(dy, dx)`` of the offset).

    Raises
    ------
    ValueError
        For bad ``points``, ``n_radial`` or ``n_angle`` not a positive integer, or not
        ``0 < r_inner < r_outer``.

    Notes
    -----
    Distances are divided by the set's mean pairwise distance, so the descriptor is invariant to
    translation and to uniform scaling (not to rotation: the angles are absolute). Vectorised,
    O(n^2) time and memory per point set.
    """
    pts = _check_points(points)
    for name, v in (("n_radial", n_radial), ("n_angle", n_angle)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name} must be a positive integer (number of bins); got {v!r}")
    if not 0 < r_inner < r_outer < np.inf:
        raise ValueError(f"need 0 < r_inner < r_outer (radial range in mean pairwise distances); "
                         f"got r_inner={r_inner!r}, r_outer={r_outer!r}")
    n = pts.shape[-2]
    dist, mean = _mean_pairwise_distance(pts)
    r = dist / mean[..., None, None]
    offset = pts[..., None, :, :] - pts[..., :, None, :]  # [i, j] = p_j - p_i
    angle = np.mod(np.arctan2(offset[..., 1], offset[..., 0]), 2 * np.pi)
    edges = np.geomspace(r_inner, r_outer, n_radial + 1)
    ring = np.clip(np.searchsorted(edges, r, side="right") - 1, 0, None)
    sector = np.minimum((angle * (n_angle / (2 * np.pi))).astype(np.int64), n_angle - 1)
    keep = (r < r_outer) & ~np.eye(n, dtype=bool)
    bins = n_radial * n_angle
    flat_bin = np.where(keep, ring * n_angle + sector, bins)  # dropped pairs -> overflow bin
    rows = np.arange(flat_bin.size // n) * (bins + 1)
    counts = np.bincount((flat_bin.reshape(-1, n) + rows[:, None]).ravel(),
                         minlength=rows.size * (bins + 1))
    hist = counts.reshape(*pts.shape[:-1], bins + 1)[..., :bins]
    return hist / (n - 1)


def normalized_coordinates(points):
    """Coordinates centred on the centroid and divided by the mean pairwise distance.

    Parameters
    ----------
    points : array_like of float, shape (..., n, 2)

    Returns
    -------
    ndarray of float64, shape (..., n, 2)
        Invariant to translation and uniform scaling. O(n^2) per point set.
    """
    pts = _check_points(points)
    _, mean = _mean_pairwise_distance(pts)
    return (pts - pts.mean(axis=-2, keepdims=True)) / mean[..., None, None]


def edge_features(desc_a, desc_b, points_a=None, points_b=None):
    """Edge features of pairs of point sets: squared descriptor differences (+ position).

    Parameters
    ----------
    desc_a, desc_b : array_like of float, shape (..., n, k)
        Point descriptors of the first and second set (e.g. :func:`shape_context`).
    points_a, points_b : array_like of float, shape (..., n, 2), optional
        If given, one extra feature is appended: the squared distance between the
        :func:`normalized_coordinates` of point ``i`` of the first set and point ``j`` of the
        second (a translation- and scale-invariant "same place" cue).

    Returns
    -------
    ndarray of float64, shape (..., n, n, k) or (..., n, n, k + 1)
        ``x[..., i, j, c] = (desc_a[..., i, c] - desc_b[..., j, c]) ** 2`` (Petterson et al.
        eq. 19), then the position feature. All features are distances: large means "unlike",
        so learned weights are typically negative, and ``theta = -1`` on the descriptor
        features is plain shape-context matching (sum of squared differences). O(n^2 k).

    Raises
    ------
    ValueError
        If the descriptors' shapes differ in ``(n, k)``, or ``points_a`` / ``points_b`` do not
        have the shape of their descriptors with ``k`` replaced by 2.
    """
    a = np.asarray(desc_a, dtype=np.float64)
    b = np.asarray(desc_b, dtype=np.float64)
    if a.ndim < 2 or a.shape[-2:] != b.shape[-2:]:
        raise ValueError(
            f"descriptors must both have shape (..., n, k); got {a.shape} and {b.shape}"
        )
    x = (a[..., :, None, :] - b[..., None, :, :]) ** 2
    if points_a is None and points_b is None:
        return x
    if points_a is None or points_b is None:
        raise ValueError("pass both points_a and points_b for the position feature, or neither")
    za, zb = normalized_coordinates(points_a), normalized_coordinates(points_b)
    for name, z, desc in (("points_a", za, a), ("points_b", zb, b)):
        if z.shape[:-1] != desc.shape[:-1]:
            raise ValueError(f"{name} must have shape {desc.shape[:-1] + (2,)} (one point per "
                             f"descriptor row); got {z.shape}")
    pos = np.sum((za[..., :, None, :] - zb[..., None, :, :]) ** 2, axis=-1)
    return np.concatenate([x, pos[..., None]], axis=-1)
