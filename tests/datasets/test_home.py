"""data_home: the shared data folder, $PM_PERM_DATA overriding ../shared/data."""

from pathlib import Path

import pytest

import pm_perm
from pm_perm.datasets import DATA_ENV, data_home, data_path
from pm_perm.datasets.caltech_silhouettes import load_caltech101_silhouettes


def test_default_is_shared_data_beside_the_repository(monkeypatch):
    monkeypatch.delenv(DATA_ENV, raising=False)
    repository = Path(pm_perm.__file__).resolve().parents[1]
    assert data_home() == repository.parent / "shared" / "data"


def test_environment_variable_overrides_the_default(monkeypatch, tmp_path):
    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    assert data_home() == tmp_path
    monkeypatch.setenv(DATA_ENV, "")  # empty: as if unset
    assert data_home().parts[-2:] == ("shared", "data")


def test_data_path_accepts_the_shared_folder_or_the_data_set_itself(tmp_path):
    assert data_path("cmu_house/house", tmp_path) == tmp_path / "cmu_house" / "house"
    own = tmp_path / "cmu_house" / "house"
    assert data_path("cmu_house/house", own) == own


def test_a_missing_data_set_names_the_folder_and_the_variable(monkeypatch, tmp_path):
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(ValueError, match=f"Caltech-101 Silhouettes not found at "
                                         f"{tmp_path / 'nowhere'}.*{DATA_ENV}"):
        load_caltech101_silhouettes()
