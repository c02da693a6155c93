"""Matching data: the CMU house sequence and a generated silhouette experiment.

Value convention: a pair of point sets ``(points_a, points_b)`` comes with its ground-truth
matching ``y`` (int64, shape ``(n,)``): point ``i`` of ``points_a`` corresponds to point
``y[i]`` of ``points_b`` (the ``PermutationExpFamily`` convention, rows = first set).

The data are read from the shared data folder (``../shared/data`` from the repository, or any
folder with the same layout); nothing is copied into the project.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

__all__ = [
    "HOUSE_GAPS",
    "SPLITS",
    "house_pairs",
    "load_house",
    "load_mpeg7_contour",
    "make_silhouette_pairs",
    "mpeg7_class_index",
]

HOUSE_DIR = Path("cmu_house/house")
MPEG7_FILE = Path("shapes/mpeg7_closed_BayesLASA/MPEG7closed.mat")
HOUSE_GAPS = tuple(range(0, 100, 10))
SPLITS = ("train", "validate", "test")
N_HOUSE_FRAMES, N_HOUSE_POINTS = 111, 30
MPEG7_CLASSES = (
    "bone comma half-circle heart misk apple bat beetle bell bird bottle brick butterfly camel "
    "car carriage cattle cell-phone child chopper classic-car crown cup deer flower-5-petals "
    "flower-6-petals flower-7-petals four-corners three-corners cross five-corners "
    "flower-10-petals letter-T circle dog elephant face fish-1 fish-2 fly fork fountain guitar "
    "hammer hat horse horseshoe jar key lizard fish-3 octopus pencil personal-car pocket "
    "stingray sea-snake shoe spoon spring teddy-bear tree truck turtle watch"
).split()


def _folder(data_dir, rel, what):
    root = Path(data_dir)
    path = root / rel if not str(root).endswith(str(rel)) else root
    if not path.exists():
        raise ValueError(
            f"{what} not found at {path}; pass the shared data folder (../shared/data from the "
            "repository root)"
        )
    return path


def load_house(data_dir):
    """Landmarks and supplied shape contexts of the 111 CMU house frames.

    Parameters
    ----------
    data_dir : path-like
        Folder holding ``cmu_house/house/`` (``../shared/data`` here).

    Returns
    -------
    points : ndarray of float64, shape (111, 30, 2)
        ``points[k - 1]`` = landmarks of frame ``k`` (``house/label/house{k}``), image
        ``(x, y)`` coordinates; landmark ``i`` is the same physical point in every frame, so the
        ground truth between any two frames is the identity.
    scf : ndarray of float64, shape (111, 30, 60)
        The supplied shape-context histograms (``house/house{k:03d}.scf``) divided by 29 (the
        number of other landmarks), i.e. fractions as in
        :func:`pm_perm.matching.features.shape_context`.

    Notes
    -----
    Reads 222 small text files, well under a second. Frame ``k``'s image is
    ``house/images/house.seq{k - 1}.png``.
    """
    root = _folder(data_dir, HOUSE_DIR, "CMU house data")
    points = np.empty((N_HOUSE_FRAMES, N_HOUSE_POINTS, 2))
    scf = np.empty((N_HOUSE_FRAMES, N_HOUSE_POINTS, 60))
    for k in range(1, N_HOUSE_FRAMES + 1):
        points[k - 1] = np.loadtxt(root / "label" / f"house{k}")
        scf[k - 1] = np.loadtxt(root / f"house{k:03d}.scf")
    return points, scf / (N_HOUSE_POINTS - 1)


def house_image_path(data_dir, frame):
    """Path of the image of frame ``frame`` (1..111)."""
    return _folder(data_dir, HOUSE_DIR, "CMU house data") / "images" / f"house.seq{frame - 1}.png"


def house_pairs(data_dir, gap, split):
    """Frame pairs at a given frame gap from ``house/pairs/houses{gap}_{split}.txt``.

    Parameters
    ----------
    data_dir : path-like
    gap : int
        One of 0, 10, ..., 90.
    split : {"train", "validate", "test"}

    Returns
    -------
    ndarray of int64, shape (n_pairs, 2)
        Frame numbers (1..111); two consecutive lines of the file make one pair (the paths in
        those files are stale, only the frame number of the first token is used).
    """
    if gap not in HOUSE_GAPS:
        raise ValueError(f"gap must be one of {HOUSE_GAPS}; got {gap!r}")
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}; got {split!r}")
    path = _folder(data_dir, HOUSE_DIR, "CMU house data") / "pairs" / f"houses{gap}_{split}.txt"
    frames = []
    for line in path.read_text().splitlines():
        if line.strip():
            m = re.search(r"house(\d+)\s", line.split()[0] + " ")
            if m is None:
                raise ValueError(f"cannot parse a frame number from line {line!r} of {path}")
            frames.append(int(m.group(1)))
    if len(frames) % 2:
        raise ValueError(f"{path} has an odd number of frames ({len(frames)})")
    return np.asarray(frames, dtype=np.int64).reshape(-1, 2)


def mpeg7_class_index(name, instance=0):
    """Column of ``C_cl`` holding instance ``instance`` (0..19) of MPEG-7 class ``name``."""
    if name not in MPEG7_CLASSES:
        raise ValueError(f"unknown MPEG-7 class {name!r}; choose one of {MPEG7_CLASSES}")
    if not 0 <= instance < 20:
        raise ValueError(f"instance must be in 0..19; got {instance}")
    return 20 * MPEG7_CLASSES.index(name) + instance


def load_mpeg7_contour(data_dir, name="horse", instance=0):
    """One closed MPEG-7 contour (100 distinct points, the closing duplicate dropped).

    Parameters
    ----------
    data_dir : path-like
        Folder holding ``shapes/mpeg7_closed_BayesLASA/MPEG7closed.mat``.
    name : str
        MPEG-7 class name (``MPEG7closedLabels.txt``), default ``"horse"``.
    instance : int
        Which of the class's 20 shapes.

    Returns
    -------
    ndarray of float64, shape (100, 2)
        Contour ``(x, y)`` in order along the curve.
    """
    from scipy.io import loadmat

    path = _folder(data_dir, MPEG7_FILE, "MPEG-7 contours")
    C = loadmat(path)["C_cl"]
    return np.ascontiguousarray(C[:, :-1, mpeg7_class_index(name, instance)].T, dtype=np.float64)


def make_silhouette_pairs(contour, n_points=20, n_copies=200, n_pairs=None, shear=0.5,
                          noise=0.02, seed=0):
    """Randomly sheared, noised copies of points on a contour, and random pairs of copies.

    Parameters
    ----------
    contour : array_like of float, shape (K, 2)
        Closed contour (e.g. :func:`load_mpeg7_contour`).
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
