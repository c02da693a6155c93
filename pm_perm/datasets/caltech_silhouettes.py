"""Caltech-101 Silhouettes (28 x 28): reader and a seeded train/validation/test split.

The data set (Marlin, Swersky, Chen & de Freitas, AISTATS 2010) has 8,671 binary 28 x 28
silhouettes of 101 classes. The shared ``.mat`` holds ``X`` (8671, 784), ``Y`` (1, 8671) with
classes 1..101 and ``classnames``, without a split; :func:`load_caltech101_silhouettes` makes a
seeded random split with the sizes of the published one (4,100 / 2,264 / 2,307).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pm_perm.datasets import data_home, not_found

__all__ = ["SPLIT_SIZES", "load_caltech101_silhouettes"]

SPLIT_SIZES = (4100, 2264, 2307)
RELATIVE_PATH = Path("shapes/caltech101_silhouettes_28/caltech101_silhouettes_28.mat")


def load_caltech101_silhouettes(data_root=None, seed=0):
    """Read the silhouettes and split them at random with the published split sizes.

    Parameters
    ----------
    data_root : str or path-like, optional
        Folder containing ``shapes/caltech101_silhouettes_28/caltech101_silhouettes_28.mat``,
        or the ``.mat`` file itself. Default: :func:`pm_perm.datasets.data_home`.
    seed : int
        Seed of the permutation that assigns images to splits.

    Returns
    -------
    splits : dict
        ``{"train": (X, y), "valid": (X, y), "test": (X, y)}``, ``X`` float64 (n, 784) in
        {0, 1}, ``y`` int64 class indices 0..100.
    classnames : list of str

    Raises
    ------
    ValueError
        The file is not found.
    """
    from scipy.io import loadmat

    root = data_home() if data_root is None else Path(data_root)
    path = root if root.is_file() else root / RELATIVE_PATH
    if not path.is_file():
        raise ValueError(not_found("Caltech-101 Silhouettes", path))
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
