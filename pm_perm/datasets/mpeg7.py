"""Closed MPEG-7 contours (Latecki et al. 2000), as prepared for BayesLASA.

The shared ``shapes/mpeg7_closed_BayesLASA/MPEG7closed.mat`` holds ``C_cl``: 1,300 closed
contours of 101 points (the last repeats the first), 20 instances of each of 65 classes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pm_perm.datasets import data_path, not_found

__all__ = ["MPEG7_CLASSES", "load_mpeg7_contour", "mpeg7_class_index"]

MPEG7_FILE = Path("shapes/mpeg7_closed_BayesLASA/MPEG7closed.mat")
#: Class names in the order of ``C_cl``'s columns (``MPEG7closedLabels.txt``).
MPEG7_CLASSES = (
    "bone comma half-circle heart misk apple bat beetle bell bird bottle brick butterfly camel "
    "car carriage cattle cell-phone child chopper classic-car crown cup deer flower-5-petals "
    "flower-6-petals flower-7-petals four-corners three-corners cross five-corners "
    "flower-10-petals letter-T circle dog elephant face fish-1 fish-2 fly fork fountain guitar "
    "hammer hat horse horseshoe jar key lizard fish-3 octopus pencil personal-car pocket "
    "stingray sea-snake shoe spoon spring teddy-bear tree truck turtle watch"
).split()


def mpeg7_class_index(name, instance=0):
    """Column of ``C_cl`` holding instance ``instance`` (0..19) of MPEG-7 class ``name``."""
    if name not in MPEG7_CLASSES:
        raise ValueError(f"unknown MPEG-7 class {name!r}; choose one of {MPEG7_CLASSES}")
    if not 0 <= instance < 20:
        raise ValueError(f"instance must be in 0..19; got {instance}")
    return 20 * MPEG7_CLASSES.index(name) + instance


def load_mpeg7_contour(name="horse", instance=0, data_root=None):
    """One closed MPEG-7 contour (100 distinct points, the closing duplicate dropped).

    Parameters
    ----------
    name : str
        MPEG-7 class name (:data:`MPEG7_CLASSES`), default ``"horse"``.
    instance : int
        Which of the class's 20 shapes.
    data_root : str or path-like, optional
        Folder holding ``shapes/mpeg7_closed_BayesLASA/MPEG7closed.mat`` (or that file).
        Default: :func:`pm_perm.datasets.data_home`.

    Returns
    -------
    ndarray of float64, shape (100, 2)
        Contour ``(x, y)`` in order along the curve.

    Raises
    ------
    ValueError
        An unknown class or instance, or the file is not found.
    """
    from scipy.io import loadmat

    column = mpeg7_class_index(name, instance)
    path = data_path(MPEG7_FILE, data_root)
    if not path.exists():
        raise ValueError(not_found("MPEG-7 contours", path))
    C = loadmat(path)["C_cl"]
    return np.ascontiguousarray(C[:, :-1, column].T, dtype=np.float64)
