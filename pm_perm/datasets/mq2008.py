"""LETOR 4.0 MQ2008: the five folds, rebuilt from the five ``Fold*/test.txt`` files.

The files are read by :func:`pm_perm.learning_to_rank.data.read_letor` (the LETOR format reader
of the task package), imported when a fold is loaded: importing this module imports no task
package. ``train.txt`` is not needed (see ``README.md`` of the shared data folder).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pm_perm.datasets import DATA_ENV, data_home

__all__ = ["MQ2008_N_FEATURES", "load_mq2008_fold", "mq2008_folder"]

#: Number of features of LETOR 4.0's MQ2007 and MQ2008.
MQ2008_N_FEATURES = 46


def mq2008_folder(data_root=None) -> Path:
    """The folder holding MQ2008's ``Fold1`` .. ``Fold5``.

    Parameters
    ----------
    data_root : str or path-like, optional
        The shared data folder holding ``MQ2008_LETOR4/MQ2008/Fold1..5`` (or that ``MQ2008``
        folder itself). Default: :func:`pm_perm.datasets.data_home`.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    FileNotFoundError
        No folder with the five ``Fold*/test.txt`` files.
    """
    root = data_home() if data_root is None else Path(data_root)
    for base in (root / "MQ2008_LETOR4" / "MQ2008", root / "MQ2008", root):
        if all((base / f"Fold{k}" / "test.txt").is_file() for k in range(1, 6)):
            return base
    raise FileNotFoundError(
        f"MQ2008 not found under {root}: expected MQ2008_LETOR4/MQ2008/Fold1..5/test.txt (pass "
        f"data_root= the folder that holds MQ2008_LETOR4, or set {DATA_ENV} to it)"
    )


def load_mq2008_fold(fold, data_root=None, *, single_doc="raise", query_norm=False):
    """Train, validation and test splits of MQ2008 fold ``fold``, rebuilt from its test files.

    LETOR 4.0's five folds rotate five disjoint query subsets; ``Fold{k}/test.txt`` is one of
    them and ``vali(Fold k) == test(Fold k-1)`` (cyclically). Hence ``train(Fold k)`` is the
    concatenation of ``test(Fold k+1)``, ``test(Fold k+2)`` and ``test(Fold k+3)`` (indices mod
    5), the order of LETOR's rotation (Fold 1 trains on subsets S1 S2 S3, validates on S4 and
    tests on S5). The validation file is checked against ``test(Fold k-1)``.

    Parameters
    ----------
    fold : int
        1 to 5.
    data_root : str or path-like, optional
        As in :func:`mq2008_folder`. Default: :func:`pm_perm.datasets.data_home`.
    single_doc, query_norm
        As in :func:`pm_perm.learning_to_rank.data.read_letor` (MQ2008 has no single-document
        query).

    Returns
    -------
    pm_perm.learning_to_rank.data.LetorFold
        ``(train, valid, test)``; the five subsets hold 784 queries and 15,211 documents with
        46 features and labels 0, 1, 2.

    Raises
    ------
    FileNotFoundError
        The data folder or a fold file is missing.
    ValueError
        A bad ``fold``, or a folder that does not follow the LETOR rotation.

    References
    ----------
    Qin, T. & Liu, T.-Y. (2013). Introducing LETOR 4.0 Datasets. arXiv:1306.2597.
    """
    # the LETOR reader and the split types belong to the task package, which may import this
    # package: imported here, on use, so that importing pm_perm.datasets imports no task package
    from pm_perm.learning_to_rank.data import LetorFold, read_letor

    if isinstance(fold, bool) or not isinstance(fold, int | np.integer) or not 1 <= fold <= 5:
        raise ValueError(f"fold must be an integer from 1 to 5, got {fold!r}")
    base = mq2008_folder(data_root)

    def test_file(k):
        return base / f"Fold{(k - 1) % 5 + 1}" / "test.txt"

    opts = {"n_features": MQ2008_N_FEATURES, "single_doc": single_doc, "query_norm": query_norm}
    train = read_letor([test_file(fold + i) for i in (1, 2, 3)], **opts)
    valid = read_letor(base / f"Fold{fold}" / "vali.txt", **opts)
    test = read_letor(test_file(fold), **opts)
    previous = read_letor(test_file(fold - 1), **opts)
    if not (
        np.array_equal(valid.qids, previous.qids)
        and np.array_equal(valid.group_ptr, previous.group_ptr)
        and np.array_equal(valid.y, previous.y)
        and np.array_equal(valid.X, previous.X)
    ):
        raise ValueError(
            f"{base / f'Fold{fold}' / 'vali.txt'} differs from {test_file(fold - 1)}: the folder "
            "does not follow the LETOR 4.0 rotation, so the training split cannot be rebuilt"
        )
    seen = np.concatenate([train.qids, valid.qids, test.qids])
    if np.unique(seen).size != seen.size:
        raise ValueError(f"the five test files under {base} share queries; they must be disjoint")
    return LetorFold(train, valid, test)
