"""Issue 53, findings 2 and 3: a ranking mixture's ballots are an observed distribution (per-ballot
log-likelihood, LOO, posterior predictive) and plain ``pm.find_MAP`` on it is not silently
degenerate."""

from __future__ import annotations

import arviz as az
import numpy as np
import pymc as pm
import pytest
import xarray as xr
from scipy.special import logsumexp

from pm_perm.inference import check_find_map
from pm_perm.preferences import fitting as rfit
from pm_perm.preferences import models as rmod
from pm_perm.preferences import posterior as rpost
from pm_perm.preferences.synthetic import simulate_rankings
from pm_perm.reference.rankings import every_top_k_order, mixture_loglik_enum
from pm_perm.testing import chi_square_pvalue

M = 4
U = np.array([[2.0, 1.0, 0.0, -1.0], [-1.5, -0.5, 0.5, 1.5]])
U -= U.mean(axis=1, keepdims=True)
LENGTHS = [0.0, 0.3, 0.3, 0.0, 0.4]


@pytest.fixture(scope="module")
def mixture():
    data = simulate_rankings(300, utilities=U, mixture_weights=[0.65, 0.35],
                             length_probs=LENGTHS, rng=3)
    return data, rmod.plackett_luce_model(data, components=2)


def _posterior(rm, draws, seed, repeat=None):
    """Prior draws of the order model standing in for posterior draws (the per-ballot structure
    does not depend on where the draws come from); ``repeat``: the first draw repeated."""
    prior = pm.sample_prior_predictive(draws=draws, model=rm.model, random_seed=seed,
                                       var_names=["u_raw", "u", "mixture_weights",
                                                  "length_probs"])["prior"].to_dataset()
    if repeat is not None:
        prior = prior.isel(draw=[0] * repeat).assign_coords(draw=np.arange(repeat))
    return xr.DataTree.from_dict({"posterior": prior})


def test_mixture_ballots_have_a_per_ballot_log_likelihood_and_loo(mixture):
    """``pm.compute_log_likelihood`` has ``"ballots"`` with one entry per BALLOT, equal to the
    mixture's exact log-probability of the ballot (order model by the numba kernels, plus
    ``log length_probs[k]``), and ``az.loo`` on it equals ``az.loo`` on the hand-expanded
    per-ballot log-likelihood."""
    data, rm = mixture
    idata = _posterior(rm, 100, seed=1)
    pm.compute_log_likelihood(idata, model=rm.model, progressbar=False)
    ll = np.asarray(idata["log_likelihood"]["ballots"])
    assert ll.shape == (1, 100, data.n_rankings)
    post = rfit.posterior_params(idata, "plackett-luce")
    k = (data.orders >= 0).sum(axis=1)
    hand = rpost.pointwise_loglik(post, "plackett-luce", data.orders) \
        + np.log(post["length_probs"][:, k])
    hand = np.repeat(hand, data.counts, axis=1)  # (S, n_ballots)
    np.testing.assert_allclose(ll[0], hand, rtol=1e-10)
    ref = xr.DataTree.from_dict({
        "posterior": xr.Dataset({"x": (("chain", "draw"), np.zeros((1, 100)))}),
        "log_likelihood": xr.Dataset({"ballots": (("chain", "draw", "ballot"), hand[None])})})
    with pytest.warns(UserWarning):  # prior draws: large Pareto k, warned by both
        loo = az.loo(idata, pointwise=True)
    with pytest.warns(UserWarning):
        loo_ref = az.loo(ref, pointwise=True)
    assert float(loo.elpd) == pytest.approx(float(loo_ref.elpd), rel=1e-10)
    assert float(loo.p) == pytest.approx(float(loo_ref.p), rel=1e-10)
    np.testing.assert_allclose(np.asarray(loo.pareto_k).ravel(),
                               np.asarray(loo_ref.pareto_k).ravel(), rtol=1e-10)


def test_mixture_posterior_predictive_draws_the_ballots(mixture):
    """``pm.sample_posterior_predictive`` draws one replicated ballot per observed ballot, with
    its observed ballot's length (the pattern kept); with one posterior draw repeated, the
    replicated ballots pass a chi-square test (level 1e-3: one false failure in 1,000 seeds;
    fixed seed) against ``share[k] * p_mix(order)`` by enumeration, ``share`` the observed
    length shares."""
    data, rm = mixture
    idata = _posterior(rm, 1, seed=2, repeat=60)
    pp = pm.sample_posterior_predictive(idata, model=rm.model, progressbar=False,
                                        random_seed=3, return_inferencedata=False)
    draws = np.asarray(pp["ballots"])
    assert draws.shape == (1, 60, data.n_rankings, M)
    # each replicated ballot keeps its observed ballot's pattern (keep_pattern, the default):
    # the lengths are the observed ones, and a ballot of length k is a top-k order with
    # probability p_mix(order) (the mixture's probability of that top-k order)
    ballots = np.repeat(data.orders, data.counts, axis=0)
    np.testing.assert_array_equal((draws >= 0).sum(-1),
                                  np.broadcast_to((ballots >= 0).sum(-1), draws.shape[:-1]))
    post = idata["posterior"]
    u, w = post["u"].values[0, 0], post["mixture_weights"].values[0, 0]
    share = np.bincount((ballots >= 0).sum(axis=1), minlength=M + 1) / len(ballots)
    cells = every_top_k_order(M)
    ll, _ = mixture_loglik_enum("plackett-luce", u, w, cells)
    probs = share[(cells >= 0).sum(axis=1)] * np.exp(ll)
    assert probs.sum() == pytest.approx(1.0)
    assert chi_square_pvalue(draws.reshape(-1, M), cells, probs) > 1e-3


def test_plain_find_map_on_a_mixture_is_refused_on_the_saddle_and_fit_map_finds_the_mode(mixture):
    """``pm.find_MAP`` without jitter starts at the prior means, where the components are the
    same, and stays on that symmetric saddle: ``check_find_map`` raises, naming the fix. The
    jittered multi-start of ``fit_map``, and a jittered ``pm.find_MAP``, find the mode: two
    distinct components (the generating ones, up to the label), which ``check_find_map``
    accepts."""
    from pm_perm.inference import MapFitError

    data, rm = mixture
    saddle = pm.find_MAP(model=rm.model, jitter=False, progressbar=False,
                         return_inferencedata=True)
    with pytest.raises(MapFitError, match=r"degenerate mixture optimum.*n_starts.*jitter=True"):
        check_find_map(saddle)
    fit = pm.find_MAP(model=rm.model, jitter=True, random_seed=1, progressbar=False,
                      return_inferencedata=True)
    check_find_map(fit)
    for u, w in ((fit["posterior"]["u"].values[0, 0],
                  fit["posterior"]["mixture_weights"].values[0, 0]),
                 (lambda p: (p["u"], p["mixture_weights"]))(rfit.fit_map(rm, n_starts=3))):
        order = np.argsort(-w)
        assert np.abs(u[order] - U).max() < 0.6
        assert w[order][0] == pytest.approx(0.65, abs=0.08)


def test_memberships_of_the_mixture_ballots_equal_brute_force(mixture):
    """``mixture_memberships`` of the model's ballots at a point: per ballot, ``w_k p_k / p``."""
    from pm_perm.distributions import mixture_memberships

    data, rm = mixture
    model = rm.model
    ballots = np.repeat(data.orders, data.counts, axis=0)
    expr = model.replace_rvs_by_values([mixture_memberships(model["ballots"], ballots)])[0]
    fn = model.compile_fn([expr, model.replace_rvs_by_values([model["u"]])[0],
                           model.replace_rvs_by_values([model["mixture_weights"]])[0]],
                          inputs=model.value_vars, on_unused_input="ignore")
    rng = np.random.default_rng(5)
    point = {k: v + rng.normal(size=np.shape(v)) for k, v in model.initial_point().items()}
    probs, u, w = fn(point)
    _, comps = mixture_loglik_enum("plackett-luce", u, w, ballots)
    joint = np.log(w)[:, None] + comps
    np.testing.assert_allclose(probs, np.exp(joint - logsumexp(joint, axis=0)).T, rtol=1e-10)


@pytest.mark.slow
@pytest.mark.parametrize("sampler", ["numpyro", "blackjax"])
def test_fit_nuts_relabels_the_jax_samplers_draws(mixture, sampler):
    """fit_nuts with PyMC's JAX samplers: the mixture's ballots compile for JAX and the chains'
    components agree after relabelling (every chain's component 0 is the same component)."""
    pytest.importorskip(sampler)
    data, rm = mixture
    idata = rfit.fit_nuts(rm, sampler=sampler, draws=100, tune=100, chains=2, seed=1)
    u = idata["posterior"]["u"].values  # (chain, draw, K, M)
    first = u[:, :, 0, 0].mean(axis=1)  # item 0's utility in component 0, per chain
    assert np.sign(first[0]) == np.sign(first[1]) and abs(first[0] - first[1]) < 0.5
    w = idata["posterior"]["mixture_weights"].values.mean(axis=(0, 1))
    assert sorted(w) == pytest.approx([0.35, 0.65], abs=0.1)
