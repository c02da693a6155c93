"""Data sets: where the shared data live, and their loaders.

Every loader takes ``data_root=None``: the folder holding the shared data, by default
:func:`data_home`. The data are read in place, never copied into the project.

:func:`data_home`
    ``$PM_PERM_DATA`` when that environment variable is set, else ``../shared/data`` next to
    the repository (the folder beside the checkout; it may not exist).
:mod:`~pm_perm.datasets.mq2008`
    LETOR 4.0 MQ2008, its five folds rebuilt from the ``Fold*/test.txt`` files.
:mod:`~pm_perm.datasets.cmu_house`
    The CMU house sequence: landmarks, shape contexts and frame pairs.
:mod:`~pm_perm.datasets.mpeg7`
    Closed MPEG-7 contours (for the generated silhouette matching experiment).
:mod:`~pm_perm.datasets.caltech_silhouettes`
    Caltech-101 Silhouettes (28 x 28, 101 classes) with a seeded split.
:mod:`~pm_perm.datasets.embedded_digits`
    Generated images holding 1 to 4 distinct digit classes (Swersky et al. 2012, sec. 5.1) and
    the grid-cell RBM features used with them; no shared file needed.

This package imports no task package (``pm_perm.learning_to_rank`` and the others may import it).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["DATA_ENV", "data_home", "data_path", "not_found"]

#: Environment variable naming the shared data folder (overrides the default of
#: :func:`data_home`).
DATA_ENV = "PM_PERM_DATA"


def data_home() -> Path:
    """The shared data folder: ``$PM_PERM_DATA``, else ``../shared/data`` beside the repository.

    Returns
    -------
    pathlib.Path
        The folder (it may not exist: loaders then raise, tests skip).
    """
    env = os.environ.get(DATA_ENV)
    if env:
        return Path(env).expanduser()
    return Path(__file__).resolve().parents[2].parent / "shared" / "data"


def data_path(relative, data_root=None) -> Path:
    """Where the data set at ``relative`` (inside the shared folder) lives.

    Parameters
    ----------
    relative : str or path-like
        Path of the data set inside the shared data folder, e.g. ``"cmu_house/house"``.
    data_root : str or path-like, optional
        The shared data folder, or the data set's own folder or file (a path ending with
        ``relative``). Default: :func:`data_home`.

    Returns
    -------
    pathlib.Path
        The path; whether it exists is for the caller to check (see :func:`not_found`).
    """
    root = data_home() if data_root is None else Path(data_root)
    return root if str(root).endswith(str(Path(relative))) else root / relative


def not_found(what, path) -> str:
    """The message of a loader whose data set ``what`` is not at ``path``."""
    return (f"{what} not found at {path}; pass data_root= the shared data folder, or set "
            f"{DATA_ENV} to it (default ../shared/data beside the repository)")
