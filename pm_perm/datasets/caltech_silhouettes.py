"""Caltech-101 Silhouettes (28 x 28): reader and a seeded train/validation/test split.

The data set (Marlin, Swersky, Chen & de Freitas, AISTATS 2010) has 8,671 binary 28 x 28
silhouettes of 101 classes. The shared ``.mat`` holds ``X`` (8671, 784), ``Y`` (1, 8671) with
classes 1..101 and ``classnames``, without a split; :func:`load_caltech101_silhouettes` makes a
seeded random split with the sizes of the published one (4,100 / 2,264 / 2,307).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

SPLIT_SIZES = (4100, 2264, 2307)
RELATIVE_PATH = Path("shapes/caltech101_silhouettes_28/caltech101_silhouettes_28.mat")


def load_caltech101_silhouettes(data_dir, seed=0):
    """Read the silhouettes and split them at random with the published split sizes.

    Parameters
    ----------
    data_dir : path-like
        Folder containing ``shapes/caltech101_silhouettes_28/caltech101_silhouettes_28.mat``
        (``../shared/data`` here), or the ``.mat`` file itself.
    seed : int
        Seed of the permutation that assigns images to splits.

    Returns
    -------
    splits : dict
        ``{"train": (X, y), "valid": (X, y), "test": (X, y)}``, ``X`` float64 (n, 784) in
        {0, 1}, ``y`` int64 class indices 0..100.
    classnames : list of str
    """
    from scipy.io import loadmat

    path = Path(data_dir)
    if path.is_dir():
        path = path / RELATIVE_PATH
    if not path.is_file():
        raise ValueError(f"Caltech-101 Silhouettes not found at {path}; pass ../shared/data")
    mat = loadmat(path)
    X = mat["X"].astype(np.float64)
    y = mat["Y"].reshape(-1).astype(np.int64) - 1
    names = [str(np.asarray(c).reshape(-1)[0]) for c in mat["classnames"].reshape(-1)]
    perm = np.random.default_rng(seed).permutation(len(y))
    bounds = np.cumsum((0,) + SPLIT_SIZES)
    splits = {}
    for key, lo, hi in zip(("train", "valid", "test"), bounds[:-1], bounds[1:], strict=True):
        idx = perm[lo:hi]
        splits[key] = (X[idx], y[idx])
    return splits, names
