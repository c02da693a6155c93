"""Fits of the ranking models (:mod:`pm_perm.preferences.fitting`): MAP (fit_map, one
multi-start loop shared with fit_map_type2), NUTS, new counts (set_counts) and the order model's
arrays from a fit (posterior_params). The type-II MAP's shrinkage: test_shrinkage.py."""

import arviz as az
import numpy as np
import pymc as pm
import pytest
import xarray as xr

from pm_perm.inference import CompiledMAP, MapFitError
from pm_perm.inference.laplace import laplace_log_evidence, negative_hessian
from pm_perm.preferences import fitting as rfit
from pm_perm.preferences import models as rmod
from pm_perm.preferences.synthetic import rank_one_logits, simulate_rankings

LENGTHS = [0.0, 0.3, 0.3, 0.0, 0.4]  # top-1, top-2 and complete ballots of 4 items


def test_failed_map_is_an_error():
    data = simulate_rankings(200, utilities=[1.0, 0.0, -1.0], rng=10)
    with pytest.raises(RuntimeError, match="did not converge"):
        rfit.fit_map(rmod.plackett_luce_model(data), maxiter=1)


@pytest.mark.parametrize("family, builder, K", [
    ("plackett-luce", rmod.plackett_luce_model, 1), ("full", rmod.full_model, 2)])
def test_set_counts_refits_like_a_model_built_on_the_fold(family, builder, K):
    data = simulate_rankings(400, logits=rank_one_logits(np.array([1.0, 0.3, -0.2, -1.1])),
                             length_probs=LENGTHS, rng=5)
    fold = np.random.default_rng(6).binomial(data.counts, 0.5)
    refit = rfit.set_counts(builder(data, components=K), fold)
    fresh = builder(data.with_counts(fold), components=K)  # zero-count orders dropped
    assert refit.data.n_rankings == fold.sum()
    # the same log posterior at the same parameters (zero-count orders contribute nothing)
    point = fresh.model.initial_point()
    point = {k: v + np.random.default_rng(7).normal(size=np.shape(v)) * 0.5
             for k, v in point.items()}
    np.testing.assert_allclose(refit.model.compile_logp()(point),
                               fresh.model.compile_logp()(point), rtol=1e-12)
    with pytest.raises(ValueError, match="non-negative integers"):
        rfit.set_counts(refit, -fold)
    with pytest.raises(ValueError, match="all counts are zero"):
        rfit.set_counts(refit, np.zeros_like(fold))


def test_fit_map_is_find_maps_estimate_and_reuses_its_compiled_functions():
    data = simulate_rankings(300, logits=rank_one_logits(np.array([1.0, 0.3, -0.2, -1.1])),
                             length_probs=LENGTHS, rng=8)
    rm = rmod.full_model(data, components=2)
    point = rfit.fit_map(rm, seed=3)
    idata = pm.find_MAP(model=rm.model, jitter=True, random_seed=3, return_inferencedata=True,
                        progressbar=False, maxiter=20_000)
    assert set(point) - {"_optimizer"} == set(idata["posterior"].data_vars)
    # the same start and objective; both stop on L-BFGS-B's relative-reduction test, so the
    # optimum agrees to that tolerance (the full model's tau direction is flat on 300 ballots)
    find_map_logp = -float(idata["optimizer_result"]["fun"].values)
    np.testing.assert_allclose(point["_optimizer"]["log_posterior"], find_map_logp, rtol=1e-5)
    for name in ("W", "mixture_weights", "tau", "length_probs"):
        np.testing.assert_allclose(point[name], idata["posterior"][name].values[0, 0], atol=0.05)
    # a refit on new counts uses the same compiled functions and sees the new data
    compiled = rfit._COMPILED_MAP[rm.model]
    refit = rfit.fit_map(rfit.set_counts(rm, data.counts * 2), seed=3)
    assert rfit._COMPILED_MAP[rm.model] is compiled
    assert refit["_optimizer"]["log_posterior"] < 1.5 * point["_optimizer"]["log_posterior"]


def test_fit_nuts_chooses_the_sampler_and_its_options(monkeypatch):
    """What ``pm.sample`` receives from fit_nuts (``checked_sample`` stubbed, so nothing is
    compiled; the sampling run itself is the next test): nutpie with its low-rank mass matrix
    when nutpie is installed, the caller's ``nuts`` options over that default, PyMC's NUTS
    when asked or when nutpie is missing, and an error for any other sampler."""
    import importlib.util

    pytest.importorskip("nutpie")
    seen = []

    def fake_sample(model, **kwargs):
        seen.append(kwargs)
        return xr.DataTree(), None

    monkeypatch.setattr(rfit, "checked_sample", fake_sample)
    rm = rmod.full_model(simulate_rankings(20, utilities=[1.0, 0.0, -1.0], rng=0))
    runs = [rfit.fit_nuts(rm, draws=5, tune=5, chains=1),
            rfit.fit_nuts(rm, nuts={"adaptation": "diag", "store_mass_matrix": True}),
            rfit.fit_nuts(rm, sampler="pymc")]
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "nutpie" else real_find_spec(name, *a))
    runs.append(rfit.fit_nuts(rm))
    assert [r.attrs["pm_perm_sampler"] for r in runs] == ["nutpie", "nutpie", "pymc", "pymc"]
    assert seen[0]["nuts_sampler"] == "nutpie" and seen[0]["nuts"] == {"adaptation": "low_rank"}
    assert (seen[0]["draws"], seen[0]["tune"], seen[0]["chains"]) == (5, 5, 1)
    assert seen[1]["nuts"] == {"adaptation": "diag", "store_mass_matrix": True}
    for kwargs in seen[2:]:
        assert "nuts_sampler" not in kwargs and kwargs["compute_convergence_checks"] is False
    with pytest.raises(ValueError, match="sampler must be"):
        rfit.fit_nuts(rm, sampler="stan")
    assert len(seen) == 4


@pytest.mark.numba  # nutpie runs compiled graphs
@pytest.mark.slow  # 30-45 s, nearly all of it compiling the full model for nutpie
def test_fit_nuts_runs_nutpie_with_low_rank_adaptation(monkeypatch):
    """With nutpie installed, fit_nuts samples with nutpie and its low-rank mass matrix (the
    full model's W entries are strongly correlated); sampler="pymc" is PyMC's NUTS. A model
    compiled for nutpie in the default run: Getting started's PartialRanking model
    (tests/test_docs_examples.py)."""
    import nutpie

    seen = {}
    real = nutpie.sample

    def spy(*args, **kwargs):
        seen.update(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(nutpie, "sample", spy)
    rng = np.random.default_rng(13)
    data = simulate_rankings(400, logits=rng.normal(size=(3, 3)), length_probs=[0, .5, 0, .5],
                             rng=2)
    rm = rmod.full_model(data, parametrization="centered")
    idata = rfit.fit_nuts(rm, draws=50, tune=50, chains=2, seed=3)
    assert seen["adaptation"] == "low_rank" and idata.attrs["pm_perm_sampler"] == "nutpie"
    assert np.all(np.isfinite(idata["posterior"]["W"].values))
    with pytest.raises(ValueError, match="sampler must be"):
        rfit.fit_nuts(rm, sampler="stan")


def test_map_with_a_non_finite_log_posterior_is_a_failed_fit(monkeypatch):
    """A negative prior scale (past the builder's check) makes the log posterior -inf
    everywhere; L-BFGS-B then "converges" on a zero gradient, which is no estimate."""
    from pm_perm.inference import MapFitError

    data = simulate_rankings(50, utilities=[1.0, 0.0, -1.0], rng=0)
    monkeypatch.setattr(rmod, "_check_scale", lambda name, value: value)
    for sigma in (-1.0, np.inf):
        rm = rmod.plackett_luce_model(data, prior_sigma=sigma)
        with pytest.raises(MapFitError, match=r"log posterior at the optimum is -inf \(not "
                           r"finite\)"):
            rfit.fit_map(rm)


def _point(K, M=4, family="full"):
    """A hand-built fit_map-style point of K components (no fit needed)."""
    rng = np.random.default_rng(0)
    name, shape = ("u", (K, M)) if family == "plackett-luce" else ("W", (K, M, M))
    return {name: rng.normal(size=shape), "length_probs": np.full(M + 1, 1.0 / (M + 1)),
            "mixture_weights": np.full(K, 1.0 / K)}


def test_posterior_params_refuses_a_mixture_without_its_weights():
    point = _point(2)
    del point["mixture_weights"]
    with pytest.raises(ValueError, match="'W' with 2 components but no 'mixture_weights'"):
        rfit.posterior_params(point, "full")
    with pytest.raises(ValueError, match=r"mixture_weights has shape \(3,\) but 'W' has 2"):
        rfit.posterior_params({**_point(2), "mixture_weights": np.ones(3) / 3}, "full")
    # the same for posterior draws (chain, draw, K, M, M) without mixture_weights
    W = np.zeros((1, 3, 2, 4, 4))
    idata = az.from_dict({"posterior": {"W": W, "length_probs": np.full((1, 3, 5), 0.2)}})
    with pytest.raises(ValueError, match="no 'mixture_weights'"):
        rfit.posterior_params(idata, "full")
    # one component needs no weights; K = 2 with them keeps them
    one = _point(1)
    del one["mixture_weights"]
    np.testing.assert_array_equal(rfit.posterior_params(one, "full")["weights"], [[1.0]])
    np.testing.assert_allclose(rfit.posterior_params(_point(2), "full")["weights"], [[0.5, 0.5]])


@pytest.mark.parametrize("key,value,match", [
    ("mixture_weights", np.array([0.7, 0.7]), r"mixture_weights is \[0\.7 0\.7\]: it must be "
                                              r"non-negative and sum to 1"),
    ("mixture_weights", np.array([1.5, -0.5]), "mixture_weights .* non-negative"),
    ("mixture_weights", np.array([np.nan, 1.0]), "mixture_weights .* non-negative"),
    ("length_probs", np.full(5, 0.3), "length_probs .* sum to 1"),
    ("length_probs", np.full(4, 0.25), r"length_probs has shape \(4,\) but 'W' has M = 4 "
                                       r"items; give M \+ 1 = 5"),
    ("W", np.full((2, 4, 4), np.inf), "'W' holds non-finite values"),
])
def test_posterior_params_refuses_what_is_not_a_distribution(key, value, match):
    """Weights that do not sum to 1 would silently mis-weight every mixture summary."""
    with pytest.raises(ValueError, match=match):
        rfit.posterior_params({**_point(2), key: value}, "full")


def test_posterior_params_names_the_draw_with_bad_weights():
    w = np.full((1, 3, 2), 0.5)
    w[0, 2] = [0.9, 0.9]
    idata = az.from_dict({"posterior": {"W": np.zeros((1, 3, 2, 4, 4)), "mixture_weights": w,
                                        "length_probs": np.full((1, 3, 5), 0.2)}})
    with pytest.raises(ValueError, match=r"mixture_weights \(draw 2\) is \[0\.9 0\.9\]"):
        rfit.posterior_params(idata, "full")


@pytest.mark.parametrize("family", ["PL", "bogus", "Plackett-Luce", None])
def test_posterior_params_refuses_an_unknown_family(family):
    with pytest.raises(ValueError, match=r"family must be one of \('plackett-luce', 'rank-one', "
                                         r"'full', 'top-k', 'pl-anchored'\)"):
        rfit.posterior_params(_point(1, family="plackett-luce"), family)


def test_posterior_params_names_a_parameter_of_another_family():
    with pytest.raises(ValueError, match="source has no 'W' .*family 'full'"):
        rfit.posterior_params(_point(1, family="plackett-luce"), "full")
    with pytest.raises(ValueError, match="source has no 'length_probs'"):
        rfit.posterior_params({"W": np.zeros((1, 4, 4))}, "rank-one")


# several compiled engines (67 s of wall time on empty compile caches at load 10): --runslow
@pytest.mark.slow
def test_fit_map_keeps_the_best_start_and_counts_the_converged_ones(monkeypatch):
    """fit_map and fit_map_type2 share one multi-start loop: the best log posterior over the
    starts that converge, a start that fails skipped and counted out."""
    data = simulate_rankings(300, logits=rank_one_logits(np.array([1.0, 0.3, -0.2, -1.1])),
                             length_probs=LENGTHS, rng=8)
    rm = rmod.full_model(data, components=2)
    singles = [rfit.fit_map(rm, seed=3 + 7919 * s)["_optimizer"]["log_posterior"]
               for s in range(3)]
    best = rfit.fit_map(rm, seed=3, n_starts=3)
    assert best["_optimizer"]["log_posterior"] == pytest.approx(max(singles), rel=1e-12)
    assert best["_optimizer"]["n_converged"] == 3
    engine = rfit._COMPILED_MAP[rm.model]
    real_fit = engine.fit

    def second_start_fails(*args, seed=None, **kwargs):
        if seed == 3 + 7919:
            raise MapFitError("start 1 failed")
        return real_fit(*args, seed=seed, **kwargs)

    monkeypatch.setattr(engine, "fit", second_start_fails)
    out = rfit.fit_map(rm, seed=3, n_starts=3)
    assert out["_optimizer"]["n_converged"] == 2
    expected = max(singles[0], singles[2])
    assert out["_optimizer"]["log_posterior"] == pytest.approx(expected, rel=1e-12)
    monkeypatch.setattr(engine, "fit", lambda *a, **k: (_ for _ in ()).throw(
        MapFitError("no start converges")))
    with pytest.raises(MapFitError, match=r"did not converge from any of 2 start\(s\)"):
        rfit.fit_map(rm, n_starts=2)


def test_mixture_evidence_is_of_the_unscaled_log_posterior():
    """A mixture's MAP objective is per ballot (CompiledMAP(scale=n_ballots)); the Laplace
    evidence must still use the Hessian of -log p itself, not of -log p / n (which shifted
    every log evidence by d/2 log n). Reference: the Hessian of an unscaled engine at the same
    point."""
    data = simulate_rankings(300, logits=rank_one_logits(np.array([1.0, 0.3, -0.2, -1.1])),
                             length_probs=LENGTHS, rng=8)
    rm = rmod.full_model(data, components=2, tau=0.0)
    point = rfit.fit_map_type2(rm, grid=(0.25,), n_starts=2)
    engine = rfit._COMPILED_MAP[rm.model]
    assert engine.scale == data.n_rankings
    unscaled = CompiledMAP(rm.model)
    x, keep = engine.x.copy(), rfit._order_model_coordinates(engine)
    unscaled.x = x  # the same raveled layout

    def grad(z):
        full = x.copy()
        full[keep] = z
        return -unscaled.value_and_grad(full)[1][keep]

    log_post = -unscaled.value_and_grad(x)[0]
    assert log_post == pytest.approx(point["_optimizer"]["log_posterior"], rel=1e-12)
    expected = laplace_log_evidence(log_post, negative_hessian(grad, x[keep]))
    assert point["_optimizer"]["log_evidence"][0.25] == pytest.approx(expected, abs=1e-3)


def test_the_map_engine_compiles_the_orders_as_a_constant_and_follows_a_change():
    """The fits' engine compiles the ``orders`` container as a constant (its data-only work
    done once) with the model's objective; new counts keep the engine, orders set to other
    values (``pm.set_data``) compile a new one that sees them."""
    from pm_perm.preferences.anchored import pl_anchored_model

    data = simulate_rankings(80, utilities=[1.0, 0.3, -0.2, -1.1], length_probs=LENGTHS, rng=4)
    rm = pl_anchored_model(data, tau=0.25)
    engine = rfit._map_engine(rm, 10)
    np.testing.assert_array_equal(engine.frozen_data["orders"], data.orders)
    plain = CompiledMAP(rm.model)  # the objective on the pm.Data orders
    x = engine.x + np.random.default_rng(0).normal(0, 0.3, engine.x.size)
    plain.x = engine.x  # the same raveled layout

    def same(a, b):
        (va, ga), (vb, gb) = a.value_and_grad(x), b.value_and_grad(x)
        return va == pytest.approx(vb, rel=1e-12) and np.allclose(ga, gb, rtol=1e-10, atol=1e-10)

    assert same(engine, plain)
    rfit.set_counts(rm, data.counts * 2)
    assert rfit._map_engine(rm, 10) is engine and same(engine, plain)
    pm.set_data({"orders": data.orders[::-1]}, model=rm.model)  # other orders, same counts
    new = rfit._map_engine(rm, 10)
    assert new is not engine and rfit._COMPILED_MAP[rm.model] is new
    new.x = engine.x
    assert same(new, plain) and not same(engine, plain)
