"""check_find_map refuses a degenerate mixture optimum (identical components), naming the fix."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from pm_perm.inference import DEGENERATE_RTOL, MapFitError, check_find_map


def _fit(u, w):
    """A converged ``pm.find_MAP`` result (the DataTree layout) at the point ``u`` (K, M), ``w``."""
    K, M = u.shape
    coords = {"chain": [0], "draw": [0], "component": np.arange(K), "item": np.arange(M)}
    posterior = xr.Dataset(
        {"u": (("chain", "draw", "component", "item"), u[None, None]),
         "mixture_weights": (("chain", "draw", "component"), w[None, None])}, coords=coords)
    result = xr.Dataset({"success": True, "message": "CONVERGENCE: REL_REDUCTION_OF_F",
                         "status": 0, "nit": 12, "fun": 123.4, "method": "L-BFGS-B",
                         "x": ("x_dim", np.zeros(3)), "jac": ("x_dim", np.zeros(3))})
    return xr.DataTree.from_dict({"posterior": posterior, "optimizer_result": result})


def test_check_find_map_raises_on_identical_components():
    u = np.tile([1.5, 0.2, -0.4, -1.3], (3, 1))
    with pytest.raises(MapFitError, match=r"degenerate mixture optimum: the 3 components are "
                                          r"identical \(u equal.*fit_map\(rm, n_starts=.*"
                                          r"jitter=True"):
        check_find_map(_fit(u, np.full(3, 1 / 3)))
    # within the tolerance still identical; beyond it, distinct
    near = u + DEGENERATE_RTOL * 0.5 * np.arange(3)[:, None]
    with pytest.raises(MapFitError, match="degenerate"):
        check_find_map(_fit(near, np.full(3, 1 / 3)))


def test_check_find_map_accepts_distinct_components_and_equal_weights():
    u = np.array([[1.5, 0.2, -0.4, -1.3], [1.5, 0.2, -0.4, -1.2]])
    fit = _fit(u, np.array([0.5, 0.5]))  # equal weights alone are no degeneracy
    assert check_find_map(fit) is fit
    one = _fit(u[:1], np.ones(1))  # one component: nothing to compare
    assert check_find_map(one) is one
