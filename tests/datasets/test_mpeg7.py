import numpy as np
import pytest

from pm_perm.datasets import DATA_ENV
from pm_perm.datasets.mpeg7 import MPEG7_CLASSES, load_mpeg7_contour, mpeg7_class_index


@pytest.mark.data
def test_load_mpeg7_contour(shared_data):
    c = load_mpeg7_contour("horse", 3, shared_data)
    assert c.shape == (100, 2) and np.all(np.isfinite(c))
    assert len(np.unique(c, axis=0)) == 100  # the closing duplicate is dropped


def test_class_index_and_errors(monkeypatch, tmp_path):
    assert len(MPEG7_CLASSES) == 65 and mpeg7_class_index("watch", 19) == 1299
    with pytest.raises(ValueError, match="unknown MPEG-7 class"):
        load_mpeg7_contour("unicorn")
    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    with pytest.raises(ValueError, match=f"MPEG-7 contours not found at {tmp_path}"):
        load_mpeg7_contour()
