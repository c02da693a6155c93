import numpy as np
import pytest

from pm_perm.datasets import DATA_ENV
from pm_perm.datasets.cmu_house import HOUSE_GAPS, house_image_path, house_pairs, load_house


@pytest.mark.data
def test_load_house(shared_data):
    points, scf = load_house(shared_data)
    assert points.shape == (111, 30, 2) and scf.shape == (111, 30, 60)
    assert np.all(np.isfinite(points))
    # the supplied histograms count the 29 other landmarks (some fall outside the outer ring)
    assert np.all(scf >= 0) and np.all(scf.sum(-1) <= 1 + 1e-9)
    assert house_image_path(1, shared_data).is_file()


@pytest.mark.data
@pytest.mark.parametrize("gap", [10, 90])
def test_house_pairs(shared_data, gap):
    for split in ("train", "validate", "test"):
        pairs = house_pairs(gap, split, shared_data)
        assert pairs.ndim == 2 and pairs.shape[1] == 2 and len(pairs) > 0
        assert np.all(pairs[:, 1] - pairs[:, 0] == gap)
        assert pairs.min() >= 1 and pairs.max() <= 111


@pytest.mark.data
def test_default_data_root_is_data_home(shared_data, monkeypatch):
    monkeypatch.setenv(DATA_ENV, str(shared_data))
    np.testing.assert_array_equal(house_pairs(10, "test"), house_pairs(10, "test", shared_data))


def test_house_arguments(monkeypatch, tmp_path):
    with pytest.raises(ValueError, match="gap"):
        house_pairs(15, "train", "nowhere")
    with pytest.raises(ValueError, match="split"):
        house_pairs(10, "valid", "nowhere")
    with pytest.raises(ValueError, match="not found"):
        load_house("/nonexistent-folder")
    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    with pytest.raises(ValueError, match=f"CMU house data not found at {tmp_path}"):
        load_house()
    assert HOUSE_GAPS == (0, 10, 20, 30, 40, 50, 60, 70, 80, 90)
