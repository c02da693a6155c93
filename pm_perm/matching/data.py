"""Generated matching data: randomly distorted copies of a contour, paired with ground truth.

Value convention: a pair of point sets ``(points_a, points_b)`` comes with its ground-truth
matching ``y`` (int64, shape ``(n,)``): point ``i`` of ``points_a`` corresponds to point
``y[i]`` of ``points_b`` (the ``PermutationExpFamily`` convention, rows = first set).

The loaders of the real data (the CMU house sequence, the MPEG-7 contours) are in
:mod:`pm_perm.datasets.cmu_house` and :mod:`pm_perm.datasets.mpeg7`.
"""

from __future__ import annotations

import numpy as np

__all__ = ["make_silhouette_pairs"]


def make_silhouette_pairs(contour, n_points=20, n_copies=200, n_pairs=None, shear=0.5,
                          noise=0.02, seed=0):
    """Randomly sheared, noised copies of points on a contour, and random pairs of copies.

    Parameters
    ----------
    contour : array_like of float, shape (K, 2)
        Closed contour (e.g. :func:`pm_perm.datasets.mpeg7.load_mpeg7_contour`).
    n_points : int
        Points drawn at random (without replacement) among the contour's ``K`` points; the same
        points are used in every copy (they are the interest points).
    n_copies : int
        Number of distorted copies ("images").
    n_pairs : dict of str to int
        Pairs per split, e.g. ``{"train": 500, "validate": 500, "test": 500}``. Each pair is two
        distinct copies drawn at random.
    shear : float
        Each copy is ``p @ A.T`` with ``A = [[1, s_x], [s_y, 1]]``, ``s_x, s_y ~ U(-shear,
        shear)`` independently per copy.
    noise : float
        Then isotropic Gaussian noise with standard deviation ``noise`` times the mean pairwise
        distance of the interest points.
    seed : int

    Returns
    -------
    copies : ndarray, shape (n_copies, n_points, 2)
        The distorted copies, points in the same order in every copy.
    splits : dict of str to dict
        ``splits[name] = {"copies": (P, 2) int, "points_a": (P, n, 2), "points_b": (P, n, 2),
        "y": (P, n) int64}``. ``points_b`` is the second copy with its points in a random order
        (a fresh permutation per pair), so ``points_a[p, i]`` corresponds to
        ``points_b[p, y[p, i]]``: the ground truth is known by construction.

    Notes
    -----
    Seeded and vectorised; O(n_copies n) plus O(P n) per split.
    """
    contour = np.asarray(contour, dtype=np.float64)
    if contour.ndim != 2 or contour.shape[1] != 2 or contour.shape[0] < n_points:
        raise ValueError(f"contour must have shape (K >= n_points, 2); got {contour.shape}")
    n_pairs = dict(n_pairs or {"train": 500, "validate": 500, "test": 500})
    if n_copies < 2:
        raise ValueError("need at least 2 copies to form pairs")
    rng = np.random.default_rng(seed)
    base = contour[np.sort(rng.choice(contour.shape[0], n_points, replace=False))]
    base = base - base.mean(axis=0)
    scale = np.mean(np.linalg.norm(base[:, None] - base[None], axis=-1)) * n_points / (n_points - 1)
    A = np.tile(np.eye(2), (n_copies, 1, 1))
    A[:, 0, 1], A[:, 1, 0] = rng.uniform(-shear, shear, size=(2, n_copies))
    copies = base @ A.transpose(0, 2, 1) + rng.normal(scale=noise * scale,
                                                       size=(n_copies, n_points, 2))
    splits = {}
    for name, P in n_pairs.items():
        first = rng.integers(n_copies, size=P)
        second = (first + rng.integers(1, n_copies, size=P)) % n_copies  # distinct copy
        order = np.argsort(rng.random((P, n_points)), axis=1)  # points_b[p, j] = copy[order[j]]
        y = np.argsort(order, axis=1)  # inverse permutation: copy point i sits at y[i]
        splits[name] = {
            "copies": np.stack([first, second], axis=1),
            "points_a": copies[first],
            "points_b": np.take_along_axis(copies[second], order[..., None], axis=1),
            "y": y.astype(np.int64),
        }
    return copies, splits
