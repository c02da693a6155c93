import numpy as np
import pymc as pm
import pytest

from pm_perm.inference import CompiledMAP, laplace_whitening, map_path


def _model(n=3):
    """theta ~ N(0, sigma), five observations y_k ~ N(theta, 1): MAP = sum(y) / (5 + 1/sigma^2)."""
    y = np.arange(5.0)[:, None] + np.arange(n)
    with pm.Model() as model:
        sigma = pm.Data("prior_sigma", 1.0)
        theta = pm.Normal("theta", 0.0, sigma, shape=n)
        pm.Normal("y", theta, 1.0, observed=y)
    return model, y.sum(0)


def _exact(total, sigma):
    return total / (5 + 1 / sigma**2)


def test_map_path_scalar_score_picks_the_best():
    model, total = _model()
    sigmas = (0.1, 1.0, 10.0)
    sigma, theta, scores, results = map_path(model, sigmas, lambda s, t: -abs(s - 1.0))
    assert sigma == 1.0 and set(scores) == set(results) == set(sigmas)
    np.testing.assert_allclose(theta, _exact(total, 1.0), rtol=1e-5)
    for s in sigmas:
        np.testing.assert_allclose(results[s].x, _exact(total, s), rtol=1e-5)
    # without a score only the first scale is fitted
    sigma, theta, scores, results = map_path(model, sigmas)
    assert sigma == 0.1 and scores == {} and list(results) == [0.1]


def test_map_path_tuple_scores_are_lexicographic_and_ties_go_to_the_earliest():
    model, total = _model()
    sigmas = (0.1, 1.0, 10.0, 100.0)
    # first criterion ties 1, 10 and 100; the second prefers 10
    first = {0.1: -1.0, 1.0: 0.0, 10.0: 0.0, 100.0: 0.0}
    second = {0.1: 9.0, 1.0: 1.0, 10.0: 2.0, 100.0: 2.0}
    sigma, _, scores, _ = map_path(model, sigmas, lambda s, t: (first[s], second[s]))
    assert sigma == 10.0 and scores[0.1] == (-1.0, 9.0)
    sigma, _, _, _ = map_path(model, sigmas, lambda s, t: (first[s],))
    assert sigma == 1.0


def test_map_path_start_and_memory_do_not_change_the_optimum():
    model, total = _model()
    _, theta, _, results = map_path(model, (1.0,), start=np.full(3, 50.0))
    np.testing.assert_allclose(theta, _exact(total, 1.0), rtol=1e-5)
    _, theta, _, _ = map_path(model, (1.0,), start=np.full(3, 50.0), maxcor=2)
    np.testing.assert_allclose(theta, _exact(total, 1.0), rtol=1e-5)
    with pytest.raises(ValueError):
        map_path(model, (1.0,), start=np.zeros(4))


@pytest.mark.parametrize("maxcor", [0, -3, 2.5, True, "10"])
def test_map_path_rejects_a_bad_memory(maxcor):
    model, _ = _model()
    with pytest.raises(ValueError, match="L-BFGS-B memory"):
        map_path(model, (1.0,), maxcor=maxcor)


def test_laplace_whitening_inverts_the_hessian():
    model, total = _model()
    loc, L = laplace_whitening(model, _exact(total, 1.0))
    # the negative log posterior has Hessian (5 + 1) I, so L L^T = I / 6
    np.testing.assert_allclose(L @ L.T, np.eye(3) / 6, rtol=1e-6, atol=1e-10)


@pytest.mark.numba  # the default backend is numba here, so "default" means numba
@pytest.mark.parametrize("python", [True, False])
def test_map_fits_compile_on_the_python_linker_unless_told_otherwise(monkeypatch, python):
    model, total = _model()
    made = []
    compile_fn = pm.Model.compile_fn

    def spy(self, *args, **kwargs):
        made.append(compile_fn(self, *args, **kwargs))
        return made[-1]

    monkeypatch.setattr(pm.Model, "compile_fn", spy)
    kwargs = {} if python else {"mode": None}
    _, theta, _, _ = map_path(model, (1.0,), **kwargs)
    compiled = CompiledMAP(model, **kwargs)
    values = compiled.fit(seed=3)
    expected = "VMLinker" if python else "NumbaLinker"
    assert type(made[0].maker.linker).__name__ == expected
    assert type(compiled._f.maker.linker).__name__ == expected
    np.testing.assert_allclose(theta, _exact(total, 1.0), rtol=1e-5)
    np.testing.assert_allclose(values["theta"], _exact(total, 1.0), rtol=1e-5)


def test_check_find_map_passes_a_converged_fit_and_refuses_an_early_stop():
    import pm_perm
    from pm_perm.inference import MapFitError, check_find_map

    model, total = _model()
    with model:
        fit = pm.find_MAP(return_inferencedata=True, progressbar=False, jitter=False)
    # PyMC warns, and still returns the point: the check makes it an error
    with model, pytest.warns(UserWarning, match="did not converge"):
        stopped = pm.find_MAP(return_inferencedata=True, progressbar=False, jitter=False,
                              maxiter=1)
    assert pm_perm.check_find_map(fit) is fit
    np.testing.assert_allclose(fit.posterior["theta"].values.ravel(), _exact(total, 1.0),
                               rtol=1e-5)
    assert pm_perm.MapFitError is MapFitError
    with pytest.raises(MapFitError, match=r"pm.find_MAP \(L-BFGS-B\) did not converge: STOP: "
                       r"TOTAL NO. OF ITERATIONS.*status 1, 1 iterations"):
        check_find_map(stopped)


def test_check_find_map_needs_the_optimizer_result():
    from pm_perm.inference import check_find_map

    model, _ = _model()
    with model, pytest.warns(FutureWarning):
        point = pm.find_MAP(progressbar=False, jitter=False)
    with pytest.raises(ValueError, match=r"return_inferencedata=True.*got dict"):
        check_find_map(point)


def test_check_draws_reports_diagnostics_and_refuses_short_or_nan_draws():
    import xarray as xr

    import pm_perm
    from pm_perm.inference import SamplingError

    rng = np.random.default_rng(0)
    theta = rng.normal(size=(2, 1000, 3))  # independent draws: r_hat near 1
    diverging = np.zeros((2, 1000), dtype=bool)
    diverging[1, 7] = True

    def idata(values):
        return xr.DataTree.from_dict({
            "posterior": xr.Dataset({"theta": (("chain", "draw", "f"), values)}),
            "sample_stats": xr.Dataset({"diverging": (("chain", "draw"), diverging)})})

    diagnostics = pm_perm.check_draws(idata(theta), chains=2, draws=1000)
    assert diagnostics["chains"] == 2 and diagnostics["draws"] == 1000
    assert diagnostics["divergences"] == 1 and diagnostics["max_r_hat"] < 1.01
    warnings = pm_perm.sampler_warnings(diagnostics)
    assert len(warnings) == 1 and warnings[0].startswith("1 divergent transitions")
    assert len(pm_perm.sampler_warnings({**diagnostics, "max_r_hat": 1.2})) == 2
    with pytest.raises(SamplingError, match="2 chain.* x 1000 draws.*fewer than the 2 x 2000"):
        pm_perm.check_draws(idata(theta), chains=2, draws=2000)
    with pytest.raises(SamplingError, match="fewer than the 3 x 1000"):
        pm_perm.check_draws(idata(theta), chains=3, draws=1000)
    theta[0, 3, 1] = np.nan
    with pytest.raises(SamplingError, match="non-finite draws of 'theta' \\(1 values\\)"):
        pm_perm.check_draws(idata(theta), chains=2, draws=1000)


@pytest.mark.parametrize("sigma", [-1.0, np.nan])
def test_compiled_map_refuses_a_non_finite_optimum(sigma):
    """A log posterior of -inf (or NaN) everywhere: L-BFGS-B stops at once, "converged" on a
    zero gradient or not; either way the fit is refused, with a message saying why."""
    from pm_perm.inference import MapFitError

    model, total = _model()
    with model:
        pm.set_data({"prior_sigma": sigma})
    engine = CompiledMAP(model)
    with pytest.raises(MapFitError, match=r"\(not finite\)"):
        engine.fit(seed=0)
    assert not engine.result.success
    with pytest.raises(MapFitError):
        map_path(model, [sigma])
    with model:
        pm.set_data({"prior_sigma": 1.0})
    values = CompiledMAP(model).fit(seed=0)  # a legitimate fit still succeeds
    assert values["_info"]["converged"]
    np.testing.assert_allclose(values["theta"], _exact(total, 1.0), rtol=1e-5)


def test_scaled_objective_has_the_same_optimum_and_reports_the_unscaled_density():
    """``scale`` (e.g. a model's number of ballots) divides the objective; the optimum and the
    reported log-density are the unscaled fit's. A scale read from ``pm.Data`` follows it."""
    model, total = _model()
    plain = CompiledMAP(model).fit()
    with model:
        n = pm.Data("n", 1e6)
    scaled = CompiledMAP(model, scale=n)
    fit = scaled.fit()
    np.testing.assert_allclose(fit["theta"], _exact(total, 1.0), rtol=1e-5)
    np.testing.assert_allclose(fit["_info"]["log_posterior"], plain["_info"]["log_posterior"],
                               rtol=1e-9)
    value, grad = scaled.value_and_grad(scaled.x)
    assert abs(value) < 1e-3 and np.all(np.abs(grad) < 1e-3)  # per 1e6
    scaled.set_data(n=-1.0)
    with pytest.raises(ValueError, match="scale must be positive"):
        scaled.fit()
