"""The CMU house sequence: 111 frames of a toy house with 30 hand-labelled landmarks.

Value convention: landmark ``i`` is the same physical point in every frame, so the ground-truth
matching between any two frames is the identity (Caetano et al. 2009). The files are read from
``cmu_house/house`` of the shared data folder (:func:`pm_perm.datasets.data_home`).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from pm_perm.datasets import data_path, not_found

__all__ = [
    "HOUSE_GAPS",
    "N_HOUSE_FRAMES",
    "N_HOUSE_POINTS",
    "SPLITS",
    "house_folder",
    "house_image_path",
    "house_pairs",
    "load_house",
]

HOUSE_DIR = Path("cmu_house/house")
#: Frame gaps of the published pair lists (``house/pairs/houses{gap}_{split}.txt``).
HOUSE_GAPS = tuple(range(0, 100, 10))
SPLITS = ("train", "validate", "test")
N_HOUSE_FRAMES, N_HOUSE_POINTS = 111, 30


def house_folder(data_root=None) -> Path:
    """The ``cmu_house/house`` folder; ``ValueError`` when it does not exist.

    Parameters
    ----------
    data_root : str or path-like, optional
        The shared data folder (or ``cmu_house/house`` itself). Default:
        :func:`pm_perm.datasets.data_home`.
    """
    path = data_path(HOUSE_DIR, data_root)
    if not path.exists():
        raise ValueError(not_found("CMU house data", path))
    return path


def load_house(data_root=None):
    """Landmarks and supplied shape contexts of the 111 CMU house frames.

    Parameters
    ----------
    data_root : str or path-like, optional
        Folder holding ``cmu_house/house/``. Default: :func:`pm_perm.datasets.data_home`.

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

    Raises
    ------
    ValueError
        The folder is not found.

    Notes
    -----
    Reads 222 small text files. Frame ``k``'s image is :func:`house_image_path` ``(k)``.
    """
    root = house_folder(data_root)
    points = np.empty((N_HOUSE_FRAMES, N_HOUSE_POINTS, 2))
    scf = np.empty((N_HOUSE_FRAMES, N_HOUSE_POINTS, 60))
    for k in range(1, N_HOUSE_FRAMES + 1):
        points[k - 1] = np.loadtxt(root / "label" / f"house{k}")
        scf[k - 1] = np.loadtxt(root / f"house{k:03d}.scf")
    return points, scf / (N_HOUSE_POINTS - 1)


def house_image_path(frame, data_root=None) -> Path:
    """Path of the image of frame ``frame`` (1..111), ``house/images/house.seq{frame - 1}.png``."""
    return house_folder(data_root) / "images" / f"house.seq{frame - 1}.png"


def house_pairs(gap, split, data_root=None):
    """Frame pairs at a given frame gap from ``house/pairs/houses{gap}_{split}.txt``.

    Parameters
    ----------
    gap : int
        One of 0, 10, ..., 90.
    split : {"train", "validate", "test"}
    data_root : str or path-like, optional
        As in :func:`load_house`.

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
    path = house_folder(data_root) / "pairs" / f"houses{gap}_{split}.txt"
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
