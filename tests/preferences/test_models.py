"""Ranking models: likelihood against brute force, MAP recovery, mixtures, LOO with counts."""

import warnings

import arviz as az
import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
import xarray as xr

from pm_perm.preferences import fitting as rfit
from pm_perm.preferences import models as rmod
from pm_perm.preferences import posterior as rpost
from pm_perm.preferences.synthetic import rank_one_logits, simulate_rankings
from pm_perm.reference.rankings import every_top_k_order, mixture_loglik_enum

LENGTHS = [0.0, 0.3, 0.3, 0.0, 0.4]  # top-1, top-2 and complete ballots of 4 items


def _potential(rm):
    """Compiled (point -> the order model's log-likelihood of all ballots, W or u, weights).

    The observed ``ballots``' logp less its ballot-length term (counts times
    ``log length_probs[k]``), for one component and for a mixture."""
    model = rm.model
    name = "u" if rm.family == "plackett-luce" else "W"
    k = (rm.data.orders >= 0).sum(axis=1)
    lengths = rm.data.counts @ pm.math.log(model["length_probs"][k])
    outs = [model.logp(vars=[model["ballots"]]) - lengths, model[name]]
    if rm.components > 1:
        outs.append(model["mixture_weights"])
    outs = model.replace_rvs_by_values(outs)  # the variables' values at the point, not draws
    return model.compile_fn(outs, inputs=model.value_vars, on_unused_input="ignore")


@pytest.mark.parametrize("family, builder, kwargs", [
    ("plackett-luce", rmod.plackett_luce_model, {}),
    ("rank-one", rmod.rank_one_model, {"learn_positions": True}),
    ("full", rmod.full_model, {"components": 2}),
])
def test_likelihood_matches_brute_force(family, builder, kwargs):
    rng = np.random.default_rng(0)
    data = simulate_rankings(300, logits=rng.normal(size=(4, 4)), length_probs=LENGTHS, rng=1)
    rm = builder(data, **kwargs)
    fn = _potential(rm)
    point = rm.model.initial_point()
    point = {k: v + rng.normal(size=np.shape(v)) for k, v in point.items()}
    out = fn(point)
    K = rm.components
    weights = out[2] if K > 1 else np.ones(1)
    ll, _ = mixture_loglik_enum(family, np.asarray(out[1]), weights, data.orders)
    np.testing.assert_allclose(out[0], data.counts @ ll, rtol=1e-10)
    # and the pointwise function agrees
    post = {"params": np.asarray(out[1])[None], "weights": weights[None],
            "length_probs": np.full((1, 5), 0.2)}
    np.testing.assert_allclose(rpost.pointwise_loglik(post, family, data.orders)[0], ll,
                               rtol=1e-10)


def test_rank_one_map_recovers_utilities():
    u = np.array([1.5, 0.5, -0.5, -1.5]) * 1.5
    data = simulate_rankings(6000, logits=rank_one_logits(u), length_probs=LENGTHS, rng=2)
    # drawn with the linear profile of rank_one_logits: fitted with the same profile
    point = rfit.fit_map(rmod.rank_one_model(data, positions="linear"), seed=0)
    assert point["_optimizer"]["n_converged"] == 1
    # 6,000 ballots: the MAP is within ~0.1 of the truth (prior sigma 3 barely shrinks)
    np.testing.assert_allclose(point["u"][0], u - u.mean(), atol=0.2)
    np.testing.assert_allclose(point["length_probs"], np.array(LENGTHS), atol=0.02)


def test_plackett_luce_map_recovers_utilities_with_features():
    X = np.array([[1.0, 0.0], [0.5, 1.0], [0.0, -1.0], [-1.0, 0.5]])
    theta = np.array([1.2, -0.8])
    u = X @ theta
    data = simulate_rankings(6000, utilities=u, length_probs=LENGTHS, rng=3)
    point = rfit.fit_map(rmod.plackett_luce_model(data, item_features=X))
    np.testing.assert_allclose(point["theta"][0], theta, atol=0.15)
    np.testing.assert_allclose(point["u"][0], u - u.mean(), atol=0.15)


def test_full_map_recovers_position_marginals():
    rng = np.random.default_rng(4)
    W = rng.normal(size=(4, 4)) * 1.5
    data = simulate_rankings(8000, logits=W, rng=5)  # complete ballots
    point = rfit.fit_map(rmod.full_model(data))
    from pm_perm.kernels.permanent import permutation_marginals

    np.testing.assert_allclose(permutation_marginals(point["W"][0]), permutation_marginals(W),
                               atol=0.03)


def test_mixture_recovers_planted_blocs():
    u = np.array([2.0, 1.0, -1.0, -2.0]) * 1.5
    W = np.stack([rank_one_logits(u), rank_one_logits(-u)])
    data = simulate_rankings(6000, logits=W, mixture_weights=[0.65, 0.35],
                             length_probs=LENGTHS, rng=6)
    rm = rmod.full_model(data, components=2)
    point = rfit.fit_map(rm, seed=1, n_starts=2)
    post = rfit.posterior_params(point, "full")
    big = int(np.argmax(point["mixture_weights"]))
    assert point["mixture_weights"][big] == pytest.approx(0.65, abs=0.05)
    from pm_perm.kernels.permanent import permutation_marginals

    for k, truth in ((big, W[0]), (1 - big, W[1])):
        np.testing.assert_allclose(permutation_marginals(point["W"][k]),
                                   permutation_marginals(truth), atol=0.08)
    # complete ballots are assigned to their bloc with high probability
    member = rpost.membership_probabilities(post, "full", data.orders)
    np.testing.assert_allclose(member.sum(axis=1), 1.0)
    first_item = np.argmin(np.where(data.orders < 0, 99, data.orders), axis=1)
    full = (data.orders >= 0).all(axis=1)
    top0 = full & (data.orders[:, 0] == 0) & (data.orders[:, 3] == 3)
    assert np.all(member[top0, big] > 0.9)
    assert first_item.shape == (data.n_distinct,)


def test_loo_with_counts_equals_loo_on_expanded_data():
    rng = np.random.default_rng(7)
    S, n = 800, 6
    ll = rng.normal(-2.0, 0.5, size=(S, n)) + rng.normal(size=n)
    ll[:, 2] += rng.standard_t(2, size=S)  # one heavy-tailed point (larger Pareto k)
    counts = np.array([1, 3, 2, 5, 1, 4])
    with pytest.warns(UserWarning, match="Pareto"):  # as az.loo warns on the expanded data
        ours = rpost.loo_with_counts(ll, counts)
    expanded = np.repeat(ll, counts, axis=1)
    dt = xr.DataTree.from_dict({
        "posterior": xr.Dataset({"x": (("chain", "draw"), np.zeros((1, S)))}),
        "log_likelihood": xr.Dataset({"y": (("chain", "draw", "obs"), expanded[None])}),
    })
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the heavy-tailed point's Pareto k
        ref = az.loo(dt, pointwise=True, reff=1.0)
    assert ours["elpd"] == pytest.approx(float(ref.elpd), rel=1e-10)
    assert ours["se"] == pytest.approx(float(ref.se), rel=1e-10)
    assert ours["p_loo"] == pytest.approx(float(ref.p), rel=1e-10)
    # ArviZ's own ELPD type, per ballot (pareto_k and elpd_i one entry per expanded row)
    assert type(ours) is type(ref) and ours.n_data_points == ref.n_data_points
    np.testing.assert_allclose(np.asarray(ours["pareto_k"]), np.asarray(ref.pareto_k).ravel(),
                               rtol=1e-10)
    np.testing.assert_allclose(np.repeat(ours["pareto_k_distinct"], counts),
                               np.asarray(ref.pareto_k).ravel(), rtol=1e-10)
    np.testing.assert_allclose(np.asarray(ours.elpd_i), np.asarray(ref.elpd_i).ravel(),
                               rtol=1e-10)
    assert ours["n_ballots"] == counts.sum()


def test_relabel_components_undoes_switching():
    rng = np.random.default_rng(8)
    W = rng.normal(size=(2, 4, 4)) * 2
    w = np.array([0.3, 0.7])
    draws = np.empty((2, 5, 2, 4, 4))
    ws = np.empty((2, 5, 2))
    swap = rng.integers(2, size=(2, 5))
    swap[0, 0] = 0
    for c in range(2):
        for d in range(5):
            o = [1, 0] if swap[c, d] else [0, 1]
            draws[c, d] = W[o] + rng.normal(size=(2, 4, 4)) * 0.05
            ws[c, d] = w[o]
    idata = xr.DataTree.from_dict({"posterior": xr.Dataset({
        "W": (("chain", "draw", "component", "item", "position"), draws),
        "mixture_weights": (("chain", "draw", "component"), ws)})})
    rpost.relabel_components(idata, "full")
    np.testing.assert_allclose(idata["posterior"]["mixture_weights"].values,
                               np.broadcast_to(w, (2, 5, 2)))
    assert np.abs(idata["posterior"]["W"].values - W).max() < 0.3


@pytest.mark.numba  # NUTS runs a graph thousands of times: compiled, as a user's
@pytest.mark.slow
def test_models_work_with_find_map_and_nuts():
    data = simulate_rankings(200, utilities=[1.0, 0.0, -1.0], rng=9)
    rm = rmod.rank_one_model(data)
    with rm.model:
        mp = pm.find_MAP(progressbar=False, return_inferencedata=True, jitter=False)
    assert np.isfinite(mp["posterior"]["u"].values).all()
    idata = rfit.fit_nuts(rm, draws=100, tune=100, chains=1, seed=1)
    post = rfit.posterior_params(idata, "rank-one")
    assert post["params"].shape == (100, 1, 3, 3) and post["length_probs"].shape == (100, 4)


@pytest.mark.parametrize("kwargs, match", [
    ({"components": 0}, "components"),
    ({"item_features": np.ones((3, 1))}, "constant column"),
    ({"item_features": np.ones((2, 1))}, "item_features"),
])
def test_bad_model_arguments(kwargs, match):
    data = simulate_rankings(20, utilities=[1.0, 0.0, -1.0], rng=0)
    with pytest.raises(ValueError, match=match):
        rmod.plackett_luce_model(data, **kwargs)


def _potential_model(data, family):
    """The one-component models as they were built before the ballots became an observed
    distribution: the summed log-likelihood in a ``pm.Potential`` and the length counts
    observed by a multinomial (the reference of the MAP-equivalence test)."""
    from pm_perm.ops.partial_orders import partial_order_loglik_sum
    from pm_perm.ops.plackett_luce import plackett_luce_loglik_sum

    M = data.n_items
    B = rmod.zero_sum_basis(M)
    with pm.Model(coords=rmod._coords(data, 1)) as model:
        u = pm.Normal("u_raw", 0.0, 3.0, dims=("component", "item_basis"))[0] @ B.T
        if family == "plackett-luce":
            pm.Deterministic("u", u[None], dims=("component", "item"))
            total = plackett_luce_loglik_sum(u, data.orders, data.counts)
        else:
            W = u[:, None] * rmod.harmonic_positions(M)[None, :]  # c_j, fixed (the default)
            if family == "full":
                tau = pm.HalfNormal("tau", 1.0)
                delta = pm.Normal("delta_raw", 0.0, 1.0,
                                  dims=("component", "item_basis", "position_basis"))
                W = W + tau * (B @ delta[0] @ B.T)
            W = pm.Deterministic("W", W[None])
            total = partial_order_loglik_sum(W[0], data.orders, data.counts)
        length_probs = pm.Dirichlet("length_probs", a=np.ones(M + 1), dims="length")
        lengths = np.bincount(data.ranked_lengths(), weights=data.counts, minlength=M + 1)
        pm.Multinomial("ballot_lengths", n=int(data.n_rankings), p=length_probs,
                       observed=lengths.astype(np.int64), dims="length")
        pm.Potential("ballots", total)
    return model


_FAMILIES = [("plackett-luce", rmod.plackett_luce_model), ("rank-one", rmod.rank_one_model),
             ("full", rmod.full_model)]


def _small_data():
    rng = np.random.default_rng(11)
    return simulate_rankings(400, logits=rng.normal(size=(4, 4)), length_probs=LENGTHS, rng=12)


@pytest.mark.parametrize("family, builder", _FAMILIES)
def test_observed_ballots_differ_from_the_potential_by_a_constant(family, builder):
    """The log density of the observed-ballots model is that of the former Potential model
    less the log multinomial coefficient of the length counts (a constant), with the same
    gradient, at random points: the same posterior and the same MAP."""
    from scipy.special import gammaln

    data = _small_data()
    rng = np.random.default_rng(16)
    new, old = builder(data).model, _potential_model(data, family)
    assert [v.name for v in new.value_vars] == [v.name for v in old.value_vars]
    n = np.bincount(data.ranked_lengths(), weights=data.counts, minlength=5)
    const = gammaln(n.sum() + 1) - gammaln(n + 1).sum()
    f_new, f_old = new.compile_logp(), old.compile_logp()
    g_new, g_old = new.compile_dlogp(), old.compile_dlogp()
    for _ in range(3):
        point = {k: v + rng.normal(size=np.shape(v)) for k, v in new.initial_point().items()}
        assert f_old(point) - f_new(point) == pytest.approx(const, rel=1e-7)
        np.testing.assert_allclose(g_new(point), g_old(point), rtol=1e-9, atol=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("family, builder", _FAMILIES)
def test_observed_ballots_give_the_same_map_as_the_potential(family, builder):
    """The order model's log-likelihood at the MAP of both models agrees to 1e-9 relative (both
    optimised to a tight tolerance from the same start). Not tighter: at a MAP the
    log-likelihood's gradient is the prior's, not zero, so it moves to first order with the
    optimum's last digits (the full model's two optima give log-likelihoods 1e-7 apart at -740,
    1.5e-10 relative), while a model that differed by more than a constant would move the MAP
    and the log-likelihood far more."""
    data = _small_data()
    name = "u" if family == "plackett-luce" else "W"
    lls = []
    for model in (builder(data).model, _potential_model(data, family)):
        with model, warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            idata = pm.find_MAP(progressbar=False, jitter=False, tol=1e-14, maxiter=20_000,
                                return_inferencedata=True)
        params = np.asarray(idata["posterior"][name].values)[0]  # (1 draw, K=1, ...)
        post = {"params": params, "weights": np.ones((1, 1))}
        lls.append(float(data.counts @ rpost.pointwise_loglik(post, family, data.orders)[0]))
    assert abs(lls[0] - lls[1]) < 1e-9 * abs(lls[1])


@pytest.mark.parametrize("keep_pattern", [True, False])
@pytest.mark.parametrize("family, builder, K", [
    ("full", rmod.full_model, 1), ("plackett-luce", rmod.plackett_luce_model, 1),
    ("full", rmod.full_model, 2)])
def test_predictive_ballots_goodness_of_fit(family, builder, K, keep_pattern):
    """The replicated ballots of one posterior draw against the exact probability of every
    partial ballot, ``share[k] * p(top-k order)`` (brute force), with ``share`` the draw's
    ``length_probs`` (``keep_pattern=False``) or the data's length shares (``keep_pattern``:
    the patterns are the data's ballots drawn with replacement, as ``n_ballots`` is not their
    number). Chi-square test at level 1e-3: the false-failure rate of this (fixed-seed) test
    is 0.1% per case."""
    from scipy.stats import chisquare

    M, N = 3, 20_000
    data = simulate_rankings(50, utilities=[1.0, 0.0, -1.0], length_probs=[0, .3, .3, .4],
                             rng=13)
    rm = builder(data, components=K)
    # a prior draw stands in for a posterior draw
    prior = pm.sample_prior_predictive(draws=1, model=rm.model, random_seed=14)["prior"]
    lp = np.array([0.1, 0.3, 0.2, 0.4])
    prior["length_probs"] = prior["length_probs"].copy(data=lp[None, None])
    ballots = rpost.predictive_ballots(rm, {"posterior": prior}, n_ballots=N, seed=15,
                                       keep_pattern=keep_pattern)
    assert ballots.shape == (1, N, M)
    if keep_pattern:
        lp = np.bincount((data.orders >= 0).sum(axis=1), weights=data.counts, minlength=M + 1)
        lp = lp / lp.sum()
    name = "u" if family == "plackett-luce" else "W"
    params = prior[name].values[0, 0]
    weights = prior["mixture_weights"].values[0, 0] if K > 1 else np.ones(1)
    cells = every_top_k_order(M)
    ll, _ = mixture_loglik_enum(family, params, weights, cells)
    expected = N * lp[(cells >= 0).sum(axis=1)] * np.exp(ll)
    assert expected.sum() == pytest.approx(N)
    code = {tuple(r): i for i, r in enumerate(cells)}
    observed = np.bincount([code[tuple(r)] for r in ballots[0]], minlength=len(cells))
    keep = expected > 0  # the data have no ballot of 0 items: no pattern of that length
    assert observed[~keep].sum() == 0
    assert chisquare(observed[keep], expected[keep]).pvalue > 1e-3
    # and the model's data were restored after the call
    if K == 1:
        np.testing.assert_array_equal(rm.model["orders"].get_value(), data.orders)


def _transformed_point(model, values):
    """Values of the model's free variables -> the point of its (transformed) value variables."""
    point = {}
    for vv in model.value_vars:
        rv = model.values_to_rvs[vv]
        tr = model.rvs_to_transforms.get(rv)
        x = values[rv.name]
        x = pt.as_tensor_variable(np.asarray(x, dtype=np.float64))
        point[vv.name] = np.asarray(tr.forward(x).eval() if tr is not None else x.eval())
    return point


def _double_centred(W):
    return W - W.mean(-1, keepdims=True) - W.mean(-2, keepdims=True) + W.mean((-2, -1),
                                                                              keepdims=True)


@pytest.mark.parametrize("components", [1, 2])
def test_centred_full_model_is_the_same_model(components):
    """The centred density at (u_raw, tau, W_raw) is the non-centred one at (u_raw, tau,
    delta_raw) with W_raw = B^T m B + tau delta_raw (the coordinates of the same W), less the
    Jacobian log tau^(K (M-1)^2): the same posterior in other coordinates; and both give the
    same W up to row shifts."""
    rng = np.random.default_rng(11)
    data = simulate_rankings(200, logits=rng.normal(size=(4, 4)), length_probs=LENGTHS, rng=3)
    nc = rmod.full_model(data, components=components)
    ce = rmod.full_model(data, components=components, parametrization="centered")
    assert ce.parametrization == "centered" and nc.parametrization == "noncentered"
    assert "delta_raw" in nc.model.named_vars and "W_raw" in ce.model.named_vars
    lp_nc, lp_ce = nc.model.compile_logp(jacobian=False), ce.model.compile_logp(jacobian=False)
    W_nc, W_ce = (m.model.compile_fn(m.model.replace_rvs_by_values([m.model["W"]])[0],
                                     inputs=m.model.value_vars, on_unused_input="ignore")
                  for m in (nc, ce))
    K, M = components, 4
    B = rmod.zero_sum_basis(M)
    c = rmod.harmonic_positions(M)  # the default fixed profile
    for _ in range(3):
        zu = rng.normal(size=(K, M - 1))
        tau = rng.uniform(0.2, 2.0)
        delta = rng.normal(size=(K, M - 1, M - 1))
        shared = {"u_raw": zu, "tau": tau, "length_probs": rng.dirichlet(np.ones(M + 1))}
        if K > 1:
            shared["mixture_weights"] = rng.dirichlet(np.ones(K))
        W_raw = zu[:, :, None] * (c @ B)[None, None, :] + tau * delta
        p_nc = _transformed_point(nc.model, {**shared, "delta_raw": delta})
        p_ce = _transformed_point(ce.model, {**shared, "W_raw": W_raw})
        np.testing.assert_allclose(lp_ce(p_ce), lp_nc(p_nc) - K * (M - 1) ** 2 * np.log(tau),
                                   rtol=1e-10)
        np.testing.assert_allclose(W_ce(p_ce), _double_centred(W_nc(p_nc)), atol=1e-12)


def test_zero_sum_basis_gives_the_zero_sum_normal():
    """B^T B = I and B B^T = I - 1 1^T / n: u = B z with z ~ N(0, s^2 I) has covariance
    s^2 (I - 1 1^T / n), the covariance of pm.ZeroSumNormal(s) (a Gaussian is fixed by it)."""
    for n in range(2, 9):
        B = rmod.zero_sum_basis(n)
        np.testing.assert_allclose(B.T @ B, np.eye(n - 1), atol=1e-14)
        np.testing.assert_allclose(B @ B.T, np.eye(n) - 1.0 / n, atol=1e-14)
    with pm.Model():
        z = pm.ZeroSumNormal("z", sigma=2.0, shape=5)
    draws = pm.draw(z, draws=40_000, random_seed=1)
    # the sample covariance of PyMC's own ZeroSumNormal (4 se of a variance of 4: 0.12)
    np.testing.assert_allclose(np.cov(draws.T), 4.0 * (np.eye(5) - 0.2), atol=0.15)


def test_centred_full_model_refuses_map_and_auto_picks_by_size():
    rng = np.random.default_rng(12)
    small = simulate_rankings(100, logits=rng.normal(size=(4, 4)), length_probs=LENGTHS, rng=1)
    large = simulate_rankings(160, logits=rng.normal(size=(4, 4)), length_probs=LENGTHS, rng=1)
    # 10 ballots per entry of the 4 x 4 W: 160
    assert rmod.full_model(small, parametrization="auto").parametrization == "noncentered"
    assert rmod.full_model(large, parametrization="auto").parametrization == "centered"
    with pytest.raises(ValueError, match="no MAP"):
        rfit.fit_map(rmod.full_model(large, parametrization="centered"))
    with pytest.raises(ValueError, match="parametrization must be"):
        rmod.full_model(small, parametrization="centred")


@pytest.mark.parametrize("builder", [rmod.plackett_luce_model, rmod.rank_one_model,
                                     rmod.full_model])
@pytest.mark.parametrize("sigma", [-1.0, 0.0, np.inf, np.nan, "3", [1.0]])
def test_builders_refuse_a_bad_prior_scale(builder, sigma):
    data = simulate_rankings(20, utilities=[1.0, 0.0, -1.0], rng=0)
    with pytest.raises(ValueError, match="prior_sigma must be a positive finite number"):
        builder(data, prior_sigma=sigma)
    if builder is rmod.full_model:
        with pytest.raises(ValueError, match="shrinkage_scale must be a positive finite"):
            builder(data, shrinkage_scale=sigma)


def test_model_functions_refuse_an_unknown_family():
    """component_logliks, relabel_components, pointwise_loglik and membership_probabilities
    took any other name for a W family."""
    post = {"params": np.zeros((1, 1, 3, 3)), "weights": np.ones((1, 1))}
    orders = np.array([[0, 1, 2]])
    for call in (lambda: rmod.component_logliks("bogus", np.zeros((1, 3, 3)), orders),
                 lambda: rpost.relabel_components(None, "bogus"),
                 lambda: rpost.pointwise_loglik(post, "bogus", orders),
                 lambda: rpost.membership_probabilities(post, "bogus", orders)):
        with pytest.raises(ValueError, match="family must be one of"):
            call()
