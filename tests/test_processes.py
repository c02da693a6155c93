"""Multi-process sampling (pickled Ops and RVs), sampler agreement, and persistence of results."""

import numpy as np
import pymc as pm
import pytest
import xarray as xr

from pm_perm import PermutationExpFamily, edge_logits

pytestmark = pytest.mark.numba  # sampling: compiled code wins (tests/conftest.py)


def _model(seed=0, N=40, M=5):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(N, M, M, 2))
    theta = np.array([0.8, -0.5])
    y = pm.draw(PermutationExpFamily.dist(logits=x @ theta), random_seed=seed)
    with pm.Model() as model:
        th = pm.Normal("theta", 0.0, 2.0, shape=2)
        PermutationExpFamily("y", logits=edge_logits(x, th), observed=y)
    return model


def test_two_processes_four_chains_and_nutpie_agree(tmp_path):
    model = _model()
    with model:
        multi = pm.sample(300, tune=300, chains=4, cores=2, nuts_sampler="pymc",
                          progressbar=False, random_seed=1, compute_convergence_checks=False)
        nut = pm.sample(300, tune=300, chains=2, progressbar=False, random_seed=2)
    assert multi.posterior.sizes["chain"] == 4
    a = multi.posterior["theta"].values.reshape(-1, 2)
    b = nut.posterior["theta"].values.reshape(-1, 2)
    # same posterior: means agree within 5 combined Monte Carlo standard errors (ESS ~ n / 3)
    se = np.sqrt(a.var(0) / (len(a) / 3) + b.var(0) / (len(b) / 3))
    assert np.all(np.abs(a.mean(0) - b.mean(0)) < 5 * se + 1e-3)
    np.testing.assert_allclose(a.std(0), b.std(0), rtol=0.25)
    # persistence: netCDF and zarr round trips keep the draws
    pytest.importorskip("h5netcdf")
    path = tmp_path / "idata.nc"
    multi.to_netcdf(path)
    back = xr.open_datatree(path)
    np.testing.assert_array_equal(back.posterior["theta"].values, multi.posterior["theta"].values)
    zpath = tmp_path / "idata.zarr"
    nut.to_zarr(zpath, consolidated=False)  # zarr 3: consolidated metadata is not in the spec
    zback = xr.open_datatree(zpath, engine="zarr", consolidated=False)
    np.testing.assert_array_equal(zback.posterior["theta"].values, nut.posterior["theta"].values)


def test_count_models_sample_in_two_processes():
    """NChooseK (Dirichlet count prior) and OrdinalNChooseK inside one model: four chains in two
    worker processes (the Ops and RVs are pickled to the workers) give finite, converging draws
    and a posterior predictive of valid labels."""
    import pytensor.tensor as pt

    from pm_perm import NChooseK, OrdinalNChooseK

    rng = np.random.default_rng(3)
    D, d = 5, 2
    X = rng.normal(size=(30, D, d))
    theta_true = np.array([1.0, -0.5])
    y_bin = pm.draw(NChooseK.dist(logits=X @ theta_true, count_probs=np.full(D + 1, 1 / (D + 1))),
                    random_seed=4)
    counts = np.array([2, 2, 1])
    y_ord = pm.draw(OrdinalNChooseK.dist(logits=X @ theta_true, counts=counts), random_seed=5)
    with pm.Model():
        theta = pm.Normal("theta", 0.0, 2.0, shape=d)
        pk = pm.Dirichlet("count_probs", a=np.ones(D + 1))
        NChooseK("y_bin", logits=pt.dot(X, theta), count_probs=pk, observed=y_bin)
        OrdinalNChooseK("y_ord", logits=pt.dot(X, theta), counts=counts, observed=y_ord)
        idata = pm.sample(150, tune=200, chains=4, cores=2, nuts_sampler="pymc",
                          progressbar=False, random_seed=6, compute_convergence_checks=False)
        ppc = pm.sample_posterior_predictive(idata.sel(draw=slice(0, 20)), progressbar=False,
                                             random_seed=7)
    post = idata.posterior["theta"].values
    assert post.shape == (4, 150, d) and np.all(np.isfinite(post))
    chain_means = post.mean(1)  # the four chains agree (same posterior) within a loose bound
    assert np.all(np.ptp(chain_means, axis=0) < 4 * post.reshape(-1, d).std(0) / np.sqrt(40))
    yb = ppc.posterior_predictive["y_bin"].values
    yo = ppc.posterior_predictive["y_ord"].values
    assert set(np.unique(yb)) <= {0, 1}
    assert np.all(np.stack([(yo == r).sum(-1) for r in range(3)], -1) == counts)
