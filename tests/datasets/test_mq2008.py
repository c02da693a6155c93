"""MQ2008 folds rebuilt from the five test files (pm_perm.datasets.mq2008)."""

import numpy as np
import pytest

from pm_perm.datasets import DATA_ENV
from pm_perm.datasets.mq2008 import MQ2008_N_FEATURES, load_mq2008_fold, mq2008_folder
from pm_perm.learning_to_rank.data import query_level_norm


def _fake_mq2008(tmp_path, break_vali=False):
    """Five disjoint subsets of two queries each; vali(Fold k) = test(Fold k-1)."""
    base = tmp_path / "MQ2008_LETOR4" / "MQ2008"
    subsets = []
    for k in range(1, 6):
        lines = [f"{(q + k) % 3} qid:{10 * k + q} 1:{k} 2:0.{q}{d}" for q in (0, 1) for d in (1, 2)]
        subsets.append("\n".join(lines) + "\n")
    for k in range(1, 6):
        (base / f"Fold{k}").mkdir(parents=True)
        (base / f"Fold{k}" / "test.txt").write_text(subsets[k - 1])
        vali = subsets[(k - 2) % 5]
        if break_vali and k == 3:
            vali = vali.replace("1:2", "1:9")
        (base / f"Fold{k}" / "vali.txt").write_text(vali)
    return tmp_path


def test_fold_rotation_on_a_fake_folder(tmp_path):
    root = _fake_mq2008(tmp_path)
    for k in range(1, 6):
        train, valid, test = load_mq2008_fold(k, root)
        # subset j is the test file of fold j and holds qids 10 j and 10 j + 1
        order = [(k + i - 1) % 5 + 1 for i in (1, 2, 3)]
        np.testing.assert_array_equal(train.qids, [10 * j + q for j in order for q in (0, 1)])
        np.testing.assert_array_equal(train.X[::2, 0], np.repeat(order, 2))
        prev = (k - 2) % 5 + 1
        np.testing.assert_array_equal(valid.qids, [10 * prev, 10 * prev + 1])
        np.testing.assert_array_equal(test.qids, [10 * k, 10 * k + 1])
        assert train.n_features == valid.n_features == test.n_features == MQ2008_N_FEATURES
    # the MQ2008 folder itself is accepted as data_root too
    np.testing.assert_array_equal(
        load_mq2008_fold(2, root / "MQ2008_LETOR4" / "MQ2008").test.qids, [20, 21]
    )


def test_fold_helper_errors(tmp_path):
    for bad in (0, 6, True, 1.0):
        with pytest.raises(ValueError, match="fold must be an integer from 1 to 5"):
            load_mq2008_fold(bad, tmp_path)
    with pytest.raises(FileNotFoundError, match="MQ2008 not found under"):
        load_mq2008_fold(1, tmp_path / "absent")
    root = _fake_mq2008(tmp_path, break_vali=True)
    with pytest.raises(ValueError, match="does not follow the LETOR 4.0 rotation"):
        load_mq2008_fold(3, root)
    load_mq2008_fold(1, root)  # other folds are unaffected


@pytest.mark.data
def test_mq2008_folds_on_the_real_files(shared_data):
    seen_qids, label_counts = set(), np.zeros(3, dtype=int)
    for k in range(1, 6):
        train, valid, test = load_mq2008_fold(k, shared_data)
        parts = (train, valid, test)
        assert all(s.n_features == 46 for s in parts)
        # the three splits are the five subsets: 784 queries, 15,211 documents
        assert sum(s.n_queries for s in parts) == 784
        assert sum(s.n_docs for s in parts) == 15211
        all_qids = np.concatenate([s.qids for s in parts])
        assert np.unique(all_qids).size == 784
        seen_qids.update(test.qids.tolist())
        label_counts += np.bincount(test.y, minlength=3)
        assert test.y.max() <= 2 and train.group_sizes.min() >= 2
        # the files are already query-level normalised: QueryLevelNorm leaves them unchanged
        if k == 1:
            np.testing.assert_array_equal(query_level_norm(train.X, train.group_ptr), train.X)
    assert len(seen_qids) == 784  # the five test files cover every query once
    np.testing.assert_array_equal(label_counts, [12279, 2001, 931])


def test_default_data_root_is_data_home(tmp_path, monkeypatch):
    root = _fake_mq2008(tmp_path)
    monkeypatch.setenv(DATA_ENV, str(root))
    assert mq2008_folder() == root / "MQ2008_LETOR4" / "MQ2008"
    np.testing.assert_array_equal(load_mq2008_fold(4).test.qids, [40, 41])
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "absent"))
    with pytest.raises(FileNotFoundError, match=f"MQ2008 not found under {tmp_path / 'absent'}"):
        load_mq2008_fold(1)
