"""Ranking variables with counts (``weights=counts, observed=orders``) have one row per BALLOT:
per-ballot pointwise log-likelihoods (az.loo / az.compare as on the data expanded by hand),
posterior predictive draws per ballot, a summed logp per distinct order.

Posterior draws are a fixed set put in a DataTree (no sampling: the test is of what PyMC and
ArviZ compute from the draws). Before the ballots mechanism (pm_perm.distributions._ballots),
the pointwise log-likelihood had one entry per DISTINCT order, ``count * log p``: every test of
loo, compare, the posterior predictive's size and the ballot dim failed.
"""

import warnings

import arviz as az
import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
import xarray as xr
from pytensor.gradient import verify_grad

from pm_perm import PartialRanking, PlackettLuce
from pm_perm._modes import PYTHON_MODE
from pm_perm.distributions._ballots import distinct_rows, observed_ballots
from pm_perm.ops.ballots import ExpandCounts, RepeatRows

M = 4
#: complete, tied (first two; middle block), top-k and top-1 orders; one with count 0
ORDERS = np.array([[0, 1, 2, 3], [1, 0, 3, 2], [0, 0, 2, 3], [-1, 0, 1, -1], [2, 0, 1, -1],
                   [0, 1, 1, -1], [1, 1, 0, -1], [0, -1, -1, -1], [3, 2, 1, 0]])
COUNTS = np.array([5, 2, 3, 0, 4, 1, 6, 2, 1])
N = int(COUNTS.sum())
EXPANDED = np.repeat(ORDERS, COUNTS, axis=0)
LENGTHS = np.array([0.0, 0.2, 0.2, 0.2, 0.4])
S = 400  # posterior draws


def _model(family, counts=True, dims=None, data=False):
    """The model with counts (``weights=counts, observed=orders``) or expanded by hand."""
    with pm.Model(coords={"order": np.arange(len(ORDERS))}) as model:
        if family == "pl":
            u = pm.Normal("u", 0.0, 1.0, shape=M)
            dist, kwargs = PlackettLuce, {"utilities": u, "length_probs": LENGTHS}
        else:
            W = pm.Normal("W", 0.0, 1.0, shape=(M, M))
            dist, kwargs = PartialRanking, {"logits": W}
        if not counts:
            dist("y", observed=EXPANDED, **kwargs)
        elif data:
            orders = pm.Data("orders", ORDERS, dims=("order", "item"))
            w = pm.Data("counts", COUNTS.astype(np.float64), dims="order")
            dist("y", weights=w, observed=orders, dims=dims, **kwargs)
        else:
            dist("y", weights=COUNTS, observed=ORDERS, dims=dims, **kwargs)
    return model


def _draws(family, seed=0):
    rng = np.random.default_rng(seed)
    if family == "pl":
        u = np.array([1.0, 0.3, -0.2, -1.1]) + 0.4 * rng.normal(size=(1, S, M))
        return xr.DataTree.from_dict({"posterior": xr.Dataset(
            {"u": (("chain", "draw", "u_dim"), u)})})
    W = rng.normal(size=(M, M)) + 0.4 * rng.normal(size=(1, S, M, M))
    return xr.DataTree.from_dict({"posterior": xr.Dataset(
        {"W": (("chain", "draw", "W_dim_0", "W_dim_1"), W)})})


def _loglik(model, draws):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        dt = pm.compute_log_likelihood(draws.copy(), model=model, progressbar=False,
                                       extend_inferencedata=True,
                                       compile_kwargs={"mode": PYTHON_MODE})
    return dt


def _loo(dt):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # Pareto k warnings: compared, not judged
        return az.loo(dt, pointwise=True, reff=1.0)


@pytest.mark.parametrize("family", ["pl", "pr"])
def test_loo_per_ballot_equals_loo_on_the_expanded_data(family):
    draws = _draws(family)
    ours = _loglik(_model(family), draws)
    hand = _loglik(_model(family, counts=False), draws)
    assert ours["log_likelihood"]["y"].shape == (1, S, N)  # one entry per ballot
    np.testing.assert_allclose(ours["log_likelihood"]["y"].values,
                               hand["log_likelihood"]["y"].values, rtol=1e-12)
    a, b = _loo(ours), _loo(hand)
    assert a.n_data_points == N
    assert a.elpd == pytest.approx(b.elpd, rel=1e-6)
    assert a.se == pytest.approx(b.se, rel=1e-6)
    assert a.p == pytest.approx(b.p, rel=1e-6)
    np.testing.assert_allclose(np.asarray(a.pareto_k), np.asarray(b.pareto_k), rtol=1e-6)


def test_compare_of_two_models_with_counts_is_that_of_the_expanded_data():
    ours = {f: _loglik(_model(f), _draws(f)) for f in ("pl", "pr")}
    hand = {f: _loglik(_model(f, counts=False), _draws(f)) for f in ("pl", "pr")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        a, b = az.compare(ours), az.compare(hand)
    assert list(a.index) == list(b.index)
    for col in ("elpd", "p", "elpd_diff", "se", "dse"):
        np.testing.assert_allclose(a[col].astype(float), b[col].astype(float), rtol=1e-6,
                                   atol=1e-9)


@pytest.mark.parametrize("family", ["pl", "pr"])
def test_summed_logp_is_counts_times_log_p_per_distinct_order(family):
    """The model's logp of the ballots is ``sum(counts * log p(order))``, compiled with no
    per-ballot node; its gradient passes verify_grad."""
    model = _model(family)
    rng = np.random.default_rng(1)
    point = {k: rng.normal(size=np.shape(v)) for k, v in model.initial_point().items()}
    name = "u" if family == "pl" else "W"
    if family == "pl":
        d = PlackettLuce.dist(utilities=point[name], length_probs=LENGTHS)
    else:
        d = PartialRanking.dist(logits=point[name])
    per_order = pm.logp(d, ORDERS).eval()
    f = model.compile_logp(vars=[model["y"]], jacobian=False)
    assert f(point) == pytest.approx(COUNTS @ per_order, rel=1e-12)
    # the compiled logp + gradient: no node per ballot (no expansion, no repeat)
    fn = model.compile_fn([model.logp(), *pt.grad(model.logp(), model.value_vars)],
                          point_fn=False)
    ops = {type(getattr(n.op, "core_op", n.op)) for n in fn.maker.fgraph.apply_nodes}
    assert not ops & {ExpandCounts, RepeatRows}

    def summed(x):
        dist = (PlackettLuce.dist(utilities=x, length_probs=LENGTHS) if family == "pl"
                else PartialRanking.dist(logits=x))
        return pt.sum(pm.logp(dist, observed_ballots(ORDERS, COUNTS)))

    verify_grad(summed, [point[name]], rng=rng)


@pytest.mark.parametrize("family", ["pl", "pr"])
def test_posterior_predictive_draws_one_ballot_per_observed_ballot(family):
    model = _model(family)
    draws = _draws(family).isel(draw=slice(0, 5))
    pp = pm.sample_posterior_predictive(draws, model=model, progressbar=False, random_seed=2,
                                        compile_kwargs={"mode": PYTHON_MODE})
    y = pp["posterior_predictive"]["y"]
    assert y.shape == (1, 5, N, M)
    assert pp["observed_data"]["y"].shape == (N, M)
    np.testing.assert_array_equal(pp["observed_data"]["y"].values, EXPANDED)


def test_the_first_dim_must_be_a_ballot_dim():
    with pytest.raises(ValueError, match=r"one row per BALLOT \(24 = the sum of the counts\), "
                       r"but its first dim 'order' has length 9.*dims=\('ballot', 'item'\)"):
        _model("pl", dims=("order", "item"))
    model = _model("pl", dims=("ballot", "item"))
    dt = _loglik(model, _draws("pl").isel(draw=slice(0, 3)))
    assert dt["log_likelihood"]["y"].dims == ("chain", "draw", "ballot")
    assert dt["log_likelihood"].sizes["ballot"] == N


@pytest.mark.parametrize("bad", [[1.5], [-1], [np.nan], [np.inf]])
def test_invalid_counts_are_refused(bad):
    counts = np.array([*bad, *COUNTS[1:]])
    with pm.Model(), pytest.raises(ValueError, match="non-negative integers"):
        PlackettLuce("y", utilities=np.zeros(M), weights=counts, observed=ORDERS)
    with pm.Model(), pytest.raises(ValueError, match="non-negative integers"):
        PartialRanking("y", logits=np.zeros((M, M)), weights=counts, observed=ORDERS)


def test_counts_in_pm_data_refit_without_recompiling():
    """New counts by pm.set_data: the same compiled logp sees them; the observed value and the
    log-likelihood follow (rows of count 0 vanish); invalid ones give -inf, not NaN."""
    model = _model("pl", data=True, dims=("ballot", "item"))
    f = model.compile_logp(vars=[model["y"]], jacobian=False)
    point = {"u": np.array([0.5, 0.1, -0.2, -0.4])}
    per_order = pm.logp(PlackettLuce.dist(utilities=point["u"], length_probs=LENGTHS),
                        ORDERS).eval()
    new = np.array([0, 1, 0, 7, 2, 0, 0, 3, 0])
    model.set_data("counts", new.astype(np.float64))
    assert f(point) == pytest.approx(new @ per_order, rel=1e-12)
    value = model.rvs_to_values[model["y"]]
    np.testing.assert_array_equal(value.eval(), np.repeat(ORDERS, new, axis=0))
    dt = _loglik(model, _draws("pl").isel(draw=slice(0, 3)))
    assert dt["log_likelihood"].sizes["ballot"] == new.sum()
    model.set_data("counts", np.where(new == 7, 7.5, new).astype(np.float64))
    assert f(point) == -np.inf


def test_dist_weights_keep_their_per_row_meaning():
    u = np.array([0.5, 0.1, -0.2, -0.4])
    one = pm.logp(PlackettLuce.dist(utilities=u), ORDERS).eval()
    weighted = pm.logp(PlackettLuce.dist(utilities=u, weights=COUNTS), ORDERS).eval()
    np.testing.assert_allclose(weighted, COUNTS * one, rtol=1e-12)
    W = np.outer(np.arange(M), np.arange(M)) / 3.0
    one = pm.logp(PartialRanking.dist(logits=W), ORDERS).eval()
    weighted = pm.logp(PartialRanking.dist(logits=W, weights=COUNTS), ORDERS).eval()
    np.testing.assert_allclose(weighted, COUNTS * one, rtol=1e-12)


def test_distinct_rows_recovers_the_orders_and_counts():
    value = observed_ballots(ORDERS, COUNTS)
    orders, counts = distinct_rows(pt.cast(pt.cast(value, "int32"), "int64"))
    np.testing.assert_array_equal(orders.eval(), ORDERS)
    np.testing.assert_array_equal(counts.eval(), COUNTS)
    assert distinct_rows(pt.as_tensor(EXPANDED)) is None


@pytest.mark.slow  # JAX compilation of the model: about a minute
@pytest.mark.numba
def test_numpyro_sampling_gives_per_ballot_log_likelihood():
    pytest.importorskip("numpyro")
    model = _model("pl", data=True, dims=("ballot", "item"))
    with model:
        idata = pm.sample(draws=50, tune=50, chains=1, nuts_sampler="numpyro",
                          progressbar=False, random_seed=0)
        pm.compute_log_likelihood(idata, progressbar=False)
    assert idata["log_likelihood"]["y"].shape == (1, 50, N)
